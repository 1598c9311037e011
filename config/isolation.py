"""Each team's isolation tier against the hardware, the KAI release and the quotas.

- ``shared``: KAI fractions (or time-slicing); nothing isolates one team's GPU memory from another's.
- ``memory-capped``: KAI fractions whose memory is capped in the container by HAMi-core. KAI's ``hamicore``
  plugins (binder and pod webhook, since v0.16.0) write ``CUDA_DEVICE_MEMORY_LIMIT`` into the fractional
  container; the HAMi-core library (loaded by ``LD_PRELOAD``) enforces it. Needs ``kaiScheduler.gpuSharing``.
- ``mig``: slices of one MIG profile of a pool the GPU Operator's MIG manager splits (``migConfig``). KAI
  refuses non-MIG pods on nodes with the ``mixed`` strategy, so only ``mig`` teams may be pinned there.
- ``exclusive``: whole GPUs, so its gpu quota and limit are whole numbers.

``check_isolation`` adds one issue per wrong combination (naming the key and the fix); ``pin_teams`` puts a
team's pool into its vCluster node labels; ``isolation_warnings`` compares the MIG slices promised to the
slices present ("promised vs present", like the GPU count warnings of config/load.py) and names the slices no team
can use (config/mig_slices.py).
"""

from __future__ import annotations

import dataclasses
from typing import Optional

from config import versions
from config.capacity import GPU_EPSILON
from config.errors import MISSING
from config.mig import MIG_WITHOUT_LAYOUTS, PROFILE_PATTERN, kai_units, layout, supports_mig
from config.mig_pools import MIG_INSTANCE_FAMILIES, check_pool, layout_valid, mig_pools, node_groups, pool_models, \
    sharing_profile, slices_as_gpus, team_pool
from config.mig_slices import mig_slices, unused_slices_warnings
from config.model import EXCLUSIVE, MEMORY_CAPPED, MIG, SHARED, Cluster, GpuOperator, KaiScheduler, Platform, Team
from config.model_host import GpuNodeGroup
from config.reader import Reader, within
from config.hosts import host_profile
from config.placement import place
from config.sharing import TIME_SLICED
from config.vocabulary import POOL_LABEL

# The first KAI release with the hamicore binder and pod-webhook plugins (pkg/binder/plugins/hamicore).
HAMICORE_MINIMUM_VERSION = (0, 16, 0)


def _reported(reader: Reader, key: str) -> bool:
    """Whether ``key`` or a key under it already has a problem of its own (its value then reads as None)."""
    return any(within(issue.key, key) for issue in reader.issues)


def _readable(reader: Reader, cluster: Optional[Cluster]) -> Optional[Cluster]:
    """The cluster when its GPU node groups were read without problems: the hardware rules need all of them."""
    if cluster is None or (cluster.eks is not None and _reported(reader, "cluster.eks.gpuNodeGroups")):
        return None
    return cluster


def check_isolation(reader: Reader, cluster: Optional[Cluster], gpu_operator: GpuOperator, kai: KaiScheduler,
                    teams: list[Team]) -> None:
    """One issue per wrong combination; a value with a problem of its own (None here) is left to that problem."""
    cluster = _readable(reader, cluster)
    for name, (index, group) in (node_groups(cluster) if cluster is not None else {}).items():
        check_pool(reader, f"cluster.eks.gpuNodeGroups[{index}]", group, gpu_operator)
    for index, team in enumerate(teams):
        key = f"teams[{index}].isolation"
        tier = team.isolation.tier
        if tier is None:
            continue
        if tier != MIG and team.isolation.mig_profile is not None:
            reader.fail(f"{key}.migProfile", team.isolation.mig_profile, f"only a mig team has a MIG profile, "
                        f"this one is {tier}", "remove migProfile, or set isolation.tier to mig")
        if cluster is None:
            pass  # the pools are unknown: the cluster's own problem is reported
        elif tier == MIG:
            _check_mig_team(reader, key, index, team, cluster)
        else:
            _check_pinned_pool(reader, key, team, cluster, gpu_operator)
        if tier == MEMORY_CAPPED:
            _check_memory_capped(reader, key, kai)
        if tier == EXCLUSIVE:
            _check_whole(reader, f"teams[{index}].resources.gpu", team, 1, "an exclusive team gets whole GPUs only")
            if cluster is not None:
                _check_whole_gpu_pools(reader, key, team, cluster, gpu_operator)


