"""What vCluster 0.36.1's syncer does to a tenant's pod, built the way its source at the pinned tag does it.

- ``vcluster_sync``: the host pod the syncer creates (pkg/controllers/resources/pods/translate/translator.go):
  renamed ``P-x-N-x-<release>`` and its label keys translated (tests/vcluster_names.py; labels already in the
  translated form dropped), every other label and annotation copied, managed-by/namespace labels and the virtual
  namespace's labels added, vCluster's annotations added (the pod-specific ones taken from the tenant's pod when it
  has them), ``priorityClassName`` reset, enforced tolerations and node-sync labels added, the volumes translated
  (tests/vcluster_volumes.py); a pod with a ``subdomain`` (a StatefulSet's) gets the hosts-rewriting init container
  first, without a pull policy (pods/translate/hosts.go).
- The host API server hands a policy a gRPC probe without ``service`` with ``service: null`` (k8s.io/api core/v1
  ``GRPCAction.Service``, a pointer without ``omitempty``, written so by the conversion for admission:
  tests/test_synced_claims_admission.py ``test_an_unset_pointer_is_null_to_a_policy``); ``vcluster_sync`` writes it
  so.
- ``syncer_update``: a later tenant edit, merged three-way onto the host pod (pods/translate/diff.go);
  ``copy_back``: the host's (KAI's) label and annotation additions copied into the virtual pod.
- ``syncer_status_update``: a tenant's change of its pod's conditions, written onto the host pod whole through
  ``pods/status`` (pods/translate/diff.go).
- ``syncer_resize``: on a 1.35+ host, a tenant's change of its containers' resources, patched onto the host pod
  through ``pods/resize`` (pods/syncer.go ``buildHostPodContainersResourcesResizePatch``).
"""

from __future__ import annotations

import copy
import json
import re
from typing import Optional

from config.model import Team
from config.vcluster_images import rewrite_hosts_image
from tests.vcluster_names import TRANSLATED_LABELS, host_label_key, host_object_name, safe_concat_name, translated_label
from tests.vcluster_volumes import TOKEN_ANNOTATION, translate_env, translate_volumes

# Taken from the tenant's own virtual pod when it carries them (translator.go), else computed.
POD_ANNOTATIONS = ("vcluster.loft.sh/namespace", "vcluster.loft.sh/name", "vcluster.loft.sh/uid",
                   "vcluster.loft.sh/service-account-name", "vcluster.loft.sh/labels")
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# Annotations the copy leaves out of managed-annotations (pkg/util/translate HostAnnotations, applyAnnotations).
UNMANAGED_ANNOTATIONS = ("vcluster.loft.sh/managed-annotations", "vcluster.loft.sh/managed-labels",
                         "vcluster.loft.sh/object-name", "vcluster.loft.sh/object-namespace",
                         "vcluster.loft.sh/object-uid", "vcluster.loft.sh/object-kind",
                         "vcluster.loft.sh/object-host-name", "vcluster.loft.sh/object-host-namespace")
# An owner reference's fields in the order Go writes them, and the apps/v1 owners named in owner-set-kind.
OWNER_FIELDS = ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion")
OWNER_SET_KINDS = ("DaemonSet", "Job", "ReplicaSet", "StatefulSet")
# Annotations an edit of the virtual pod never changes on the host (diff.go GetExcludedAnnotations, and the
# object-* keys of pkg/util/translate).
UPDATE_KEPT_ANNOTATIONS = (SAFE_TO_EVICT, "vcluster.loft.sh/owner-references", "vcluster.loft.sh/owner-set-kind",
                           *POD_ANNOTATIONS, "vcluster.loft.sh/hosts-rewritten", *UNMANAGED_ANNOTATIONS[2:])
