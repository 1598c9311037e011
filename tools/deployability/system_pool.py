"""The ``system-pool`` rule: whether the nodes the platform's own pods land on hold them, as the charts render them.

On an EKS site every pod that fits the system node group and no GPU group (node_fit.py: its nodeSelector, required
affinity and tolerations) runs there: each workload's replicas (a DaemonSet: one pod per node), the Prometheus
operator's Prometheus and Alertmanager (their ``replicas`` and ``resources``), the largest Job at the time it runs,
plus the pods no chart of the plan renders (config/system_pods.py: KAI's operator-made services, EKS's add-ons and
per-node pods). A MicroK8s box runs all of it on its one node, beside the GPU Operator its nvidia addon installs and
the teams' own pods. Their requests are held against what the nodes give pods, and their number against the pods a
node may run (``inputs.Site.system_nodes``); a kubeconfig site states no nodes and is not checked.

A pod that fits both the system nodes and a GPU group may land on either and is not counted, nor a chart's
``helm test`` pod: the finding is what surely lands there. ``check_system_pool`` returns the findings.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from config.key_types import QUANTITY, quantity_value
from config.node_allocatable import NOTHING, CpuMemory
from config.system_pods import microk8s_unrendered_pods, unrendered_pods
from config.tenant_budget import DNS_REPLICAS
from tools.deployability import operator_mounts
from tools.deployability.findings import ERROR, WARNING, Finding
from tools.deployability.inputs import K8sObject, Site, pod_templates
from tools.deployability.node_fit import fits

RULE = "system-pool"


def _amount(value: Any, scale: int) -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * scale)
    return int(quantity_value(value) * scale) if isinstance(value, str) and QUANTITY.fullmatch(value) else 0


def _requests(resources: Mapping[str, Any]) -> CpuMemory:
    requests = (resources or {}).get("requests") or {}
    return CpuMemory(_amount(requests.get("cpu", 0), 1000), _amount(requests.get("memory", 0), 1))


def pod_requests(spec: Mapping[str, Any]) -> CpuMemory:
    """What the scheduler reserves for a pod: its containers' requests added up, or its largest init container's
    where that is more (each resource on its own). A sidecar (an init container that keeps running) adds to the
    containers and to every init container started after it."""
    sidecars, peaks = NOTHING, []
    for init in spec.get("initContainers") or []:
        if init.get("restartPolicy") == "Always":
            sidecars = sidecars + _requests(init.get("resources"))
        else:
            peaks.append(sidecars + _requests(init.get("resources")))
    total = sum((_requests(c.get("resources")) for c in spec.get("containers") or []), sidecars)
    return CpuMemory(max([total.millicores] + [i.millicores for i in peaks]),
                     max([total.memory] + [i.memory for i in peaks]))


def _replicas(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


class _Tally:
    """The pods that surely land on the system nodes: cluster-wide ones, one per node, and the largest Job."""

    def __init__(self) -> None:
        self.pods, self.requests = 0, NOTHING
        self.node_pods, self.node_requests = 0, NOTHING
        self.job: Optional[tuple[str, CpuMemory]] = None
        self.names: list[str] = []

    def add(self, name: str, replicas: int, requests: CpuMemory) -> None:
        self.pods += replicas
        self.requests += requests.times(replicas)
        self.names.append(f"{name} x{replicas}" if replicas != 1 else name)

    def add_per_node(self, requests: CpuMemory) -> None:
        self.node_pods += 1
        self.node_requests += requests

    def add_job(self, name: str, requests: CpuMemory) -> None:
        if self.job is None or (requests.millicores, requests.memory) > (self.job[1].millicores, self.job[1].memory):
            self.job = (name, requests)


def _short(obj: K8sObject) -> str:
    return f"{obj.kind} {obj.namespace}/{obj.name}" if obj.namespace else f"{obj.kind} {obj.name}"


def _lands_on_system(spec: Mapping[str, Any], site: Site, every_node: bool = False) -> bool:
    """Whether the pod fits the system nodes and, unless it is a DaemonSet's (``every_node``), no GPU pool."""
    pools = site.node_pools or ()
    if site.kind == "microk8s":
        return True
    return any(not fits(spec, pool) for pool in pools if not pool.gpu) \
        and (every_node or all(fits(spec, pool) for pool in pools if pool.gpu))


