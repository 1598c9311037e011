"""What KAI does to a host pod, built the way its source at the pinned tags does it.

- ``kai_mutate``: KAI's pod webhook on CREATE (pkg/admission/webhook/v1alpha2/{gpusharing,deviceaccess,
  runtimeenforcement}, pkg/binder/common): the fractional container gets NVIDIA_VISIBLE_DEVICES,
  RUNAI_NUM_OF_GPUS and GPU_PORTION from the device-list ConfigMap, its ``-evar`` envFrom
  (``optional: false``) and a ``<cm>-vol`` volume; the prefix annotation is derived from the pod's name
  unless the pod already carries one; every other container without a GPU request gets its *first*
  NVIDIA_VISIBLE_DEVICES entry's value set to ``void`` (``valueFrom`` kept) or a new ``void`` entry.
- ``kai_group`` / ``kai_bind``: the pod-grouper's and binder's later writes (pod_controller.go,
  binding/binder.go, binding/resourcereservation): a one-device fraction's ``runai-gpu-group``, a multi-device
  fraction's ``runai-gpu-group/<group>`` (one a device, no bare key), and ``received-resource-type``.
"""

from __future__ import annotations

import copy
import re

from config.versions import release_order

GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
SHARING_ENV = (VISIBLE_DEVICES, "RUNAI_NUM_OF_GPUS", "GPU_PORTION")
KAI_SCHEDULER = "kai-scheduler"  # the schedulerName of KAI's pods
# The first KAI release that trims '.' and '-' off a cut pod name (config_map.go generateConfigMapNamePrefix) and
# makes the ConfigMap's volume name a DNS label (volumes.go GetConfigVolumeName); v0.16.0 to v0.16.4 do neither.
KAI_SANITISED_SHARING_NAMES = "v0.16.5"
# What the binder writes after the scheduler's bind request (pkg/common/constants/constants.go GPUGroup,
# MultiGpuGroupLabelPrefix, ReceivedResourceType, GpuFractionsNumDevices; pod_info.go ReceivedType*).
GPU_GROUP = "runai-gpu-group"
RECEIVED_RESOURCE_TYPE = "received-resource-type"
NUM_DEVICES = "gpu-fraction-num-devices"
FRACTION, REGULAR, MIG_INSTANCE = "Fraction", "Regular", "MigInstance"


class WebhookRefusal(Exception):
    """KAI's mutating webhook failed the request (failurePolicy Fail): the pod is not created."""


def sanitises_sharing_names(kai_version: str) -> bool:
    return release_order(kai_version) >= release_order(KAI_SANITISED_SHARING_NAMES)


def device_list_prefix(pod_name: str, index: int, kai_version: str, random_chars: str) -> str:
    """generateConfigMapNamePrefix (config_map.go): the name cut for a 63-character volume name."""
    base = pod_name[:(63 - 13) - len("shared-gpu") - len(str(index)) - 1 - 5]
    if sanitises_sharing_names(kai_version):
        base = base.rstrip(".-")
    return f"{base}-{random_chars}-shared-gpu"


def kai_mutate(pod: dict, *, kai_version: str = "v0.16.4", random_chars: str = "bq2kd7x") -> dict:
    """KAI's pod webhook on CREATE (it only handles pods of its scheduler)."""
    mutated = copy.deepcopy(pod)
    spec = mutated["spec"]
    if spec.get("schedulerName") != KAI_SCHEDULER:
        return mutated
    annotations = mutated["metadata"].setdefault("annotations", {})
    containers, init = spec["containers"], spec.get("initContainers", [])
    fraction_container = None
    if "gpu-fraction" in annotations or "gpu-memory" in annotations:
        wanted = annotations.get("gpu-fraction-container-name", containers[0]["name"])
        fraction_container = next((entry for entry in init + containers if entry["name"] == wanted), None)
        if fraction_container is None:
            raise WebhookRefusal(f"[kai-webhook] container with name {wanted} not found")
        is_init = fraction_container in init and fraction_container not in containers
        index = (init if is_init else containers).index(fraction_container)
        prefix = annotations.setdefault("runai/shared-gpu-configmap", device_list_prefix(
            mutated["metadata"]["name"], index, kai_version, random_chars))
        configmap = f"{prefix}-{'i' if is_init else ''}{index}"
        for name in SHARING_ENV:
            _set_env(fraction_container, name, {"valueFrom": {"configMapKeyRef": {"name": configmap, "key": name}}})
        volume = _volume_name(configmap, kai_version)
        spec["volumes"] = [v for v in spec.get("volumes", []) if v["name"] != volume] + [
            {"name": volume, "configMap": {"name": configmap}}]
        env_from = fraction_container.setdefault("envFrom", [])
        if not any(source.get("configMapRef", {}).get("name") == f"{configmap}-evar" for source in env_from):
            env_from.append({"configMapRef": {"name": f"{configmap}-evar", "optional": False}})
        spec.setdefault("runtimeClassName", "nvidia")
    for entry in containers + init:
        if entry is fraction_container or _requests_gpu(entry):
            continue
        existing = next((item for item in entry.get("env", []) if item["name"] == VISIBLE_DEVICES), None)
        if existing is not None:
            existing["value"] = "void"  # setVisibleDevicesEnvVar: valueFrom stays
        else:
            entry.setdefault("env", []).append({"name": VISIBLE_DEVICES, "value": "void"})
    return mutated


