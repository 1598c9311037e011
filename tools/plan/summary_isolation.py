"""summary.md: each team's GPU isolation tier, and per MIG-split pool its layout and slices promised vs present."""

from __future__ import annotations

from typing import Any

from config.capacity import GPUS_PER_INSTANCE_TYPE, gpu_model
from config.mig import MIG_CONFIG_LABEL, kai_units, pool_slices
from config.vocabulary import EKS_NODE_GROUP, ISOLATION_ADMISSION_COMPONENT, POOL_LABEL, QUEUE, TENANT_COMPONENT
from tools.plan.lookup import PlanIndex, dig
from tools.plan.markdown import code, fmt_num, table


def _tiers(index: PlanIndex) -> list[dict[str, Any]]:
    """The isolation each tenant registered (components/tenant.py), by team name."""
    tiers = []
    for component in sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"]):
        outputs = component.get("outputs") or {}
        isolation = outputs.get("isolation") or {}
        policies = [r for r in index.descendants(component) if r["type"] == ISOLATION_ADMISSION_COMPONENT]
        tiers.append({"team": str(outputs.get("team") or "—"), "tier": isolation.get("tier") or "shared",
                      "profile": isolation.get("migProfile"), "pool": isolation.get("nodePool"),
                      "policy": dig(policies[0], "outputs", "policy") if policies else None})
    return tiers


def _quota(index: PlanIndex, queue: str) -> float:
    for resource in index.of_type(QUEUE):
        if dig(resource, "inputs", "metadata", "name") == queue:
            return float(dig(resource, "inputs", "spec", "resources", "gpu", "quota", default=0) or 0)
    return 0.0


def isolation_section(index: PlanIndex) -> list[str]:
    lines = ["## GPU isolation", ""]
    tiers = _tiers(index)
    if not tiers:
        return lines + ["None."]
    lines += table(["Team", "Tier", "MIG profile", "Node pool", "Tier policy"], [
        [code(row["team"]), row["tier"], code(row["profile"]) if row["profile"] else "—",
         code(row["pool"]) if row["pool"] else "every GPU pool", code(row["policy"]) if row["policy"] else "—"]
        for row in tiers])
    slices = []
    for group in sorted(index.of_type(EKS_NODE_GROUP), key=lambda r: r["name"]):
        inputs = group["inputs"]
        labels = inputs.get("labels") or {}
        config_name = labels.get(MIG_CONFIG_LABEL)
        if config_name is None:
            continue
        pool = labels.get(POOL_LABEL, group["name"])
        kinds = inputs.get("instanceTypes") or []
        # The most nodes the group runs: its desired size, unless the site's autoscaler sizes it (config/model_host.py).
        most = "maxSize" if inputs.get("ignoreScalingChanges") else "desiredSize"
        gpus = max((GPUS_PER_INSTANCE_TYPE.get(kind, 0) for kind in kinds), default=0) * \
            int(dig(inputs, "scalingConfig", most, default=0) or 0)
        for profile, count in pool_slices([gpu_model(kind) for kind in kinds], config_name).items():
            holders = [row for row in tiers if row["tier"] == "mig" and row["profile"] == profile
                       and row["pool"] == pool]
            promised = sum(max(_quota(index, row["team"]), 0) / kai_units(profile) for row in holders)
            slices.append([code(pool), code(config_name), code(profile), f"{gpus * count} (at {most})", fmt_num(promised),
                           ", ".join(code(row["team"]) for row in holders) or "—"])
    if slices:
        lines += ["", "### MIG slices per pool", ""]
        lines += table(["Pool", "Layout", "Profile", "Present", "Promised", "Teams"], slices)
        lines += ["", "KAI counts a slice in a queue's gpu quota by its compute slices (`3g.40gb` costs 3): promised "
                      "slices are each team's gpu quota divided by that."]
    return lines
