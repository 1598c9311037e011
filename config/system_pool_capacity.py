"""Whether an EKS site's system node group can hold the teams' vCluster control planes.

A control plane carries no toleration of the GPU taint, so every team's runs on the system node group, beside KAI,
the GPU Operator's controllers, the cluster's DNS and the monitoring stack. The group runs ``desiredSize`` nodes, or
up to ``maxSize`` under the site's Cluster Autoscaler (``NodeGroupScaling.most_nodes``). When the control planes'
requests alone (config/tenant_budget.py) pass what those nodes give pods (config/node_allocatable.py, less the pods
every node runs), some stay Pending and their teams' Helm releases time out in ``pulumi up``. Warned, not refused:
the allocatable is computed, not read from the nodes. Pure arithmetic on config.
"""

from __future__ import annotations

from config.model import Platform
from config.node_allocatable import GPU_NODE_PLATFORM_REQUESTS, NOTHING, CpuMemory, eks_node_allocatable
from config.tenant_budget import control_plane_budget

KEY = "cluster.eks.systemNodeGroup"


def _gibibytes(amount: int) -> str:
    return f"{amount / 2 ** 30:.1f} GiB"


def system_pool_warnings(platform: Platform) -> list[str]:
    eks = platform.cluster.eks
    if eks is None:
        return []
    group = eks.system_node_group
    nodes = [eks_node_allocatable(kind) for kind in group.instance_types]
    if not nodes or any(node is None for node in nodes):
        return []
    # Of several instance types the most generous counts, as for the GPU groups: warn only when none would do.
    node = CpuMemory(max(n.millicores for n in nodes), max(n.memory for n in nodes)) - GPU_NODE_PLATFORM_REQUESTS
    count, key = group.scaling.most_nodes, eks.most_nodes_key
    room = node.times(count)
    budgets = [control_plane_budget(team.vcluster) for team in platform.teams]
    need = sum((CpuMemory(budget.millicores, budget.memory) for budget in budgets), NOTHING)
    short = [f"{need.millicores / 1000:.2f} CPU, more than the {room.millicores / 1000:.2f} CPU"
             if need.millicores > room.millicores else "",
             f"{_gibibytes(need.memory)}, more than the {_gibibytes(room.memory)}" if need.memory > room.memory else ""]
    short = [text for text in short if text]
    if not short:
        return []
    return [f"{KEY}: the {len(budgets)} vCluster control planes request {' and '.join(short)} the system "
            f"node group's {count} {'/'.join(group.instance_types)} node(s) give pods (its {key}; what nodeadm "
            "reserves and each node's own pods are taken out), and "
            "KAI, the GPU Operator, the cluster's DNS and the monitoring stack need room there too: some control "
            "planes stay Pending and their teams' Helm releases time out in `pulumi up`. Raise "
            f"{KEY}.{key} or pick a larger instance type, or lower "
            "vcluster.controlPlaneResources.requests."]
