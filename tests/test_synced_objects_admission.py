"""The synced-objects boundary (components/synced_objects_admission.py), tested by attack.

Each test writes the Service, claim, endpoints, ConfigMap or Secret a hostile tenant (cluster-admin in its
vCluster) would create, turns it into the host object vCluster 0.36.1's syncer writes
(tests/synced_objects_sim.py), and evaluates the policy the program renders with cel-python. Every attack
is refused with a message naming its rule; what honest tenants write is admitted. The attacks by volume claim:
tests/test_synced_claims_admission.py. A few attacks send what vCluster's syncer never writes (their docstrings
say so, from tests/test_vcluster_objects_real.py running the real syncers): those rules guard against a host-side
writer other than the syncer in the team's namespace, or a future syncer that copies more.
"""

from __future__ import annotations

import copy
import dataclasses
import ipaddress
import re

import pytest
from hypothesis import given, strategies as st

from components.synced_objects_admission import CANONICAL_IPV4, NON_PUBLIC_IPV4, ipv4_pattern, policy_spec
from components.tenant import vcluster_values
from config.hosts import TENANT_EGRESS_EXCEPTIONS
from config.model import TenantServices
from tools.offline.mocks import MOCK_CLUSTER_DNS
from tests.conftest import dev_config, eks_config, security_model_text
from tests.served_objects import as_served
from tests.synced_objects_sim import (
    SyncedObjectsAdmission, allocated, create_service, host_metadata, host_name, sync_claim, sync_endpoint_slice,
    sync_endpoints, sync_service, synced_objects_admission_for,
)
from tests.tenant_sim import platform_of

class Synced:
    """One team's synced objects as its syncer writes them, reviewed by the policy."""

    def __init__(self, admission: SyncedObjectsAdmission, team):
        self.admission, self.team = admission, team
        self.syncer = f"system:serviceaccount:{team.namespace}:vc-{team.vcluster_name}"

    def create(self, host: dict, *, user=None) -> list[str]:
        return self.admission.review(self.team.namespace, host, user=user or self.syncer)

    def update(self, old: dict, new: dict, *, subresource: str = "") -> list[str]:
        return self.admission.review(self.team.namespace, new, operation="UPDATE", old=old, user=self.syncer,
                                     subresource=subresource)


def team_of(config: dict, name: str):
    return next(t for t in platform_of(config).teams if t.name == name)


@pytest.fixture(scope="module")
def nlp(dev_run) -> Synced:
    return Synced(synced_objects_admission_for(dev_run, "team-nlp"), team_of(dev_config(), "team-nlp"))


@pytest.fixture(scope="module")
def legal(eks_run) -> Synced:
    return Synced(synced_objects_admission_for(eks_run, "team-legal"), team_of(eks_config(), "team-legal"))


def allowing(tenant: Synced, **services) -> Synced:
    """The same team with its services settings (node ports, load balancers, their keys) changed as its config
    would change them: the settings not named, the host's default load-balancer keys among them, kept."""
    team = dataclasses.replace(tenant.team, vcluster=dataclasses.replace(
        tenant.team.vcluster, services=dataclasses.replace(tenant.team.vcluster.services, **services)))
    spec = policy_spec(team, MOCK_CLUSTER_DNS, ())
    return Synced(SyncedObjectsAdmission(spec, tenant.admission.binding), team)


def rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def service(name: str = "web", *, selector=None, **spec) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}],
                     **({"selector": selector} if selector is not None else {}), **spec}}


# An address the host's allocator could give (the offline runs' host DNS is 10.96.0.10).
ALLOCATED_IP = "10.96.143.7"


def created(tenant: Synced, virtual: dict) -> dict:
    """The host Service a tenant's CREATE gives, as the host's validating admission sees it: built by vCluster's
    API proxy, then completed by the host's allocator."""
    return allocated(create_service(virtual, tenant.team), ALLOCATED_IP)


def claim(name: str = "data", *, annotations=None, **spec) -> dict:
    metadata = {"name": name, "namespace": "default", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": metadata,
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}, **spec}}


def defaulted(tenant: Synced, host_claim: dict) -> dict:
    """The host API server's DefaultStorageClass admission names the default class before validation; the claim as
    the API server hands it to admission (``as_served``)."""
    result = as_served("PersistentVolumeClaim", host_claim)
    result["spec"].setdefault("storageClassName", tenant.team.vcluster.storage_class)
    return result


