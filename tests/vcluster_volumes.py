"""What vCluster 0.36.1's syncer does to the volumes of a tenant's pod (translator.go translateVolumes).

Every object a volume or projection names in the tenant's namespace is renamed (``VOLUME_NAMES``,
``PROJECTED_NAMES``), an ephemeral volume replaced by the claim the virtual cluster made for it, a service account
token by a downward-API projection of the token the syncer writes in an annotation
(``sync.toHost.pods.useSecretsForSATokens`` off, the chart's default), and downward-API field paths pointed at the
host pod's copies; every other kind passes as written.
"""

from __future__ import annotations

from tests.vcluster_names import host_object_name

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
VIRTUAL_TOKEN = "eyJhbGciOiJSUzI1NiJ9.virtual-token"  # what the virtual API server answers the syncer's TokenRequest with


def translate_volumes(host: dict, virtual_name: str, namespace: str, release: str) -> None:
    """``host``'s volumes, copied from the virtual pod ``virtual_name`` of ``namespace``, as the syncer writes them."""
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
                host["metadata"]["annotations"][annotation] = VIRTUAL_TOKEN
                source["downwardAPI"] = {"items": [{"path": token.get("path", ""), "mode": 0o644, "fieldRef": {
                    "apiVersion": "v1", "fieldPath": f"metadata.annotations['{annotation}']"}}]}


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
