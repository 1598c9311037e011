"""The series a team's Grafana reads, each carrying the label its query proxy enforces (``team``).

A team queries Prometheus only through prom-label-proxy (components/observability_views.py), which adds
``team="<team>"`` to every selector of every query. Series without a ``team`` label are then invisible to
it, so what a team board shows from DCGM (labels ``namespace``, ``pod``) and from the API server (labels
``policy``, ``policy_binding``) is recorded here with the team joined in from ``gpu_tenancy_team_info`` and
``gpu_tenancy_team_policy_info``, the constant series stack config writes (components/observability_rules.py).
Plain data, no resources.
"""

from __future__ import annotations

from components import observability_init_gpus as init_gpus
from components import observability_mig as mig
from components import observability_shares as shares
from components import observability_xid as xid
from components.observability_rules import (
    ON_TEAMS_POLICIES, TEAM_INFO, failed_gpus_by_team, on_teams_gpus, rule_groups,
)
from config.model import Platform

# The label the proxy enforces: every per-team recording rule carries it, and no tenant can set it (the
# platform writes every series that has it).
TEAM_LABEL = "team"

POD_GPU_UTILISATION = "team_pod:gpu_tenancy_gpu_utilisation:max"
POD_GPU_MEMORY_USED = "team_pod:gpu_tenancy_gpu_memory_used_mib:max"
ADMISSION_DENIALS = "team:gpu_tenancy_admission_denials:increase1h"
# A shared GPU's per-pod share and the busy time charged for it (components/observability_shares.py).
POD_GPU_SHARE = "team_pod:gpu_tenancy_gpu_share:ratio"
POD_GPU_CHARGED = "team_pod:gpu_tenancy_used_gpus:share"
# GPUs (KAI units) a pod's ordinary init containers hold until the pod ends, which DCGM names no pod for
# (components/observability_init_gpus.py).
POD_INIT_GPUS = "team_pod:gpu_tenancy_init_container_gpus:sum"
# The code of a new XID error on a GPU the team's pods hold or share, fatal or not (components/observability_xid.py).
GPU_XID = "team_gpu:gpu_tenancy_xid:code"
# 1 while a GPU the team's pods hold or share reported an XID that pages the platform (its page names the code):
# a non-fatal code the driver logs right after such a failure (63, 154) is not the team's application's fault.
GPU_FAILED = "team_gpu:gpu_tenancy_gpu_failed:flag"


def _per_pod(metric: str) -> str:
    # max: a GPU scraped twice, or reported per container, counts once; each MIG slice of a card (GPU_I_ID,
    # absent on whole GPUs) is a series of its own.
    return (f"max by ({TEAM_LABEL}, pod, UUID, {mig.INSTANCE_LABEL}) "
            f"({metric} * on (namespace) group_left ({TEAM_LABEL}) {TEAM_INFO})")


def _pod_utilisation() -> str:
    """Busy percent per GPU or MIG slice a pod holds (DCGM measures a slice's busy ratio, not GPU_UTIL)."""
    return (f"{_per_pod(f'DCGM_FI_DEV_GPU_UTIL{{{mig.WHOLE_GPU}}}')} or "
            f"{_per_pod(f'{mig.SLICE_BUSY_METRIC}{{{mig.SLICES_ONLY}}} * 100')}")


def team_series_rules() -> list[dict]:
    return [
        {"record": POD_GPU_UTILISATION, "expr": _pod_utilisation()},
        {"record": POD_GPU_MEMORY_USED, "expr": _per_pod("DCGM_FI_DEV_FB_USED")},
        {"record": POD_GPU_SHARE, "expr": _per_pod(shares.SHARE)},
        {"record": POD_GPU_CHARGED, "expr": _per_pod(shares.CHARGED)},
        {"record": POD_INIT_GPUS, "expr": _per_pod(init_gpus.INIT_GPUS)},
        {"record": GPU_XID, "expr": on_teams_gpus(xid.new_code())},
        {"record": GPU_FAILED, "expr": failed_gpus_by_team()},
        {"record": ADMISSION_DENIALS,
         "expr": f"sum by ({TEAM_LABEL}) (increase(apiserver_validating_admission_policy_check_total"
                 f"{{enforcement_action=\"deny\"}}[1h]) * {ON_TEAMS_POLICIES})"},
    ]


def all_rule_groups(platform: Platform) -> list[dict]:
    """The PrometheusRule's groups: the platform's accounting and alerts, then the teams' own series."""
    return [*rule_groups(platform), {"name": "gpu-tenancy-team-series", "rules": team_series_rules()}]
