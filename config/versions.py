"""Every chart, image and version the platform deploys, pinned in one place.

Stack config may override a version (``gpuOperator.version``, ``kaiScheduler.version``,
``vcluster.version``), but the defaults below are what a new stack gets. Nothing here says
``latest``: an upgrade is a reviewed change to this file or to a stack file.
"""

GPU_OPERATOR_REPO = "https://helm.ngc.nvidia.com/nvidia"
GPU_OPERATOR_CHART = "gpu-operator"
GPU_OPERATOR_VERSION = "v26.7.0"

# Version passed to `microk8s enable nvidia --gpu-operator-version` when the program enables the
# MicroK8s addon itself.
MICROK8S_ADDON_GPU_OPERATOR_VERSION = "v26.7.0"

# The KAI chart moved registries between v0.13.0 and v0.13.1; the chart version is the git tag,
# leading "v" included.
KAI_CHART_REGISTRY_LEGACY = "oci://ghcr.io/nvidia/kai-scheduler/kai-scheduler"
KAI_CHART_REGISTRY = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
KAI_LAST_LEGACY_VERSION = (0, 13, 0)
# v0.17.0 keeps every value and the Queue CRD the platform uses (global.gpuSharing, the
# kai-queue-validation-v2 webhook); the committed stacks stay on the seed's v0.16.4.
KAI_VERSION = "v0.17.0"

VCLUSTER_REPO = "https://charts.loft.sh"
VCLUSTER_CHART = "vcluster"
VCLUSTER_VERSION = "0.36.1"

# New EKS clusters only: EKS upgrades an existing cluster one minor version at a time.
EKS_KUBERNETES_VERSION = "1.36"
# EKS addon for EBS volumes (tenant control planes' claims). Driver v1.64.0; list what a
# cluster version accepts with: aws eks describe-addon-versions --addon-name aws-ebs-csi-driver
EBS_CSI_ADDON_VERSION = "v1.64.0-eksbuild.1"

# Runs the Jobs that wait for KAI's queue webhook (components/kai.py) and for a tenant's
# kubeconfig Secret (components/tenant.py); `kubectl wait --for=create` needs kubectl 1.31+.
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.33.0"


def kai_chart_ref(version: str) -> str:
    """The OCI chart reference that hosts the given KAI release tag (``vX.Y.Z``)."""
    numbers = tuple(int(part) for part in version.lstrip("v").split("-")[0].split("."))
    if numbers <= KAI_LAST_LEGACY_VERSION:
        return KAI_CHART_REGISTRY_LEGACY
    return KAI_CHART_REGISTRY
