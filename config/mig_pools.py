"""The EKS GPU node groups split into MIG slices: which they are, the pool a team is pinned to, and each group's own
MIG checks (config/isolation.py judges the teams against them).

Under the operator's ``single`` MIG strategy the device plugin advertises every slice of a node as a plain
``nvidia.com/gpu`` (k8s-device-plugin v0.20.0 ``internal/rm/rm.go``: ``AddMIGResource("*", "gpu")``), and KAI
sees a plain GPU node: it takes a node for a MIG one only by the ``node-role.kubernetes.io/mig-enabled`` label or
``nvidia.com/mig-*`` resources (``NodeInfo.IsMIGEnabled`` at v0.17.0), neither of which is set under ``single``.
So a slice is then one GPU to KAI's queues, not its compute slices as under ``mixed`` (config/mig.py); and the
time-slicing config, which replicates ``nvidia.com/gpu`` (``updateDeviceMapWithReplicas``,
``internal/rm/device_map.go``), would share each slice in time between pods.
"""

from __future__ import annotations

from typing import Optional

from config.capacity import gpu_model
from config.errors import MISSING
from config.mig import MIG_CONFIG_LABEL, MIG_LAYOUTS, MIG_WITHOUT_LAYOUTS, kai_units, layout, supports_mig
from config.model import MIG, Cluster, GpuOperator, Team
from config.model_host import GpuNodeGroup
from config.reader import Reader
from config.sharing import TIME_SLICED

MIG_INSTANCE_FAMILIES = "p4d, p4de (A100), p5 (H100), p5e or p5en (H200)"


def pool_models(group: GpuNodeGroup) -> list[Optional[str]]:
    return [gpu_model(kind) for kind in group.instance_types]


def node_groups(cluster: Cluster) -> dict[str, tuple[int, GpuNodeGroup]]:
    if cluster.eks is None:
        return {}
    return {group.name: (index, group) for index, group in enumerate(cluster.eks.gpu_node_groups)}


def layout_valid(group: GpuNodeGroup) -> bool:
    """The group's migConfig is a layout of every GPU model it may run (checked, with its error, by check_pool)."""
    return all(group.mig_config in MIG_LAYOUTS.get(model or "", {}) for model in pool_models(group))


def mig_pools(cluster: Cluster) -> list[GpuNodeGroup]:
    return [group for _, group in node_groups(cluster).values() if group.mig_config is not None]


def team_pool(team: Team, cluster: Cluster) -> Optional[str]:
    """The pool a team is pinned to: its nodePool, or for a mig team the site's only MIG-split pool."""
    if team.isolation.node_pool is not None or team.isolation.tier != MIG:
        return team.isolation.node_pool
    pools = mig_pools(cluster)
    return pools[0].name if len(pools) == 1 else None


