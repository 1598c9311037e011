"""Prometheus recording rules and alerts for per-team GPU accounting (plain data, no resources).

One key runs through every number: team = vCluster = host namespace = leaf queue. KAI reports per queue
(label ``queue_name``), the DCGM exporter per pod (labels ``namespace``, ``pod``), the API server per admission
policy and binding (labels ``policy``, ``policy_binding``). Constant series written from stack config join them:
``gpu_tenancy_team_info`` (one per team) the first two, ``gpu_tenancy_team_policy_info`` (one per binding judging
what a team's vCluster writes to the host: its pod, synced-objects, deletion and tier policies, and its binding of
the site's pod-size policy) the third, so no relabelling or namespace-label export is needed on the Prometheus side.

Measured use ("used", "utilisation") covers whole GPUs, attributed to the namespace DCGM names, and GPUs
shared under KAI fractions, attributed through KAI's GPU groups (components/observability_shares.py). GPUs
held by ordinary init containers, which DCGM names no pod for, count as held from kube-state-metrics
(components/observability_init_gpus.py), never as used. The usage report (ops/usage.py) runs these same
expressions.

Metric names and labels were read from KAI v0.16.4/v0.17.0 (pkg/queuecontroller/metrics,
pkg/scheduler/metrics, namespace ``kai``), dcgm-exporter (etc/dcp-metrics-included.csv, Kubernetes pod
mapping), kube-state-metrics (kube_pod_status_phase, kube_pod_labels, kube_pod_annotations) and the Kubernetes
API server (apiserver_validating_admission_policy_check_total); tests/test_observability_contract.py and
tests/test_observability_shares.py check them.
"""

from __future__ import annotations

from components import observability_backup_rules as backup_rules
from components import observability_init_gpus as init_gpus
from components import observability_mig as mig
from components import observability_multi_fractions as multi_fractions
from components import observability_shares as shares
from components import observability_xid as xid
from components.admission import policy_name
from components.admission_deletion import deletion_policy_name
from components.isolation_admission import has_tier_policy, isolation_policy_name
from components.pod_size_admission import POD_SIZE_POLICY, pod_size_binding_name
from components.synced_objects_admission import synced_objects_policy_name
from config.model import Platform, Team, UNLIMITED
from config.observability import DCGM_ECC_DBE_FIELD, RETENTION_SIZE_SHARE

TEAM_INFO = "gpu_tenancy_team_info"
POLICY_INFO = "gpu_tenancy_team_policy_info"
# Prometheus' own counter of the blocks it deleted to stay within its size limit.
SIZE_RETENTIONS = "prometheus_tsdb_size_retentions_total"
QUEUE_INFO = "gpu_tenancy_queue_info"
TEAM_GPU_LIMIT = "gpu_tenancy_team_gpu_limit"

# Per team (label ``team`` only, so any two can be compared directly).
QUOTA = "team:kai_queue_deserved_gpus:max"
ALLOCATED = "team:kai_queue_allocated_gpus:max"
UTILISATION = "team:gpu_tenancy_gpu_utilisation:ratio"
USED = "team:gpu_tenancy_used_gpus:sum"
# GPUs held as DCGM sees them: whole GPUs mapped to the team's pods plus its pods' shares of shared GPUs.
MEASURED = "team:gpu_tenancy_measured_gpus:sum"
# Those plus the GPUs its pods' ordinary init containers hold, which DCGM cannot see as the team's.
HELD = "team:gpu_tenancy_held_gpus:sum"
ALLOCATED_HOURS = "team:gpu_tenancy_allocated_gpu_hours:1h"
HELD_HOURS = "team:gpu_tenancy_held_gpu_hours:1h"
USED_HOURS = "team:gpu_tenancy_used_gpu_hours:1h"
HEADROOM = "team:gpu_tenancy_gpu_headroom:sum"
PENDING = "team:gpu_tenancy_pending_pods:sum"
# Per site.
PROMISED = "site:gpu_tenancy_gpus_promised:sum"
PRESENT = "site:gpu_tenancy_gpus_present:count"
SITE_ALLOCATED = "site:gpu_tenancy_gpus_allocated:sum"
# Per XID series of the DCGM exporter: the code of a new non-fatal XID (components/observability_xid.py).
XID_NON_FATAL = "gpu:gpu_tenancy_xid_non_fatal:code"
# A fatal XID alert's code: its label where the exporter counts codes, else the alert's value.
XID_CODE = f"{{{{ with $labels.{xid.COUNT_LABEL} }}}}{{{{ . }}}}{{{{ else }}}}{{{{ $value }}}}{{{{ end }}}}"

