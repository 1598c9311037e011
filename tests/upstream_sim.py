"""What vCluster 0.36.1 and KAI do to a tenant's pod, built the way their source at the pinned tags does it.

- ``vcluster_sync``: the host pod the syncer creates (pkg/controllers/resources/pods/translate/translator.go,
  pkg/util/translate): renamed ``P-x-N-x-<release>``, exactly four label keys renamed to
  ``vcluster.loft.sh/label-<release>-x-<sha256(key)[:10]>`` (labels already in that form dropped), every
  other label and annotation copied, managed-by/namespace labels and the virtual namespace's labels
  added, vCluster's annotations added (the pod-specific ones taken from the tenant's pod when it has
  them), ``priorityClassName`` reset, enforced tolerations and node-sync labels added; a pod with a
  ``subdomain`` (a StatefulSet's) gets the hosts-rewriting init container first, without a pull policy
  (pods/translate/hosts.go).
  Volumes: every object a volume or projection names in the tenant's namespace renamed (``VOLUME_NAMES``,
  ``PROJECTED_NAMES``; ``kube-root-ca.crt`` to vCluster's own copy), an ephemeral volume replaced by the claim the
  virtual cluster made for it, a service account token by a downward-API projection of the token the syncer
  writes in an annotation (``sync.toHost.pods.useSecretsForSATokens`` off, the chart's default), and downward-API
  field paths pointed at the host pod's copies; every other kind passes as written (translateVolumes).
- ``pull_policy_defaults``: the API server's defaulting of every pull policy a pod leaves out (k8s.io/api
  core/v1 types.go: ``Always`` for an image tagged ``latest`` or not tagged, ``IfNotPresent`` otherwise).
- ``syncer_update``: a later tenant edit, merged three-way onto the host pod (pods/translate/diff.go);
  ``copy_back``: the host's (KAI's) label and annotation additions copied into the virtual pod.
- ``kai_mutate``: KAI's pod webhook on CREATE (pkg/admission/webhook/v1alpha2/{gpusharing,deviceaccess,
  runtimeenforcement}, pkg/binder/common): the fractional container gets NVIDIA_VISIBLE_DEVICES,
  RUNAI_NUM_OF_GPUS and GPU_PORTION from the device-list ConfigMap, its ``-evar`` envFrom
  (``optional: false``) and a ``<cm>-vol`` volume; the prefix annotation is derived from the pod's name
  unless the pod already carries one; every other container without a GPU request gets its *first*
  NVIDIA_VISIBLE_DEVICES entry's value set to ``void`` (``valueFrom`` kept) or a new ``void`` entry.
- ``kai_group`` / ``kai_bind``: the pod-grouper's and binder's later writes (pod_controller.go,
  binding/binder.go, binding/resourcereservation).
- ``limit_ranger``: the host API server's LimitRanger admission plugin, which runs before the
  webhooks: containers without requests or limits get the namespace's defaults and the pod the
  ``kubernetes.io/limit-ranger`` annotation (plugin/pkg/admission/limitranger).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Optional

from config.model import Team, TenantLimitRange
from config.versions import release_order
from config.virtual_cluster import rewrite_hosts_image

GPU_RESOURCE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
SHARING_ENV = (VISIBLE_DEVICES, "RUNAI_NUM_OF_GPUS", "GPU_PORTION")
KAI_SCHEDULER = "kai-scheduler"  # the schedulerName of KAI's pods
TRANSLATED_LABELS = ("release", "vcluster.loft.sh/namespace", "vcluster.loft.sh/managed-by",
                     "vcluster.loft.sh/controlled-by")
# Taken from the tenant's own virtual pod when it carries them (translator.go), else computed.
POD_ANNOTATIONS = ("vcluster.loft.sh/namespace", "vcluster.loft.sh/name", "vcluster.loft.sh/uid",
                   "vcluster.loft.sh/service-account-name", "vcluster.loft.sh/labels")
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
REWRITE_HOSTS = "vcluster-rewrite-hosts"  # the init container and its volume
RANDOM_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


# Volume kind -> the path (JSON names) of the object name the syncer renames into the tenant's namespace; the
# projection sources likewise (tests/test_volume_sources_contract.py reads both from translator.go).
VOLUME_NAMES = {"configMap": ("name",), "secret": ("secretName",), "persistentVolumeClaim": ("claimName",),
                "iscsi": ("secretRef", "name"), "rbd": ("secretRef", "name"), "flexVolume": ("secretRef", "name"),
                "cinder": ("secretRef", "name"), "cephfs": ("secretRef", "name"), "azureFile": ("secretName",),
                "scaleIO": ("secretRef", "name"), "storageos": ("secretRef", "name"),
                "csi": ("nodePublishSecretRef", "name"), "glusterfs": ("endpoints",)}
PROJECTED_NAMES = {"configMap": ("name",), "secret": ("name",)}
# Downward-API field paths the syncer points at the host pod's annotations (translateFieldRef).
FIELD_PATHS = {"metadata.labels": "vcluster.loft.sh/labels", "metadata.name": "vcluster.loft.sh/name",
               "metadata.namespace": "vcluster.loft.sh/namespace", "metadata.uid": "vcluster.loft.sh/uid",
               "spec.serviceAccountName": "vcluster.loft.sh/service-account-name"}
TOKEN_ANNOTATION = "vcluster.loft.sh/token-"


class WebhookRefusal(Exception):
    """KAI's mutating webhook failed the request (failurePolicy Fail): the pod is not created."""