def endpoints(*ips: str) -> dict:
    return {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "db", "namespace": "default"},
            "subsets": [{"addresses": [{"ip": ip} for ip in ips], "ports": [{"port": 5432}]}]}


def endpoint_slice(*ips: str, address_type: str = "IPv4") -> dict:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": address_type,
            "metadata": {"name": "db-1", "namespace": "default", "labels": {"kubernetes.io/service-name": "db"}},
            "endpoints": [{"addresses": [ip]} for ip in ips], "ports": [{"port": 5432}]}


# --- honest objects are admitted -------------------------------------------------------------


@pytest.mark.parametrize("spec", [{}, {"clusterIP": "None"}, {"type": "ClusterIP", "sessionAffinity": "ClientIP"}],
                         ids=["cluster-ip", "headless", "explicit-cluster-ip"])
def test_cluster_ip_and_headless_services_are_admitted(nlp, legal, spec):
    for tenant in (nlp, legal):
        host = created(tenant, service(selector={"app": "web"}, **spec))
        assert host["spec"]["clusterIP"] == spec.get("clusterIP", ALLOCATED_IP)
        assert host["metadata"]["annotations"]["vcluster.loft.sh/block-deletion"] == "true"
        assert tenant.create(host) == []
        # The syncer's later updates carry the address the host gave; it drops block-deletion (services/syncer.go).
        synced = copy.deepcopy(host)
        del synced["metadata"]["annotations"]["vcluster.loft.sh/block-deletion"]
        synced["spec"]["sessionAffinity"] = "None"
        assert tenant.update(host, synced) == []
        # The syncer re-creates a host Service that went missing through its own translate.
        assert tenant.create(allocated(sync_service(service(selector={"app": "web"}, **spec), tenant.team),
                                       ALLOCATED_IP)) == []


def test_a_claim_of_the_default_class_and_a_clone_of_its_own_claim_are_admitted(nlp, legal):
    for tenant in (nlp, legal):
        host = defaulted(tenant, sync_claim(claim(), tenant.team))
        assert tenant.create(host) == []
        bound = copy.deepcopy(host)
        bound["spec"]["volumeName"] = "pvc-3f1c"  # written by the host's PV controller, re-sent by the syncer
        assert tenant.update(bound, bound) == []
        clone = sync_claim(claim("copy", dataSource={"kind": "PersistentVolumeClaim", "name": "data"}), tenant.team)
        assert clone["spec"]["dataSource"]["name"] == host_name("data", "default", tenant.team)
        assert tenant.create(defaulted(tenant, clone)) == []


def test_selector_less_services_may_point_at_public_addresses(nlp):
    assert nlp.create(sync_endpoints(endpoints("203.0.113.10", "8.8.8.8"), nlp.team)) == []
    assert nlp.create(sync_endpoint_slice(endpoint_slice("203.0.113.10"), nlp.team)) == []


def test_plain_configmaps_and_secrets_are_admitted(nlp):
    for kind, extra in (("ConfigMap", {"data": {"a": "b"}}), ("Secret", {"type": "Opaque"}),
                        ("Secret", {"type": "kubernetes.io/dockerconfigjson"})):
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "default",
                                                              "labels": {"app": "web"}}, **extra}
        assert nlp.create(host_metadata(obj, nlp.team)) == []


def test_the_control_planes_own_objects_are_not_matched(nlp):
    """vCluster writes its kubeconfig Secret and its service-CIDR probe itself, without the managed-by label."""
    kubeconfig = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": f"vc-{nlp.team.vcluster_name}", "namespace": nlp.team.namespace}}
    probe = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "test-service-delete-me-abcde",
                                                                 "namespace": nlp.team.namespace},
             "spec": {"ports": [{"port": 80}], "clusterIP": "4.4.4.4"}}
    for obj in (kubeconfig, probe):
        assert not nlp.admission.matches(nlp.team.namespace, obj, user=nlp.syncer)
    # Another identity writing a synced object (the host's controllers) is not the tenant.
    assert not nlp.admission.matches(nlp.team.namespace, created(nlp, service(externalIPs=["1.2.3.4"])),
                                     user="system:serviceaccount:kube-system:endpoint-controller")


# --- Services ---------------------------------------------------------------------------------


def test_external_ips_are_refused_on_create_and_update(nlp, legal):
    for tenant in (nlp, legal):
        attack = created(tenant, service(selector={"app": "web"}, externalIPs=["10.0.0.10", "1.1.1.1"]))
        assert rules(tenant.create(attack)) == {"service-external-ips"}
        honest = created(tenant, service(selector={"app": "web"}))
        assert rules(tenant.update(honest, attack)) == {"service-external-ips"}


