"""What one GPU node of an EKS node group can give the teams' CPU and memory guarantees: the instance's vCPUs and
memory (config/capacity.py), less what the node keeps for itself and what the platform's pods there request.

The program's nodes run the AL2023 EKS AMIs, set up by nodeadm (awslabs/amazon-eks-ami v20260724,
``nodeadm/internal/kubelet/config.go``). nodeadm writes the kubelet's ``kubeReserved``:

- cpu: 6% of the first core, 1% of the second, 0.5% of the third and fourth, 0.25% of every core above four
  (``getCPUMillicoresToReserve``; whole millicores per step, rounded down);
- memory: 11 MiB per pod the node may run plus 255 MiB (``getMemoryMebibytesToReserve``), with the node's
  ``maxPods`` = the instance's ENIs on its default network card x (IPv4 addresses per ENI - 1) + 2
  (``eni_max_pods.go`` ``calculateStandardMaxPods``, reading the ``instance-info.jsonl`` nodeadm embeds);

and an ``evictionHard`` of ``memory.available: 100Mi``, which the kubelet also takes out of the allocatable memory.
It sets no ``systemReserved`` cpu or memory, and the program's own NodeConfig part (components/node_pids.py) adds
only ``pid`` entries and no ``maxPods``, so these stand.

The platform's pods on every GPU node take their requests first. The GPU Operator's operands (device plugin, GPU
feature discovery, DCGM exporter, validator, MIG manager) request nothing (gpu-operator v26.7.0 values.yaml,
``resources: {}``); its node-feature-discovery worker requests 5m and 64Mi (the subchart's values.yaml). KAI runs
no per-node pod by default. The rest is EKS's and assumed, not read (no upstream source here): the VPC CNI's
aws-node (25m), kube-proxy (100m) and the EBS CSI driver's node pod (three containers at 10m and 40Mi each). The
vCluster control planes carry no toleration of the GPU taint and run on the system node group. Pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from config.capacity import CPU_MEMORY_PER_INSTANCE_TYPE, CPU_MEMORY_PER_SYSTEM_INSTANCE_TYPE

MEBIBYTE = 2 ** 20
GIBIBYTE = 2 ** 30

# nodeadm's kubeReserved cpu: (up to this many millicores of the node, ten-thousandths of them reserved).
CPU_RESERVE_STEPS = ((1000, 600), (2000, 100), (4000, 50), (None, 25))
MEMORY_RESERVE_PER_POD_MIB = 11
MEMORY_RESERVE_BASE_MIB = 255
EVICTION_MEMORY_AVAILABLE = 100 * MEBIBYTE

# nodeadm's instance-info.jsonl at v20260724: (defaultMaxENIs, ipv4AddressesPerInterface) per instance type.
ENIS_PER_INSTANCE_TYPE = {
    "g4dn.xlarge": (3, 10), "g4dn.2xlarge": (3, 10), "g4dn.4xlarge": (3, 10), "g4dn.8xlarge": (4, 15),
    "g4dn.16xlarge": (4, 15), "g4dn.12xlarge": (8, 30), "g4dn.metal": (15, 50),
    "g5.xlarge": (4, 15), "g5.2xlarge": (4, 15), "g5.4xlarge": (8, 30), "g5.8xlarge": (8, 30),
    "g5.16xlarge": (8, 30), "g5.12xlarge": (15, 50), "g5.24xlarge": (15, 50), "g5.48xlarge": (7, 50),
    "g6.xlarge": (4, 15), "g6.2xlarge": (4, 15), "g6.4xlarge": (8, 30), "g6.8xlarge": (8, 30),
    "g6.16xlarge": (15, 50), "g6.12xlarge": (8, 30), "g6.24xlarge": (15, 50), "g6.48xlarge": (15, 50),
    "g6e.xlarge": (4, 15), "g6e.2xlarge": (4, 15), "g6e.4xlarge": (8, 30), "g6e.8xlarge": (8, 30),
    "g6e.16xlarge": (15, 50), "g6e.12xlarge": (10, 30), "g6e.24xlarge": (10, 50), "g6e.48xlarge": (10, 50),
    "p4d.24xlarge": (15, 50), "p4de.24xlarge": (15, 50), "p5.48xlarge": (2, 50), "p5e.48xlarge": (2, 50),
    "p5en.48xlarge": (4, 50), "p6-b200.48xlarge": (4, 50),
    "t3.medium": (3, 6), "t3.large": (3, 12), "t3.xlarge": (4, 15), "t3.2xlarge": (4, 15),
    "m5.large": (3, 10), "m5.xlarge": (4, 15), "m5.2xlarge": (4, 15),
    "m6i.large": (3, 10), "m6i.xlarge": (4, 15), "m6i.2xlarge": (4, 15),
    "m7i.large": (3, 10), "m7i.xlarge": (4, 15), "m7i.2xlarge": (4, 15),
    "c6i.large": (3, 10), "c6i.xlarge": (4, 15), "c6i.2xlarge": (4, 15),
}


@dataclass(frozen=True)
class CpuMemory:
    """An amount of CPU (millicores) and memory (bytes)."""
    millicores: int
    memory: int

    def __add__(self, other: CpuMemory) -> CpuMemory:
        return CpuMemory(self.millicores + other.millicores, self.memory + other.memory)

    def __sub__(self, other: CpuMemory) -> CpuMemory:
        return CpuMemory(self.millicores - other.millicores, self.memory - other.memory)

    def times(self, count: int) -> CpuMemory:
        return CpuMemory(self.millicores * count, self.memory * count)


NOTHING = CpuMemory(0, 0)
# Requests of the platform's pods on every EKS GPU node (see the module's docstring for where each comes from).
GPU_NODE_PLATFORM_PODS = {
    "node-feature-discovery worker": CpuMemory(5, 64 * MEBIBYTE),
    "aws-node (assumed)": CpuMemory(25, 0),
    "kube-proxy (assumed)": CpuMemory(100, 0),
    "ebs-csi-node (assumed)": CpuMemory(30, 120 * MEBIBYTE),
}
GPU_NODE_PLATFORM_REQUESTS = sum(GPU_NODE_PLATFORM_PODS.values(), NOTHING)


def eks_max_pods(instance_type: str) -> int:
    enis, addresses = ENIS_PER_INSTANCE_TYPE[instance_type]
    return enis * (addresses - 1) + 2


def kube_reserved_millicores(node_millicores: int) -> int:
    reserved, start = 0, 0
    for end, per_ten_thousand in CPU_RESERVE_STEPS:
        top = node_millicores if end is None else min(end, node_millicores)
        if top > start:
            reserved += (top - start) * per_ten_thousand // 10000
        if end is None or node_millicores <= end:
            break
        start = end
    return reserved


def kube_reserved_memory(max_pods: int) -> int:
    return (MEMORY_RESERVE_PER_POD_MIB * max_pods + MEMORY_RESERVE_BASE_MIB) * MEBIBYTE


def eks_node_allocatable(instance_type: str) -> Optional[CpuMemory]:
    """What the kubelet of one node of this type offers pods (its allocatable), or None for a type the tables lack."""
    sizes = {**CPU_MEMORY_PER_INSTANCE_TYPE, **CPU_MEMORY_PER_SYSTEM_INSTANCE_TYPE}
    if instance_type not in sizes or instance_type not in ENIS_PER_INSTANCE_TYPE:
        return None
    vcpus, gibibytes = sizes[instance_type]
    millicores = vcpus * 1000
    return CpuMemory(millicores - kube_reserved_millicores(millicores),
                     gibibytes * GIBIBYTE - kube_reserved_memory(eks_max_pods(instance_type))
                     - EVICTION_MEMORY_AVAILABLE)


def eks_gpu_node_for_teams(instance_types: tuple[str, ...]) -> Optional[CpuMemory]:
    """What one node of a GPU group leaves the teams after the platform's pods; of a mixed group, the most any of
    its types leaves (the group may scale on any of them, as config/capacity.py takes its largest for GPUs)."""
    nodes = [eks_node_allocatable(kind) for kind in instance_types]
    if not nodes or any(node is None for node in nodes):
        return None
    return CpuMemory(max(node.millicores for node in nodes), max(node.memory for node in nodes)) \
        - GPU_NODE_PLATFORM_REQUESTS