def safe_concat_name(*parts: str) -> str:
    """vCluster's SafeConcatName: joined with '-', hashed above 63 characters."""
    full = "-".join(parts)
    if len(full) <= 63:
        return full
    return (full[:52] + "-" + hashlib.sha256(full.encode()).hexdigest()[:10]).replace(".-", "-")


def translated_label(prefix: str, release: str, key: str) -> str:
    return safe_concat_name(prefix, release, "x", hashlib.sha256(key.encode()).hexdigest()[:10])


def host_label_key(key: str, release: str) -> str:
    return translated_label("vcluster.loft.sh/label", release, key) if key in TRANSLATED_LABELS else key


def vcluster_sync(pod: dict, team: Team, namespace_labels: Optional[dict] = None) -> dict:
    """The host pod the team's vCluster syncer creates for ``pod``."""
    host = copy.deepcopy(pod)
    metadata, release = host["metadata"], team.vcluster_name
    virtual_name, virtual_namespace = pod["metadata"]["name"], pod["metadata"]["namespace"]
    metadata["name"] = safe_concat_name(virtual_name, "x", virtual_namespace, "x", release)
    metadata["namespace"] = team.namespace
    owners = metadata.pop("ownerReferences", [])
    translated = {translated_label("vcluster.loft.sh/label", release, key) for key in TRANSLATED_LABELS}
    labels = {host_label_key(key, release): value for key, value in pod["metadata"].get("labels", {}).items()
              if key not in translated}
    labels.update({"vcluster.loft.sh/managed-by": release, "vcluster.loft.sh/namespace": virtual_namespace})
    for key, value in {"kubernetes.io/metadata.name": virtual_namespace, **(namespace_labels or {})}.items():
        labels[translated_label("vcluster.loft.sh/ns-label", release, key)] = value
    metadata["labels"] = labels
    virtual = pod["metadata"].get("annotations", {})
    annotations = {key: value for key, value in virtual.items()
                   if key not in ("vcluster.loft.sh/managed-annotations", "vcluster.loft.sh/managed-labels")}
    if annotations:
        annotations["vcluster.loft.sh/managed-annotations"] = "\n".join(sorted(annotations))
    annotations.update({
        "vcluster.loft.sh/object-name": virtual_name, "vcluster.loft.sh/object-namespace": virtual_namespace,
        "vcluster.loft.sh/object-uid": "6f1c2a4e-0000-4000-8000-000000000001", "vcluster.loft.sh/object-kind": "/v1, Kind=Pod",
        "vcluster.loft.sh/object-host-name": metadata["name"], "vcluster.loft.sh/object-host-namespace": team.namespace})
    computed = {"vcluster.loft.sh/namespace": virtual_namespace, "vcluster.loft.sh/name": virtual_name,
                "vcluster.loft.sh/uid": annotations["vcluster.loft.sh/object-uid"],
                "vcluster.loft.sh/service-account-name": pod["spec"].get("serviceAccountName", "default"),
                "vcluster.loft.sh/labels": "\n".join(f'{k}="{v}"' for k, v in sorted(pod["metadata"].get("labels", {}).items()))}
    for key in POD_ANNOTATIONS:
        annotations[key] = virtual.get(key) or computed[key]
    annotations.setdefault(SAFE_TO_EVICT, "true" if any(o.get("controller") for o in owners) else "false")
    if owners and "vcluster.loft.sh/owner-references" not in annotations:
        annotations["vcluster.loft.sh/owner-references"] = json.dumps(owners)
        kind = next((o["kind"] for o in owners if o.get("apiVersion") == "apps/v1"), None)
        if kind in ("ReplicaSet", "StatefulSet", "DaemonSet", "Deployment"):
            annotations["vcluster.loft.sh/owner-set-kind"] = kind
    metadata["annotations"] = annotations
    _translate_spec(host["spec"], team)
    _translate_volumes(host, virtual_name, virtual_namespace, release)
    return host


