"""Whether the nodes the platform's own pods run on can hold them: their requests and their number.

Every pod without a toleration of the GPU taint runs on an EKS site's system node group: each team's vCluster control
plane, KAI's operator and the services it creates, the GPU Operator's controllers, the cluster's DNS and the
monitoring stack. On a MicroK8s box everything shares its one node with the GPU work. ``system_nodes`` says what
those nodes are: how many (an EKS group's ``desiredSize``, or ``maxSize`` under the site's Cluster Autoscaler:
``NodeGroupScaling.most_nodes``), what one gives pods (config/node_allocatable.py; a MicroK8s box's stated
``cpu`` and ``memory``) and how many pods one may run (nodeadm's maxPods of the instance type, the kubelet's 110 on
MicroK8s). A kubeconfig site states no nodes, so nothing is checked there.

The deployability check (tools/deployability/system_pool.py) counts every rendered workload that lands there. Here,
with no charts at hand, ``system_pool_warnings`` counts what config alone tells: the control planes, the KAI
services and the EKS add-ons no chart renders (config/system_pods.py) and the per-node pods. Past the nodes, some
stay Pending and their Helm releases time out in ``pulumi up``. Warned, not refused: the allocatable is computed,
not read from the nodes. Pure arithmetic on config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from config.key_types import quantity_value
from config.model import Cluster, Platform
from config.node_allocatable import GPU_NODE_PLATFORM_PODS, NOTHING, CpuMemory, eks_max_pods, eks_node_allocatable
from config.system_pods import EKS_NODE_PODS, KUBELET_DEFAULT_MAX_PODS, unrendered_pods
from config.tenant_budget import control_plane_budget

KEY = "cluster.eks.systemNodeGroup"
NFD_WORKER = "node-feature-discovery worker"
MICROK8S_KEY = "cluster.microk8s"


@dataclass(frozen=True)
class SystemNodes:
    """The nodes the platform's own pods land on."""
    # The config key that sizes them, the key holding their count, and that count.
    key: str
    size_key: Optional[str]
    nodes: int
    # One node: the pods it may run, and what it gives pods after the per-node pods no chart renders take theirs
    # (None: the site does not say).
    max_pods: int
    allocatable: Optional[CpuMemory]
    node_pods: int
    # How a message names them ("2 m6i.large node(s)").
    description: str


def system_nodes(cluster: Cluster) -> Optional[SystemNodes]:
    """The system nodes of an EKS site, or a MicroK8s box's one node; None where the site does not state them (a
    kubeconfig site, an instance type the tables lack)."""
    if cluster.eks is not None:
        eks = cluster.eks
        group = eks.system_node_group
        sizes = [eks_node_allocatable(kind) for kind in group.instance_types]
        if not sizes or any(size is None for size in sizes):
            return None
        # Of several instance types the most generous counts, as for the GPU groups: warn only when none would do.
        node = CpuMemory(max(s.millicores for s in sizes), max(s.memory for s in sizes)) \
            - sum(EKS_NODE_PODS.values(), NOTHING)
        count = group.scaling.most_nodes
        return SystemNodes(KEY, f"{KEY}.{eks.most_nodes_key}", count,
                           max(eks_max_pods(kind) for kind in group.instance_types), node, len(EKS_NODE_PODS),
                           f"{count} {'/'.join(group.instance_types)} node(s)")
    if cluster.microk8s is not None:
        box = cluster.microk8s
        stated = None
        if box.cpu is not None and box.memory is not None:
            stated = CpuMemory(int(quantity_value(box.cpu) * 1000), int(quantity_value(box.memory)))
        return SystemNodes(MICROK8S_KEY, None, 1, KUBELET_DEFAULT_MAX_PODS, stated, 0, "the MicroK8s node")
    return None


def system_nodes_output(cluster: Cluster) -> Optional[dict]:
    """``system_nodes`` as the host component registers it (camelCase keys; None where the site does not state its
    nodes), for the deployability check, which reads the plan."""
    nodes = system_nodes(cluster)
    if nodes is None:
        return None
    return {"key": nodes.key, "sizeKey": nodes.size_key, "nodes": nodes.nodes, "maxPods": nodes.max_pods,
            "nodePods": nodes.node_pods, "description": nodes.description,
            "allocatable": None if nodes.allocatable is None else {"millicores": nodes.allocatable.millicores,
                                                                   "memory": nodes.allocatable.memory}}


