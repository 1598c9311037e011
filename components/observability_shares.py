"""Measured GPU use of pods that share a GPU under KAI fractions, as PromQL (plain data, no resources).

Under KAI fractions the DCGM exporter maps a shared GPU to KAI's reservation pod (namespace
``kai-resource-reservation``), the only pod holding the ``nvidia.com/gpu`` device. KAI's binder labels that
reservation pod and every fractional pod bound to the same GPU with one ``runai-gpu-group`` value, so:

    DCGM GPU (UUID) -> reservation pod -> GPU group -> fractional pods -> namespace -> team

kube-state-metrics exports the label and the fraction annotations (``kube_pod_labels`` /
``kube_pod_annotations``, allowlisted in the kube-prometheus-stack values, see ``KSM_VALUES``). A pod's share is
its ``gpu-fraction``, else its ``gpu-memory`` (MiB) over the GPU's framebuffer (DCGM: used + free + reserved).

The charging rule: time-sliced use is not additive (DCGM sees one busy ratio per GPU, not per process), so each
pod is charged its share of the GPU's busy time, scaled down when the shares on one GPU add up to more than 1,
so a GPU is never charged more than its measured busy time. Whole GPUs stay attributed as before: to the
namespace DCGM names.

PromQL cannot turn a label value into a number, so the annotations are read digit by digit: one regex
selector per (position, binary bit of the digit), weighted and summed. ``gpu-fraction`` is read to ``FRACTION_DIGITS``
decimals (KAI's examples use two), ``gpu-memory`` up to ``MEMORY_DIGITS`` digits of MiB. A value in another
form (an exponent, more integer digits) is not read, and its pod is not charged.

Pods asking for fractions of several GPUs (``gpu-fraction-num-devices``) carry their groups in label *keys*
(``runai-gpu-group/<group>``), which kube-state-metrics turns into label names; PromQL cannot join on a label
name, so those pods are not charged (docs/observability-charging.md says so).
"""

from __future__ import annotations

import re

from config.observability import (
    KAI_FRACTION_ANNOTATION as FRACTION_ANNOTATION, KAI_FRACTION_CONTAINER_ANNOTATION as FRACTION_CONTAINER_ANNOTATION,
    KAI_GPU_GROUP_LABEL as GPU_GROUP_LABEL, KAI_MEMORY_ANNOTATION as MEMORY_ANNOTATION, KSM_ANNOTATIONS_ALLOWLIST,
    KSM_LABELS_ALLOWLIST,
)
from config.vocabulary import KAI_RESERVATION_NAMESPACE

# KAI v0.16.4 / v0.17.0: pkg/common/constants (DefaultResourceReservationName, GPUGroup, GpuFraction, GpuMemory),
# pkg/binder/binding/resourcereservation (the reservation pod's namespace and labels).
RESERVATION_NAMESPACE = KAI_RESERVATION_NAMESPACE
RESERVATION_APP_LABEL = ("app", "kai-resource-reservation")

FRACTION_DIGITS = 4
MEMORY_DIGITS = 7

# The label the rules carry the GPU group in (kube-state-metrics' name, label_runai_gpu_group, shortened).
GROUP = "gpu_group"
# Per pod sharing a GPU, labels namespace, pod, gpu_group, UUID.
SHARE = "pod:gpu_tenancy_gpu_share:ratio"
CHARGED = "pod:gpu_tenancy_used_gpus:share"


def ksm_label_name(prefix: str, key: str) -> str:
    """The Prometheus label kube-state-metrics v2.20.0 gives a Kubernetes label or annotation key
    (internal/store/utils.go: labelName = prefix + "_" + snake case of the key with [^a-zA-Z0-9_] as "_")."""
    sanitised = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return f"{prefix}_" + re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", sanitised).lower()


KSM_GROUP = ksm_label_name("label", GPU_GROUP_LABEL)
KSM_FRACTION = ksm_label_name("annotation", FRACTION_ANNOTATION)
KSM_MEMORY = ksm_label_name("annotation", MEMORY_ANNOTATION)
KSM_FRACTION_CONTAINER = ksm_label_name("annotation", FRACTION_CONTAINER_ANNOTATION)

# kube-state-metrics' allowlist flags (KSM_FLAGS) as the kube-state-metrics chart's values (list items joined by ",").
KSM_VALUES = {"metricLabelsAllowlist": [KSM_LABELS_ALLOWLIST], "metricAnnotationsAllowList": [KSM_ANNOTATIONS_ALLOWLIST]}


# A decimal digit is the sum of its binary bits: the digits of each class have that bit set.
_DIGIT_BITS = ((1, "13579"), (2, "2367"), (4, "4567"), (8, "89"))