def _pool_or_fail(reader: Reader, key: str, pool: str, cluster: Cluster) -> Optional[GpuNodeGroup]:
    if cluster.eks is None:
        reader.fail(f"{key}.nodePool", pool, f"node pools are only known on eks hosts, this one is {cluster.kind}",
                    "remove nodePool")
        return None
    found = node_groups(cluster).get(pool)
    if found is None:
        reader.fail(f"{key}.nodePool", pool, "is not a GPU node group of cluster.eks.gpuNodeGroups",
                    f"use one of {', '.join(node_groups(cluster)) or 'the GPU node group names'}")
        return None
    return found[1]


def _check_pinned_pool(reader: Reader, key: str, team: Team, cluster: Cluster, gpu_operator: GpuOperator) -> None:
    pool = team.isolation.node_pool
    group = _pool_or_fail(reader, key, pool, cluster) if pool is not None else None
    if group is None or group.mig_config is None or not layout_valid(group):
        return
    tier = team.isolation.tier
    if slices_as_gpus(group, gpu_operator):
        # KAI sees a plain GPU node there (config/mig_pools.py): it would place the pods, on the mig teams' slices.
        problem = (f"under the single strategy each nvidia.com/gpu there is one MIG slice, which a {tier} team would "
                   "take from the mig teams' pool as a GPU of its own")
    else:
        problem = f"KAI places no {tier} pods there under the mixed strategy (only nvidia.com/mig-<profile> ones)"
    reader.fail(f"{key}.nodePool", pool, f"pool {pool} is split into MIG slices ({group.mig_config}): {problem}",
                "pin the team to a pool without migConfig, or set isolation.tier to mig")


def _check_whole_gpu_pools(reader: Reader, key: str, team: Team, cluster: Cluster, gpu_operator: GpuOperator) -> None:
    """An exclusive team's nvidia.com/gpu is a whole card only where the device plugin advertises each card once: on
    a pool on the time-sliced profile it is one of the card's replicas, time-shared (memory and faults too) with
    the pods holding the others, whatever team they are; on a MIG-split pool under the single strategy it is one
    slice of a card."""
    settings = team.vcluster
    if cluster.eks is None or settings.node_labels is None or settings.enforce_tolerations is None:
        return
    groups, pool = node_groups(cluster), team.isolation.node_pool
    if pool is not None and (pool not in groups or groups[pool][1].mig_config is not None):
        return  # reported by _check_pinned_pool
    labels = dict(settings.node_labels) if pool is None else {**settings.node_labels, POOL_LABEL: pool}
    reached = [groups[found.name][1] for found in
               place(cluster.kind, host_profile(cluster).node_pools, labels, settings.enforce_tolerations).runnable
               if found.name in groups]
    sliced = [group.name for group in reached
              if group.mig_config is None and sharing_profile(group, gpu_operator) == TIME_SLICED]
    split = [group.name for group in reached if slices_as_gpus(group, gpu_operator)]
    if not sliced and not split:
        return
    problems = []
    if sliced:
        pools = f"pool {sliced[0]} is" if len(sliced) == 1 else f"pools {', '.join(sliced)} are"
        problems.append(f"{pools} on the {TIME_SLICED} profile, where each GPU is advertised "
                        f"{gpu_operator.time_slicing.replicas} times: an exclusive team's GPU there is a time slice "
                        "of a card whose memory and faults it shares with other pods")
    if split:
        pools = f"pool {split[0]} is" if len(split) == 1 else f"pools {', '.join(split)} are"
        problems.append(f"{pools} split into MIG slices under the single strategy, where each nvidia.com/gpu is one "
                        "slice: an exclusive team's GPU there is a slice of a card, taken from the mig teams' pool")
    problem = "; ".join(problems)
    if pool is not None:
        reader.fail(f"{key}.nodePool", pool, problem, f"set cluster.eks.gpuNodeGroups[{groups[pool][0]}]."
                    f"sharingProfile to exclusive, or pin the team to a pool on the exclusive profile")
        return
    whole = [name for name, (_, group) in groups.items()
             if group.mig_config is None and sharing_profile(group, gpu_operator) != TIME_SLICED]
    reader.fail(f"{key}.nodePool", MISSING, problem, "pin the team to a pool on the exclusive profile"
                + (f" ({', '.join(whole)})" if whole else "")
                + (", or set those pools' sharingProfile to exclusive" if sliced else ""))