@pytest.mark.parametrize("spec", [
    {"clusterIP": MOCK_CLUSTER_DNS}, {"clusterIP": MOCK_CLUSTER_DNS, "clusterIPs": [MOCK_CLUSTER_DNS]},
    {"clusterIP": MOCK_CLUSTER_DNS, "clusterIPs": [MOCK_CLUSTER_DNS], "ipFamilies": ["IPv4"],
     "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None"},
], ids=["cluster-ip", "cluster-ips", "as-kubectl-get-prints-it"])
def test_a_service_may_not_take_the_host_dns_address(nlp, legal, spec):
    """vCluster's API proxy keeps the tenant's clusterIP: a selector-less Service on the host DNS's address, with
    Endpoints to the tenant's resolver, would answer every pod's lookups once that address is free."""
    for tenant in (nlp, legal):
        dns = service("dns", ports=[{"name": "dns", "port": 53, "protocol": "UDP"}], **spec)
        host = created(tenant, dns)
        assert host["spec"]["clusterIP"] == MOCK_CLUSTER_DNS
        assert rules(tenant.create(host)) == {"service-cluster-ip"}
        assert rules(tenant.update(host, host)) == {"service-cluster-ip"}


def _spellings(address: str) -> list[str]:
    """The address as API servers without strict IP validation also take it, and kube-proxy routes it."""
    octets = [int(octet) for octet in address.split(".")]
    return [".".join(f"{octet:03d}" for octet in octets), ".".join(map(str, octets[:3])) + f".0{octets[3]}",
            f"::ffff:{address}", f"::FFFF:{address}", f"0:0:0:0:0:ffff:{address}",
            "::ffff:{:x}:{:x}".format(octets[0] << 8 | octets[1], octets[2] << 8 | octets[3]),
            "0::ffff:{:x}:{:x}".format(octets[0] << 8 | octets[1], octets[2] << 8 | octets[3]),
            "::FFFF:{:X}:{:X}".format(octets[0] << 8 | octets[1], octets[2] << 8 | octets[3])]


def test_the_host_dns_address_in_another_spelling_is_refused(nlp, legal):
    for tenant in (nlp, legal):
        for spelling in _spellings(MOCK_CLUSTER_DNS):
            dns = service("dns", ports=[{"name": "dns", "port": 53, "protocol": "UDP"}],
                          clusterIP=spelling, clusterIPs=[spelling])
            host = created(tenant, dns)
            assert rules(tenant.create(host)) == {"service-cluster-ip"}, spelling
            honest = created(tenant, service("dns", ports=[{"name": "dns", "port": 53, "protocol": "UDP"}]))
            assert rules(tenant.update(honest, host)) == {"service-cluster-ip"}, spelling


@pytest.mark.parametrize("spec", [{}, {"clusterIP": "None"}, {"clusterIP": "10.152.183.77"},
                                  {"clusterIP": "10.152.183.77", "clusterIPs": ["10.152.183.77"]}],
                         ids=["allocated", "headless", "chosen", "chosen-both"])
def test_a_service_with_an_address_written_as_the_host_writes_it_is_admitted(nlp, legal, spec):
    for tenant in (nlp, legal):
        host = created(tenant, service(selector={"app": "web"}, **spec))
        assert tenant.create(host) == [] and tenant.update(host, host) == []


def test_an_ipv6_address_as_a_dual_stack_host_allocates_it_is_admitted(nlp):
    """On a dual-stack host the Service's IPv6 address is allocated before admission runs, printed as Go prints it."""
    dual = created(nlp, service(selector={"app": "web"}, clusterIP="10.152.183.77",
                                clusterIPs=["10.152.183.77", "fd00:10:96::4d"], ipFamilyPolicy="PreferDualStack"))
    assert nlp.create(dual) == [] and nlp.update(dual, dual) == []


@pytest.mark.parametrize("kind, extra", [
    ("NodePort", {}), ("LoadBalancer", {"allocateLoadBalancerNodePorts": False}),
    ("ExternalName", {"externalName": "metadata.google.internal"}),
])
def test_node_port_load_balancer_and_external_name_services_are_refused_by_default(nlp, legal, kind, extra):
    for tenant in (nlp, legal):
        assert "service-type" in rules(tenant.create(created(tenant, service(type=kind, **extra))))


