"""summary.md: how each team reaches its vCluster, who it is there, and what ops.smoke will run after `pulumi up`."""

from __future__ import annotations

from typing import Any

from config.credential_lifetimes import VCLUSTER_LEAF_VALIDITY, VCLUSTER_RENEWAL_WINDOW
from config.gpu_asks import gpu_ask
from config.vocabulary import SEED_GPU_FRACTION, TENANT_COMPONENT
from tools.plan.lookup import PlanIndex
from tools.plan.markdown import code, table


def _identity(outputs: dict[str, Any]) -> str:
    if outputs.get("identity") != "oidc":
        return "admin certificate only (stack secret `tenantKubeconfigs`)"
    groups = [f"{', '.join(code(g) for g in outputs.get(key) or []) or '—'} → {role}"
              for key, role in (("adminGroups", "cluster-admin"), ("viewGroups", "view"))]
    return "OIDC groups: " + "; ".join(groups) + " (kubeconfig `teamKubeconfigs`; admin certificate for break-glass)"


def access_section(index: PlanIndex) -> list[str]:
    components = sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"])
    outputs = [component.get("outputs") or {} for component in components]
    queues = [str(o.get("queue")) for o in outputs if o.get("queue")]
    rows = []
    for registered in outputs:
        queue = str(registered.get("queue") or "—")
        other = next((q for q in queues if q != queue), f"{queue}-smoke-other")
        endpoint = registered.get("endpoint")
        # The pod ops.smoke sends: it asks in the team's tier's terms, from the same isolation the stack exports.
        ask = gpu_ask(registered.get("isolation") or {}, SEED_GPU_FRACTION)
        refused = f"a pod in queue {code(other)} must be refused"
        smoke = (f"GPU pod (`{ask.describe()}`, nvidia-smi) and an unmodified Deployment in queue "
                 f"{code(queue)}; {refused}") if endpoint else \
            (f"inside the vCluster skipped: no endpoint (`--vcluster-kubeconfig` after `vcluster connect`); on the "
             f"host, as the team's syncer (dry run), {refused}")
        rows.append([code(str(registered.get("team") or "—")),
                     code(endpoint) if endpoint else "none (`vcluster connect` through the host)",
                     _identity(registered), smoke])
    if not rows:
        return []
    return ["", "### Access per tenant", ""] + table(["Team", "Endpoint", "Identity", "Smoke test (ops.smoke)"], rows) \
        + ["", renewal_note()]


def renewal_note() -> str:
    return (f"Each admin kubeconfig (`tenantKubeconfigs`) signs in with vCluster's admin client certificate, valid "
            f"{VCLUSTER_LEAF_VALIDITY.days} days. vCluster renews it in `vc-<vcluster>` {VCLUSTER_RENEWAL_WINDOW.days} "
            "days before it ends; the stack output follows on the next `pulumi up`, a copy already handed out does "
            "not. `tenantKubeconfigExpiry` says when each ends; `python -m ops.expiry SITE` checks a running site "
            "(docs/operations-running.md, What expires).")
