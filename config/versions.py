"""Every chart, image and version the platform deploys, pinned in one place.

Stack config may override a version (``gpuOperator.version``, ``kaiScheduler.version``,
``vcluster.version``), but the defaults below are what a new stack gets. Nothing here says
``latest``: an upgrade is a reviewed change to this file or to a stack file.
"""

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_VERSION = "v26.3.3"

# Version passed to `microk8s enable nvidia --gpu-operator-version` when the program enables the
# MicroK8s addon itself.
MICROK8S_ADDON_GPU_OPERATOR_VERSION = "v26.3.3"

# The chart version is the git tag, leading "v" included. Every release the program accepts (v0.16.0 and
# later, see config/load.py) is in this registry; releases up to v0.13.0 were in ghcr.io/nvidia.
KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
KAI_VERSION = "v0.16.4"

VCLUSTER_REPO = "https://charts.loft.sh"
VCLUSTER_CHART = "vcluster"
VCLUSTER_VERSION = "0.36.1"

# Each tenant's in-vCluster DNS (components/tenant_dns.py): vCluster's own choice for its default Kubernetes.
COREDNS_IMAGE = "docker.io/coredns/coredns:1.12.1"

EKS_KUBERNETES_VERSION = "1.33"

# Runs the probe that holds queue creation until KAI's queue webhook answers (components/kai.py).
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.33.0"


def release_numbers(version: str) -> tuple[int, ...]:
    """``v0.16.4`` or ``0.16.4-rc1`` -> ``(0, 16, 4)``."""
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split("+")[0].split("."))

