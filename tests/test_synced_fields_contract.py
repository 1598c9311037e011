"""Every field of the objects vCluster writes on the host besides pods, classified at every accepted vCluster tag.

vCluster decodes a tenant's Service, claim, Endpoints, EndpointSlice, ConfigMap and Secret into the Kubernetes Go
types it vendors (``vendor/k8s.io/api`` at each tag) and writes the host object from them (``translate.HostMetadata``
copies the whole object; tests/synced_objects_sim.py): a field those types lack never reaches the host, and every
field they have may. So the vendored types list what a tenant can write on the host. Each field is classified here:
refused by a rule of the synced-objects policy (components/synced_objects_admission.py), with the host object an
attacker sends through it, which the rule must refuse; or harmless, with the reason, and set all at once on an
honest object the policy must admit. A vCluster release whose Kubernetes types add a field fails here until someone
classifies it. Object metadata is tests/test_synced_metadata_contract.py's; the values of ``Service.spec.type``
and ``Secret.type`` are read from the same types and classified too.
"""

from __future__ import annotations

import base64
import copy
import re
from typing import Callable, NamedTuple

import pytest

from config.tenant_budget import MEBIBYTE
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, git, mirrored_tag
from tests.synced_objects_sim import host_metadata, sync_claim, sync_endpoint_slice, sync_endpoints
from tests.test_synced_objects_admission import (  # noqa: F401 (fixtures)
    Synced, allowing, claim, created, defaulted, endpoint_slice, endpoints, legal, nlp, rules, service,
)
from tests.test_volume_sources_contract import go_structs
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"
TYPES = {"core": "vendor/k8s.io/api/core/v1/types.go", "discovery": "vendor/k8s.io/api/discovery/v1/types.go"}
KINDS = {"Service": "core", "PersistentVolumeClaim": "core", "Endpoints": "core", "ConfigMap": "core",
         "Secret": "core", "EndpointSlice": "discovery"}


class Refused(NamedTuple):
    rule: str
    # The team (with what its config must allow for the attack to get that far) and the host object vCluster writes.
    attack: Callable[[Synced], tuple[Synced, dict]]


def _balancer(tenant: Synced, **spec) -> tuple[Synced, dict]:
    """A LoadBalancer Service of a team given one load balancer and no node ports, with ``spec`` on top."""
    team = allowing(tenant, load_balancers=1)
    return team, created(team, service(type="LoadBalancer", **{"allocateLoadBalancerNodePorts": False, **spec}))


def _claim(**spec) -> Callable[[Synced], tuple[Synced, dict]]:
    return lambda tenant: (tenant, defaulted(tenant, sync_claim(claim(**spec), tenant.team)))


def _not_ready(ip: str) -> dict:
    attack = endpoints("203.0.113.10")
    attack["subsets"][0]["notReadyAddresses"] = [{"ip": ip}]
    return attack


_MEBIBYTE_BASE64 = base64.b64encode(b"\0" * MEBIBYTE).decode()


def _oversized(tenant: Synced, kind: str, field: str, value: str) -> dict:
    """A ConfigMap or Secret holding 1 MiB, what the API server takes: past every cap the config allows."""
    return host_metadata({"apiVersion": "v1", "kind": kind, "metadata": {"name": "blob", "namespace": "default"},
                          field: {"blob": value}}, tenant.team)


STATUS = ("the API server drops it on create and keeps the stored one on update; the syncer is not granted the "
          "status subresource (tests/test_synced_kinds_contract.py)")
OWN_ENDPOINTS = "how the tenant's own Service picks among its own endpoints"
NODE_NAME = "which node kube-proxy counts the endpoint local to, for the tenant's own Service's traffic policies"
TARGET_REF = ("vCluster renames a pod reference into the tenant's namespace (endpoints/translate.go, "
              "endpointslices/translate.go); kube-proxy and DNS do not read it")
PORTS = "the tenant's own Service's ports; its pods or the addresses its endpoints may name serve them"
HOSTNAME = "a DNS name under the tenant's own headless Service"
DNS_ADDRESS = {"clusterIP": MOCK_CLUSTER_DNS, "clusterIPs": [MOCK_CLUSTER_DNS]}

