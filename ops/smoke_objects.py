"""The objects ops.smoke sends and reads: the seeds' GPU pod (asking in the team's isolation tier's terms), an
ordinary chart's Deployment, a pod as a team's vCluster syncer writes it on the host (for the host-refusal dry run),
and what a host pod's status says."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

from components.admission_devices import TOOLKIT_FEATURES
from components.isolation_admission import IMAGE_ROOT, LIBRARY, LIBRARY_NAMES
from components.virtual_defaults import HAMI_CORE_NAME
from config import versions
from config.gpu_asks import GpuAsk
from config.mirrors import Mirrors
from config.vocabulary import POOL_LABEL, QUEUE_LABEL, VCLUSTER_MANAGED_BY_LABEL
from ops.smoke_kube import ApiError

KAI_SCHEDULER = "kai-scheduler"
FRACTION_ANNOTATION = "gpu-fraction"
SMOKE_LABEL = "gpu-tenancy/smoke"
MANAGED_BY = VCLUSTER_MANAGED_BY_LABEL
VIRTUAL_NAMESPACE = "vcluster.loft.sh/namespace"
VIRTUAL_NAME = "vcluster.loft.sh/object-name"


def gpu_pod(name: str, namespace: str, queue: str, ask: GpuAsk, mirrors: Mirrors = Mirrors()) -> dict:
    """The seeds' workload: a pod in the team's queue asking for a GPU as ``ask`` says (a fraction, or one of a
    GPU resource) and running nvidia-smi once."""
    container = {"name": "nvidia-smi", "image": mirrors.image(versions.SMOKE_CUDA_IMAGE), "command": ["nvidia-smi"]}
    if ask.resource is not None:
        container["resources"] = {"limits": {ask.resource: "1"}}
    annotations = {FRACTION_ANNOTATION: ask.fraction} if ask.fraction is not None else {}
    spec = {"schedulerName": KAI_SCHEDULER, "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [container]}
    if ask.node_pool is not None:
        spec["nodeSelector"] = {POOL_LABEL: ask.node_pool}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "labels": {QUEUE_LABEL: queue, SMOKE_LABEL: "gpu"},
                         "annotations": annotations},
            "spec": spec}


def plain_deployment(name: str, namespace: str, mirrors: Mirrors = Mirrors()) -> dict:
    """What an ordinary chart ships: no queue label, no scheduler name."""
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": {**labels, SMOKE_LABEL: "deployment"}},
                "spec": {"containers": [{"name": "pause", "image": mirrors.image(versions.SMOKE_PAUSE_IMAGE),
                                         "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}}}


def synced_pod(gpu: dict, host_namespace: str, vcluster: str, isolation: Mapping) -> dict:
    """The GPU pod ``gpu`` as the team's syncer writes it in the host namespace: with what the vCluster's defaults add
    (``vcluster_defaults``), renamed, with vCluster's bookkeeping labels and annotations, no service account token.
    It also passes the restricted Pod Security level, which the API server checks before the admission policy, and
    pulls its image always, which a site with vcluster.alwaysPullImages asks of every synced pod ([image-pull-policy])
    and any other site allows, so that only the policy's queue rule can refuse it."""
    pod = vcluster_defaults(gpu, isolation)
    metadata, virtual_namespace = pod["metadata"], pod["metadata"]["namespace"]
    restricted = {"allowPrivilegeEscalation": False, "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
                  "seccompProfile": {"type": "RuntimeDefault"}}
    containers = [{**container, "securityContext": restricted, "imagePullPolicy": "Always"}
                  for container in pod["spec"]["containers"]]
    return {**pod, "metadata": {
        "name": f"{metadata['name']}-x-{virtual_namespace}-x-{vcluster}"[:63].rstrip("-"),
        "namespace": host_namespace,
        "labels": {**metadata["labels"], MANAGED_BY: vcluster, VIRTUAL_NAMESPACE: virtual_namespace},
        "annotations": {**metadata["annotations"], VIRTUAL_NAME: metadata["name"],
                        "vcluster.loft.sh/object-namespace": virtual_namespace}},
        "spec": {**pod["spec"], "containers": containers, "automountServiceAccountToken": False,
                 "enableServiceLinks": False}}


def vcluster_defaults(gpu: dict, isolation: Mapping) -> dict:
    """What the team's vCluster adds to the GPU pod ``gpu`` before its syncer sends it (components/virtual_defaults.py;
    the host's rules ask for each): the device features switched off in its one container, which holds the GPU; and
    for a memory-capped team's fraction, HAMi-core loaded from the image its vCluster names (``isolation``, as the
    stack exports it)."""
    container = {**gpu["spec"]["containers"][0]}
    env = [{"name": name, "value": value} for name, value in TOOLKIT_FEATURES.items()]
    spec = {**gpu["spec"]}
    hami_core = isolation.get("hamiCoreImage")
    if hami_core and FRACTION_ANNOTATION in gpu["metadata"]["annotations"]:
        env += [{"name": name, "value": LIBRARY} for name in LIBRARY_NAMES]
        container["volumeMounts"] = [{"name": HAMI_CORE_NAME, "mountPath": IMAGE_ROOT, "readOnly": True}]
        spec["volumes"] = [{"name": HAMI_CORE_NAME, "image": {"reference": hami_core}}]
    container["env"] = env
    return {**gpu, "spec": {**spec, "containers": [container]}}


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