# DCGM maps a GPU to the pod holding it; several series of one GPU (scraped twice, or per container) count once.
# A shared GPU sits in KAI's reservation namespace, which is no team's: only the share rules charge it.
# MIG slices are counted apart, in KAI's units (components/observability_mig.py).
_GPU_UTIL_BY_NAMESPACE = f"max by (namespace, UUID) (DCGM_FI_DEV_GPU_UTIL{{{mig.WHOLE_GPU}}}) / 100"
_WHOLE_GPUS_PRESENT = f"count(count by (UUID) (DCGM_FI_DEV_GPU_UTIL{{{mig.WHOLE_GPU}}}) {mig.UNLESS_SPLIT})"


def _per_team(metric: str) -> str:
    # max, not sum: the same queue scraped by two monitors must not count twice.
    return f"max by (team) ({metric} * on (queue_name) group_left (team) {TEAM_INFO})"


def _constant(record: str, value: float, labels: dict[str, str]) -> dict:
    return {"record": record, "expr": f"vector({value:g})", "labels": labels}


def judging_bindings(team: Team) -> list[tuple[str, str]]:
    """Each (policy, binding) the API server names when it refuses a write of the team's vCluster to the host: the
    team's own policies, each bound under its own name, and its binding of the site's pod-size policy."""
    own = [policy_name(team), synced_objects_policy_name(team), deletion_policy_name(team),
           *([isolation_policy_name(team)] if has_tier_policy(team) else [])]
    return [*((name, name) for name in own), (POD_SIZE_POLICY, pod_size_binding_name(team))]


def info_rules(platform: Platform) -> list[dict]:
    """What stack config knows and Prometheus cannot: which namespace, queue and policy belong to a team."""
    rules = [_constant(QUEUE_INFO, 1, {"queue_name": platform.organization.name, "parent": ""})]
    for team in platform.teams:
        rules.append(_constant(TEAM_INFO, 1, {"team": team.name, "queue_name": team.queue_name,
                                               "namespace": team.namespace}))
        for policy, binding in judging_bindings(team):
            rules.append(_constant(POLICY_INFO, 1, {"team": team.name, "policy": policy, "policy_binding": binding}))
        rules.append(_constant(QUEUE_INFO, 1, {"queue_name": team.queue_name, "parent": platform.organization.name}))
        if team.resources.gpu.limit != UNLIMITED:
            rules.append(_constant(TEAM_GPU_LIMIT, team.resources.gpu.limit, {"team": team.name}))
    return rules


# Joins the API server's admission metrics to the team each binding judges pods of.
ON_TEAMS_POLICIES = f"on (policy, policy_binding) group_left (team) {POLICY_INFO}"


def _to_team(expr: str) -> str:
    return f"({expr}) * on (namespace) group_left (team) {TEAM_INFO}"


def used_gpus() -> str:
    """Per team: busy ratio of each whole GPU it holds, the busy time charged to its pods' shares, and its MIG
    slices' busy time in KAI units."""
    return (f"sum by (team) (({_to_team(_GPU_UTIL_BY_NAMESPACE)}) or ({_to_team(shares.charged())}) or "
            f"({_to_team(mig.slice_busy_by_namespace())}))")