REWRITE_HOSTS = "vcluster-rewrite-hosts"  # the init container and its volume
HOSTS_REWRITTEN = "vcluster.loft.sh/hosts-rewritten"
VIRTUAL_UID = "6f1c2a4e-0000-4000-8000-000000000001"  # what the virtual API server gave the tenant's pod


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
    # HostMetadata copies every annotation (vCluster's own bookkeeping keys included) and lists the copied ones in
    # managed-annotations, all but the two lists and the object-* keys it then overwrites.
    annotations = dict(virtual)
    managed = sorted(key for key in virtual if key not in UNMANAGED_ANNOTATIONS)
    annotations.pop("vcluster.loft.sh/managed-annotations", None)
    if managed:
        annotations["vcluster.loft.sh/managed-annotations"] = "\n".join(managed)
    annotations.update({
        "vcluster.loft.sh/object-name": virtual_name, "vcluster.loft.sh/object-namespace": virtual_namespace,
        "vcluster.loft.sh/object-uid": VIRTUAL_UID,
        "vcluster.loft.sh/object-kind": "/v1, Kind=Pod",
        "vcluster.loft.sh/object-host-name": metadata["name"],
        "vcluster.loft.sh/object-host-namespace": team.namespace})
    virtual_labels = pod["metadata"].get("labels", {})
    computed = {"vcluster.loft.sh/namespace": virtual_namespace, "vcluster.loft.sh/name": virtual_name,
                "vcluster.loft.sh/uid": annotations["vcluster.loft.sh/object-uid"],
                "vcluster.loft.sh/service-account-name": pod["spec"].get("serviceAccountName", "default"),
                "vcluster.loft.sh/labels": labels_annotation(virtual_labels)}
    for key in POD_ANNOTATIONS:
        annotations[key] = virtual.get(key) or computed[key]
    if SAFE_TO_EVICT not in annotations:
        controller = next((owner for owner in owners if owner.get("controller")), None)
        annotations[SAFE_TO_EVICT] = "true" if controller else "false"
        if controller and controller["kind"] == "DaemonSet":
            annotations["cluster-autoscaler.kubernetes.io/daemonset-pod"] = "true"
    if "vcluster.loft.sh/owner-references" not in annotations:
        _annotate_owners(annotations, owners)
    metadata["annotations"] = annotations
    if _translate_spec(host["spec"], team, virtual_namespace):
        annotations[HOSTS_REWRITTEN] = "true"
    translate_volumes(host, virtual_name, virtual_namespace, release)
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for container in host["spec"].get(field, []):
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if "grpc" in container.get(probe, {}):
                    container[probe]["grpc"].setdefault("service", None)
    return host


def _annotate_owners(annotations: dict, owners: list) -> None:
    """The virtual pod's owners as the host pod's annotations (Go's compact JSON, its field order)."""
    if not owners:
        return
    annotations["vcluster.loft.sh/owner-references"] = json.dumps(
        [{field: owner[field] for field in OWNER_FIELDS if field in owner} for owner in owners], separators=(",", ":"))
    kind = next((o["kind"] for o in owners if o.get("apiVersion") == "apps/v1" and o["kind"] in OWNER_SET_KINDS), None)
    if kind:
        annotations["vcluster.loft.sh/owner-set-kind"] = kind


def labels_annotation(labels: dict) -> str:
    """vcluster.loft.sh/labels: each label as key=<value as a JSON string>, the lines sorted."""
    return "\n".join(sorted(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in labels.items()))


def enforced_tolerations(team: Team) -> list[dict]:
    """The team's ``sync.toHost.pods.enforceTolerations`` ("key[=value]:Effect") as the syncer adds them."""
    tolerations = []
    for entry in team.vcluster.enforce_tolerations:
        key_value, effect = entry.rsplit(":", 1)
        key, _, value = key_value.partition("=")
        toleration = {"key": key, "operator": "Equal" if value else "Exists", "effect": effect}
        if value:
            toleration["value"] = value
        tolerations.append(toleration)
    return tolerations


def _translate_spec(spec: dict, team: Team, namespace: str) -> bool:
    """Whether the hosts file was rewritten."""
    release = team.vcluster_name
    spec["serviceAccountName"] = f"vc-workload-{release}"
    spec.pop("serviceAccount", None)
    spec["automountServiceAccountToken"] = False
    spec["enableServiceLinks"] = False
    spec.pop("priorityClassName", None)
    spec.pop("priority", None)
    tolerations = list(spec.get("tolerations", []))
    spec["tolerations"] = tolerations + [entry for entry in enforced_tolerations(team) if entry not in tolerations]
    for entry in spec.get("imagePullSecrets", []):
        entry["name"] = host_object_name(entry["name"], namespace, release)
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for entry in spec.get(field, []):
            translate_env(entry, namespace, release)
    # The node-sync selector goes to a pod the host scheduler places; a pod naming its node is synced only when that
    # node is in the virtual cluster (one the selector picked), and unchanged.
    if team.vcluster.node_labels and not spec.get("nodeName"):
        spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **team.vcluster.node_labels}
    if spec.pop("subdomain", ""):
        _rewrite_hosts(spec, team)
        return True
    return False


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