def host_object_name(name: str, namespace: str, release: str, kind: str = "") -> str:
    """The host name of an object of the tenant's namespace (mappings.VirtualToHostName)."""
    if kind == "configMap" and name == "kube-root-ca.crt":
        return safe_concat_name("vcluster", "kube-root-ca.crt", "x", release)
    return safe_concat_name(name, "x", namespace, "x", release)


def _rename(source: dict, path: tuple, namespace: str, release: str, kind: str) -> None:
    *parents, field = path
    for parent in parents:
        source = source.get(parent)
        if source is None:
            return
    if source.get(field):
        source[field] = host_object_name(source[field], namespace, release, kind)


def _translate_field_refs(items: list) -> None:
    for item in items:
        reference = item.get("fieldRef")
        if reference and reference["fieldPath"] in FIELD_PATHS:
            reference["fieldPath"] = f"metadata.annotations['{FIELD_PATHS[reference['fieldPath']]}']"


def _translate_volumes(host: dict, virtual_name: str, namespace: str, release: str) -> None:
    for index, volume in enumerate(host["spec"].get("volumes", [])):
        for kind, path in VOLUME_NAMES.items():
            if kind in volume:
                _rename(volume[kind], path, namespace, release, kind)
        if "ephemeral" in volume:
            claim = f"{virtual_name}-{volume['name']}"  # component-helpers ephemeral.VolumeClaimName
            del volume["ephemeral"]
            volume["persistentVolumeClaim"] = {"claimName": host_object_name(claim, namespace, release)}
        _translate_field_refs(volume.get("downwardAPI", {}).get("items", []))
        for position, source in enumerate(volume.get("projected", {}).get("sources", [])):
            for kind, path in PROJECTED_NAMES.items():
                if kind in source:
                    _rename(source[kind], path, namespace, release, kind)
            _translate_field_refs(source.get("downwardAPI", {}).get("items", []))
            if "serviceAccountToken" in source:
                token = source.pop("serviceAccountToken")
                annotation = f"{TOKEN_ANNOTATION}{index:04d}{position:04d}"  # eight random characters upstream
                host["metadata"]["annotations"][annotation] = "eyJhbGciOiJSUzI1NiJ9.virtual-token"
                source["downwardAPI"] = {"items": [{"path": token.get("path", ""), "mode": 0o644, "fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{annotation}']"}}]}


def _translate_spec(spec: dict, team: Team) -> None:
    release = team.vcluster_name
    spec["serviceAccountName"] = f"vc-workload-{release}"
    spec["automountServiceAccountToken"] = False
    spec["enableServiceLinks"] = False
    spec.pop("priorityClassName", None)
    spec.pop("priority", None)
    tolerations = list(spec.get("tolerations", []))
    for entry in team.vcluster.enforce_tolerations:
        key_value, effect = entry.rsplit(":", 1)
        key, _, value = key_value.partition("=")
        toleration = {"key": key, "operator": "Equal" if value else "Exists", "effect": effect}
        if value:
            toleration["value"] = value
        tolerations.append(toleration)
    spec["tolerations"] = tolerations
    if team.vcluster.node_labels:
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **team.vcluster.node_labels}
    if spec.pop("subdomain", ""):
        _rewrite_hosts(spec, team)


