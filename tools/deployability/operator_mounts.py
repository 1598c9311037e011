"""Deployability rule ``operator-mounts``: what the Prometheus operator mounts into a pod exists.

The operator turns each Secret named in a Prometheus', Alertmanager's or ThanosRuler's ``spec.secrets`` and
each ConfigMap of ``spec.configMaps`` into a volume of the pod it runs (prometheus-operator v0.93: a plain
volume, not an optional one). One that neither the program nor a chart creates in that namespace keeps the pod
in ContainerCreating, and the atomic Helm release waiting for it rolls back: the alert receiver's Secret, for
one, must exist before kube-prometheus-stack is installed.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from tools.deployability.inputs import K8sObject

OPERATOR_KINDS = ("Prometheus", "Alertmanager", "ThanosRuler")
OPERATOR_API_GROUP = "monitoring.coreos.com/"
MOUNTED = (("secrets", "Secret"), ("configMaps", "ConfigMap"))
RULE = "operator-mounts"


def operator_objects(objects: Iterable[K8sObject]) -> Iterable[K8sObject]:
    """The Prometheus operator's workloads among ``objects`` (its own API group, not a look-alike kind)."""
    return (obj for obj in objects
            if obj.kind in OPERATOR_KINDS and str(obj.manifest.get("apiVersion", "")).startswith(OPERATOR_API_GROUP))


def missing_mounts(objects: Sequence[K8sObject]) -> list[tuple[str, str, str]]:
    """(object, problem, fix) for each Secret or ConfigMap an operator workload mounts that nothing creates."""
    present = {(obj.kind, obj.namespace, obj.name) for obj in objects if obj.kind in dict(MOUNTED).values()}
    found = []
    for obj in operator_objects(objects):
        spec = obj.manifest.get("spec") or {}
        for field, kind in MOUNTED:
            for name in spec.get(field) or []:
                if (kind, obj.namespace, name) not in present:
                    found.append((obj.describe(),
                                  f"spec.{field} names {kind} {obj.namespace}/{name}, which neither the program nor a "
                                  "chart creates: the operator mounts it, and the pod does not start without it",
                                  f"create {kind} {name} in {obj.namespace} before the release, or remove it from "
                                  f"spec.{field}"))
    return found