def _check_mig_team(reader: Reader, key: str, index: int, team: Team, cluster: Cluster) -> None:
    profile = team.isolation.mig_profile
    if profile is None:
        reader.fail(f"{key}.migProfile", MISSING, "a mig team needs the MIG profile its pods may request",
                    "set migProfile to a profile of its pool's layout, e.g. 1g.10gb")
    elif not PROFILE_PATTERN.fullmatch(profile):
        reader.fail(f"{key}.migProfile", profile, "is not a MIG profile KAI can count (<n>g.<m>gb; KAI counts other "
                    "names, such as +me profiles, as zero GPUs in the queue)", "use a profile such as 1g.10gb")
        profile = None
    if cluster.eks is None:
        reader.fail(f"{key}.tier", MIG, f"MIG needs GPU pools whose model the program knows; on a {cluster.kind} "
                    "host it knows none", "use tier memory-capped or exclusive on this host, or run on eks")
        return
    pool = team_pool(team, cluster)
    if pool is None:
        candidates = [group.name for group in mig_pools(cluster)]
        if not candidates:
            reader.fail(f"{key}.tier", MIG, "no GPU node group is split into MIG slices",
                        f"set migConfig on a node group with MIG GPUs ({MIG_INSTANCE_FAMILIES})")
        else:
            reader.fail(f"{key}.nodePool", MISSING, "several node groups are split into MIG slices",
                        f"set nodePool to one of {', '.join(candidates)}")
        return
    group = _pool_or_fail(reader, key, pool, cluster)
    if group is None:
        return
    if group.mig_config is None:
        models = sorted({model or kind for kind, model in zip(group.instance_types, pool_models(group))})
        has_mig = all(supports_mig(model) for model in pool_models(group))
        reader.fail(f"{key}.nodePool", pool, f"pool {pool} ({', '.join(models)}) is not split into MIG slices"
                    + ("" if has_mig else f": {', '.join(models)} GPUs have no MIG"
                       + (" layouts the program knows" if set(models) & set(MIG_WITHOUT_LAYOUTS) else "")),
                    f"set cluster.eks.gpuNodeGroups[{node_groups(cluster)[pool][0]}].migConfig" if has_mig else
                    f"pin the team to a pool of MIG GPUs ({MIG_INSTANCE_FAMILIES}) with a migConfig, or use tier "
                    "memory-capped or exclusive")
        return
    if profile is None or not layout_valid(group):
        return  # a layout the GPUs do not have is reported once, on the pool
    for kind, model in zip(group.instance_types, pool_models(group)):
        slices = layout(model, group.mig_config)
        if slices and profile not in slices:
            reader.fail(f"{key}.migProfile", profile, f"is not a slice of pool {pool}'s layout {group.mig_config} on "
                        f"{model} ({kind})", f"use one of {', '.join(slices)}, or change the pool's migConfig")
            return
    _check_whole(reader, f"teams[{index}].resources.gpu", team, kai_units(profile),
                 f"KAI counts a {profile} slice as {kai_units(profile)} in a queue's gpu quota")