def syncer_update(host: dict, virtual_old: dict, virtual_new: dict, team: Team) -> dict:
    """The host pod after the syncer applies a tenant's edit (virtual_old -> virtual_new), as pods/translate/diff.go
    ``Diff`` does: labels and annotations three-way but for the syncer's own annotations, which it recomputes
    (vcluster.loft.sh/labels, owner references) or keeps; images, ``activeDeadlineSeconds`` and ``schedulingGates``
    from the virtual pod; tolerations as calcSpecDiff merges them."""
    updated = copy.deepcopy(host)
    tokens = set(re.findall(r"metadata\.annotations\['(" + re.escape(TOKEN_ANNOTATION) + r"[^']*)'\]",
                            json.dumps(host["spec"].get("volumes", []))))
    kept = {*UPDATE_KEPT_ANNOTATIONS, *tokens}
    for field in ("labels", "annotations"):
        before, after = virtual_old["metadata"].get(field, {}), virtual_new["metadata"].get(field, {})
        target = updated["metadata"].setdefault(field, {})
        for key in set(before) | set(after):
            if field == "annotations" and key in kept:
                continue
            host_key = host_label_key(key, team.vcluster_name) if field == "labels" else key
            if key not in after:
                target.pop(host_key, None)
            elif before.get(key) != after[key]:
                target[host_key] = after[key]
    annotations = updated["metadata"]["annotations"]
    annotations["vcluster.loft.sh/labels"] = labels_annotation(virtual_new["metadata"].get("labels", {}))
    annotations.pop("vcluster.loft.sh/owner-references", None)
    annotations.pop("vcluster.loft.sh/owner-set-kind", None)
    _annotate_owners(annotations, virtual_new["metadata"].get("ownerReferences", []))
    spec, wanted = updated["spec"], virtual_new["spec"]
    for field in ("activeDeadlineSeconds", "schedulingGates"):
        spec.pop(field, None)
        if field in wanted:
            spec[field] = copy.deepcopy(wanted[field])
    for field in ("containers", "initContainers"):
        images = {entry["name"]: entry.get("image") for entry in wanted.get(field, [])}
        for entry in spec.get(field, []):
            if entry["name"] in images and not (entry["name"] == REWRITE_HOSTS and annotations.get(HOSTS_REWRITTEN)):
                entry["image"] = images[entry["name"]]
    # calcSpecDiff: the virtual pod's tolerations, then the host's own and the enforced ones not among them.
    merged = list(wanted.get("tolerations", []))
    for toleration in host["spec"].get("tolerations", []) + enforced_tolerations(team):
        if toleration not in merged:
            merged.append(toleration)
    spec["tolerations"] = merged
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


def syncer_resize(host: dict, virtual: dict) -> Optional[dict]:
    """The host pod after the syncer's ``pods/resize`` patch, or None when it sends none. Each regular container
    (not init containers) whose resources differ from the virtual one's, matched by name, is patched with the
    virtual container's requests and limits; a strategic merge patch merges them into the host's maps key by key,
    so what the host's LimitRanger added stays."""
    virtual_resources = {entry["name"]: entry.get("resources", {}) for entry in virtual["spec"]["containers"]}
    resized = copy.deepcopy(host)
    patched = False
    for entry in resized["spec"]["containers"]:
        wanted = virtual_resources.get(entry["name"])
        if wanted is None or wanted == entry.get("resources", {}):
            continue
        patched = True
        resources = entry.setdefault("resources", {})
        for kind, values in wanted.items():
            resources.setdefault(kind, {}).update(values)
    return resized if patched else None


def syncer_status_update(host: dict, virtual_old: dict, virtual_new: dict) -> Optional[dict]:
    """The host pod after the syncer writes its status, or None when it writes none. A change of the virtual pod's
    conditions wins over the host's and replaces the host pod's whole list (pods/translate/diff.go ``Diff``:
    ``CopyBidirectional`` over ``Status.Conditions``), which the syncer then writes through ``pods/status``
    (pkg/patcher/apply.go); no other status field goes that way."""
    before = virtual_old.get("status", {}).get("conditions")
    after = virtual_new.get("status", {}).get("conditions")
    if before == after:
        return None
    updated = copy.deepcopy(host)
    updated.setdefault("status", {})["conditions"] = copy.deepcopy(after)
    return updated
