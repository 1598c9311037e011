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

# The chart version is the git tag, leading "v" included. Every release the program accepts (v0.16.0 and
# later, see config/load.py) is in this registry; releases up to v0.13.0 were in ghcr.io/nvidia.
KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
# v0.17.0 keeps every value and the Queue CRD the platform uses (global.gpuSharing,
# global.blockNvidiaVisibleDevices, the kai-queue-validation-v2 webhook); the committed stacks stay on
# the seed's v0.16.4.
KAI_VERSION = "v0.17.0"

VCLUSTER_REPO = "https://charts.loft.sh"
VCLUSTER_CHART = "vcluster"
VCLUSTER_VERSION = "0.36.1"

# Each tenant's in-vCluster DNS (components/tenant_dns.py): vCluster's own choice for its default Kubernetes.
COREDNS_IMAGE = "docker.io/coredns/coredns:1.12.1"

# New EKS clusters only: EKS upgrades an existing cluster one minor version at a time.
EKS_KUBERNETES_VERSION = "1.36"
# EKS addon for EBS volumes (tenant control planes' claims). Driver v1.64.0; list what a
# cluster version accepts with: aws eks describe-addon-versions --addon-name aws-ebs-csi-driver
EBS_CSI_ADDON_VERSION = "v1.64.0-eksbuild.1"

# Runs the Jobs that wait for KAI's queue webhook (components/kai.py) and for a tenant's
# kubeconfig Secret (components/tenant.py); `kubectl wait --for=create` needs kubectl 1.31+.
KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.33.0"


def release_numbers(version: str) -> tuple[int, ...]:
    """``v0.16.4`` or ``0.16.4-rc1`` -> ``(0, 16, 4)``."""
    return tuple(int(part) for part in version.lstrip("v").split("-")[0].split("+")[0].split("."))


# Metrics, rules and dashboards (components/observability.py) when observability.prometheus is install.
# 88.5.3 is the newest kube-prometheus-stack tag (2026-08-21) in the prometheus-community/helm-charts
# repository snapshot read for it; tests/test_observability_contract.py checks the values it is given.
KUBE_PROMETHEUS_STACK_REPO = "https://prometheus-community.github.io/helm-charts"
KUBE_PROMETHEUS_STACK_CHART = "kube-prometheus-stack"
KUBE_PROMETHEUS_STACK_VERSION = "88.5.3"

# HAMi-core (libvgpu.so), the in-container library that enforces a memory-capped team's
# CUDA_DEVICE_MEMORY_LIMIT. HAMi-core itself publishes no image: the HAMi project's image carries the
# library, and a memory-capped pod mounts it as an image volume (components/isolation_admission.py).
# The tag and the path inside the image were not readable offline: check them
# (`crane export IMAGE - | tar -t | grep libvgpu.so`) before the first memory-capped team goes live.
HAMI_CORE_IMAGE = "docker.io/projecthami/hami:v2.6.1"
HAMI_CORE_IMAGE_LIBRARY_DIR = "k8s-vgpu/lib/nvidia"