def _measured_terms() -> str:
    return (f"({_to_team(f'{_GPU_UTIL_BY_NAMESPACE} * 0 + 1')}) or ({_to_team(shares.share())}) or "
            f"({_to_team(mig.slice_units_by_namespace())})")


def measured_gpus() -> str:
    """Per team: whole GPUs DCGM maps to its pods, its pods' shares of the shared GPUs DCGM sees, and its MIG
    slices in KAI units: what DCGM measures the busy time of."""
    return f"sum by (team) ({_measured_terms()})"


def held_gpus() -> str:
    """Per team: the measured GPUs, plus the GPUs and slices (KAI units) its pods' ordinary init containers hold
    until the pod ends, which DCGM maps to no pod (components/observability_init_gpus.py), plus the shares of its
    pods with fractions of several GPUs, which no GPU group joins to DCGM (components/observability_multi_fractions.py).
    The last term is labelled apart: a pod may be in both, and ``or`` keeps one series per label set."""
    multi = f'label_replace({_to_team(multi_fractions.held_by_multi_fractions())}, "held_as", "multi-fraction", "", "")'
    return f"sum by (team) ({_measured_terms()} or ({_to_team(init_gpus.held_by_init())}) or ({multi}))"


def on_teams_gpus(per_series: str) -> str:
    """Per (GPU, team with pods on it): the max of an expression over DCGM's per-pod series of that GPU. A GPU
    DCGM maps to a team's pods is that team's; a shared GPU sits in KAI's reservation namespace, so its teams are
    those holding shares of it."""
    gpu = "UUID, gpu, Hostname"
    held = f"max by ({gpu}, team) ({_to_team(per_series)})"
    sharing = (f"group by (UUID, team) ({_to_team(shares.SHARE)})"
               f" * on (UUID) group_left (gpu, Hostname) max by ({gpu}) ({per_series})")
    return f"({held}) or ({sharing})"


def xid_non_fatal_by_team() -> str:
    """Per (GPU, team with pods on it): the code of a new non-fatal XID; a GPU with no team fires once, with none."""
    attributed = on_teams_gpus(XID_NON_FATAL)
    return f"{attributed} or (max by (UUID, gpu, Hostname) ({XID_NON_FATAL}) unless on (UUID) ({attributed}))"


def failed_gpus_by_team() -> str:
    """Per (GPU, team with pods on it): 1 while the GPU reported an XID that pages the platform. A non-fatal code
    the driver logs right after such a failure (63, 154) is not the team's application's fault either. A team
    holding fractions of several GPUs is told of a shared GPU failing on its pod's node: it may be one of them."""
    failed = f"({xid.fatal()} > bool 0)"
    spread = f"max by (UUID, gpu, Hostname, team) ({_to_team(multi_fractions.shared_gpus_of_holders_nodes(failed))})"
    return f"{on_teams_gpus(failed)} or ({spread})"


def gpus_present() -> str:
    """Whole GPUs DCGM sees plus its MIG slices in KAI units, comparable with the quotas promised."""
    slices = mig.slices_present()
    return f"({_WHOLE_GPUS_PRESENT} + {slices}) or {_WHOLE_GPUS_PRESENT} or {slices}"


