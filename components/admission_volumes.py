"""The volume rule of a tenant's pod policies: a pod mounts only what lives in its own namespace or in itself.

vCluster copies a pod's volumes to the host as the tenant wrote them, renaming only the objects they name in the
tenant's namespace (pods/translate/translator.go ``translateVolumes``). Every other kind the kubelet mounts with
the node's own network address and credentials (NFS, iSCSI, Ceph, Fibre Channel, node-installed FlexVolume and CSI
drivers, cloud disks through CSI migration, ``gitRepo``'s git run on the node), or with the host cluster's signers
(``podCertificate``, ``clusterTrustBundle`` projections). So the host admits exactly the kinds the syncer writes
for an honest pod, an allowlist: tests/test_volume_sources_contract.py classifies every kind of every accepted
Kubernetes and reads from vCluster's source which kinds it renames into the namespace.
"""

from __future__ import annotations

from components.admission_metadata import refusal, served_list
from config.model import Team

# What the syncer writes for an honest pod: objects of the tenant's namespace, renamed (configMap, secret,
# persistentVolumeClaim), the pod's own fields and scratch space (downwardAPI, emptyDir), an image it could run
# anyway (image: HAMi-core's volume, components/isolation_admission.py), and projections of the first three.
HOST_VOLUME_SOURCES = ("configMap", "secret", "downwardAPI", "emptyDir", "persistentVolumeClaim", "image")
HOST_PROJECTED_SOURCES = ("configMap", "secret", "downwardAPI")
# The syncer rewrites these before the host sees them (ephemeral into a claim the virtual cluster made, a service
# account token into a Secret or downward-API projection): only a virtual pod carries them. On the host an
# ephemeral volume would have the host's controller create a claim no claim rule checked.
REWRITTEN_VOLUME_SOURCES = ("ephemeral",)
REWRITTEN_PROJECTED_SOURCES = ("serviceAccountToken",)
# A privileged pod already owns its node (hostPath, mount(2) on the host network): the level's warning says so
# (config/load.py), and a volume rule would only take away what the level was chosen for.
UNGUARDED_POD_SECURITY = "privileged"


def _any_of(item: str, kinds: tuple[str, ...]) -> str:
    # The API server admits a volume or projection with exactly one source (its validation runs before validating
    # admission), so having an allowed one means having no other. has() keeps the check typed and per volume.
    return " || ".join(f"has({item}.{kind})" for kind in kinds)


def volume_allowed(volume: str, before_sync: bool) -> str:
    """Volume ``volume`` is of an allowed kind: as the host sees it, or, ``before_sync``, as the tenant writes it."""
    kinds = HOST_VOLUME_SOURCES + (REWRITTEN_VOLUME_SOURCES if before_sync else ())
    sources = HOST_PROJECTED_SOURCES + (REWRITTEN_PROJECTED_SOURCES if before_sync else ())
    projected = (f"(has({volume}.projected) && ({served_list(f'{volume}.projected.sources')} ? "
                 f"{volume}.projected.sources.all(s, {_any_of('s', sources)}) : true))")
    return f"({_any_of(volume, kinds)} || {projected})"


def volume_validations(team: Team, before_sync: bool) -> list[dict]:
    """The ``volume-sources`` rule, checked on CREATE (a pod's volumes cannot change afterwards); none for a team at
    Pod Security ``privileged``."""
    if team.vcluster.pod_security == UNGUARDED_POD_SECURITY:
        return []
    allowed = volume_allowed("v", before_sync)
    rule = refusal(
        "volume-sources",
        f"request.operation != 'CREATE' || !has(object.spec.volumes) || object.spec.volumes.all(v, {allowed})",
        "a pod may mount ConfigMaps, Secrets and volume claims of its own namespace, ephemeral, emptyDir, image and "
        "downward-API volumes and its service account token; other kinds (nfs, iscsi, csi, cloud disks, gitRepo, "
        "host certificates, ...) are mounted by the node with its own network access and credentials",
        "store data in a PersistentVolumeClaim of one of the team's storage classes (vcluster.storageClasses)")
    rule["messageExpression"] = (
        f"'[volume-sources] volumes [' + object.spec.volumes.filter(v, !{allowed}).map(v, v.name).join(', ') + "
        "'] are of kinds the node mounts with its own network access and credentials (nfs, iscsi, csi, cloud disks, "
        "gitRepo, host certificates, ...): a pod may mount ConfigMaps, Secrets and volume claims of its own "
        "namespace, ephemeral, emptyDir, image and downward-API volumes and its service account token; store data "
        "in a PersistentVolumeClaim of one of the team\\'s storage classes (vcluster.storageClasses)'")
    return [rule]
