"""What the config tells about the host's GPU count, for capacity warnings."""

from __future__ import annotations

from dataclasses import astuple, dataclass
from typing import Optional

from config.mig import kai_units_per_gpu, layout, pool_slices, resource_name
from config.model import Cluster, Platform, TimeSlicing
from config.model_host import GpuNodeGroup
from config.sharing import TIME_SLICED

# GPU quotas are fractions written in decimal (0.33 x 3): sums and counts are compared within this.
GPU_EPSILON = 1e-9

# GPUs per EC2 instance type, for the instance families GPU node groups use most.
GPUS_PER_INSTANCE_TYPE = {
    "g4dn.xlarge": 1, "g4dn.2xlarge": 1, "g4dn.4xlarge": 1, "g4dn.8xlarge": 1, "g4dn.16xlarge": 1,
    "g4dn.12xlarge": 4, "g4dn.metal": 8,
    "g5.xlarge": 1, "g5.2xlarge": 1, "g5.4xlarge": 1, "g5.8xlarge": 1, "g5.16xlarge": 1,
    "g5.12xlarge": 4, "g5.24xlarge": 4, "g5.48xlarge": 8,
    "g6.xlarge": 1, "g6.2xlarge": 1, "g6.4xlarge": 1, "g6.8xlarge": 1, "g6.16xlarge": 1,
    "g6.12xlarge": 4, "g6.24xlarge": 4, "g6.48xlarge": 8,
    "g6e.xlarge": 1, "g6e.2xlarge": 1, "g6e.4xlarge": 1, "g6e.8xlarge": 1, "g6e.16xlarge": 1,
    "g6e.12xlarge": 4, "g6e.24xlarge": 4, "g6e.48xlarge": 8,
    "p4d.24xlarge": 8, "p4de.24xlarge": 8, "p5.48xlarge": 8, "p5e.48xlarge": 8, "p5en.48xlarge": 8,
    "p6-b200.48xlarge": 8,
}


# vCPUs and memory (GiB) of each instance type above, from AWS's "Accelerated computing" instance-type pages
# (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html, the Instance type / vCPUs / Memory (GiB) columns), for what
# their nodes can give the teams' CPU and memory guarantees (config/node_allocatable.py).
CPU_MEMORY_PER_INSTANCE_TYPE = {
    "g4dn.xlarge": (4, 16), "g4dn.2xlarge": (8, 32), "g4dn.4xlarge": (16, 64), "g4dn.8xlarge": (32, 128),
    "g4dn.16xlarge": (64, 256), "g4dn.12xlarge": (48, 192), "g4dn.metal": (96, 384),
    "g5.xlarge": (4, 16), "g5.2xlarge": (8, 32), "g5.4xlarge": (16, 64), "g5.8xlarge": (32, 128),
    "g5.16xlarge": (64, 256), "g5.12xlarge": (48, 192), "g5.24xlarge": (96, 384), "g5.48xlarge": (192, 768),
    "g6.xlarge": (4, 16), "g6.2xlarge": (8, 32), "g6.4xlarge": (16, 64), "g6.8xlarge": (32, 128),
    "g6.16xlarge": (64, 256), "g6.12xlarge": (48, 192), "g6.24xlarge": (96, 384), "g6.48xlarge": (192, 768),
    "g6e.xlarge": (4, 32), "g6e.2xlarge": (8, 64), "g6e.4xlarge": (16, 128), "g6e.8xlarge": (32, 256),
    "g6e.16xlarge": (64, 512), "g6e.12xlarge": (48, 384), "g6e.24xlarge": (96, 768), "g6e.48xlarge": (192, 1536),
    "p4d.24xlarge": (96, 1152), "p4de.24xlarge": (96, 1152), "p5.48xlarge": (192, 2048), "p5e.48xlarge": (192, 2048),
    "p5en.48xlarge": (192, 2048), "p6-b200.48xlarge": (192, 2048),
}
# (vCPUs, GiB) of the CPU instance types a system node group commonly runs, from AWS's general-purpose and
# compute-optimized instance-type pages; a type missing here leaves the system group's fit unjudged.
CPU_MEMORY_PER_SYSTEM_INSTANCE_TYPE = {
    "t3.medium": (2, 4), "t3.large": (2, 8), "t3.xlarge": (4, 16), "t3.2xlarge": (8, 32),
    "m5.large": (2, 8), "m5.xlarge": (4, 16), "m5.2xlarge": (8, 32),
    "m6i.large": (2, 8), "m6i.xlarge": (4, 16), "m6i.2xlarge": (8, 32),
    "m7i.large": (2, 8), "m7i.xlarge": (4, 16), "m7i.2xlarge": (8, 32),
    "c6i.large": (2, 4), "c6i.xlarge": (4, 8), "c6i.2xlarge": (8, 16),
}

