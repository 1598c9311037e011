"""A pod mounts only its own namespace's objects and itself: the ``volume-sources`` rule, tested by attack.

vCluster 0.36.1 copies a virtual pod's volumes to the host as written, renaming only the objects they name in the
tenant's namespace (pods/translate/translator.go ``translateVolumes``). A hostile tenant's pod asks the kubelet of a
shared GPU node to mount storage from the node's own network address and credentials, or the host cluster's
certificates. Each pod is synced as vCluster does it (tests/vcluster_volumes.py), mutated by KAI's webhook and judged
by the team's host policy; inside the vCluster the shipped copy of the rule refuses it at create with the same
message. Honest pods, their service account token, ephemeral volumes and KAI's own volumes included, pass.
"""

from __future__ import annotations

import copy

import pytest

from tests.conftest import dev_config, eks_config
from tests.tenant_sim import KAI_SCHEDULER, Tenant, container, tenant_of, virtual_pod
from tests.test_admission_honest import mixed_config, mixed_run  # noqa: F401 (mixed_run is a fixture)
from tests.test_virtual_defaults import Inside

# What a tenant writes to mount storage the platform never gave it, each reached from the node.
NODE_MOUNTS = {
    # Any NFS or EFS export that trusts the node subnet, another team's included.
    "nfs": {"server": "fs-0a1b2c3d.efs.us-east-1.amazonaws.com", "path": "/team-vision"},
    "iscsi": {"targetPortal": "10.0.12.7:3260", "iqn": "iqn.2003-01.org.linux-iscsi:team-vision", "lun": 0,
              "chapAuthSession": True, "secretRef": {"name": "chap"}},
    "rbd": {"monitors": ["10.0.12.8:6789"], "image": "team-vision-data", "pool": "rbd", "user": "admin",
            "secretRef": {"name": "ceph"}},
    "cephfs": {"monitors": ["10.0.12.8:6789"], "path": "/", "user": "admin", "secretRef": {"name": "ceph"}},
    "glusterfs": {"endpoints": "gluster", "path": "team-vision"},
    "fc": {"targetWWNs": ["500a0982991b8dc5"], "lun": 2, "fsType": "ext4"},
    "flexVolume": {"driver": "example.com/lvm", "options": {"volumeID": "vg0/team-vision"}},
    # Inline CSI authenticates as the host pod's service account (vCluster's one workload account) or the node.
    "csi": {"driver": "efs.csi.aws.com", "volumeAttributes": {"fileSystemId": "fs-0a1b2c3d"}},
    # CSI migration hands the in-tree kinds to the installed driver, which attaches the volume ID it is given.
    "awsElasticBlockStore": {"volumeID": "vol-0f1e2d3c4b5a69788", "fsType": "ext4"},
    "gcePersistentDisk": {"pdName": "team-vision-data", "fsType": "ext4"},
    "azureDisk": {"diskName": "team-vision-data", "diskURI": "/subscriptions/0/resourceGroups/rg/providers/"
                                                             "Microsoft.Compute/disks/team-vision-data"},
    # git runs on the node, as root, with the repository's hooks.
    "gitRepo": {"repository": "https://git.example.com/payload.git", "directory": "."},
    "hostPath": {"path": "/", "type": "Directory"},
}
REFERENCES = ("secretRef", "endpoints")
# Projection sources the host fills from its own signers and trust bundles.
HOST_PROJECTIONS = {
    "podCertificate": {"signerName": "kubernetes.io/kube-apiserver-client-pod", "keyType": "ED25519",
                       "credentialBundlePath": "credentials.pem"},
    "clusterTrustBundle": {"signerName": "kubernetes.io/kube-apiserver-serving", "labelSelector": {},
                           "path": "ca.pem"},
}


def kube_api_access() -> dict:
    """The token volume the virtual API server's ServiceAccount admission adds to every pod."""
    return {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1",
                                                                      "fieldPath": "metadata.namespace"}}]}}]}}