def _rewrite_hosts(spec: dict, team: Team) -> None:
    """rewritePodHostnameFQDN with the chart's default resources: an init container that writes the pod's hosts
    file, mounted over /etc/hosts in every other container."""
    mount = {"mountPath": "/etc/hosts", "name": REWRITE_HOSTS, "subPath": "hosts"}
    # Its sed script, which nothing on the host reads, left out.
    rewrite = {"name": REWRITE_HOSTS, "image": rewrite_hosts_image(team.vcluster), "command": ["sh"],
               "securityContext": {"runAsUser": 1001, "runAsGroup": 1001, "runAsNonRoot": True,
                                   "capabilities": {"drop": ["ALL"]}, "allowPrivilegeEscalation": False,
                                   "seccompProfile": {"type": "RuntimeDefault"}},
               "resources": {"limits": {"cpu": "30m", "memory": "64Mi"}, "requests": {"cpu": "30m", "memory": "64Mi"}},
               "volumeMounts": [{"mountPath": "/hosts", "name": REWRITE_HOSTS}]}
    spec["volumes"] = [*spec.get("volumes", []), {"name": REWRITE_HOSTS, "emptyDir": {}}]
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for entry in spec.get(field, []):
            entry["volumeMounts"] = [*entry.get("volumeMounts", []), mount]
    spec["initContainers"] = [rewrite, *spec.get("initContainers", [])]


def pull_policy_defaults(pod: dict) -> dict:
    """``pod`` with the pull policy of every container and image volume that leaves it out set by the API server."""
    defaulted = copy.deepcopy(pod)
    spec = defaulted["spec"]
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for entry in spec.get(field, []):
            entry.setdefault("imagePullPolicy", _default_pull_policy(entry.get("image", "")))
    for volume in spec.get("volumes", []):
        if "image" in volume:
            volume["image"].setdefault("pullPolicy", _default_pull_policy(volume["image"].get("reference", "")))
    return defaulted


def _default_pull_policy(image: str) -> str:
    name, _, digest = image.partition("@")
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ("" if digest else "latest")
    return "Always" if tag == "latest" else "IfNotPresent"


def syncer_update(host: dict, virtual_old: dict, virtual_new: dict, team: Team) -> dict:
    """The host pod after the syncer applies a tenant's edit (virtual_old -> virtual_new) three-way."""
    updated = copy.deepcopy(host)
    for field in ("labels", "annotations"):
        before, after = virtual_old["metadata"].get(field, {}), virtual_new["metadata"].get(field, {})
        target = updated["metadata"].setdefault(field, {})
        for key in set(before) | set(after):
            if field == "annotations" and key in POD_ANNOTATIONS:
                continue
            host_key = host_label_key(key, team.vcluster_name) if field == "labels" else key
            if key not in after:
                target.pop(host_key, None)
            elif before.get(key) != after[key]:
                target[host_key] = after[key]
    return updated


def copy_back(host: dict, virtual: dict, team: Team) -> dict:
    """The virtual pod after the syncer copies the host's own label and annotation changes into it."""
    updated = copy.deepcopy(virtual)
    synced = vcluster_sync(virtual, team)
    for field in ("labels", "annotations"):
        target = updated["metadata"].setdefault(field, {})
        for key, value in host["metadata"].get(field, {}).items():
            if key not in synced["metadata"].get(field, {}) and not key.startswith("vcluster.loft.sh/"):
                target[key] = value
    return updated


# --- KAI ------------------------------------------------------------------------------------------


def _requests_gpu(entry: dict) -> bool:
    requests = entry.get("resources", {}).get("requests", {})
    return any((name == GPU_RESOURCE or name.startswith(MIG_PREFIX)) and str(value) not in ("0", "0m")
               for name, value in requests.items())


# The first KAI release that trims '.' and '-' off a cut pod name (config_map.go generateConfigMapNamePrefix) and
# makes the ConfigMap's volume name a DNS label (volumes.go GetConfigVolumeName); v0.16.0 to v0.16.4 do neither.
KAI_SANITISED_SHARING_NAMES = "v0.16.5"


def sanitises_sharing_names(kai_version: str) -> bool:
    return release_order(kai_version) >= release_order(KAI_SANITISED_SHARING_NAMES)