# The GPU model of each instance type above, from AWS's "Accelerated computing" instance-type pages
# (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html; also in docs/FACTS: g4dn T4 16GB, g5 A10G 24GB, g6 L4
# 24GB, g6e L40S 48GB, p4d 8xA100 40GB, p4de 8xA100 80GB, p5 8xH100 80GB, p5e/p5en 8xH200 141GB). p6-b200: 8 x B200 of
# 180GB, 1440GB of HBM3e in all (AWS's P6 announcement; SageMaker HyperPod names its largest MIG slice 7g.180gb, and
# the GPU Operator's default MIG config gives B200, device 0x2901, a balanced layout ending in 3g.90gb). Which
# of them can be split into MIG slices, and how, is config/mig.py's business. An instance type missing here leaves
# its site without capacity warnings: config/review_notes.py says so.
GPU_MODEL_PER_INSTANCE_FAMILY = {
    "g4dn": "T4", "g5": "A10G", "g6": "L4", "g6e": "L40S",
    "p4d": "A100-40GB", "p4de": "A100-80GB", "p5": "H100-80GB", "p5e": "H200-141GB", "p5en": "H200-141GB",
    "p6-b200": "B200-180GB",
}


def gpu_model(instance_type: str) -> Optional[str]:
    """The NVIDIA GPU model of an EC2 instance type, or None when the table does not know the family."""
    return GPU_MODEL_PER_INSTANCE_FAMILY.get(instance_type.split(".", 1)[0])


def accelerator_label_value(instance_types: tuple[str, ...]) -> str:
    """The Cluster Autoscaler's GPU node label value (``nvidia-l40s``): any value marks a GPU node; the model, when
    every type of the group has the same one, tells a reader which."""
    models = {gpu_model(kind) for kind in instance_types}
    model = models.pop() if len(models) == 1 else None
    return f"nvidia-{model.lower()}" if model else "nvidia"


@dataclass(frozen=True)
class GpuCapacity:
    """The most GPUs the host can have by its config: the cards, and what KAI counts of them (queue quotas' unit),
    with the cards KAI counts otherwise than one each: those split into MIG slices (and their slices and the
    compute units KAI counts them by) and those on the time-sliced profile."""
    gpus: float
    kai_units: float
    split_cards: float = 0
    slices: float = 0
    split_units: float = 0
    sliced_cards: float = 0

    def __add__(self, other: GpuCapacity) -> GpuCapacity:
        return GpuCapacity(*(mine + theirs for mine, theirs in zip(astuple(self), astuple(other))))

    def describe(self) -> str:
        """The count in KAI's units (the quotas' unit), with how the cards add up to it when they are not whole."""
        if self.kai_units == self.gpus:
            return f"{self.gpus:g} GPU(s)"
        whole = self.gpus - self.split_cards - self.sliced_cards
        sliced_units = self.kai_units - whole - self.split_units
        parts = [f"{whole:g} unsplit card(s) x 1 = {whole:g}"] if whole else []
        if self.split_cards:
            parts.append(f"{self.split_cards:g} card(s) split into {self.slices:g} MIG slice(s), each counted by its "
                         f"compute units (a 3g slice as 3) = {self.split_units:g}")
        if self.sliced_cards:
            parts.append(f"{self.sliced_cards:g} card(s) on the time-sliced profile x "
                         f"{sliced_units / self.sliced_cards:g} replicas = {sliced_units:g}")
        return f"{self.kai_units:g} GPU(s) as KAI counts them ({self.gpus:g} card(s): {'; '.join(parts)})"


