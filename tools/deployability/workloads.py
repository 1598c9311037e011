"""Workloads as the API server validates them, beyond their schema: the selector of a Deployment, StatefulSet,
DaemonSet or ReplicaSet selects its own pod template ("selector does not match template labels"), and every
volume a container mounts is one of the pod's volumes (or, in a StatefulSet, of its volume claim templates). Otherwise the API server refuses the workload and the
release that sends it fails. ``check_workloads`` reports each as (object, problem, fix).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from policy.label_selectors import InvalidSelector, selector_matches
from tools.deployability.inputs import CONTAINER_LISTS, K8sObject, pod_templates

RULE = "workloads"
SELECTING_KINDS = ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet")


def _selector_problem(obj: K8sObject, labels: Mapping[str, str]) -> Iterable[str]:
    selector = (obj.manifest.get("spec") or {}).get("selector")
    if obj.kind not in SELECTING_KINDS:
        return
    if not selector:
        yield "has no spec.selector"
        return
    try:
        if not selector_matches(selector, labels):
            yield f"spec.selector {selector} does not select its own pod template (labels {dict(labels)})"
    except InvalidSelector as error:
        yield f"spec.selector is invalid: {error}"


def _mount_problems(obj: K8sObject, spec: Mapping[str, Any]) -> Iterable[str]:
    volumes = {volume.get("name") for volume in spec.get("volumes") or []}
    if obj.kind == "StatefulSet":
        claims = (obj.manifest.get("spec") or {}).get("volumeClaimTemplates") or []
        volumes |= {(claim.get("metadata") or {}).get("name") for claim in claims}
    for field in CONTAINER_LISTS:
        for container in spec.get(field) or []:
            for mount in container.get("volumeMounts") or []:
                if mount.get("name") not in volumes:
                    yield (f"container {container.get('name', '?')} mounts volume {mount.get('name')!r}, which the pod "
                           "does not have")


def check_workloads(objects: Sequence[K8sObject]) -> list[tuple[K8sObject, str, str]]:
    found = []
    for obj, metadata, spec in pod_templates(objects):
        if obj.synced_model:
            continue  # its volumes come from the tenant
        for problem in [*_selector_problem(obj, metadata.get("labels") or {}), *_mount_problems(obj, spec)]:
            found.append((obj, problem, "fix the workload (the chart value or the program's object that sets it)"))
    return found