def _check_whole(reader: Reader, key: str, team: Team, unit: int, why: str) -> None:
    for field, value in (("quota", team.resources.gpu.quota), ("limit", team.resources.gpu.limit)):
        if value is not None and value != -1 and abs(value / unit - round(value / unit)) > GPU_EPSILON:
            reader.fail(f"{key}.{field}", value, f"{why}, so it must be a multiple of {unit}",
                        f"set it to a multiple of {unit}, e.g. {max(round(value / unit), 1) * unit:g}")


def _check_memory_capped(reader: Reader, key: str, kai: KaiScheduler) -> None:
    if kai.gpu_sharing is False:
        reader.fail(f"{key}.tier", MEMORY_CAPPED, "memory-capped teams get KAI fractions, but "
                    "kaiScheduler.gpuSharing is off", "turn kaiScheduler.gpuSharing on, or use tier exclusive")
    if kai.version is not None and versions.release_numbers(kai.version) < HAMICORE_MINIMUM_VERSION:
        minimum = "v" + ".".join(map(str, HAMICORE_MINIMUM_VERSION))
        reader.fail("kaiScheduler.version", kai.version, f"has no hamicore plugin (KAI {minimum} added it), which "
                    "memory-capped teams need", f"pin {minimum} or later, e.g. {versions.KAI_VERSION}")


def pin_teams(reader: Reader, teams: list[Team], cluster: Optional[Cluster], gpu_operator: GpuOperator) -> list[Team]:
    """A pinned team's vCluster syncs only its pool's nodes, and vCluster pins every pod of the team there
    (so the placement rules judge the pinned selector). A mig team also learns its pool; on a site with a MIG-split
    pool every team learns the strategy slices are named by, for its admission policy (a mig team's slices, a shared
    team's refusal of them). Teams whose values have problems of their own stay as read."""
    cluster = _readable(reader, cluster)
    if cluster is None:
        return teams
    pinned, split = [], bool(mig_pools(cluster))
    for index, team in enumerate(teams):
        # A nodePool refused (no such group, not an eks host) pins nothing: placement judges the nodeLabels as written.
        pool = team_pool(team, cluster) if team.isolation.tier is not None \
            and not _reported(reader, f"teams[{index}].isolation.nodePool") else None
        if pool is not None and team.vcluster.node_labels is not None:
            labels = {**team.vcluster.node_labels, POOL_LABEL: pool}
            team = dataclasses.replace(team, vcluster=dataclasses.replace(team.vcluster, node_labels=labels),
                                       isolation=dataclasses.replace(team.isolation, node_pool=pool))
        if split:
            team = dataclasses.replace(team, isolation=dataclasses.replace(
                team.isolation, mig_strategy=gpu_operator.mig_strategy))
        pinned.append(team)
    return pinned


def with_isolation(gpu_operator: GpuOperator, kai: KaiScheduler, cluster: Cluster,
                   teams: list[Team]) -> tuple[GpuOperator, KaiScheduler]:
    """The operator sets the MIG strategy where a pool is split; KAI turns hamicore on for memory-capped teams."""
    return (dataclasses.replace(gpu_operator, mig_split=bool(mig_pools(cluster))),
            dataclasses.replace(kai, hamicore=any(team.isolation.tier == MEMORY_CAPPED for team in teams)))


def _only_on_mixed_mig_pools(platform: Platform) -> list[str]:
    """Teams guaranteed GPUs whose pods reach GPU pools, all of them MIG-split under the mixed strategy (a pinned
    team there is refused by _check_pinned_pool; an unpinned one is only selected there)."""
    cluster = platform.cluster
    if cluster.eks is None or platform.gpu_operator.mig_strategy != "mixed" or not mig_pools(cluster):
        return []
    groups, stranded = node_groups(cluster), []
    for team in platform.teams:
        settings = team.vcluster
        if team.isolation.tier == MIG or team.resources.gpu.quota <= 0:
            continue
        reached = place(cluster.kind, host_profile(cluster).node_pools, settings.node_labels,
                        settings.enforce_tolerations).runnable
        pools = [groups[pool.name][1] for pool in reached if pool.name in groups]
        if pools and all(group.mig_config is not None for group in pools):
            stranded.append(team.name)
    return stranded