def digit_sum(label: str, positions: list[tuple[str, str, float]]) -> str:
    """Per (namespace, pod): the number a label value spells, read one binary bit of one digit per term.

    ``positions`` are (regex before the digit, regex after it, weight of the digit's unit). Each term gets a
    label of its own before ``or``, so equal label sets do not swallow each other; a pod's series scraped twice
    count once (max)."""
    terms = [f'label_replace(kube_pod_annotations{{{label}=~"{before}[{digits}]{after}"}} * {round(bit * unit, 9)!r}, '
             f'"digit_bit", "{index}-{bit}", "", "")'
             for index, (before, after, unit) in enumerate(positions) for bit, digits in _DIGIT_BITS]
    return f"sum by (namespace, pod) (max by (namespace, pod, digit_bit) ({' or '.join(terms)}))"


def declared_fraction() -> str:
    """gpu-fraction as a number: "0.33" and ".33" are 0.3 + 0.03."""
    return digit_sum(KSM_FRACTION, [("0*[.]" + "[0-9]" * (position - 1), "[0-9]*", round(10 ** -position, FRACTION_DIGITS))
                                     for position in range(1, FRACTION_DIGITS + 1)])


def declared_memory() -> str:
    """gpu-memory (MiB) as a number: "10560" is 10000 + 500 + 60."""
    return digit_sum(KSM_MEMORY, [("[0-9]*", "[0-9]" * position, 10 ** position) for position in range(MEMORY_DIGITS)])


def share_in_use() -> str:
    """Pods whose share may be in use: running ones, and pending ones while the init container KAI gave the share
    to (``gpu-fraction-container-name``) runs. KAI binds the share before init containers start, and an init
    container may run as long as its pod likes: without the second term its GPU work would be charged to no one."""
    in_init = (f'kube_pod_init_container_status_running == 1 and on (namespace, pod, container) '
               f'label_replace(kube_pod_annotations{{{KSM_FRACTION_CONTAINER}!=""}}, "container", "$1", '
               f'"{KSM_FRACTION_CONTAINER}", "(.+)")')
    return (f'(max by (namespace, pod) (kube_pod_status_phase{{phase="Running"}} == 1)'
            f' or max by (namespace, pod) ({in_init}))')


def pod_groups(reservation: bool) -> str:
    """Running pods carrying a GPU group (reservation pods, or the fractional pods), value 1."""
    where = "=" if reservation else "!="
    return (f"max by (namespace, pod, {GROUP}) (label_replace(kube_pod_labels{{{KSM_GROUP}!=\"\", "
            f"namespace{where}\"{RESERVATION_NAMESPACE}\"}}, \"{GROUP}\", \"$1\", \"{KSM_GROUP}\", \"(.+)\")"
            f" * on (namespace, pod) group_left () {share_in_use()})")


def _reservation_gpu(expr: str) -> str:
    return f"{expr} * on (namespace, pod) group_left ({GROUP}) {pod_groups(reservation=True)}"


def group_busy() -> str:
    """Per (gpu_group, UUID): the busy ratio (0-1) of the GPU the group's reservation pod holds."""
    util = f'max by (namespace, pod, UUID) (DCGM_FI_DEV_GPU_UTIL{{namespace="{RESERVATION_NAMESPACE}"}}) / 100'
    return f"max by ({GROUP}, UUID) ({_reservation_gpu(util)})"


def group_memory() -> str:
    """Per gpu_group: the framebuffer (MiB) of the group's GPU."""
    fields = " + ".join(f'max by (namespace, pod, UUID) (DCGM_FI_DEV_FB_{field}{{namespace="{RESERVATION_NAMESPACE}"}})'
                        for field in ("USED", "FREE", "RESERVED"))
    return f"max by ({GROUP}) ({_reservation_gpu(f'({fields})')})"


def declared_share() -> str:
    """Per (namespace, pod, gpu_group): the share of its GPU a fractional pod holds (gpu-fraction wins)."""
    fractional = pod_groups(reservation=False)
    by_fraction = f"{declared_fraction()} * on (namespace, pod) group_right () {fractional}"
    by_memory = (f"({declared_memory()} * on (namespace, pod) group_right () {fractional})"
                 f" / on ({GROUP}) group_left () {group_memory()}")
    return f"(({by_fraction}) or ({by_memory}))"


def share() -> str:
    """Per (namespace, pod, gpu_group, UUID): the pod's share, where DCGM sees its GPU."""
    return f"({declared_share()} * on ({GROUP}) group_left (UUID) ({group_busy()} * 0 + 1))"


def charged() -> str:
    """Per (namespace, pod, gpu_group, UUID): GPUs charged = busy ratio x share / max(1, sum of shares on it)."""
    per_unit_share = f"{group_busy()} / on ({GROUP}) group_left () clamp_min(sum by ({GROUP}) ({declared_share()}), 1)"
    return f"({declared_share()} * on ({GROUP}) group_left (UUID) ({per_unit_share}))"