def test_a_tenant_chosen_node_port_is_refused_on_create_and_update(nlp, legal):
    """vCluster's API proxy creates the host Service with the tenant's node ports, and the syncer copies them on
    update (services/syncer.go). allocateLoadBalancerNodePorts reaches the host on create only: Sync keeps the host
    copy's, so the update turning it on is not one the syncer writes; refusing it guards against another host-side
    writer, or a future syncer that copies the field."""
    for tenant in (nlp, legal):
        lb = allowing(tenant, load_balancers=1)
        honest = created(lb, service(type="LoadBalancer", allocateLoadBalancerNodePorts=False))
        assert lb.create(honest) == []
        chosen = copy.deepcopy(honest)
        chosen["spec"]["ports"][0]["nodePort"] = 30080
        assert rules(lb.update(honest, chosen)) == {"service-node-ports"}
        ports = [{"port": 80, "targetPort": 8080, "protocol": "TCP", "nodePort": 30080}]
        assert rules(lb.create(created(lb, service(type="LoadBalancer", allocateLoadBalancerNodePorts=False,
                                                   ports=ports)))) == {"service-node-ports"}
        node_ports = copy.deepcopy(honest)
        node_ports["spec"]["allocateLoadBalancerNodePorts"] = True
        assert rules(lb.update(honest, node_ports)) == {"service-node-ports"}
        health = copy.deepcopy(honest)
        health["spec"].update(externalTrafficPolicy="Local", healthCheckNodePort=31999)
        assert rules(lb.update(honest, health)) == {"service-node-ports"}


def test_node_ports_and_load_balancers_pass_where_the_config_allows_them(nlp):
    both = allowing(nlp, node_ports=3, load_balancers=1)
    assert both.create(created(both, service(type="NodePort"))) == []
    assert both.create(created(both, service(type="LoadBalancer", loadBalancerSourceRanges=["203.0.113.0/24"]))) \
        == []
    # A load balancer never claims an address the platform did not give, and externalIPs stay refused.
    assert rules(both.create(created(both, service(type="LoadBalancer", loadBalancerIP="52.1.2.3")))) \
        == {"service-load-balancer-ip"}
    assert rules(both.create(created(both, service(type="NodePort", externalIPs=["1.2.3.4"])))) \
        == {"service-external-ips"}
    only_ports = allowing(nlp, node_ports=3)
    assert rules(only_ports.create(created(only_ports, service(type="LoadBalancer")))) == {"service-type"}


@pytest.mark.parametrize("stack, team, config", [("dev", "team-nlp", dev_config), ("eks", "team-legal", eks_config)])
def test_the_namespace_quota_agrees_with_the_service_config(stack, team, config):
    settings = team_of(config(), team)
    quota = vcluster_values(settings, MOCK_CLUSTER_DNS)["policies"]["resourceQuota"]["quota"]
    assert quota["services.nodeports"] == 0 and quota["services.loadbalancers"] == 0
    opened = dataclasses.replace(settings, vcluster=dataclasses.replace(
        settings.vcluster, services=TenantServices(node_ports=4, load_balancers=2)))
    quota = vcluster_values(opened, MOCK_CLUSTER_DNS)["policies"]["resourceQuota"]["quota"]
    assert (quota["services.nodeports"], quota["services.loadbalancers"]) == (4, 2)


# --- endpoints, ConfigMaps, Secrets, pod subresources ------------------------------------------------


@pytest.mark.parametrize("ip", ["10.1.23.4", "172.20.0.1", "192.168.1.1", "100.64.0.5", "169.254.169.254",
                                "127.0.0.1", "fd00::1", "not-an-ip"])
def test_selector_less_services_may_not_point_into_the_cluster(nlp, ip):
    assert rules(nlp.create(sync_endpoints(endpoints("203.0.113.10", ip), nlp.team))) == {"endpoint-addresses"}
    assert rules(nlp.create(sync_endpoint_slice(endpoint_slice(ip), nlp.team))) == {"endpoint-addresses"}


@pytest.mark.parametrize("ip", ["010.0.0.1", "0169.0254.0169.0254", "8.8.8.08", "203.0.113.010", "256.1.1.1",
                                "8.8.8.8.", "0x8.8.8.8"])