def _reaches(team: Team, cluster: Cluster, pool: str) -> bool:
    settings = team.vcluster
    return pool in {found.name for found in place(cluster.kind, host_profile(cluster).node_pools,
                                                  settings.node_labels, settings.enforce_tolerations).runnable}


def _beside_single_slices(platform: Platform) -> list[str]:
    """Under the single strategy KAI sees a plain GPU node (config/mig_pools.py), so any team's nvidia.com/gpu pod
    reaching a MIG-split pool takes a slice there, inside its own quota (an exclusive team is refused)."""
    cluster, warnings = platform.cluster, []
    for group in mig_pools(cluster):
        mig = [team.name for team in platform.teams if team.isolation.tier == MIG and team_pool(team, cluster)
               == group.name]
        others = [team.name for team in platform.teams if team.isolation.tier != MIG and team.resources.gpu.limit
                  and _reaches(team, cluster, group.name)]
        if slices_as_gpus(group, platform.gpu_operator) and mig and others:
            warnings.append(f"under the single MIG strategy each nvidia.com/gpu of pool {group.name} is one MIG slice "
                            f"and KAI sees a plain GPU node: team(s) {', '.join(others)}, not mig, can take those "
                            f"slices inside their own quotas, out of those mig team(s) {', '.join(mig)} are promised. "
                            f"Fix: keep them off pool {group.name} (isolation.nodePool or vcluster.nodeLabels), or set "
                            "gpuOperator.migStrategy to mixed.")
    return warnings


def _capped_beside_uncapped(platform: Platform) -> list[str]:
    """HAMi-core caps a memory-capped team's own containers only. KAI, which knows nothing of the cap, packs any
    team's fractions onto one card, so a shared team's uncapped pod beside them can still fill the card's memory."""
    cluster = platform.cluster
    capped = [team for team in platform.teams if team.isolation.tier == MEMORY_CAPPED]
    shared = [team for team in platform.teams if team.isolation.tier == SHARED and team.resources.gpu.limit]
    if not capped or not shared:
        return []
    pools = host_profile(cluster).node_pools
    if pools is None:
        # An existing cluster's nodes are unknown: teams meet unless their node selectors part them.
        beside = [team.name for team in shared if any(_may_meet(team, other) for other in capped)]
        return [_capped_warning([team.name for team in capped], "may share GPU nodes", beside,
                                "give them vcluster.nodeLabels that select other GPU nodes")] if beside else []
    split = {group.name for group in mig_pools(cluster)}
    warnings = []
    for pool in (pool.name for pool in pools if pool.gpu and pool.name not in split):
        here = [team.name for team in capped if _reaches(team, cluster, pool)]
        beside = [team.name for team in shared if _reaches(team, cluster, pool)]
        if here and beside:
            fix = (f"keep them off pool {pool} (isolation.nodePool or vcluster.nodeLabels)" if len(pools) > 1
                   else "give them no GPU limit (resources.gpu.limit: 0)")
            warnings.append(_capped_warning(here, f"share pool {pool}", beside, fix))
    return warnings


def _may_meet(team: Team, other: Team) -> bool:
    """Whether two teams' pods may land on one node: no label both select with different values."""
    labels = other.vcluster.node_labels
    return all(labels.get(key, value) == value for key, value in team.vcluster.node_labels.items())


def _capped_warning(capped: list[str], where: str, shared: list[str], fix: str) -> str:
    return (f"memory-capped team(s) {', '.join(capped)} {where} with shared team(s) {', '.join(shared)}, whose "
            f"fractions KAI may pack onto the same cards with no memory cap: the cap keeps {', '.join(capped)} within "
            f"its share, but a shared pod's OOM or leak can still take the memory it counts on. Fix: {fix}, or make "
            "them memory-capped.")


