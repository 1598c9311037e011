"""The objects ops.smoke sends and reads: the seeds' GPU pod, an ordinary chart's Deployment, a pod as a team's
vCluster syncer writes it on the host (for the host-refusal dry run), and what a host pod's status says."""

from __future__ import annotations

from typing import Optional, Sequence

from config import versions
from config.mirrors import Mirrors
from config.vocabulary import QUEUE_LABEL, VCLUSTER_MANAGED_BY_LABEL
from ops.smoke_kube import ApiError

KAI_SCHEDULER = "kai-scheduler"
FRACTION_ANNOTATION = "gpu-fraction"
SMOKE_LABEL = "gpu-tenancy/smoke"
MANAGED_BY = VCLUSTER_MANAGED_BY_LABEL
VIRTUAL_NAMESPACE = "vcluster.loft.sh/namespace"
VIRTUAL_NAME = "vcluster.loft.sh/object-name"


def gpu_pod(name: str, namespace: str, queue: str, fraction: str, mirrors: Mirrors = Mirrors()) -> dict:
    """The seeds' workload: a fractional GPU pod in the team's queue running nvidia-smi once."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue, SMOKE_LABEL: "gpu"},
                         "annotations": {FRACTION_ANNOTATION: fraction}},
            "spec": {"schedulerName": KAI_SCHEDULER, "restartPolicy": "Never",
                     "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                     "containers": [{"name": "nvidia-smi", "image": mirrors.image(versions.SMOKE_CUDA_IMAGE),
                                     "command": ["nvidia-smi"]}]}}


def plain_deployment(name: str, namespace: str, mirrors: Mirrors = Mirrors()) -> dict:
    """What an ordinary chart ships: no queue label, no scheduler name."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": {**labels, SMOKE_LABEL: "deployment"}},
                "spec": {"containers": [{"name": "pause", "image": mirrors.image(versions.SMOKE_PAUSE_IMAGE),
                                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def synced_pod(pod: dict, host_namespace: str, vcluster: str) -> dict:
    """``pod`` as the team's syncer writes it in the host namespace: renamed, with vCluster's bookkeeping
    labels and annotations, no service account token. It also passes the restricted Pod Security level, which
    the API server checks before the admission policy, so that only the policy can refuse it."""
    metadata, virtual_namespace = pod["metadata"], pod["metadata"]["namespace"]
    restricted = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                  "seccompProfile": {"type": "RuntimeDefault"}}
    containers = [{**container, "securityContext": restricted} for container in pod["spec"]["containers"]]
    return {**pod, "metadata": {
        "name": f"{metadata['name']}-x-{virtual_namespace}-x-{vcluster}"[:63].rstrip("-"),
        "namespace": host_namespace,
        "labels": {**metadata["labels"], MANAGED_BY: vcluster, VIRTUAL_NAMESPACE: virtual_namespace},
        "annotations": {**metadata["annotations"], VIRTUAL_NAME: metadata["name"],
                        "vcluster.loft.sh/object-namespace": virtual_namespace}},
        "spec": {**pod["spec"], "containers": containers, "automountServiceAccountToken": False,
                 "enableServiceLinks": False}}


def in_phase(pod: Optional[dict], phases: Sequence[str], obj: str) -> Optional[dict]:
    """``pod`` if it is in one of ``phases``; an error naming its state if it failed."""
    phase = ((pod or {}).get("status") or {}).get("phase")
    if phase == "Failed" and "Failed" not in phases:
        raise ApiError(0, f"the pod failed{pod_state(pod)}")
    return pod if phase in phases else None


def pod_state(pod: Optional[dict]) -> str:
    """What a pod's status says about why it is where it is, for a failed step's message."""
    status = (pod or {}).get("status") or {}
    parts = [f"phase {status.get('phase', 'unknown')}"]
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("message"):
            parts.append(f"{condition.get('type')}: {condition.get('reason', '')} {condition['message']}".strip())
    for container in status.get("containerStatuses") or []:
        for state in (container.get("state") or {}).values():
            if state.get("reason"):
                parts.append(f"{container.get('name')}: {state['reason']}"
                             + (f" (exit {state['exitCode']})" if "exitCode" in state else ""))
    return "; " + "; ".join(parts)
