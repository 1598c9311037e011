"""Whether the GPU node groups the teams' pods can run on hold the GPUs their KAI queues guarantee.

KAI judges a queue's gpu quota against the whole cluster, as it does its cpu and memory quota
(config/cpu_memory_capacity.py says how it shares and reclaims), but a team whose ``vcluster.nodeLabels`` or
``enforceTolerations`` keep its pods on some GPU node groups can only be given GPUs there. When the teams that can run
only inside a set of groups are guaranteed more GPUs than those groups hold, the groups fill up with every team inside
its quota, nothing is reclaimed, and a team still under its quota keeps Pending pods, while the site-wide sum of the
quotas (config/load.py) fits the host. The sets are the unions of the teams' placements, as for cpu and memory; a set
that takes in every GPU group is the whole host, which the site-wide check judges. Only an EKS host has more than one
GPU pool. Warned, not refused, as the cpu and memory guarantees are. Pure arithmetic on config.
"""

from __future__ import annotations

from config.capacity import GpuCapacity, group_gpu_capacity
from config.cpu_memory_capacity import KAI_OUTCOME, placement_sets, team_pools_of
from config.model import Platform

_EPSILON = 1e-9


def gpu_pool_warnings(platform: Platform) -> list[str]:
    eks = platform.cluster.eks
    if eks is None or len(eks.gpu_node_groups) < 2:
        return []
    groups = {group.name: (index, group_gpu_capacity(group, platform.gpu_operator.time_slicing))
              for index, group in enumerate(eks.gpu_node_groups)}
    team_pools = team_pools_of(platform)
    warnings, reported = [], []
    for pools in placement_sets(team_pools):
        gpu_pools = sorted(pool for pool in pools if pool in groups)
        if not gpu_pools or len(gpu_pools) == len(groups) or any(groups[pool][1] is None for pool in gpu_pools):
            continue
        inside = [team for team in platform.teams
                  if team.name in team_pools and team_pools[team.name] <= pools and team.resources.gpu.quota != -1]
        guaranteed = sum(team.resources.gpu.quota for team in inside)
        held = GpuCapacity(sum(groups[pool][1].gpus for pool in gpu_pools),
                           sum(groups[pool][1].kai_units for pool in gpu_pools))
        # A set over only through a smaller set already warned of says nothing new until that is fixed.
        if guaranteed <= held.kai_units + _EPSILON or any(smaller <= pools for smaller in reported):
            continue
        reported.append(pools)
        sizes = " / ".join(f"cluster.eks.gpuNodeGroups[{groups[pool][0]}].maxSize" for pool in gpu_pools)
        warnings.append(
            f"teams[].resources.gpu.quota: the teams whose pods can run only on GPU node group(s) "
            f"{', '.join(gpu_pools)} ({', '.join(team.name for team in inside)}) are guaranteed {guaranteed:g} "
            f"GPU(s) in all, more than the {held.describe()} those groups hold at their maxSize "
            f"({sizes}). {KAI_OUTCOME}. Lower those teams' gpu quotas until "
            f"they add up to at most {held.kai_units:g}, let a team's pods reach another GPU node group "
            f"(teams[].vcluster.nodeLabels, enforceTolerations), or raise {sizes} or choose instance types with "
            "more GPUs.")
    return warnings