def known_gpu_capacity(cluster: Cluster, time_slicing: TimeSlicing) -> Optional[GpuCapacity]:
    """The most GPUs the host can have, or None when the config does not say.

    For EKS: each GPU node group's (``group_gpu_capacity``) added up. MicroK8s and existing clusters: their nodes
    take the default profile (nodes labelled by hand cannot be known).
    """
    box = cluster.microk8s or cluster.kubeconfig
    if box is not None:
        return None if box.gpus is None else _unsplit(box.gpus, _replicas(time_slicing, None))
    if cluster.eks is not None:
        groups = [group_gpu_capacity(group, time_slicing) for group in cluster.eks.gpu_node_groups]
        if any(group is None for group in groups):
            return None
        return sum(groups, GpuCapacity(0, 0))
    return None


def group_gpu_capacity(group: GpuNodeGroup, time_slicing: TimeSlicing) -> Optional[GpuCapacity]:
    """The most GPUs an EKS GPU node group can have, or None when an instance type is not in the tables.

    GPUs per instance type x the most nodes the group runs (``NodeGroupScaling.most_nodes``), taking its largest
    instance type (a mixed group may scale on any of them). KAI counts what the device plugin advertises, as its
    queue quotas do: a MIG-split group's compute slices (a GPU split 7 ways is 7), and on the time-sliced profile each
    card's replicas (``nvidia.com/gpu`` is advertised once per replica).
    """
    per_node = [GPUS_PER_INSTANCE_TYPE.get(kind) for kind in group.instance_types]
    if any(count is None for count in per_node):
        return None
    cards = max(per_node) * group.scaling.most_nodes
    if group.mig_config:
        split = min(kai_units_per_gpu(gpu_model(kind), group.mig_config) for kind in group.instance_types)
        slices = min(sum(layout(gpu_model(kind), group.mig_config).values()) for kind in group.instance_types)
        return GpuCapacity(cards, cards * split, split_cards=cards, slices=cards * slices, split_units=cards * split)
    return _unsplit(cards, _replicas(time_slicing, group.sharing_profile))


def _unsplit(cards: float, replicas: int) -> GpuCapacity:
    """Cards without MIG: each counted once, or as its replicas on the time-sliced profile."""
    return GpuCapacity(cards, cards * replicas, sliced_cards=cards if replicas > 1 else 0)


def _replicas(time_slicing: TimeSlicing, profile: Optional[str]) -> int:
    """What KAI counts of one card: its replicas on the time-sliced profile, else the card."""
    return time_slicing.replicas if (profile or time_slicing.default_profile) == TIME_SLICED else 1


WHOLE_GPU_RESOURCE = "nvidia.com/gpu"


def advertised_gpu_resources(group: GpuNodeGroup, time_slicing: TimeSlicing, mig_strategy: str) -> dict[str, int]:
    """What one node of the group advertises of GPU resources once the GPU Operator has set it up, where that differs
    from the GPUs of its instance type: each MIG slice of its layout under the mixed strategy (and no whole GPU), the
    slices as whole GPUs under the single strategy, or each card's replicas on the time-sliced profile. {} when
    the instance type's GPU count is what the node advertises, or when the tables lack a type. A group of several
    types counts the one with the fewest."""
    per_node = [GPUS_PER_INSTANCE_TYPE.get(kind) for kind in group.instance_types]
    if any(count is None for count in per_node):
        return {}
    cards = min(per_node)
    if group.mig_config:
        slices = pool_slices([gpu_model(kind) for kind in group.instance_types], group.mig_config)
        if not slices:
            return {}
        if mig_strategy == "single":
            return {WHOLE_GPU_RESOURCE: cards * sum(slices.values())}
        return {WHOLE_GPU_RESOURCE: 0, **{resource_name(profile): cards * count for profile, count in slices.items()}}
    replicas = _replicas(time_slicing, group.sharing_profile)
    return {WHOLE_GPU_RESOURCE: cards * replicas} if replicas > 1 else {}


def autoscaler_node_resources(platform: Platform) -> dict[str, dict[str, int]]:
    """Per EKS GPU node group the site's Cluster Autoscaler sizes, what a node advertises that its instance type does
    not say: the autoscaler reads it from the group's tags when the group has no node to look at."""
    eks, operator = platform.cluster.eks, platform.gpu_operator
    if eks is None or not eks.autoscaled:
        return {}
    return {group.name: found for group in eks.gpu_node_groups
            if (found := advertised_gpu_resources(group, operator.time_slicing, operator.mig_strategy))}
