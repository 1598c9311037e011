"""summary.md: what the teams' vClusters may write into the host's datastore at most (config/synced_data.py)."""

from __future__ import annotations

from typing import Any, Optional

from config.synced_data import DATASTORE_LIMITS, ETCD_DEFAULT_QUOTA, gibibytes
from config.tenant_budget import bytes_quantity
from config.vocabulary import ADMISSION_COMPONENT, HOST_COMPONENT, RELEASE, TENANT_COMPONENT
from tools.plan.lookup import PlanIndex, dig
from tools.plan.markdown import code, table

COUNTS = ("count/configmaps", "count/secrets")


def mebibytes(amount: int) -> str:
    return f"{amount / 2 ** 20:,.1f} MiB"


def _team_row(index: PlanIndex, component: dict[str, Any]) -> Optional[tuple[str, int, int, int]]:
    """(team, ConfigMaps, Secrets, cap) from the release's quota and the synced-objects policy's cap."""
    children = index.descendants(component)
    release = next((r for r in children if r["type"] == RELEASE), None)
    cap = next((dig(r, "outputs", "objectBytes") for r in children
                if r["type"] == ADMISSION_COMPONENT and dig(r, "outputs", "objectBytes") is not None), None)
    quota = dig(release, "inputs", "values", "policies", "resourceQuota", "quota") or {}
    counts = [quota.get(key) for key in COUNTS]
    if cap is None or not all(isinstance(count, int) for count in counts):
        return None
    return str(dig(component, "outputs", "team") or component["name"]), counts[0], counts[1], cap


def datastore_section(index: PlanIndex) -> list[str]:
    teams = [row for component in sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"])
             if (row := _team_row(index, component)) is not None]
    if not teams:
        return []
    rows = [[code(team), str(maps), str(secrets), code(bytes_quantity(cap)), mebibytes((maps + secrets) * cap)]
            for team, maps, secrets, cap in teams]
    total = sum((maps + secrets) * cap for _, maps, secrets, cap in teams)
    kind = index.registered(HOST_COMPONENT, "kind")
    limit = DATASTORE_LIMITS.get(kind)
    if limit is not None:
        verdict = f"the {kind} host's etcd holds {gibibytes(limit)} (the program warns of a site past it)"
    else:
        verdict = (f"the program cannot read this {kind or 'unknown'} host's datastore limit; an etcd at its default "
                   f"quota holds {gibibytes(ETCD_DEFAULT_QUOTA)}")
    lines = ["## Host datastore", "",
             "What each team's vCluster may write into the host's datastore at most: every ConfigMap and Secret its "
             "namespace's quota allows, each at the cap the synced-objects policy holds copies to (rule "
             "`object-size`, vcluster.resourceQuota.syncedObjectBytes) in keys and values. Annotations, up to 256 "
             "KiB on any object, are not counted (docs/security-model.md, Sizes).", ""]
    lines += table(["Team", "ConfigMaps", "Secrets", "Per-object cap", "Worst case"], rows)
    return lines + ["", f"Site total: **{mebibytes(total)}**; {verdict}.", ""]