def recording_rules() -> list[dict]:
    return [
        {"record": QUOTA, "expr": _per_team("kai_queue_deserved_gpus")},
        # KAI counts a 0.33 fraction as 0.33 of a GPU in the queue's allocated resources.
        {"record": ALLOCATED, "expr": _per_team("kai_queue_allocated_gpus")},
        {"record": shares.SHARE, "expr": shares.share()},
        {"record": shares.CHARGED, "expr": shares.charged()},
        {"record": init_gpus.INIT_GPUS, "expr": init_gpus.held_by_init()},
        {"record": multi_fractions.MULTI_FRACTION_GPUS, "expr": multi_fractions.held_by_multi_fractions()},
        {"record": USED, "expr": used_gpus()},
        {"record": MEASURED, "expr": measured_gpus()},
        {"record": HELD, "expr": held_gpus()},
        # Busy ratio of what DCGM measures; with whole GPUs only, the mean busy ratio of its GPUs. GPUs held by
        # init containers are left out: their busy time is unknown, not zero, so they make no team look idle.
        {"record": UTILISATION, "expr": f"{USED} / {MEASURED}"},
        # The mean over the last hour of a GPU count is the GPU-hours of that hour.
        {"record": ALLOCATED_HOURS, "expr": f"avg_over_time({ALLOCATED}[1h])"},
        {"record": HELD_HOURS, "expr": f"avg_over_time({HELD}[1h])"},
        {"record": USED_HOURS, "expr": f"avg_over_time({USED}[1h])"},
        {"record": HEADROOM, "expr": f"{TEAM_GPU_LIMIT} - on (team) {ALLOCATED}"},
        {"record": PENDING, "expr": "sum by (team) (max by (namespace, pod) (kube_pod_status_phase{phase=\"Pending\"})"
                                    f" * on (namespace) group_left (team) {TEAM_INFO})"},
        {"record": PROMISED, "expr": f"sum({QUOTA})"},
        {"record": SITE_ALLOCATED, "expr": f"sum({ALLOCATED})"},
        {"record": PRESENT, "expr": gpus_present()},
        {"record": XID_NON_FATAL, "expr": xid.non_fatal()},
    ]