def _tally(objects: Sequence[K8sObject], site: Site) -> _Tally:
    tally = _Tally()
    for obj, _, spec in pod_templates(objects):
        hooks = str(((obj.manifest.get("metadata") or {}).get("annotations") or {}).get("helm.sh/hook", ""))
        if "test" in hooks.split(","):
            continue  # run by `helm test` only, never by an install
        if not _lands_on_system(spec, site, every_node=obj.kind == "DaemonSet"):
            continue
        requests = pod_requests(spec)
        if obj.kind == "DaemonSet":
            tally.add_per_node(requests)
        elif obj.kind in ("Job", "CronJob"):
            tally.add_job(_short(obj), requests)
        else:
            tally.add(_short(obj), _replicas((obj.manifest.get("spec") or {}).get("replicas")), requests)
    for obj in operator_mounts.operator_objects(objects):
        spec = obj.manifest.get("spec") or {}
        if obj.kind in ("Prometheus", "Alertmanager") and _lands_on_system(spec, site):
            tally.add(_short(obj), _replicas(spec.get("replicas")), _requests(spec.get("resources")))
    kai = any(obj.release is not None and obj.release.chart == "kai-scheduler" for obj in objects)
    for name, (replicas, requests) in unrendered_pods(eks=site.kind == "eks").items():
        if kai or not name.startswith("KAI "):
            tally.add(name, replicas, requests)
    return tally


def _cpu_memory(amount: CpuMemory) -> str:
    return f"{amount.millicores / 1000:.2f} CPU and {amount.memory / 2 ** 30:.1f} GiB"


def check_system_pool(objects: Sequence[K8sObject], site: Site,
                      allowances: Mapping[str, Mapping[str, Any]]) -> list[Finding]:
    """``allowances``: host namespace -> the team's stated allowance (``quota.tenant_allowances``), whose ``pods``
    share a MicroK8s box's node."""
    nodes = site.system_nodes
    if nodes is None:
        return []
    tally = _tally(objects, site)
    job_pods, job_requests = (1, tally.job[1]) if tally.job else (0, NOTHING)
    addon_operator = not any(obj.release is not None and obj.release.chart == "gpu-operator" for obj in objects)
    addon_pods = len(microk8s_unrendered_pods(addon_operator)) if site.kind == "microk8s" else 0
    per_node_pods = nodes.node_pods + tally.node_pods + addon_pods
    pods = tally.pods + job_pods
    room_for_pods = (nodes.max_pods - per_node_pods) * nodes.nodes
    where = (f"the system node group's {nodes.description} (its {nodes.size_key.rsplit('.', 1)[1]})"
             if nodes.size_key else nodes.description)
    fix = (f"raise {nodes.size_key} or pick a larger instance type in {nodes.key}.instanceTypes (more CPU, memory "
           "and network interfaces), or run fewer teams (each adds its vCluster control plane there)"
           if nodes.size_key else "run fewer teams on the box (each adds its vCluster control plane and DNS there)")
    counted = (f"{len(tally.names)} workloads ({', '.join(tally.names[:4])}{', ...' if len(tally.names) > 4 else ''})"
               + (f", the largest Job ({tally.job[0]})" if tally.job else "")
               + f" and {per_node_pods} per-node pods on each node")
    findings = []
    short = []
    if pods > room_for_pods:
        short.append(f"{pods} pods, while each node runs at most {nodes.max_pods} pods, {per_node_pods} of them its "
                     f"per-node pods, leaving {room_for_pods} in all")
    if nodes.allocatable is not None:
        need = tally.requests + job_requests
        room = (nodes.allocatable - tally.node_requests).times(nodes.nodes)
        if need.millicores > room.millicores or need.memory > room.memory:
            short.append(f"{_cpu_memory(need)} of requests, while the nodes give pods {_cpu_memory(room)} after "
                         "the per-node pods")
    if short:
        findings.append(Finding(ERROR, RULE, f"site {site.stack}",
                                f"the platform's pods that land on {where} do not fit: {'; and '.join(short)} "
                                f"({counted}); some stay Pending and their Helm releases time out in `pulumi up`",
                                fix))
    # Each team's DNS runs beside its pods, inside the vCluster: no chart of the plan renders it.
    team_pods = sum(int(allowance.get("pods") or 0) + DNS_REPLICAS for allowance in allowances.values())
    if site.kind == "microk8s" and not short and pods + team_pods > room_for_pods:
        findings.append(Finding(
            WARNING, RULE, f"site {site.stack}",
            f"the MicroK8s node runs at most {nodes.max_pods} pods (the kubelet's default): the platform's {pods} "
            f"and {per_node_pods} per-node pods leave {room_for_pods - pods} for the teams, whose quotas allow "
            f"{team_pods} (vcluster.resourceQuota.pods and teams[].vcluster.resourceQuota.pods, and one DNS pod "
            "each); past it their pods "
            "stay Pending inside their quota",
            "lower vcluster.resourceQuota.pods so the teams' pods add up to what the node runs"))
    return findings
