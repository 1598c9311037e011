"""How many of the teams' pods an EKS site's GPU node groups can run at once.

With the VPC CNI each pod takes an address of the node's network interfaces, so a node runs at most nodeadm's
``maxPods`` for its instance type (config/node_allocatable.py ``eks_max_pods``: 29 on a g4dn.xlarge), its own
per-node pods included: the VPC CNI, kube-proxy, the EBS CSI node plugin and the feature-discovery worker
(``GPU_NODE_PLATFORM_PODS``), the GPU Operator's operands, and the node exporter of an installed monitoring stack
(kube-prometheus-stack's tolerates every NoSchedule taint). vCluster pins every synced pod of a team, its DNS
included, to the team's pools (config/placement.py), and the namespace quota lets the team run
``resourceQuota.pods`` of its own there. Where the allowances of the teams sharing pools add up to more than those
pools' nodes run, the last pods stay Pending ("Too many pods") while the quota says they fit: KAI counts no pods.
A note, not a warning: a pod allowance is a ceiling, not a guarantee. Pure arithmetic on config.
"""

from __future__ import annotations

from typing import Optional

from config.cpu_memory_capacity import placement_sets, team_pools_of
from config.model import Platform
from config.model_host import GpuNodeGroup
from config.node_allocatable import ENIS_PER_INSTANCE_TYPE, GPU_NODE_PLATFORM_PODS, eks_max_pods
from config.system_pods import GPU_OPERATOR_OPERAND_PODS
from config.tenant_budget import DNS_REPLICAS

TOOLKIT_POD = "nvidia-container-toolkit"
# The GPU Operator's operands on every GPU node whatever the site (config/system_pods.py); the container toolkit, the
# driver and the MIG manager come on top where they are enabled.
GPU_OPERATOR_NODE_OPERANDS = tuple(pod for pod in GPU_OPERATOR_OPERAND_PODS if pod != TOOLKIT_POD)


def node_platform_pods(platform: Platform, group: GpuNodeGroup) -> int:
    """The pods every node of this GPU group runs for the platform."""
    operator = platform.gpu_operator
    return (len(GPU_NODE_PLATFORM_PODS) + len(GPU_OPERATOR_NODE_OPERANDS) + operator.toolkit_enabled
            + operator.driver_enabled + (group.mig_config is not None)
            + (platform.observability.prometheus == "install"))


def team_pod_room(platform: Platform, group: GpuNodeGroup) -> Optional[int]:
    """How many of the teams' pods the group's nodes run at once; None for an instance type the tables lack. Of a
    mixed group, the most any of its types runs, as for its GPUs."""
    if not group.instance_types or any(kind not in ENIS_PER_INSTANCE_TYPE for kind in group.instance_types):
        return None
    per_node = max(eks_max_pods(kind) for kind in group.instance_types) - node_platform_pods(platform, group)
    return max(per_node, 0) * group.scaling.most_nodes


def gpu_pool_pod_notes(platform: Platform) -> list[str]:
    eks = platform.cluster.eks
    if eks is None or not platform.teams:
        return []
    groups = {group.name: (index, group) for index, group in enumerate(eks.gpu_node_groups)}
    rooms = {name: team_pod_room(platform, group) for name, (_, group) in groups.items()}
    team_pools = team_pools_of(platform)
    by_name = {team.name: team for team in platform.teams}
    notes = []
    for pools in placement_sets(team_pools):
        if not pools <= set(rooms) or any(rooms[pool] is None for pool in pools):
            continue
        inside = [by_name[name] for name, where in team_pools.items() if where <= pools]
        allowed = sum(team.vcluster.resource_quota.pods + DNS_REPLICAS for team in inside)
        room = sum(rooms[pool] for pool in pools)
        if allowed <= room:
            continue
        keys = [f"cluster.eks.gpuNodeGroups[{groups[pool][0]}]" for pool in sorted(pools)]
        sizes = "; ".join(
            f"{key} ({group.scaling.most_nodes} x {'/'.join(group.instance_types)}: at most "
            f"{max(eks_max_pods(kind) for kind in group.instance_types)} pods a node, "
            f"{node_platform_pods(platform, group)} of them the platform's)"
            for key, (_, group) in zip(keys, (groups[pool] for pool in sorted(pools))))
        notes.append(
            f"{', '.join(keys)}: the {len(inside)} team(s) running there ({', '.join(team.name for team in inside)}) "
            f"may run {allowed} pods, their vcluster.resourceQuota.pods and one DNS pod each, but the nodes run at "
            f"most {room} of theirs ({sizes}; nodeadm's maxPods for the instance type). Past that, pods stay "
            "Pending with \"Too many pods\" while the quota admits them: KAI counts no pods. Lower the teams' "
            f"resourceQuota.pods, or raise {keys[0]}.{eks.most_nodes_key} or choose an instance type with more "
            "network interfaces.")
    return notes