def _alert(name: str, expr: str, duration: str, severity: str, summary: str, description: str,
           runbook: str) -> dict:
    return {"alert": name, "expr": expr, "for": duration, "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description, "runbook": runbook}}


def history_alerts(platform: Platform) -> list[dict]:
    """The installed Prometheus dropping history for size (its ``retentionSize``) before its ``retention``: the
    chart's Prometheus scrapes its own metrics (``prometheus.serviceMonitor.selfMonitor``)."""
    settings = platform.observability
    if settings.prometheus != "install":
        return []
    return [_alert(
        "GpuTenancyHistoryTrimmedForSize",
        f'increase({SIZE_RETENTIONS}{{namespace="{settings.namespace}"}}[1h]) > 0',
        "0m", "warning",
        "Prometheus deletes history to stay within its volume",
        f"Prometheus deleted its oldest data in the last hour because it reached {settings.retention_size} "
        f"({RETENTION_SIZE_SHARE:.0%} of observability.storage, {settings.storage}): it keeps less than "
        "observability.retention "
        f"({settings.retention}).",
        "Usage reports reaching back past the history now left are refused (ops.usage names where it begins). "
        "Raise observability.storage and resize the claim (docs/operations-data.md, Monitoring data), or lower "
        "observability.retention to what the volume holds.")]


def alert_rules(platform: Platform) -> list[dict]:
    thresholds = platform.observability.alerts
    idle_ratio = thresholds.idle_utilisation_percent / 100
    return [
        *history_alerts(platform),
        _alert(
            "GpuTenancyTeamStarved",
            f"({PENDING} > 0) and on (team) ({ALLOCATED} < on (team) {QUOTA})"
            f" and on () (count({ALLOCATED} > on (team) {QUOTA}) > 0)",
            f"{thresholds.pending_minutes}m", "warning",
            "Team {{ $labels.team }} has pending pods below its GPU guarantee while other teams borrow",
            "{{ $labels.team }} has {{ $value }} pending pod(s) and holds less than its GPU quota, while at least "
            "one other team is over its own quota.",
            "KAI should reclaim borrowed GPUs for a team under its quota. Check the team's queue "
            "(kubectl get queue {{ $labels.team }} -o yaml): a pending pod that asks for more than the queue's "
            "limit, or for a whole GPU where only fractions are free, stays pending by design. Otherwise look at "
            "the KAI scheduler's logs for reclaim decisions and at the borrowing teams' preemptibility (a "
            "non-preemptible workload over quota is not reclaimed)."),
        _alert(
            "GpuTenancyAllocatedGpuIdle",
            f"({UTILISATION} < {idle_ratio:g}) and on (team) ({ALLOCATED} > 0)",
            f"{thresholds.idle_minutes}m", "info",
            "Team {{ $labels.team }} holds GPUs it barely uses",
            "The GPUs and GPU shares held by {{ $labels.team }}'s pods were busy {{ $value | humanizePercentage }} "
            "of the time "
            f"over the last {thresholds.idle_minutes} minutes (threshold {thresholds.idle_utilisation_percent:g}%).",
            "A reclaim candidate: ask the team to scale down idle notebooks or servers, or lower its quota so the "
            "GPUs become surplus other teams can borrow."),
        _alert(
            "GpuTenancyGpuXidError",
            xid.fatal(),
            "0m", "critical",
            f"GPU {{{{ $labels.gpu }}}} on {{{{ $labels.Hostname }}}} reported fatal XID {XID_CODE}",
            f"The DCGM exporter reported XID {XID_CODE} on GPU {{{{ $labels.UUID }}}} (pod {{{{ $labels.pod }}}} in "
            "{{ $labels.namespace }}). NVIDIA's XID catalog lists the code as fatal, or does not know it: the "
            "GPU or the node needs the operator.",
            "Look the code up in NVIDIA's XID catalog (docs.nvidia.com/deploy/xid-errors) for its action: most "
            "need the GPU reset or the node rebooted (48 double-bit ECC, 79 fallen off the bus, 95 uncontained "
            "error, 119 and 120 GSP). Cordon the node, let KAI move the work, then reset the GPU "
            "(nvidia-smi -r) or reboot. Application faults (13, 31, 43, 45, ...) never fire this alert: see "
            "GpuTenancyGpuXidNonFatal."),
        _alert(
            "GpuTenancyGpuXidNonFatal",
            xid_non_fatal_by_team(),
            "0m", "info",
            "A GPU on {{ $labels.Hostname }} stopped an application with XID {{ $value }}"
            "{{ if $labels.team }} (team {{ $labels.team }}){{ end }}",
            "GPU {{ $labels.UUID }} reported XID {{ $value }}, which NVIDIA's XID catalog lists as non-fatal: "
            "the driver stopped the application that hit it (usually a fault in the application's own kernel, "
            "such as an out-of-bounds access) and the GPU stays usable."
            "{{ if $labels.team }} Team {{ $labels.team }} has pods on that GPU; where teams share it (KAI "
            "fractions, time-slicing), the application that faulted may be another team's: the driver does not "
            "say whose.{{ end }}",
            "Nothing on the node needs the operator. The team restarts the workload and looks at its "
            "application (CUDA_LAUNCH_BLOCKING=1 and compute-sanitizer locate the faulting kernel); if its own "
            "pods did not fail on a shared GPU, the fault was a neighbour's. The same "
            "code again and again on one GPU for different applications points at the card: run DCGM "
            "diagnostics (dcgmi diag -r 3) on it."),
        _alert(
            "GpuTenancyTeamGpuFailed",
            failed_gpus_by_team(),
            "0m", "warning",
            "A GPU team {{ $labels.team }}'s pods use on {{ $labels.Hostname }} failed",
            "GPU {{ $labels.UUID }} ({{ $labels.gpu }} on {{ $labels.Hostname }}) reported an XID error that needs "
            "the platform's operator while team {{ $labels.team }} had pods on it: the work it ran there has "
            "probably stopped, and what it computed there since may be wrong. The platform is paged separately "
            "(GpuTenancyGpuXidError).",
            "Nothing in the team's code caused it. Once the platform has cordoned the node and KAI has placed the "
            "work elsewhere, the team restarts it from its last checkpoint and checks what it wrote since the "
            "alert began."),
        _alert(
            "GpuTenancyGpuEccErrors",
            f"increase({DCGM_ECC_DBE_FIELD}[15m]) > 0",
            "0m", "critical",
            "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} had uncorrectable ECC errors",
            "Double-bit ECC errors on GPU {{ $labels.UUID }}: work on it may have computed wrong results.",
            "Cordon the node, drain GPU work, and check row remapping / retired pages with nvidia-smi -q. "
            "Repeated errors mean the card must be replaced."),
        _alert(
            "GpuTenancyQueueMissing",
            f"({QUEUE_INFO} unless on (queue_name) kai_queue_fair_share_gpu)"
            " and on () (count(kai_queue_fair_share_gpu) > 0)",
            "10m", "critical",
            "Queue {{ $labels.queue_name }} is not in KAI's scheduling tree",
            "Stack config defines queue {{ $labels.queue_name }} (parent '{{ $labels.parent }}'), but KAI's "
            "scheduler computes no fair share for it: its pods cannot be scheduled.",
            "KAI silently drops a queue whose parent does not exist, with its whole subtree. Run kubectl get "
            "queues and check the parentQueue chain; run pulumi up to recreate a deleted parent."),
        _alert(
            "GpuTenancyKaiMetricsMissing",
            "absent(kai_queue_info) or absent(kai_queue_fair_share_gpu)",
            "15m", "warning",
            "Prometheus receives no KAI queue metrics",
            "kai_queue_info (queue controller) or kai_queue_fair_share_gpu (scheduler) is absent: per-team GPU "
            "accounting and the queue alerts are blind.",
            "Check the ServiceMonitors gpu-tenancy-kai-queue-controller and gpu-tenancy-kai-scheduler in KAI's "
            "namespace and the targets page of Prometheus; the queue controller Service is queue-controller "
            "(port metrics), the scheduler Service kai-scheduler-default (port http-metrics)."),
        _alert(
            "GpuTenancyAdmissionRejections",
            "sum by (team, policy) (increase(apiserver_validating_admission_policy_check_total"
            "{enforcement_action=\"deny\"}[10m]) * " + ON_TEAMS_POLICIES + ")"
            f" >= {thresholds.admission_rejections}",
            "0m", "info",
            "Team {{ $labels.team }}'s vCluster is refused writes by the host's admission",
            "Policy {{ $labels.policy }} refused {{ $value }} request(s) of the team's vCluster in the last "
            "10 minutes.",
            "A tenant is hitting its guardrails (another team's queue, a GPU device list, a Service type, a "
            "storage class, a pod past its size...). The refused object's events inside the vCluster name the "
            "rule; the policy's name says which rules: the pod rules (gpu-tenancy-<team>, gpu-tenancy-pod-size, "
            "docs/security-admission.md), the synced objects' and deletions' (-synced-objects, -deletion, "
            "docs/security-synced-objects.md) or the isolation tier's (-isolation, docs/security-isolation.md). "
            "Repeated refusals of one workload usually mean a Helm chart that sets a field the policy forbids."),
        _alert(
            "GpuTenancyGpusOverPromised",
            f"{PROMISED} > {PRESENT}",
            "30m", "warning",
            "The teams are promised more GPUs than the site has",
            "The teams' GPU quotas add up to {{ $value }}, more than the GPUs the DCGM exporter sees.",
            "Guarantees cannot all be met at once. Add GPU nodes, or lower team quotas in stack config."),
    ]


def rule_groups(platform: Platform) -> list[dict]:
    """The groups of the PrometheusRule (and of the file promtool checks)."""
    return [
        {"name": "gpu-tenancy-info", "rules": info_rules(platform)},
        {"name": "gpu-tenancy-accounting", "rules": recording_rules()},
        {"name": "gpu-tenancy-alerts", "rules": alert_rules(platform)},
        *backup_rules.rule_groups(platform),
    ]
