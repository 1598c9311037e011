"""Whether the GPU node groups the teams' pods can run on hold the GPUs their KAI queues guarantee.

KAI judges a queue's gpu quota against the whole cluster, as it does its cpu and memory quota
(config/cpu_memory_capacity.py says how it shares and reclaims), but a team whose ``vcluster.nodeLabels``,
``enforceTolerations`` or ``isolation.nodePool`` keep its pods on some GPU node groups can only be given GPUs there,
and only whole or fractional GPUs, never a group's MIG slices (their admission refuses MIG requests, and KAI places
no other pod on a node of the mixed MIG strategy; under single, where it would, config/isolation.py warns of the
teams that can reach a mig team's pool; the slices promised to mig teams are judged per pool there). When the
teams that can run only inside a set of groups are guaranteed more GPUs than the groups of that set without MIG hold,
the groups fill up with every team inside its quota, nothing is reclaimed, and a team still under its quota keeps
Pending pods, while the site-wide sum of the quotas (config/load.py) fits the host. The sets are the unions of the
teams' placements, as for cpu and memory; a set that takes in every GPU group of a host without MIG is the whole
host, which the site-wide check judges. Only an EKS host has more than one GPU pool. Warned, not refused, as the cpu
and memory guarantees are. Pure arithmetic on config.
"""

from __future__ import annotations

from config.capacity import GPU_EPSILON, GpuCapacity, group_gpu_capacity
from config.cpu_memory_capacity import KAI_OUTCOME, placement_sets, team_pools_of
from config.model import MIG, Platform, Team


def gpu_pool_warnings(platform: Platform) -> list[str]:
    eks = platform.cluster.eks
    if eks is None or len(eks.gpu_node_groups) < 2:
        return []
    time_slicing = platform.gpu_operator.time_slicing
    whole = {group.name: (index, group_gpu_capacity(group, time_slicing))
             for index, group in enumerate(eks.gpu_node_groups) if not group.mig_config}
    split = sorted(group.name for group in eks.gpu_node_groups if group.mig_config)
    team_pools = team_pools_of(platform)
    warnings, reported = [], []
    for pools in placement_sets(team_pools):
        usable = sorted(pool for pool in pools if pool in whole)
        if not usable or (len(usable) == len(whole) and not split) or any(whole[pool][1] is None for pool in usable):
            continue
        inside = [team for team in platform.teams
                  if team.name in team_pools and team_pools[team.name] <= pools
                  and team.isolation.tier != MIG and team.resources.gpu.quota != -1]
        guaranteed = sum(team.resources.gpu.quota for team in inside)
        capacities = [whole[pool][1] for pool in usable]
        held = sum(capacities, GpuCapacity(0, 0))
        # A set over only through a smaller set already warned of says nothing new until that is fixed.
        if guaranteed <= held.kai_units + GPU_EPSILON or any(smaller <= pools for smaller in reported):
            continue
        reported.append(pools)
        most = eks.most_nodes_key
        sizes = " / ".join(f"cluster.eks.gpuNodeGroups[{whole[pool][0]}].{most}" for pool in usable)
        reached = sorted(pool for pool in pools if pool in whole or pool in split)
        sliced = [pool for pool in reached if pool in split]
        warnings.append(
            f"teams[].resources.gpu.quota: the teams whose GPUs can come only from GPU node group(s) "
            f"{', '.join(reached)} ({', '.join(team.name for team in inside)}) are guaranteed {guaranteed:g} GPU(s) "
            f"in all, more than the {held.describe()} of group(s) {', '.join(usable)} at their {most} ({sizes})"
            + (f", the only groups there whose GPUs they can use ({', '.join(sliced)}: MIG slices, for mig teams only)"
               if sliced else "")
            + f". {KAI_OUTCOME}. Lower those teams' gpu quotas until they add up to at most {held.kai_units:g}, let a "
            f"team's pods reach another GPU node group ({_reach_keys(platform, inside)}), or raise "
            f"{sizes} or choose instance types with more GPUs.")
    return warnings


def _reach_keys(platform: Platform, inside: list[Team]) -> str:
    """The keys that keep those teams' pods where they are. A pinned team's nodePool, not its nodeLabels: a pool
    label there other than the nodePool is refused (config/load_placement.py check_pool_labels)."""
    names = {team.name for team in inside}
    pinned = [f"teams[{index}].isolation.nodePool" for index, team in enumerate(platform.teams)
              if team.name in names and team.isolation.node_pool is not None]
    free = any(team.isolation.node_pool is None for team in inside)
    return ", ".join(pinned + (["teams[].vcluster.nodeLabels, enforceTolerations"] if free else []))
