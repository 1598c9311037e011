"""What a larger ``observability.storage`` does to a running site.

The program sizes Prometheus' volume claim template and its ``retentionSize`` (a share of the volume,
``config.observability.RETENTION_SIZE_SHARE``) from the one key (components/observability.py). The Prometheus operator
hands the new template to Prometheus' StatefulSet (recreating it), but never resizes a claim that exists (the API
server keeps a StatefulSet's claims as they were made), while Prometheus takes the new ``retentionSize`` at once: it
then keeps history past what the old volume holds, fills it and stops writing before it drops any old block.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from config.key_types import QUANTITY, quantity_value
from config.vocabulary import RELEASE
from tools.plan.diff import Change
from tools.plan.running_site import NOT_APPLIED, Finding

PROMETHEUS_VOLUME = "values.prometheus.prometheusSpec.storageSpec.volumeClaimTemplate.spec.resources.requests.storage"


def _claim(release: str) -> str:
    """The claim of Prometheus' first pod: the operator names it ``<template>-<statefulset>-0``, with the template
    ``prometheus-<Prometheus>-db`` and the StatefulSet ``prometheus-<Prometheus>``; the chart names the Prometheus
    ``<release>-prometheus``."""
    prometheus = f"prometheus-{release}-prometheus"
    return f"{prometheus}-db-{prometheus}-0"


def _grows(change: Change) -> bool:
    sizes = (change.old, change.new)
    return (all(isinstance(size, str) and QUANTITY.fullmatch(size) for size in sizes)
            and quantity_value(change.new) > quantity_value(change.old))


def prometheus_volume_findings(resource: Mapping[str, Any], subject: str,
                               changes: Iterable[Change]) -> list[Finding]:
    """The finding of Prometheus' volume grown in the values of the kube-prometheus-stack release."""
    if resource["type"] != RELEASE:
        return []
    inputs = resource.get("inputs") or {}
    claim = f"-n {inputs.get('namespace', 'monitoring')} pvc {_claim(str(inputs.get('name') or resource['name']))}"
    return [Finding(
        NOT_APPLIED, subject, change.path, change.old, change.new,
        "the Prometheus operator does not resize a claim that exists, so Prometheus keeps its old volume while its "
        "retentionSize (a share of observability.storage) grows past it: it fills the volume and stops writing "
        "samples before it drops any old block",
        f"grow the claim first, right before `pulumi up`: `kubectl patch {claim} -p "
        f"'{{\"spec\":{{\"resources\":{{\"requests\":{{\"storage\":\"{change.new}\"}}}}}}}}'`, on a storage class that "
        "allows volume expansion (the program's EKS gp3 class does), and wait for `kubectl get` of it to show the "
        "new capacity; MicroK8s' hostpath class does not enforce a size, so there make sure the box's disk has the "
        "room instead; or keep observability.storage as it was")
        for change in changes if change.path == PROMETHEUS_VOLUME and _grows(change)]
