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

# The KAI chart moved registries between v0.13.0 and v0.13.1; the chart version is the git tag,
# leading "v" included.
KAI_CHART_REGISTRY_LEGACY = "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler"
KAI_CHART_REGISTRY = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
KAI_LAST_LEGACY_VERSION = (0, 13, 0)
KAI_VERSION = "v0.16.4"

VCLUSTER_REPO = "https://charts.loft.sh"
VCLUSTER_CHART = "vcluster"
VCLUSTER_VERSION = "0.36.1"

EKS_KUBERNETES_VERSION = "1.33"

# Runs the probe that holds queue creation until KAI's queue webhook answers (components/kai.py).
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.33.0"


def kai_chart_ref(version: str) -> str:
    """The OCI chart reference that hosts the given KAI release tag (``vX.Y.Z``)."""
    numbers = tuple(int(part) for part in version.lstrip("v").split("-")[0].split("."))
    if numbers <= KAI_LAST_LEGACY_VERSION:
        return KAI_CHART_REGISTRY_LEGACY
    return KAI_CHART_REGISTRY