def _requests_gpu(entry: dict) -> bool:
    requests = entry.get("resources", {}).get("requests", {})
    return any((name == GPU_RESOURCE or name.startswith(MIG_PREFIX)) and str(value) not in ("0", "0m")
               for name, value in requests.items())


def _volume_name(configmap: str, kai_version: str) -> str:
    name = f"{configmap}-vol"
    return re.sub("[^a-z0-9-]+", "-", name.lower()).strip("-") if sanitises_sharing_names(kai_version) else name


def _set_env(entry: dict, name: str, value: dict) -> None:
    """AddEnvVarToContainer: every entry of that name removed, the new one appended."""
    entry["env"] = [item for item in entry.get("env", []) if item["name"] != name] + [{"name": name, **value}]


def kai_group(host: dict) -> dict:
    """The pod-grouper's MergeFrom patch: PodGroup name and subgroup."""
    grouped = copy.deepcopy(host)
    grouped["metadata"].setdefault("annotations", {})["pod-group-name"] = f"pg-{host['metadata']['name'][:40]}-0"
    grouped["metadata"].setdefault("labels", {})["kai.scheduler/subgroup-name"] = "default"
    return grouped


def kai_bind(host: dict, *, node: str = "gpu-node-1", groups: tuple[str, ...] = ()) -> dict:
    """The binder (binding/binder.go Bind): a fraction's GPU groups as labels, then what the pod received, then the
    node. ``groups`` are the scheduler's (one a device; made up when not given)."""
    bound = copy.deepcopy(host)
    bound["spec"]["nodeName"] = node
    annotations = bound["metadata"].setdefault("annotations", {})
    received = received_type(bound)
    if received == FRACTION:
        devices = int(annotations.get(NUM_DEVICES, "1"))
        if not groups:
            groups = ("5c0a7f3e-group",) if devices == 1 else tuple(f"5c0a7f3e-{index}" for index in range(devices))
        assert len(groups) == devices, f"one GPU group a device: {devices} devices, groups {groups}"
        bound["metadata"].setdefault("labels", {}).update(gpu_group_labels(groups, multi=devices > 1))
    annotations[RECEIVED_RESOURCE_TYPE] = received
    return bound


def gpu_group_labels(groups: tuple[str, ...], *, multi: bool) -> dict:
    """updatePodGPUGroup (resourcereservation): a multi-device fraction (IsMultiFraction: more than one device)
    gets ``runai-gpu-group/<group>: <group>`` for each group and never the bare key, which a one-device fraction
    gets instead."""
    return {f"{GPU_GROUP}/{group}": group for group in groups} if multi else {GPU_GROUP: groups[0]}


def received_type(pod: dict) -> str:
    """The scheduler's received-resource-type (node_info.go setAcceptedResources): a MIG instance before a
    fraction, anything else (whole GPUs, none) Regular."""
    requested = [name for entry in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
                 for name, value in entry.get("resources", {}).get("requests", {}).items()
                 if str(value) not in ("0", "0m")]
    if any(name.startswith(MIG_PREFIX) for name in requested):
        return MIG_INSTANCE
    annotations = pod["metadata"].get("annotations", {})
    return FRACTION if "gpu-fraction" in annotations or "gpu-memory" in annotations else REGULAR
