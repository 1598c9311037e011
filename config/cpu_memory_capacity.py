"""Whether the nodes the teams' pods run on can give the CPU and memory their KAI queues guarantee.

Every tenant pod, its DNS included, is scheduled by KAI in its team's queue, and a queue's cpu and memory quota
(``teams[].resources``, by default ``vcluster.resourceQuota`` plus the DNS pod) is its guarantee. KAI does not
compare the guarantees with the cluster (kai-scheduler v0.16.0 to v0.17.0, ``pkg/scheduler/plugins/proportion``):
``resource_division.go`` ``setDeservedResource`` gives every queue min(quota, what it requests) as its fair share
whatever the total, letting the remainder go below zero, and a queue's pods may only reclaim from another queue
that is above its quota or its fair share (``reclaimable/strategies/strategies.go``: ``GuaranteeDeservedQuota``
needs the victim over its deserved quota, ``MaintainFairShare`` over its fair share). When the guarantees add up
past the nodes and every team stays inside its own, the nodes fill up, no queue is over its share, nothing is
reclaimed, and a team still under its quota waits with Pending pods: the guarantee does not hold, and nothing says so.

A team counts where its pods can run (``vcluster.nodeLabels`` and ``enforceTolerations``, config/placement.py).
Pools are judged together where teams share them: for every set of pools that is the union of some teams' pools,
the teams that can run only inside it must fit in it (a team on two pools may use either). A team whose quota is
``-1`` guarantees nothing countable (KAI reads it as the whole cluster) and is not summed. A pool whose size the
program does not know (an instance type the tables lack, a MicroK8s box or existing cluster that states no ``cpu`` /
``memory``, the system node group) gets a review note with the teams' totals instead. Pure arithmetic on config.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from typing import Optional

from config.key_types import quantity_value
from config.model import Platform, Team
from config.node_allocatable import GPU_NODE_PLATFORM_PODS, CpuMemory, eks_gpu_node_for_teams
from config.placement import placement
from config.tenant_budget import control_plane_budget

RESOURCES = ("cpu", "memory")
# A site with more distinct team placements than this is judged on each placement and on all its pools together.
MOST_PLACEMENTS_COMBINED = 10
EXISTING_NODES = "the cluster's nodes"
KAI_OUTCOME = ("KAI does not check it: it gives each queue its quota as a fair share whatever the nodes hold, and a "
               "team under its quota may only reclaim from a queue above its own quota or fair share, so once the "
               "nodes are full with every team inside its guarantee, nothing is reclaimed and a team still under "
               "its quota keeps Pending pods")


@dataclass(frozen=True)
class PoolSize:
    """What a pool can give the teams, per resource (None: not known), and how the program arrived at it."""
    amounts: dict[str, Optional[int]]
    basis: str
    fix: str


@dataclass(frozen=True)
class PoolGuarantees:
    """A set of pools, the teams whose pods can only run there, and what those teams guarantee against what the
    pools give (cpu in millicores, memory in bytes; an allocatable of None is not known)."""
    pools: tuple[str, ...]
    teams: tuple[str, ...]
    unlimited: dict[str, tuple[str, ...]]
    guaranteed: dict[str, int]
    allocatable: dict[str, Optional[int]]
    basis: str
    fix: str

    def over(self, resource: str) -> bool:
        amount = self.allocatable[resource]
        return amount is not None and self.guaranteed[resource] > amount

    def record(self) -> dict:
        """Plain data for the plan (the summary's table)."""
        return {"pools": list(self.pools), "teams": list(self.teams),
                **{resource: {"guaranteed": self.guaranteed[resource], "allocatable": self.allocatable[resource],
                              "unlimited": list(self.unlimited[resource])} for resource in RESOURCES},
                "basis": self.basis}


def team_guarantee(team: Team, resource: str) -> Optional[int]:
    """The team's queue quota in millicores or bytes; None when unlimited (-1)."""
    quota = getattr(team.resources, resource).quota
    if quota is None or quota == -1:
        return None
    return round(quota) if resource == "cpu" else round(quota * 1_000_000)


def team_pools_of(platform: Platform) -> dict[str, frozenset[str]]:
    host = platform.host
    if host is None or host.node_pools is None:
        return {team.name: frozenset((EXISTING_NODES,)) for team in platform.teams}
    where = {team.name: placement(host, team.vcluster.node_labels, team.vcluster.enforce_tolerations)
             for team in platform.teams}
    return {name: frozenset(pool.name for pool in spot.runnable) for name, spot in where.items()
            if spot is not None and spot.runnable}


def _stated(value: Optional[str], resource: str) -> Optional[int]:
    if value is None:
        return None
    amount = quantity_value(value)
    return round(amount * 1000) if resource == "cpu" else round(amount)


def _control_planes(platform: Platform) -> CpuMemory:
    budgets = [control_plane_budget(team.vcluster) for team in platform.teams]
    return CpuMemory(sum(budget.millicores for budget in budgets), sum(budget.memory for budget in budgets))


def _box_size(platform: Platform) -> PoolSize:
    """A MicroK8s box or an existing cluster: the allocatable the site states; on MicroK8s the vCluster control
    planes and the GPU Operator's feature-discovery worker run on the same node and are taken out first."""
    kind = platform.cluster.kind
    box = platform.cluster.microk8s or platform.cluster.kubeconfig
    stated = {resource: _stated(getattr(box, resource), resource) for resource in RESOURCES}
    keys = " and ".join(f"cluster.{kind}.{resource}" for resource in RESOURCES if stated[resource] is not None)
    fix = (f"or check cluster.{kind}.cpu and .memory against `kubectl describe nodes` (Allocatable"
           + (" of the nodes tenant pods run on)" if kind == "kubeconfig" else ")"))
    if not keys:
        return PoolSize(stated, f"cluster.{kind}.cpu and cluster.{kind}.memory are not stated", fix)
    if kind != "microk8s":
        return PoolSize(stated, f"{keys} as stated", fix)
    taken = _control_planes(platform) + GPU_NODE_PLATFORM_PODS["node-feature-discovery worker"]
    amounts = {resource: None if stated[resource] is None else stated[resource] - getattr(taken, field)
               for resource, field in (("cpu", "millicores"), ("memory", "memory"))}
    return PoolSize(amounts, f"{keys} as stated, less the {len(platform.teams)} vCluster control "
                    "planes' and the GPU Operator's feature-discovery worker's requests", fix)


def pool_sizes(platform: Platform) -> dict[str, PoolSize]:
    """What each pool the teams can run on gives them, by name."""
    eks = platform.cluster.eks
    if eks is None:
        name = EXISTING_NODES if platform.cluster.kubeconfig is not None else "microk8s"
        return {name: _box_size(platform)}
    sizes = {}
    for index, group in enumerate(eks.gpu_node_groups):
        node = eks_gpu_node_for_teams(group.instance_types)
        nodes = group.scaling.most_nodes
        key = f"cluster.eks.gpuNodeGroups[{index}]"
        sizes[group.name] = PoolSize(
            {"cpu": None if node is None else node.millicores * nodes,
             "memory": None if node is None else node.memory * nodes},
            f"{nodes} node(s) ({key}.{eks.most_nodes_key}) of {' / '.join(group.instance_types)}, less what the EKS "
            "AMI reserves for the kubelet and the platform's pods on each" if node is not None else
            f"{key}.instanceTypes has a type the program's tables lack (config/capacity.py)",
            f"or raise {key}.{eks.most_nodes_key} or choose a larger instance type")
    return sizes


def placement_sets(team_pools: dict[str, frozenset[str]]) -> list[frozenset[str]]:
    """Every union of the teams' placements (only each placement and all of them past MOST_PLACEMENTS_COMBINED)."""
    distinct = sorted(set(team_pools.values()), key=lambda pools: (len(pools), sorted(pools)))
    if len(distinct) > MOST_PLACEMENTS_COMBINED:
        unions = set(distinct) | {frozenset().union(*distinct)}
    else:
        unions = {frozenset().union(*chosen) for size in range(1, len(distinct) + 1)
                  for chosen in combinations(distinct, size)}
    return sorted(unions, key=lambda pools: (len(pools), sorted(pools)))


def pool_guarantees(platform: Platform) -> list[PoolGuarantees]:
    """Each set of pools the teams run on (alone or together) with what the teams inside it guarantee."""
    if not platform.teams:
        return []
    sizes = pool_sizes(platform)
    team_pools = team_pools_of(platform)
    by_name = {team.name: team for team in platform.teams}
    found = []
    for pools in placement_sets(team_pools):
        inside = [by_name[name] for name, where in team_pools.items() if where <= pools]
        known = [sizes.get(pool) for pool in sorted(pools)]
        allocatable = {resource: None if any(size is None or size.amounts[resource] is None for size in known)
                       else sum(size.amounts[resource] for size in known) for resource in RESOURCES}
        found.append(PoolGuarantees(
            pools=tuple(sorted(pools)), teams=tuple(team.name for team in inside),
            unlimited={resource: tuple(team.name for team in inside if team_guarantee(team, resource) is None)
                       for resource in RESOURCES},
            guaranteed={resource: sum(team_guarantee(team, resource) or 0 for team in inside)
                        for resource in RESOURCES},
            allocatable=allocatable,
            basis="; ".join(size.basis if size else f"pool {pool} is not sized by the program"
                            for pool, size in zip(sorted(pools), known)),
            fix=" ".join(dict.fromkeys(size.fix for size in known if size))))
    return found


def cpus(millicores: int) -> str:
    return f"{millicores / 1000:,.2f} CPU"


def gibibytes(amount: int) -> str:
    return f"{amount / 2 ** 30:,.1f} GiB"


SHOWN = {"cpu": cpus, "memory": gibibytes}


def quota_origin(resource: str) -> str:
    return (f"A team's {resource} quota is its vcluster.resourceQuota.{resource} plus its DNS pod unless "
            f"teams[].resources.{resource}.quota sets it")


def organization_overcommit_warnings(platform: Platform) -> list[str]:
    """KAI over-commits a parent's cpu or memory quota silently (its teams' quotas added up past it): a warning, as
    the gpu quota's sum is an error (config/load.py)."""
    warnings = []
    for resource, unit in (("cpu", "millicores"), ("memory", "MB")):
        org_quota = getattr(platform.organization.resources, resource).quota
        quotas = [getattr(team.resources, resource).quota for team in platform.teams]
        if org_quota == -1 or -1 in quotas or sum(quotas) <= org_quota + 1e-9:
            continue
        warnings.append(
            f"the teams' {resource} quotas add up to {sum(quotas):g} {unit}, more than "
            f"organization.resources.{resource}.quota ({org_quota:g}): KAI over-commits the organization's guarantee "
            f"without a word, so the teams' guarantees cannot all be met at once. {quota_origin(resource)}: raise "
            f"the organization's quota to at least {sum(quotas):g} (or -1), or lower the teams'.")
    return warnings


def cpu_memory_warnings(platform: Platform) -> list[str]:
    """The teams guarantee more CPU or memory on some pools than those pools can give: warned, not refused (a site
    that ran before keeps running, and a team that never uses its whole guarantee does not notice)."""
    warnings, reported = [], {resource: [] for resource in RESOURCES}
    for found in pool_guarantees(platform):
        for resource in RESOURCES:
            # A set of pools over only through a smaller set already warned of says nothing new until that is fixed.
            if not found.over(resource) or any(set(smaller) <= set(found.pools) for smaller in reported[resource]):
                continue
            reported[resource].append(found.pools)
            show = SHOWN[resource]
            warnings.append(
                f"teams[].resources.{resource}.quota: the teams whose pods run on {_where(found)} "
                f"({', '.join(found.teams)}) are guaranteed {show(found.guaranteed[resource])} in all, more than the "
                f"{show(found.allocatable[resource])} those nodes can give them ({found.basis}). {KAI_OUTCOME}. "
                f"{quota_origin(resource)}: lower vcluster.resourceQuota.{resource} (the stack's "
                f"or a team's) or the teams' quotas until they add up to at most {show(found.allocatable[resource])}, "
                f"{found.fix}.")
    return warnings


def cpu_memory_notes(platform: Platform) -> list[str]:
    """Pools the program cannot size: the reviewer compares the teams' totals with the nodes by hand."""
    notes = []
    for found in pool_guarantees(platform):
        unknown = [resource for resource in RESOURCES
                   if found.allocatable[resource] is None and found.guaranteed[resource] > 0]
        if not unknown:
            continue
        totals = " and ".join(f"{SHOWN[resource](found.guaranteed[resource])}" for resource in unknown)
        notes.append(
            f"The teams whose pods run on {_where(found)} ({', '.join(found.teams)}) are guaranteed {totals} by "
            f"their KAI queues (teams[].resources, by default vcluster.resourceQuota plus the DNS pod), and the "
            f"program does not know what those nodes can give ({found.basis}). Compare the totals with the "
            "Allocatable of `kubectl describe nodes` less what the platform's pods there request; past it the "
            f"guarantees do not hold. {KAI_OUTCOME}. {_stating_fix(platform)}")
    return notes


def _where(found: PoolGuarantees) -> str:
    if found.pools == (EXISTING_NODES,):
        return EXISTING_NODES
    return ("pool " if len(found.pools) == 1 else "pools ") + ", ".join(found.pools)


def _stating_fix(platform: Platform) -> str:
    kind = platform.cluster.kind
    if kind == "eks":
        return "An instance type in config/capacity.py's tables makes the program check it."
    return f"State cluster.{kind}.cpu and cluster.{kind}.memory and the program checks it."
