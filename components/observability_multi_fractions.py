"""GPU shares of pods that take a fraction of several GPUs (``gpu-fraction-num-devices`` from 2), as PromQL.

KAI's binder gives such a pod one GPU group per device, but names each only in a label *key*
(``runai-gpu-group/<group>``), never as the ``runai-gpu-group`` value a one-device pod gets
(``pkg/binder/binding/resourcereservation``, ``updatePodGPUGroup``; ``pkg/common/resources/gpu_sharing.go``
``IsMultiFraction``: more than one device; KAI v0.16.0-v0.17.0). kube-state-metrics exports labels by key and
PromQL cannot join on a label name, so the chain of components/observability_shares.py (DCGM GPU -> reservation
pod -> GPU group -> pods) never reaches such a pod: a tenant asking for ``gpu-fraction: 0.5`` on 2 devices held a
GPU's worth, which KAI allocated to its queue, and was charged no held GPU at all.

So these shares are read from the pod itself, while its share is in use (running, or its named init container
running, as for one-device shares): ``gpu-fraction`` times the number of devices, or ``gpu-memory`` times the
number of devices over the framebuffer of the GPUs of the pod's node. KAI reads one GPU memory size per node (the
node's GPU memory label), so the node's GPUs are taken to be one model; their framebuffer is read from DCGM on the
reservation pods the same node runs (the pod's own among them). They count as held GPUs. Their busy time is not
the pod's alone to know (the GPUs may be shared with other pods, and DCGM's series reach the pod by no join), so
they are never counted as used, like the GPUs of ordinary init containers.
"""

from __future__ import annotations

from components import observability_shares as shares
from config.observability import KAI_NUM_DEVICES_ANNOTATION as NUM_DEVICES_ANNOTATION

# Per (namespace, pod): GPUs' worth a multi-device fractional pod holds while its share is in use.
MULTI_FRACTION_GPUS = "pod:gpu_tenancy_multi_fraction_gpus:sum"

KSM_NUM_DEVICES = shares.ksm_label_name("annotation", NUM_DEVICES_ANNOTATION)
# kube-state-metrics' pod info (internal/store/pod.go: label node is the pod's spec.nodeName).
POD_INFO = "kube_pod_info"

_POD = "namespace, pod"


def declared_devices() -> str:
    """Per (namespace, pod): gpu-fraction-num-devices as a number (one digit: the host policy admits 1 to 8)."""
    return shares.digit_sum(KSM_NUM_DEVICES, [("", "", 1)])


def _node_framebuffer() -> str:
    """Per node: the framebuffer (MiB) of a GPU of that node, read on the reservation pods it runs."""
    fields = " + ".join(f'max by ({_POD}, UUID) (DCGM_FI_DEV_FB_{field}{{namespace="{shares.RESERVATION_NAMESPACE}"}})'
                        for field in ("USED", "FREE", "RESERVED"))
    nodes = f'max by ({_POD}, node) ({POD_INFO}{{namespace="{shares.RESERVATION_NAMESPACE}",node!=""}})'
    return f"max by (node) (({fields}) * on ({_POD}) group_left (node) {nodes})"


def held_by_multi_fractions() -> str:
    """Per (namespace, pod): the fraction times the devices, else the memory times the devices over the node's
    GPU framebuffer, of a pod with 2 or more fractional devices, while its share is in use."""
    devices = f"({declared_devices()} > 1)"
    by_fraction = f"{shares.declared_fraction()} * on ({_POD}) {devices}"
    on_node = f'max by ({_POD}, node) ({POD_INFO}{{node!=""}})'
    by_memory = (f"max by ({_POD}) (({shares.declared_memory()} * on ({_POD}) {devices}"
                 f" * on ({_POD}) group_left (node) {on_node}) / on (node) group_left () {_node_framebuffer()})")
    return f"(({by_fraction}) or ({by_memory})) * on ({_POD}) group_left () {shares.share_in_use()}"



def shared_gpus_of_holders_nodes(per_gpu: str) -> str:
    """Per (GPU, namespace): one of the shared GPUs (DCGM's series of a KAI reservation pod) in ``per_gpu`` on each
    node where the namespace's pods hold fractions of several GPUs, with its value. Which of the node's shared GPUs
    such a pod holds is in label keys only, so any of them may be its own. PromQL joins one series to many, not
    many to many: of several such GPUs on one node, one is named."""
    gpu = "UUID, gpu, Hostname"
    on_node = f'max by ({_POD}, node) ({POD_INFO}{{node!=""}})'
    reserved = (f"max by ({gpu}, node) (({per_gpu}) * on ({_POD}) group_left (node) "
                f'max by ({_POD}, node) ({POD_INFO}{{namespace="{shares.RESERVATION_NAMESPACE}",node!=""}}))')
    holders = f"max by (namespace, node) ({MULTI_FRACTION_GPUS} * on ({_POD}) group_left (node) {on_node})"
    return (f"max by ({gpu}, namespace) (({holders}) * 0 + on (node) group_left ({gpu}) "
            f"topk by (node) (1, {reserved}))")
