"""The MIG slices of each split pool against the mig teams that ask for them: promised vs present, and the slices
no team can use.

Under the ``mixed`` strategy a MIG slice is usable by a mig team only: KAI refuses every pod that does not ask a
MIG profile on a node whose ``nvidia.com/mig.strategy`` label is ``mixed`` (``NodeInfo.PredicateByNodeResourcesType``,
pkg/scheduler/api/node_info/node_info.go at KAI v0.16.4 and v0.17.0: "non MIG jobs cant run on a node with
MigStrategy='mixed'"), and the other tiers' admission refuses ``nvidia.com/mig-<profile>`` requests
(components/isolation_admission.py, ``[no-mig]`` and ``[whole-gpus]``). So a profile of a pool's layout that no mig
team pinned to the pool asks for is hardware no team can ever run on. Under ``single`` each slice is a plain
``nvidia.com/gpu`` that other teams' pods reaching the pool can take (config/isolation.py warns of that instead).
"""

from __future__ import annotations

from dataclasses import dataclass

from config.capacity import GPUS_PER_INSTANCE_TYPE
from config.mig import MIG_LAYOUTS, kai_units, pool_slices
from config.mig_pools import mig_pools, node_groups, pool_models, team_pool
from config.model import MIG, Platform


def mig_slices(platform: Platform) -> list[tuple[str, str, int, float, list[str]]]:
    """Per MIG-split pool and profile: (pool, profile, slices present at its most nodes, slices promised, teams)."""
    rows = []
    for group in mig_pools(platform.cluster):
        gpus = max(GPUS_PER_INSTANCE_TYPE.get(kind, 0) for kind in group.instance_types) * group.scaling.most_nodes
        for profile, count in pool_slices(pool_models(group), group.mig_config).items():
            teams = [team for team in platform.teams if team.isolation.tier == MIG
                     and team.isolation.mig_profile == profile and team_pool(team, platform.cluster) == group.name]
            promised = sum(max(team.resources.gpu.quota, 0) / kai_units(profile) for team in teams)
            rows.append((group.name, profile, gpus * count, promised, [team.name for team in teams]))
    return rows


@dataclass(frozen=True)
class UnusedSlices:
    """The slices of one profile of a mixed MIG pool's layout that no mig team asks for."""
    pool: str
    profile: str
    slices: int

    @property
    def kai_units(self) -> int:
        return self.slices * kai_units(self.profile)


def unused_mig_slices(platform: Platform) -> list[UnusedSlices]:
    if platform.gpu_operator.mig_strategy != "mixed":
        return []
    return [UnusedSlices(pool, profile, present) for pool, profile, present, _, teams in mig_slices(platform)
            if not teams and present]


def unused_slices_warnings(platform: Platform) -> list[str]:
    unused = unused_mig_slices(platform)
    groups = node_groups(platform.cluster)
    rows = mig_slices(platform)
    warnings = []
    for pool in dict.fromkeys(found.pool for found in unused):
        index, group = groups[pool]
        idle = [found for found in unused if found.pool == pool]
        asked = [profile for name, profile, _, _, teams in rows if name == pool and teams]
        counted = (f"{', '.join(f'{found.slices} {found.profile}' for found in idle)} slice(s) at its "
                   f"{platform.cluster.eks.most_nodes_key}, {sum(found.kai_units for found in idle)} GPU(s) as KAI "
                   "counts them")
        if asked:
            # A one-profile layout of a profile the mig teams ask for, where every model of the pool has it.
            whole = [f"all-{profile}" for profile in asked if all(f"all-{profile}" in MIG_LAYOUTS.get(model or "", {})
                                                                  for model in pool_models(group))]
            head = (f"pool {pool}'s MIG layout {group.mig_config} has slices no mig team pinned to it asks for "
                    f"({counted})")
            drop = (f"set cluster.eks.gpuNodeGroups[{index}].migConfig to a layout of the profiles its mig teams "
                    f"ask for ({', '.join(asked)}{'; e.g. ' + whole[0] if whole else ''})")
        else:
            head = (f"pool {pool} is split into MIG slices ({group.mig_config}) but no mig team is pinned to it "
                    f"({counted})")
            drop = f"remove cluster.eks.gpuNodeGroups[{index}].migConfig to give its whole GPUs to the other teams"
        warnings.append(
            f"{head}: no team can use them. Under the mixed MIG strategy KAI places no gpu-fraction or nvidia.com/gpu "
            "pod on a MIG node, and only a mig team may ask for nvidia.com/mig-<profile> (the other tiers' admission "
            f"refuses it), so they are not spare capacity either. Fix: give a team isolation tier mig with migProfile "
            f"{idle[0].profile} and nodePool {pool}, or {drop}.")
    return warnings
