"""The pods on the system nodes that no chart of the plan renders, and how many pods a system node may run.

KAI's chart renders only its operator; the operator creates the scheduler, binder, admission, pod grouper, pod-group
controller, queue controller and node-scale adjuster itself, each a Deployment whose requests its Config API defaults
(KAI ``pkg/apis/kai/v1``, at every accepted release; a service whose own defaults are applied after the shared
``common.Service`` ones keeps the shared 50m and 256Mi), one replica each (``global.replicaCount`` unset) but the
admission, which the program scales (components/kai.py). None tolerates the GPU taint.

An EKS cluster adds its own: CoreDNS (two replicas) and the EBS CSI controller (two replicas), plus the per-node pods
every node runs (config/node_allocatable.py). Those requests are EKS's and assumed, not read (no upstream source
here). A MicroK8s box's kubelet runs with no ``--max-pods`` (canonical/microk8s ``default-args/kubelet``), so the
kubelet's default of 110 holds, the same default nodeadm names (``defaultMaxPods``). Pure data.
"""

from __future__ import annotations

from config.node_allocatable import GPU_NODE_PLATFORM_PODS, MEBIBYTE, CpuMemory

# The kubelet's maxPods when nothing sets it.
KUBELET_DEFAULT_MAX_PODS = 110

# KAI's pod webhooks fail closed, and every tenant pod goes through them: one admission pod may restart
# (upgrade, node drain) while the other answers. components/kai.py patches the operator's Config to run this many.
KAI_ADMISSION_REPLICAS = 2
# The CPU one admission pod may use (its operator's default limit is 100m, twice its request). Every team's pod
# creations and updates wait on these webhooks, and a team can send them as fast as its syncer writes (40 requests a
# second by default): at 100m a flood from one team throttles them into timeouts, and every team's pods fail to
# start. The request, what the capacity figures count, stays the operator's.
KAI_ADMISSION_CPU_LIMIT = "1"
# KAI's operator-made services: (replicas, requests of one pod).
KAI_OPERATOR_SERVICES = {
    "scheduler": (1, CpuMemory(250, 512 * MEBIBYTE)),
    "binder": (1, CpuMemory(50, 200 * MEBIBYTE)),
    "admission": (KAI_ADMISSION_REPLICAS, CpuMemory(50, 256 * MEBIBYTE)),
    "pod-grouper": (1, CpuMemory(50, 256 * MEBIBYTE)),
    "podgroup-controller": (1, CpuMemory(50, 256 * MEBIBYTE)),
    "queue-controller": (1, CpuMemory(50, 256 * MEBIBYTE)),
    "node-scale-adjuster": (1, CpuMemory(50, 256 * MEBIBYTE)),
}

# EKS's cluster-wide add-on pods on the system nodes (assumed): (replicas, requests of one pod).
EKS_ADDON_PODS = {
    "coredns (assumed)": (2, CpuMemory(100, 70 * MEBIBYTE)),
    "ebs-csi-controller (assumed)": (2, CpuMemory(60, 240 * MEBIBYTE)),
}
# The per-node pods of every EKS node that no chart of the plan renders (the NFD worker is the GPU Operator's).
EKS_NODE_PODS = {name: requests for name, requests in GPU_NODE_PLATFORM_PODS.items() if "assumed" in name}


def unrendered_pods(eks: bool) -> dict[str, tuple[int, CpuMemory]]:
    """The cluster-wide pods no chart renders that land on the system nodes, by name: (replicas, one pod's requests)."""
    return {**{f"KAI {name}": entry for name, entry in KAI_OPERATOR_SERVICES.items()},
            **(EKS_ADDON_PODS if eks else {})}

# The pods a MicroK8s box runs that no chart of the plan renders (assumed; their requests are not counted): its own
# CNI, DNS and storage add-ons; the GPU Operator's operands, which its operator creates on every GPU node; and, where
# the nvidia addon installs the GPU Operator, that release's operator and node feature discovery.
MICROK8S_OWN_PODS = ("calico-node", "calico-kube-controllers", "coredns", "hostpath-provisioner")
GPU_OPERATOR_OPERAND_PODS = ("nvidia-container-toolkit", "nvidia-device-plugin", "gpu-feature-discovery",
                             "nvidia-dcgm-exporter", "nvidia-operator-validator")
GPU_OPERATOR_RELEASE_PODS = ("gpu-operator", "nfd-master", "nfd-worker", "nfd-gc")


def microk8s_unrendered_pods(addon_operator: bool) -> tuple[str, ...]:
    return MICROK8S_OWN_PODS + GPU_OPERATOR_OPERAND_PODS + (GPU_OPERATOR_RELEASE_PODS if addon_operator else ())