def check_pool(reader: Reader, key: str, group: GpuNodeGroup, gpu_operator: GpuOperator) -> None:
    if MIG_CONFIG_LABEL in group.labels:
        reader.fail(f"{key}.labels", group.labels, f"sets {MIG_CONFIG_LABEL} by hand: nothing checks that the GPUs "
                    "have MIG or that the layout exists, and the operator's MIG strategy is left unset",
                    f"remove {MIG_CONFIG_LABEL} from labels and set {key}.migConfig instead")
    if group.mig_config is None:
        return
    for kind, model in zip(group.instance_types, pool_models(group)):
        if model is None:
            reader.fail(f"{key}.migConfig", group.mig_config, f"the GPU model of {kind} is not in the instance-type "
                        "table (config/capacity.py), so its MIG layouts cannot be checked",
                        f"use MIG-capable instance types ({MIG_INSTANCE_FAMILIES}), or remove migConfig")
        elif model in MIG_WITHOUT_LAYOUTS:
            reader.fail(f"{key}.migConfig", group.mig_config, f"{kind} carries NVIDIA {model} GPUs, whose MIG layouts "
                        "the program does not know, so it cannot check the layout or count its slices",
                        f"remove migConfig (use isolation tier memory-capped or exclusive there), or use "
                        f"instance types whose MIG layouts it knows ({MIG_INSTANCE_FAMILIES})")
        elif not supports_mig(model):
            reader.fail(f"{key}.migConfig", group.mig_config, f"{kind} carries NVIDIA {model} GPUs, which have no MIG",
                        f"remove migConfig (use isolation tier memory-capped or exclusive there), or use "
                        f"instance types with MIG ({MIG_INSTANCE_FAMILIES})")
        elif group.mig_config not in MIG_LAYOUTS[model]:
            reader.fail(f"{key}.migConfig", group.mig_config, f"is not a MIG layout of {model} ({kind})",
                        f"use one of {', '.join(MIG_LAYOUTS[model])}")
        elif gpu_operator.mig_strategy == "single" and len(layout(model, group.mig_config)) > 1:
            reader.fail("gpuOperator.migStrategy", "single", f"{key}.migConfig {group.mig_config} mixes several "
                        "MIG profiles on a GPU, which the single strategy cannot advertise",
                        "set gpuOperator.migStrategy to mixed, or use a one-profile layout (all-<profile>)")
        elif gpu_operator.mig_strategy == "single" and _compute_units(model, group.mig_config) > 1:
            # The quotas, the promised-vs-present warning, the capacity figures and the usage rules all count a
            # slice by its compute slices: true under mixed, where KAI does the same, not here.
            units = _compute_units(model, group.mig_config)
            reader.fail("gpuOperator.migStrategy", "single", f"{key}.migConfig {group.mig_config} has slices of "
                        f"{units} compute units: under the single strategy each is advertised as one nvidia.com/gpu "
                        f"and KAI counts it as 1 GPU, so a gpu quota of {units} would hand out {units} slices "
                        f"where the program counts one", "set gpuOperator.migStrategy to mixed (each slice is then "
                        "nvidia.com/mig-<profile>, counted by its compute units), or use a layout of 1g slices "
                        "(all-1g.<memory>gb)")
    if gpu_operator.mig_strategy == "single" and sharing_profile(group, gpu_operator) == TIME_SLICED:
        inherited = "" if group.sharing_profile else " (gpuOperator.timeSlicing.defaultProfile)"
        reader.fail(f"{key}.sharingProfile", group.sharing_profile or MISSING, f"{group.name} is split into MIG "
                    f"slices under the single strategy, where each slice is an nvidia.com/gpu, and on the "
                    f"{TIME_SLICED} profile{inherited} the device plugin advertises each of those "
                    f"{gpu_operator.time_slicing.replicas} times: every slice would be shared in time between pods",
                    "set sharingProfile to exclusive, or set gpuOperator.migStrategy to mixed (MIG slices are then "
                    "not time-sliced)")


def _compute_units(model: str, config_name: str) -> int:
    return max(kai_units(profile) for profile in layout(model, config_name))


def sharing_profile(group: GpuNodeGroup, gpu_operator: GpuOperator) -> str:
    """The device-plugin sharing profile the group's nodes run."""
    return group.sharing_profile or gpu_operator.time_slicing.default_profile


def slices_as_gpus(group: GpuNodeGroup, gpu_operator: GpuOperator) -> bool:
    """Each nvidia.com/gpu of the group's nodes is a MIG slice (the single strategy), not a card."""
    return group.mig_config is not None and gpu_operator.mig_strategy == "single"


def time_sliced_mig_warnings(cluster: Cluster, gpu_operator: GpuOperator) -> list[str]:
    """A MIG-split group set to the time-sliced profile under the mixed strategy (single refuses it, check_pool).

    The profile has no effect there. The device plugin replicates only the resource names its
    ``sharing.timeSlicing.resources`` lists, ours being ``nvidia.com/gpu`` (config/sharing.py), and skips a name the
    node has no device of (``updateDeviceMapWithReplicas``); under a MIG strategy it leaves every MIG-enabled GPU out
    of ``nvidia.com/gpu`` (``buildGPUDeviceMap``), and the layout splits every GPU of the node, so only
    ``nvidia.com/mig-<profile>`` is advertised, one pod a slice (k8s-device-plugin internal/rm/device_map.go at v0.20.0,
    the GPU Operator v26.7.0 chart's devicePlugin.version, and alike at v0.17.0, v24.9.0's). Nor does KAI count
    replicas or place fractions there (config/mig_slices.py)."""
    if gpu_operator.mig_strategy != "mixed":
        return []
    return [f"cluster.eks.gpuNodeGroups[{index}].sharingProfile is {TIME_SLICED}, but group {group.name} is split "
            f"into MIG slices ({group.mig_config}) under the mixed strategy, where the profile has no effect: the "
            "device plugin time-slices only nvidia.com/gpu, which a node whose GPUs are all split does not advertise, "
            "so each nvidia.com/mig-<profile> slice still goes to one pod. Fix: set it to exclusive, or remove it."
            for index, group in node_groups(cluster).values()
            if group.mig_config is not None and group.sharing_profile == TIME_SLICED]