def system_nodes_from_output(output: Optional[dict]) -> Optional[SystemNodes]:
    if not output:
        return None
    allocatable = output.get("allocatable")
    return SystemNodes(output["key"], output.get("sizeKey"), int(output["nodes"]), int(output["maxPods"]),
                       None if allocatable is None else CpuMemory(int(allocatable["millicores"]),
                                                                  int(allocatable["memory"])),
                       int(output["nodePods"]), output["description"])


# Each amount's spellings, coarse to exact: a shortfall is told in the first that tells the two amounts apart.
CPU_SPELLINGS = (lambda millicores: f"{millicores / 1000:.2f} CPU", lambda millicores: f"{millicores}m CPU")
MEMORY_SPELLINGS = (lambda amount: f"{amount / 2 ** 30:.1f} GiB", lambda amount: f"{amount / 2 ** 20:.0f} MiB",
                    lambda amount: f"{amount} bytes")


def _more_than(need: int, room: int, spellings) -> str:
    spell = next((spell for spell in spellings if spell(need) != spell(room)), spellings[-1])
    return f"{spell(need)}, more than the {spell(room)}"


def shortfall(need: CpuMemory, room: CpuMemory) -> list[str]:
    """What of ``need`` passes ``room``, in words (empty: it fits)."""
    return [text for text in (
        _more_than(need.millicores, room.millicores, CPU_SPELLINGS) if need.millicores > room.millicores else "",
        _more_than(need.memory, room.memory, MEMORY_SPELLINGS) if need.memory > room.memory else "")
        if text]


def system_pool_notes(cluster: Cluster) -> list[str]:
    """A system instance type the tables lack leaves the system node group unjudged: say so, as for a GPU pool."""
    if cluster.eks is None:
        return []
    unknown = [kind for kind in cluster.eks.system_node_group.instance_types if eks_node_allocatable(kind) is None]
    if not unknown:
        return []
    return [f"{KEY}.instanceTypes: {', '.join(unknown)} not in the program's instance-type tables "
            "(config/node_allocatable.py), so nothing checks that the vCluster control planes, KAI's services and "
            "EKS's add-ons fit the system node group (neither this plan nor `--render-charts`' deployability check): "
            "add up their requests in the plan's summary and compare them with the type's allocatable CPU, memory and "
            f"pods times {KEY}.{cluster.eks.most_nodes_key} yourself."]


def system_pool_warnings(platform: Platform) -> list[str]:
    nodes = system_nodes(platform.cluster)
    if nodes is None or platform.cluster.eks is None:
        return []
    budgets = [control_plane_budget(team.vcluster) for team in platform.teams]
    others = unrendered_pods(eks=True)
    # The GPU Operator's NFD worker runs on every node, the system nodes too (its chart's tolerations).
    worker = GPU_NODE_PLATFORM_PODS[NFD_WORKER]
    room = (nodes.allocatable - worker).times(nodes.nodes)
    need = sum((CpuMemory(budget.millicores, budget.memory) for budget in budgets), NOTHING) \
        + sum((requests.times(replicas) for replicas, requests in others.values()), NOTHING)
    pods = sum(budget.pods for budget in budgets) + sum(replicas for replicas, _ in others.values())
    short = shortfall(need, room)
    room_for_pods = (nodes.max_pods - nodes.node_pods - 1) * nodes.nodes
    if pods > room_for_pods:
        short.append(f"{pods} pods, more than the {room_for_pods} pods (each node runs at most {nodes.max_pods}, "
                     f"{nodes.node_pods + 1} of them its own per-node pods)")
    if not short:
        return []
    return [f"{KEY}: the {len(budgets)} vCluster control planes, KAI's services and EKS's CoreDNS and EBS CSI "
            f"controller alone request {' and '.join(short)} the system node group's {nodes.description} give "
            f"pods (its {nodes.size_key.rsplit('.', 1)[1]}; what nodeadm reserves, nodeadm's maxPods of the instance "
            "type and each node's own pods are taken out), and the GPU Operator's controllers and the monitoring "
            "stack need room there too: some control planes stay Pending and their teams' Helm releases time out "
            f"in `pulumi up`. Raise {nodes.size_key} or pick a larger instance type (more CPU, memory and network "
            "interfaces), or lower vcluster.controlPlaneResources.requests. `python -m tools.plan STACK "
            "--render-charts` counts every pod the charts add."]