def honest_volumes() -> list[dict]:
    return [
        {"name": "settings", "configMap": {"name": "settings"}},
        {"name": "hub-token", "secret": {"secretName": "hub-token", "defaultMode": 0o400}},
        {"name": "scratch", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"name": "weights", "persistentVolumeClaim": {"claimName": "weights", "readOnly": True}},
        {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}}}},
        {"name": "podinfo", "downwardAPI": {"items": [{"path": "labels",
                                                       "fieldRef": {"fieldPath": "metadata.labels"}}]}},
        {"name": "bundle", "projected": {"sources": [{"configMap": {"name": "settings"}},
                                                     {"secret": {"name": "hub-token"}}]}},
        kube_api_access(),
    ]


CONFIGS = {"dev": dev_config, "eks": eks_config, "mixed": mixed_config}


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal", "mixed:team-nlp"])
def tenant(request) -> Tenant:
    """A team at Pod Security baseline (dev, eks) or restricted (mixed team-nlp)."""
    stack, team = request.param.split(":")
    return tenant_of(request.getfixturevalue(f"{stack}_run"), CONFIGS[stack](), team)


@pytest.fixture(scope="module")
def privileged(mixed_run) -> Tenant:
    return tenant_of(mixed_run, mixed_config(), "team-vision")


def on_kai(tenant: Tenant, volumes: list[dict], **kwargs) -> dict:
    pod = virtual_pod(queue=tenant.team.queue_name, scheduler=KAI_SCHEDULER, volumes=volumes, **kwargs)
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": volume["name"], "mountPath": f"/mnt/{volume['name']}"}
                                                    for volume in volumes]
    return pod


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def refused_volumes(messages: list[str]) -> str:
    [message] = [message for message in messages if message.startswith("[volume-sources]")]
    return message[len("[volume-sources] volumes ["):message.index("]", len("[volume-sources]"))]


# --- what a hostile tenant mounts -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", NODE_MOUNTS)
@pytest.mark.parametrize("share", ["cpu", "fraction", "whole-gpu"])
def test_a_volume_the_node_mounts_for_the_pod_is_refused(tenant, kind, share):
    volumes = [{"name": "stolen", kind: NODE_MOUNTS[kind]}, *honest_volumes()]
    gpu = {"cpu": {}, "fraction": {"annotations": {"gpu-fraction": "0.5"}},
           "whole-gpu": {"containers": [container(gpus="1")]}}[share]
    pod = on_kai(tenant, volumes, **gpu)
    # vCluster copies the volume to the host as written, renaming only the Secret or Endpoints it names.
    synced = tenant.host_pod(pod)["spec"]["volumes"][0][kind]
    assert {key: value for key, value in synced.items() if key not in REFERENCES} == \
        {key: value for key, value in NODE_MOUNTS[kind].items() if key not in REFERENCES}
    messages = tenant.create(pod)
    assert rules(messages) == {"volume-sources"}
    # KAI's device-list volume on the fractional pod and the honest volumes are not named.
    assert refused_volumes(messages) == "stolen"


@pytest.mark.parametrize("kind", HOST_PROJECTIONS)
def test_a_projection_of_the_hosts_certificates_is_refused_even_beside_allowed_sources(tenant, kind):
    alone = {"name": "identity", "projected": {"sources": [{kind: HOST_PROJECTIONS[kind]}]}}
    mixed = {"name": "identity", "projected": {"sources": [{"configMap": {"name": "settings"}},
                                                           {kind: HOST_PROJECTIONS[kind]},
                                                           {"secret": {"name": "hub-token"}}]}}
    for volume in (alone, mixed):
        messages = tenant.create(on_kai(tenant, [volume, kube_api_access()], annotations={"gpu-fraction": "0.25"}))
        assert rules(messages) == {"volume-sources"} and refused_volumes(messages) == "identity"


