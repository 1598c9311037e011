"""What vCluster 0.36.1's syncer does to the volumes of a tenant's pod (translator.go translateVolumes).

Every object a volume or projection names in the tenant's namespace is renamed (``VOLUME_NAMES``,
``PROJECTED_NAMES``), an ephemeral volume replaced by the claim the virtual cluster made for it, a service account
token by a downward-API projection of the token the syncer writes in an annotation
(``sync.toHost.pods.useSecretsForSATokens`` off, the chart's default), and downward-API field paths pointed at the
host pod's copies; every other kind passes as written.
"""

from __future__ import annotations

import re

from tests.vcluster_names import host_label_key, host_object_name

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
# What the virtual API server answers the syncer's TokenRequest with.
VIRTUAL_TOKEN = "eyJhbGciOiJSUzI1NiJ9.virtual-token"


def translate_volumes(host: dict, virtual_name: str, namespace: str, release: str) -> None:
    """``host``'s volumes, copied from the virtual pod ``virtual_name`` of ``namespace``, as the syncer writes them."""
    for index, volume in enumerate(host["spec"].get("volumes", [])):
        for kind, path in VOLUME_NAMES.items():
            if kind in volume:
                _rename(volume[kind], path, namespace, release)
        if "ephemeral" in volume:
            claim = f"{virtual_name}-{volume['name']}"  # component-helpers ephemeral.VolumeClaimName
            del volume["ephemeral"]
            volume["persistentVolumeClaim"] = {"claimName": host_object_name(claim, namespace, release)}
        for item in volume.get("downwardAPI", {}).get("items", []):
            translate_field_ref(item, release)
        for position, source in enumerate(volume.get("projected", {}).get("sources") or []):
            for kind, path in PROJECTED_NAMES.items():
                if kind in source:
                    _rename(source[kind], path, namespace, release)
            for item in source.get("downwardAPI", {}).get("items", []):
                translate_field_ref(item, release)
            if "serviceAccountToken" in source:
                token = source.pop("serviceAccountToken")
                annotation = f"{TOKEN_ANNOTATION}{index:04d}{position:04d}"  # eight random characters upstream
                host["metadata"]["annotations"][annotation] = VIRTUAL_TOKEN
                source["downwardAPI"] = {"items": [{"path": token.get("path", ""), "mode": 0o644, "fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{annotation}']"}}]}


def _rename(source: dict, path: tuple, namespace: str, release: str) -> None:
    *parents, field = path
    for parent in parents:
        source = source.get(parent)
        if source is None:
            return
    if source.get(field):
        source[field] = host_object_name(source[field], namespace, release)


def translate_field_ref(holder: dict, release: str) -> None:
    """A downward-API item's or env variable's ``fieldRef`` (translateFieldRef): a whole-map or pod-field path to
    the host pod's annotation copy, one label to the label's host key."""
    reference = holder.get("fieldRef")
    if not reference:
        return
    label = re.fullmatch(r"metadata\.labels\['(.+)'\]", reference["fieldPath"])
    if label:
        reference["fieldPath"] = f"metadata.labels['{host_label_key(label.group(1), release)}']"
    elif reference["fieldPath"] in FIELD_PATHS:
        reference["fieldPath"] = f"metadata.annotations['{FIELD_PATHS[reference['fieldPath']]}']"


def translate_env(container: dict, namespace: str, release: str) -> None:
    """A container's env (TranslateContainerEnv): field references translated, ConfigMap and Secret references
    renamed into the tenant's host namespace."""
    for variable in container.get("env", []):
        source = variable.get("valueFrom", {})
        translate_field_ref(source, release)
        for kind in ("configMapKeyRef", "secretKeyRef"):
            if source.get(kind, {}).get("name"):
                source[kind]["name"] = host_object_name(source[kind]["name"], namespace, release)
    for source in container.get("envFrom", []):
        for kind in ("configMapRef", "secretRef"):
            if source.get(kind, {}).get("name"):
                source[kind]["name"] = host_object_name(source[kind]["name"], namespace, release)