def test_endpoint_addresses_must_be_canonical(nlp, legal, ip):
    """An API server without strict IP validation reads 010.0.0.1 as 10.0.0.1, inside the cluster's ranges."""
    for tenant in (nlp, legal):
        assert rules(tenant.create(sync_endpoints(endpoints("203.0.113.10", ip), tenant.team))) == \
            {"endpoint-addresses"}
        assert rules(tenant.create(sync_endpoint_slice(endpoint_slice(ip), tenant.team))) == {"endpoint-addresses"}
        honest = sync_endpoints(endpoints("203.0.113.10", "8.8.8.8", "100.63.255.255", "1.0.0.0"), tenant.team)
        assert tenant.create(honest) == []
        assert tenant.create(sync_endpoint_slice(endpoint_slice("8.8.4.4", "199.0.0.250"), tenant.team)) == []


def test_fqdn_and_ipv6_endpoint_slices_are_refused(nlp):
    for address_type, address in (("FQDN", "db.example.com"), ("IPv6", "2001:db8::1")):
        host = sync_endpoint_slice(endpoint_slice(address, address_type=address_type), nlp.team)
        assert rules(nlp.create(host)) == {"endpoint-addresses"}


def test_service_account_token_secrets_and_grafana_dashboards_are_refused(nlp):
    """The dashboard is what the syncer writes. The token Secret is not: vCluster's syncer writes a token Secret's
    host copy as Opaque (secrets/to_host_syncer.go); refusing the type guards against another host-side writer in
    the team's namespace, or a future syncer that keeps it, since the host would mint a token into it."""
    token = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
             "metadata": {"name": "t", "namespace": "default",
                          "annotations": {"kubernetes.io/service-account.name": f"vc-{nlp.team.vcluster_name}"}}}
    assert rules(nlp.create(host_metadata(token, nlp.team))) == {"service-account-token"}
    dashboard = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"d.json": "{}"},
                 "metadata": {"name": "d", "namespace": "default", "labels": {"grafana_dashboard": "1"},
                              "annotations": {"grafana_folder": "team-vision"}}}
    assert rules(nlp.create(host_metadata(dashboard, nlp.team))) == {"dashboard-label"}


def test_pod_metadata_may_not_change_through_status_or_resize(nlp):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": host_name("model", "default", nlp.team), "namespace": nlp.team.namespace,
        "labels": {"vcluster.loft.sh/managed-by": nlp.team.vcluster_name, "kai.scheduler/queue": nlp.team.queue_name},
        "annotations": {"gpu-fraction": "0.5"}}, "spec": {"containers": []}, "status": {"phase": "Pending"}}
    running = copy.deepcopy(pod)
    running["status"]["phase"] = "Running"
    for subresource in ("status", "resize"):
        assert nlp.update(pod, running, subresource=subresource) == []
        relabelled = copy.deepcopy(running)
        relabelled["metadata"]["labels"]["app"] = "kai-resource-reservation"
        assert rules(nlp.update(pod, relabelled, subresource=subresource)) == {"pod-status-metadata"}
        reannotated = copy.deepcopy(running)
        del reannotated["metadata"]["annotations"]["gpu-fraction"]
        assert rules(nlp.update(pod, reannotated, subresource=subresource)) == {"pod-status-metadata"}


def test_the_security_model_names_every_rule(nlp, legal):
    text = security_model_text()
    for tenant in (nlp, legal):
        names = {validation["message"][1:validation["message"].index("]")]
                 for validation in tenant.admission.spec["validations"]}
        assert [name for name in sorted(names) if f"`{name}`" not in text] == []


# --- the address check means what it says ---------------------------------------------------------


def test_the_non_public_ranges_cover_the_workload_egress_exceptions():
    non_public = [ipaddress.ip_network(cidr) for cidr in NON_PUBLIC_IPV4]
    for cidr in TENANT_EGRESS_EXCEPTIONS:
        assert any(ipaddress.ip_network(cidr).subnet_of(network) for network in non_public), cidr


@given(st.ip_addresses(v=4))
def test_the_cidr_patterns_agree_with_ipaddress(address):
    for cidr in NON_PUBLIC_IPV4:
        pattern = ipv4_pattern(cidr).replace("\\\\", "\\")
        assert bool(re.match(pattern, str(address))) == (address in ipaddress.ip_network(cidr)), (cidr, address)


@given(st.lists(st.integers(0, 999), min_size=4, max_size=4), st.lists(st.integers(0, 2), min_size=4, max_size=4))
def test_the_address_pattern_accepts_exactly_canonical_addresses(octets, zeros):
    text = ".".join("0" * pad + str(octet) for octet, pad in zip(octets, zeros))
    canonical = all(octet <= 255 for octet in octets) and not any(zeros)
    assert bool(re.match(CANONICAL_IPV4.replace("\\\\", "\\"), text)) == canonical, text
