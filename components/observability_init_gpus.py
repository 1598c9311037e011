"""GPUs held by ordinary init containers, which the DCGM exporter names no pod for, as PromQL (plain data).

The DCGM exporter labels a GPU with the pod holding it from the kubelet's pod-resources ``List`` (dcgm-exporter
3.3.8-3.6.0 and 4.5.3-4.8.2 read each pod's ``Containers``), and the kubelet lists there only a pod's containers
and its restartable (sidecar) init containers (``pkg/kubelet/apis/podresources/server_v1.go``). An ordinary init
container that requests ``nvidia.com/gpu`` or a MIG slice still gets the devices, and KAI counts them in the
team's allocation (``pkg/scheduler/api/pod_info``, KAI v0.16.0-v0.17.0), but its GPU carries no pod in DCGM: a
tenant could run its whole GPU job there (an init container runs as long as it likes) and be charged nothing.

So the held GPUs are read from kube-state-metrics instead, from the moment an ordinary init container runs until
the pod ends (the kubelet frees a pod's devices only once the pod is no longer active, device manager
``UpdateAllocatedDevices``: those its containers do not reuse stay held, idle, while the containers run):

- which init containers are ordinary: ``kube_pod_init_container_info`` with ``restart_policy`` other than
  ``Always`` (the kubelet's own test, ``IsRestartableInitContainer``);
- what they request: ``kube_pod_init_container_resource_requests`` (``resource`` sanitised: ``nvidia_com_gpu``,
  ``nvidia_com_mig_3g_40gb``), counted in KAI's units (a ``3g`` slice is 3);
- minus what the pod's containers request of the same resource. The kubelet's device manager hands a finished
  ordinary init container's devices to the containers that follow (``devicesToReuse``), and allocates every
  container's devices when it admits the pod, so DCGM already names the pod for the devices its containers
  reuse, from the start, and they are charged as whole GPUs or slices (no double count);
- per resource, the largest request among the pod's ordinary init containers, not the running one's: each
  reuses the devices of those before it, so the pod holds the largest set until it ends, and the running one
  may be given any of them.

Restartable init containers are never counted here: the kubelet lists them, so DCGM names their GPUs. One GPU
sidecar declared after a GPU init container may reuse one of its devices and is then charged twice while the
pod runs (an over-charge, never an under-charge: KSM does not say in which order init containers are declared).
Between the last init container's end and the first container's start (phase still ``Pending``) nothing is
charged. Busy time of these GPUs cannot be attributed (no pod on DCGM's series): they are held, not used.
"""

from __future__ import annotations

from components import observability_mig as mig

# Per (namespace, pod): GPUs in KAI units a pod's ordinary init containers hold unnamed by DCGM, until the pod ends.
INIT_GPUS = "pod:gpu_tenancy_init_container_gpus:sum"

# kube-state-metrics' names (internal/store/pod.go, v2.11.0 and later: restart_policy is newer than the rest).
INIT_INFO = "kube_pod_init_container_info"
INIT_REQUESTS = "kube_pod_init_container_resource_requests"
INIT_RUNNING = "kube_pod_init_container_status_running"
POD_PHASE = "kube_pod_status_phase"
CONTAINER_REQUESTS = "kube_pod_container_resource_requests"
RESTART_POLICY_LABEL = "restart_policy"
# The one restart policy that makes an init container a sidecar (k8s.io/api core/v1 ContainerRestartPolicyAlways).
RESTARTABLE = "Always"
# nvidia.com/gpu and nvidia.com/mig-<n>g.<m>gb as kube-state-metrics writes them (SanitizeLabelName).
WHOLE_GPU_RESOURCE = "nvidia_com_gpu"
MIG_RESOURCE_PREFIX = "nvidia_com_mig_"

_POD = "namespace, pod"


def _units(metric: str) -> str:
    """A request metric's GPU series in KAI units: a whole GPU is 1, a MIG slice its compute slices. Under the
    ``single`` MIG strategy a slice is requested as nvidia.com/gpu, and KAI counts it as 1 too."""
    terms = [f'({metric}{{resource="{WHOLE_GPU_RESOURCE}"}} * 1)']
    terms += [f'({metric}{{resource=~"{MIG_RESOURCE_PREFIX}{units}g_.+"}} * {units})' for units in mig.COMPUTE_SLICES]
    return f"({' or '.join(terms)})"


def _ordinary() -> str:
    """Per (namespace, pod, container): 1 for each init container that is not restartable."""
    return (f"max by ({_POD}, container) "
            f'({INIT_INFO}{{{RESTART_POLICY_LABEL}!="{RESTARTABLE}"}})')


def _ordinary_running() -> str:
    """Per (namespace, pod): 1 while one of the pod's ordinary init containers runs."""
    return (f"max by ({_POD}) (({INIT_RUNNING} == 1) * on ({_POD}, container) group_left () {_ordinary()})")


def _holding() -> str:
    """Per (namespace, pod): 1 while one of the pod's ordinary init containers runs and, after them, while the pod
    runs: the devices stay the pod's until it ends."""
    return f'({_ordinary_running()} or max by ({_POD}) ({POD_PHASE}{{phase="Running"}} == 1))'


def held_by_init() -> str:
    """Per (namespace, pod): the GPUs (KAI units) the pod's ordinary init containers hold beyond those its
    containers reuse, from the first one's run until the pod ends. Series scraped twice (two kube-state-metrics)
    count once."""
    pool = (f"max by ({_POD}, resource) "
            f"({_units(INIT_REQUESTS)} * on ({_POD}, container) group_left () {_ordinary()})")
    reused = f"sum by ({_POD}, resource) (max by ({_POD}, container, resource) {_units(CONTAINER_REQUESTS)})"
    unnamed = f"clamp_min({pool} - ({reused} or {pool} * 0), 0)"
    # A pod whose containers reuse every device its init containers hold has nothing unnamed: no series.
    return f"(sum by ({_POD}) ({unnamed}) > 0) * on ({_POD}) group_left () {_holding()}"