def _whole_gpus_only(platform: Platform) -> list[str]:
    """Without KAI's GPU sharing a pod asks whole GPUs (``nvidia.com/gpu``): a shared team's fraction of a GPU in its
    quota guarantees no pod, and a limit below one GPU lets none start."""
    if platform.kai_scheduler.gpu_sharing:
        return []
    warnings = []
    for index, team in enumerate(platform.teams):
        gpu = team.resources.gpu
        if team.isolation.tier != SHARED:
            continue  # the whole-GPU tiers' quotas are whole already (check_isolation)
        if 0 < gpu.limit < 1:
            warnings.append(f"teams[{index}] ({team.name}) has gpu limit {gpu.limit:g} but kaiScheduler.gpuSharing is "
                            "off: its pods can only ask whole GPUs (nvidia.com/gpu), and one is above the limit, so "
                            "none of its GPU pods ever starts. Turn kaiScheduler.gpuSharing on, or give the team a "
                            "limit of at least 1.")
        elif gpu.quota != -1 and gpu.quota % 1 > GPU_EPSILON:
            warnings.append(f"teams[{index}] ({team.name}) has gpu quota {gpu.quota:g} but kaiScheduler.gpuSharing is "
                            f"off: its pods can only ask whole GPUs (nvidia.com/gpu), so the fraction guarantees none "
                            f"of them ({int(gpu.quota)} whole GPU(s) run within the quota; the rest run over it, by "
                            "priority and overQuotaWeight, and may be preempted). Turn kaiScheduler.gpuSharing on, or "
                            "give the team a whole-number quota.")
    return warnings


def isolation_warnings(platform: Platform) -> list[str]:
    warnings = _whole_gpus_only(platform)
    for pool, profile, present, promised, teams in mig_slices(platform):
        if promised > present + GPU_EPSILON:
            nodes = platform.cluster.eks.most_nodes_key
            warnings.append(f"teams {', '.join(teams)} are promised {promised:g} {profile} MIG slice(s) on pool {pool}, "
                            f"but it has at most {present} by its config ({nodes} × GPUs × slices per GPU): the "
                            "guarantees cannot all be met at once.")
    warnings += unused_slices_warnings(platform)
    stranded = _only_on_mixed_mig_pools(platform)
    if stranded:
        warnings.append(f"team(s) {', '.join(stranded)} are guaranteed GPUs but every GPU pool their pods can reach is "
                        "split into MIG slices under the mixed strategy, where KAI places no gpu-fraction or "
                        "nvidia.com/gpu pod, and only a mig team may ask nvidia.com/mig-<profile> (the other tiers' "
                        "admission refuses it): none of their GPU pods can run. Fix: select a pool without "
                        "migConfig (isolation.nodePool or vcluster.nodeLabels), or make the team's tier mig.")
    warnings += _beside_single_slices(platform) + _capped_beside_uncapped(platform)
    exclusive = [team.name for team in platform.teams if team.isolation.tier == EXCLUSIVE]
    time_slicing = platform.gpu_operator.time_slicing
    if exclusive and platform.cluster.eks is None and time_slicing.default_profile == TIME_SLICED:
        # The EKS pools' profiles are known and judged by check_isolation; these nodes may be labelled by hand.
        warnings.append(f"exclusive team(s) {', '.join(exclusive)} get whole GPUs only on nodes on the exclusive "
                        f"profile, but gpuOperator.timeSlicing.defaultProfile is {TIME_SLICED}: on a node without the "
                        f"nvidia.com/device-plugin.config label each GPU is advertised {time_slicing.replicas} times "
                        "and their GPU is a time slice shared with other pods. Label their nodes with the exclusive "
                        "profile's key (output timeSlicing.profileKeys), or make exclusive the default.")
    if mig_pools(platform.cluster) and platform.gpu_operator.mode != "install":
        warnings.append(f"GPU node groups are split into MIG slices but gpuOperator.mode is {platform.gpu_operator.mode}: "
                        f"the program does not set the operator's mig.strategy; it must be "
                        f"{platform.gpu_operator.mig_strategy} there.")
    return warnings