FIELDS: dict[str, dict[str, object]] = {
    "Service": {
        "spec.ports.name": PORTS, "spec.ports.protocol": PORTS, "spec.ports.appProtocol": PORTS,
        "spec.ports.port": PORTS, "spec.ports.targetPort": PORTS,
        "spec.ports.nodePort": Refused("service-node-ports", lambda t: _balancer(t, ports=[
            {"port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}])),
        "spec.selector": "vCluster adds its managed-by and namespace labels (translate.HostLabelsMap), so it selects "
                         "only the tenant's own synced pods of that virtual namespace; a Service reaches a pod only "
                         "where the NetworkPolicy lets its clients reach the pod's own address",
        "spec.clusterIP": Refused("service-cluster-ip", lambda t: (t, created(t, service(**DNS_ADDRESS)))),
        "spec.clusterIPs": Refused("service-cluster-ip", lambda t: (t, created(t, service(**DNS_ADDRESS)))),
        "spec.type": Refused("service-type", lambda t: (t, created(t, service(type="NodePort")))),
        "spec.externalIPs": Refused("service-external-ips", lambda t: (t, created(t, service(externalIPs=["1.1.1.1"])))),
        "spec.sessionAffinity": OWN_ENDPOINTS,
        "spec.sessionAffinityConfig": OWN_ENDPOINTS,
        "spec.loadBalancerIP": Refused("service-load-balancer-ip", lambda t: _balancer(t, loadBalancerIP="52.1.2.3")),
        "spec.loadBalancerSourceRanges": "narrows who reaches the tenant's own load balancer",
        "spec.externalName": Refused("service-type", lambda t: (t, created(t, service(
            type="ExternalName", externalName="metadata.google.internal")))),
        "spec.externalTrafficPolicy": "which of the tenant's own pods its load balancer reaches; Local adds a health "
                                      "check node port (service-node-ports)",
        "spec.healthCheckNodePort": Refused("service-node-ports", lambda t: _balancer(
            t, externalTrafficPolicy="Local", healthCheckNodePort=31999)),
        "spec.publishNotReadyAddresses": OWN_ENDPOINTS,
        "spec.ipFamilies": "the address family of the tenant's own cluster IPs; endpoints name IPv4 addresses only "
                           "(endpoint-addresses)",
        "spec.ipFamilyPolicy": "the address families of the tenant's own cluster IPs",
        "spec.allocateLoadBalancerNodePorts": Refused("service-node-ports", lambda t: _balancer(
            t, allocateLoadBalancerNodePorts=True)),
        "spec.loadBalancerClass": Refused("service-load-balancer-class", lambda t: _balancer(
            t, loadBalancerClass="service.k8s.aws/nlb")),
        "spec.internalTrafficPolicy": OWN_ENDPOINTS,
        "spec.trafficDistribution": OWN_ENDPOINTS,
        "status": STATUS,
    },
    "PersistentVolumeClaim": {
        "spec.accessModes": "how the tenant's own volume may be mounted",
        "spec.selector": Refused("claim-volume", _claim(selector={"matchLabels": {"team": "vision"}})),
        "spec.resources": "the size of the tenant's own volume, counted by the quota's requests.storage",
        "spec.volumeName": Refused("claim-volume", _claim(volumeName="pvc-0d5e-of-team-vision")),
        "spec.storageClassName": Refused("claim-storage-class", _claim(storageClassName="premium-io2")),
        "spec.volumeMode": "Block hands the tenant's pods their own volume as a device",
        "spec.dataSource": Refused("claim-data-source", _claim(dataSource={
            "kind": "VolumeSnapshot", "apiGroup": "snapshot.storage.k8s.io", "name": "nightly"})),
        "spec.dataSourceRef": Refused("claim-data-source", _claim(dataSourceRef={
            "kind": "PersistentVolumeClaim", "name": "weights", "namespace": "team-vision"})),
        "spec.volumeAttributesClassName": Refused("claim-volume-attributes-class",
                                                  _claim(volumeAttributesClassName="io2-64k-iops")),
        "status": STATUS,
    },
    "Endpoints": {
        "subsets.addresses.ip": Refused("endpoint-addresses", lambda t: (t, sync_endpoints(
            endpoints("10.1.23.4"), t.team))),
        "subsets.addresses.hostname": HOSTNAME,
        "subsets.addresses.nodeName": NODE_NAME,
        "subsets.addresses.targetRef": TARGET_REF,
        "subsets.notReadyAddresses.ip": Refused("endpoint-addresses", lambda t: (t, sync_endpoints(
            _not_ready("169.254.169.254"), t.team))),
        "subsets.notReadyAddresses.hostname": HOSTNAME,
        "subsets.notReadyAddresses.nodeName": NODE_NAME,
        "subsets.notReadyAddresses.targetRef": TARGET_REF,
        "subsets.ports": PORTS,
    },
    "EndpointSlice": {
        "addressType": Refused("endpoint-addresses", lambda t: (t, sync_endpoint_slice(
            endpoint_slice("db.example.com", address_type="FQDN"), t.team))),
        "endpoints.addresses": Refused("endpoint-addresses", lambda t: (t, sync_endpoint_slice(
            endpoint_slice("172.20.0.1"), t.team))),
        "endpoints.conditions": OWN_ENDPOINTS,
        "endpoints.hostname": HOSTNAME,
        "endpoints.targetRef": TARGET_REF,
        # Not read by kube-proxy or DNS, and wiped by the v1 API before admission (kubernetes/kubernetes
        # pkg/registry/discovery/endpointslice/strategy.go dropTopologyOnV1, read untagged: not mirrored), so what
        # reaches the policy is refused: 16 labels an endpoint would be 6 KiB the datastore's sum does not count.
        "endpoints.deprecatedTopology": Refused("endpoint-text", lambda t: (t, sync_endpoint_slice(
            {**endpoint_slice(), "endpoints": [{"addresses": ["203.0.113.10"],
                                                "deprecatedTopology": {"example.com/rack": "r1"}}]}, t.team))),
        "endpoints.nodeName": NODE_NAME,
        "endpoints.zone": OWN_ENDPOINTS,
        "endpoints.hints": OWN_ENDPOINTS,
        "ports": PORTS,
    },
    "ConfigMap": {
        "immutable": "only whether the tenant's own object may change",
        # Read by the tenant's own pods only, but stored in the host's etcd: its size is bounded.
        "data": Refused("object-size", lambda t: (t, _oversized(t, "ConfigMap", "data", "x" * MEBIBYTE))),
        "binaryData": Refused("object-size",
                              lambda t: (t, _oversized(t, "ConfigMap", "binaryData", _MEBIBYTE_BASE64))),
    },
    "Secret": {
        "immutable": "only whether the tenant's own object may change",
        "data": Refused("object-size", lambda t: (t, _oversized(t, "Secret", "data", _MEBIBYTE_BASE64))),
        "stringData": "the API server merges it into data before admission runs, where object-size measures it",
        # Not what the syncer writes (it makes a token Secret's host copy Opaque, sync_secret): a guard against
        # another host-side writer, or a future syncer that keeps the type.
        "type": Refused("service-account-token", lambda t: (t, host_metadata({
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "t", "namespace": "default",
                         "annotations": {"kubernetes.io/service-account.name": "default"}}}, t.team))),
    },
}

# Secret types (the SecretType constants) and what the host does with a Secret of each in the tenant's namespace
# (a token Secret from another writer than the syncer, which writes its copy Opaque).
SECRET_TYPES = {
    "kubernetes.io/service-account-token": "service-account-token",
    "Opaque": "nothing",
    "kubernetes.io/dockercfg": "the kubelet pulls the tenant's own pods' images with it",
    "kubernetes.io/dockerconfigjson": "the kubelet pulls the tenant's own pods' images with it",
    "kubernetes.io/basic-auth": "nothing: a data format",
    "kubernetes.io/ssh-auth": "nothing: a data format",
    "kubernetes.io/tls": "nothing: a data format",
    "bootstrap.kubernetes.io/token": "nothing: the bootstrap token authenticator reads kube-system's only",
}
# Service types (the ServiceType constants): ClusterIP is every team's; the others are refused unless the config
# gives the team node ports or load balancers (ExternalName always).
SERVICE_TYPES = ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")


def field_paths(structs: dict, struct: str, prefix: str = "") -> dict[str, bool]:
    """Every JSON path of ``struct``, each with whether it is a leaf (no struct of the same file under it)."""
    paths = {}
    for json_name, kind in structs[struct].values():
        if not json_name:
            paths.update(field_paths(structs, kind, prefix))
            continue
        path = prefix + json_name
        paths[path] = kind not in structs
        if kind in structs:
            paths.update(field_paths(structs, kind, path + "."))
    return paths


def unclassified(paths: dict[str, bool], classified: dict) -> set[str]:
    """Leaf paths no classified path covers (itself or one of its parents)."""
    def covered(path: str) -> bool:
        parts = path.split(".")
        return any(".".join(parts[:end]) in classified for end in range(1, len(parts) + 1))
    return {path for path, leaf in paths.items() if leaf and not covered(path)}


def vendored(tag: str, api: str) -> str:
    return git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{TYPES[api]}")


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_field_vcluster_can_copy_to_the_host_is_classified(tag, kind):
    structs = go_structs(vendored(tag, KINDS[kind]))
    paths = field_paths(structs, kind)
    assert unclassified(paths, FIELDS[kind]) == set(), f"classify these {kind} fields in FIELDS"
    # Nothing classified that the types no longer have (the object metadata aside).
    assert set(FIELDS[kind]) - set(paths) == set()


def test_an_unclassified_field_would_show():
    """The walk finds a field a newer Kubernetes adds under a struct already classified field by field."""
    structs = go_structs(vendored(ACCEPTED_VCLUSTER_TAGS[-1], "core"))
    structs["ServicePort"] = {**structs["ServicePort"], "HostPort": ("hostPort", "int32")}
    assert unclassified(field_paths(structs, "Service"), FIELDS["Service"]) == {"spec.ports.hostPort"}


REFUSED = [(kind, path) for kind, fields in FIELDS.items() for path, how in fields.items() if isinstance(how, Refused)]


@pytest.mark.parametrize("kind, path", REFUSED, ids=[f"{kind}.{path}" for kind, path in REFUSED])
def test_each_refused_field_is_refused_by_its_rule(nlp, legal, kind, path):
    how = FIELDS[kind][path]
    for tenant in (nlp, legal):
        team, host = how.attack(tenant)
        assert host["kind"] == kind
        assert how.rule in rules(team.create(host)), (tenant.team.name, path)


def _set_paths(obj, prefix: str = "") -> set[str]:
    """The JSON paths an object sets (lists looked into)."""
    found = set()
    items = obj.items() if isinstance(obj, dict) else ()
    for key, value in items:
        found.add(prefix + key)
        for element in (value if isinstance(value, list) else [value]):
            if isinstance(element, dict):
                found |= _set_paths(element, f"{prefix}{key}.")
    return found


def _harmless(kind: str) -> set[str]:
    return {path for path, how in FIELDS[kind].items() if isinstance(how, str) and path != "status"}


def honest_objects(tenant: Synced) -> dict[str, tuple[Synced, dict]]:
    """Per kind, an honest host object setting every field classified harmless (a team with a load balancer for the
    Service), as vCluster writes it and the host completes it."""
    team = allowing(tenant, load_balancers=1)
    web = created(team, service(
        "web", selector={"app": "web"}, type="LoadBalancer", allocateLoadBalancerNodePorts=False,
        ports=[{"name": "http", "protocol": "TCP", "appProtocol": "http", "port": 80, "targetPort": 8080}],
        sessionAffinity="ClientIP", sessionAffinityConfig={"clientIP": {"timeoutSeconds": 600}},
        loadBalancerSourceRanges=["203.0.113.0/24"], externalTrafficPolicy="Cluster", publishNotReadyAddresses=True,
        ipFamilies=["IPv4"], ipFamilyPolicy="SingleStack", internalTrafficPolicy="Local",
        trafficDistribution="PreferClose"))
    volume = defaulted(tenant, sync_claim(claim(
        accessModes=["ReadWriteOncePod"], volumeMode="Block",
        resources={"requests": {"storage": "10Gi"}, "limits": {"storage": "10Gi"}}), tenant.team))
    address = {"ip": "203.0.113.10", "hostname": "db-0", "nodeName": "gpu-node-1",
               "targetRef": {"kind": "Pod", "name": "db-0", "namespace": "default"}}
    database = endpoints()
    database["subsets"] = [{"addresses": [address], "notReadyAddresses": [{**address, "ip": "203.0.113.11"}],
                            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP", "appProtocol": "postgresql"}]}]
    piece = endpoint_slice("203.0.113.10")
    piece["endpoints"][0].update(conditions={"ready": True, "serving": True, "terminating": False},
                                 hostname="db-0", targetRef={"kind": "Pod", "name": "db-0", "namespace": "default"},
                                 nodeName="gpu-node-1", zone="a", hints={"forZones": [{"name": "a"}]})
    metadata = {"name": "settings", "namespace": "default"}
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "immutable": True,
                  "data": {"a": "b"}, "binaryData": {"c": "ZA=="}}
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "immutable": True, "type": "Opaque",
              "data": {"a": "Yg=="}, "stringData": {"c": "d"}}
    return {"Service": (team, web), "PersistentVolumeClaim": (tenant, volume),
            "Endpoints": (tenant, sync_endpoints(database, tenant.team)),
            "EndpointSlice": (tenant, sync_endpoint_slice(piece, tenant.team)),
            "ConfigMap": (tenant, host_metadata(config_map, tenant.team)),
            "Secret": (tenant, host_metadata(secret, tenant.team))}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_an_honest_object_setting_every_harmless_field_is_admitted(nlp, legal, kind):
    for tenant in (nlp, legal):
        team, host = honest_objects(tenant)[kind]
        assert _harmless(kind) <= _set_paths(host), _harmless(kind) - _set_paths(host)
        assert team.create(host) == [], (tenant.team.name, kind)


def _constants(types: str, go_type: str) -> set[str]:
    return set(re.findall(rf"^\t\w+\s+{go_type}\s*=\s*\"([^\"]+)\"", types, re.MULTILINE))


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_every_service_and_secret_type_is_classified(tag):
    types = vendored(tag, "core")
    assert _constants(types, "SecretType") == set(SECRET_TYPES)
    assert _constants(types, "ServiceType") == set(SERVICE_TYPES)


@pytest.mark.parametrize("secret_type", sorted(SECRET_TYPES))
def test_secrets_of_each_type_are_refused_or_admitted_as_classified(nlp, secret_type):
    secret = host_metadata({"apiVersion": "v1", "kind": "Secret", "type": secret_type,
                            "metadata": {"name": "s", "namespace": "default"}}, nlp.team)
    refused = SECRET_TYPES[secret_type] == "service-account-token"
    assert rules(nlp.create(secret)) == ({"service-account-token"} if refused else set())


@pytest.mark.parametrize("service_type", SERVICE_TYPES)
def test_only_cluster_ip_services_pass_for_a_team_given_no_node_ports_or_load_balancers(nlp, legal, service_type):
    extra = {"externalName": "db.example.com"} if service_type == "ExternalName" else {}
    for tenant in (nlp, legal):
        refused = rules(tenant.create(created(tenant, service(type=service_type, **extra))))
        assert ("service-type" in refused) == (service_type != "ClusterIP")


# --- the node a claim's volume is provisioned on -------------------------------------------------------------------

SELECTED_NODE = ("volume.kubernetes.io/selected-node", "volume.alpha.kubernetes.io/selected-node")


@pytest.mark.parametrize("key", SELECTED_NODE)
def test_a_claim_may_not_pick_the_node_its_volume_is_provisioned_on(nlp, legal, key):
    """The PV controller provisions a claim that carries the annotation at once, and the provisioner puts the volume
    on (or in the topology of) the node it names: a node of another team's pool, its local disks included.
    vCluster copies a claim's annotations on create and on every update."""
    for tenant in (nlp, legal):
        honest = defaulted(tenant, sync_claim(claim(), tenant.team))
        attack = defaulted(tenant, sync_claim(claim(annotations={key: "gpu-node-of-team-vision"}), tenant.team))
        assert attack["metadata"]["annotations"][key] == "gpu-node-of-team-vision"
        assert rules(tenant.create(attack)) == {"claim-selected-node"}
        # Added to a claim still waiting for its first pod, or moved once the scheduler chose.
        assert rules(tenant.update(honest, attack)) == {"claim-selected-node"}
        scheduled = copy.deepcopy(honest)
        scheduled["metadata"]["annotations"][key] = "gpu-node-1"
        assert rules(tenant.update(scheduled, attack)) == {"claim-selected-node"}


def test_the_schedulers_choice_passes_through_the_syncers_updates(nlp, legal):
    """The host scheduler writes the annotation on the host claim itself; the syncer copies it back into the virtual
    claim and carries it unchanged on its later updates (a larger size), or drops it after the provisioner does."""
    for tenant in (nlp, legal):
        scheduled = defaulted(tenant, sync_claim(claim(), tenant.team))
        scheduled["metadata"]["annotations"][SELECTED_NODE[0]] = "gpu-node-1"
        grown = copy.deepcopy(scheduled)
        grown["spec"]["resources"]["requests"]["storage"] = "2Gi"
        assert tenant.update(scheduled, grown) == []
        dropped = copy.deepcopy(scheduled)
        del dropped["metadata"]["annotations"][SELECTED_NODE[0]]
        assert tenant.update(scheduled, dropped) == []