def device_list_prefix(pod_name: str, index: int, kai_version: str, random_chars: str) -> str:
    """generateConfigMapNamePrefix (config_map.go): the name cut for a 63-character volume name."""
    base = pod_name[:(63 - 13) - len("shared-gpu") - len(str(index)) - 1 - 5]
    if sanitises_sharing_names(kai_version):
        base = base.rstrip(".-")
    return f"{base}-{random_chars}-shared-gpu"


def _volume_name(configmap: str, kai_version: str) -> str:
    name = f"{configmap}-vol"
    return re.sub("[^a-z0-9-]+", "-", name.lower()).strip("-") if sanitises_sharing_names(kai_version) else name


def _set_env(entry: dict, name: str, value: dict) -> None:
    """AddEnvVarToContainer: every entry of that name removed, the new one appended."""
    entry["env"] = [item for item in entry.get("env", []) if item["name"] != name] + [{"name": name, **value}]


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


def kai_group(host: dict) -> dict:
    """The pod-grouper's MergeFrom patch: PodGroup name and subgroup."""
    grouped = copy.deepcopy(host)
    grouped["metadata"].setdefault("annotations", {})["pod-group-name"] = f"pg-{host['metadata']['name'][:40]}-0"
    grouped["metadata"].setdefault("labels", {})["kai.scheduler/subgroup-name"] = "default"
    return grouped


def kai_bind(host: dict, *, node: str = "gpu-node-1", group: str = "5c0a7f3e-group") -> dict:
    """The binder: bound to a node, GPU group label on a fractional pod, what it received."""
    bound = copy.deepcopy(host)
    bound["spec"]["nodeName"] = node
    annotations = bound["metadata"].setdefault("annotations", {})
    fractional = "gpu-fraction" in annotations or "gpu-memory" in annotations
    if fractional:
        bound["metadata"].setdefault("labels", {})["runai-gpu-group"] = group
    annotations["received-resource-type"] = "Fraction" if fractional else "Regular"
    return bound


def limit_ranger(pod: dict, limits: TenantLimitRange) -> dict:
    """Defaults for containers that set no cpu or memory, and the annotation that says so."""
    defaulted = copy.deepcopy(pod)
    notes = []
    for entry in defaulted["spec"]["containers"] + defaulted["spec"].get("initContainers", []):
        resources = entry.setdefault("resources", {})
        for kind, defaults in (("request", {"cpu": limits.default_request_cpu, "memory": limits.default_request_memory}),
                               ("limit", {"cpu": limits.default_cpu, "memory": limits.default_memory})):
            current = resources.setdefault(f"{kind}s", {})
            missing = [name for name in ("cpu", "memory") if name not in current]
            current.update({name: defaults[name] for name in missing})
            if missing:
                notes.append(f"{', '.join(missing)} {kind} for container {entry['name']}")
    if notes:
        defaulted["metadata"].setdefault("annotations", {})["kubernetes.io/limit-ranger"] = \
            "LimitRanger plugin set: " + "; ".join(notes)
    return defaulted


def api_validate(pod: dict) -> list[str]:
    """The API server's own validation after mutating admission: what KAI's webhook leaves it refuses (422)."""
    problems = []
    # validateVolumeSource and validateProjectionSources (pkg/apis/core/validation): one source per volume and
    # per projection.
    for index, volume in enumerate(pod["spec"].get("volumes", [])):
        if len(set(volume) - {"name"}) != 1:
            problems.append(f"[api-validation] spec.volumes[{index}]: Invalid value: must specify exactly 1 volume "
                            "type")
        for position, source in enumerate(volume.get("projected", {}).get("sources", [])):
            if len(source) > 1:
                problems.append(f"[api-validation] spec.volumes[{index}].projected.sources[{position}]: Forbidden: "
                                "may not specify more than 1 volume type per source")
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for index, entry in enumerate(pod["spec"].get(field, [])):
            for position, item in enumerate(entry.get("env", [])):
                if item.get("value") and "valueFrom" in item:
                    problems.append(f"[api-validation] spec.{field}[{index}].env[{position}].valueFrom: Invalid value: "
                                    "may not be specified when `value` is not empty")
    return problems