@pytest.mark.parametrize("volume", [
    {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {
        "accessModes": ["ReadWriteOnce"], "storageClassName": "any-class-of-the-host",
        "resources": {"requests": {"storage": "1Ti"}}}}}},
    {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "token",
                                                                         "audience": "sts.amazonaws.com"}}]}},
], ids=["ephemeral", "service-account-token"])
def test_kinds_only_a_virtual_pod_carries_are_refused_on_the_host(tenant, volume):
    # The syncer rewrites both (a claim of the virtual cluster's, the virtual token in an annotation); on the host an
    # ephemeral volume would have the host's controller make a claim no claim rule saw, and a token projection
    # would be a token of the host's workload account.
    pod = on_kai(tenant, [volume])
    synced = tenant.host_pod(pod)
    assert tenant.create_host(synced) == []
    host = tenant.host_pod(pod, mutated=False)
    host["spec"]["volumes"] = [copy.deepcopy(volume)]
    assert rules(tenant.create_host(host)) == {"volume-sources"}


def test_a_privileged_team_gets_no_volume_rule(privileged):
    # Pod Security privileged already gives the tenant the node (hostPath, privileged containers, host network):
    # config/load.py warns, and the docs say the level is for teams trusted with the whole node.
    pods = [on_kai(privileged, [{"name": kind, kind: spec}]) for kind, spec in NODE_MOUNTS.items()]
    assert [privileged.create(pod) for pod in pods] == [[] for _ in pods]


# --- what honest pods mount ---------------------------------------------------------------------------------


@pytest.mark.parametrize("share", ["cpu", "fraction", "gpu-memory", "whole-gpu"])
def test_honest_volumes_are_admitted_as_synced(tenant, share):
    gpu = {"cpu": {}, "fraction": {"annotations": {"gpu-fraction": "0.5"}},
           "gpu-memory": {"annotations": {"gpu-memory": "4096"}},
           "whole-gpu": {"containers": [container(gpus="1")]}}[share]
    pod = on_kai(tenant, honest_volumes(), **gpu)
    host = tenant.host_pod(pod)
    kinds = [next(key for key in volume if key != "name") for volume in host["spec"]["volumes"]]
    assert kinds[:8] == ["configMap", "secret", "emptyDir", "persistentVolumeClaim", "persistentVolumeClaim",
                         "downwardAPI", "projected", "projected"]
    assert tenant.create(pod) == []


def test_inside_the_vcluster_the_same_rule_admits_what_the_syncer_rewrites(dev_run, eks_run):
    for program, config, team in ((dev_run, dev_config(), "team-nlp"), (eks_run, eks_config(), "team-legal")):
        inside = Inside(tenant_of(program, config, team))
        honest = on_kai(inside.tenant, honest_volumes(), namespace="ml")
        mutated, refused = inside.create(honest)
        assert refused == [] and inside.tenant.create(mutated) == []


@pytest.mark.parametrize("volume", [{"name": "stolen", "nfs": NODE_MOUNTS["nfs"]},
                                    {"name": "stolen", "csi": NODE_MOUNTS["csi"]},
                                    {"name": "stolen", "projected": {"sources": [
                                        {"serviceAccountToken": {"path": "token"}},
                                        {"podCertificate": HOST_PROJECTIONS["podCertificate"]}]}}],
                         ids=["nfs", "csi", "pod-certificate-beside-a-token"])
def test_inside_the_vcluster_a_node_mount_is_refused_at_create_with_the_hosts_message(dev_run, volume):
    inside = Inside(tenant_of(dev_run, dev_config(), "team-nlp"))
    pod = on_kai(inside.tenant, [volume, kube_api_access()])
    mutated, refused = inside.create(pod)
    host = inside.tenant.create(mutated)
    assert rules(refused) == {"volume-sources"} and refused_volumes(refused) == "stolen"
    assert refused == host
