"""A team's Services, Endpoints and EndpointSlices cannot load every node's kube-proxy or fill the shared Prometheus
(rules ``service-ports`` and ``endpoint-size``, components/synced_endpoints.py).

- Attack: a Service of more than 100 ports, an Endpoints naming more than 1,000 address and port pairs (in one subset
  or over many), an EndpointSlice whose addresses and zone hints times its ports pass 1,000, each as vCluster's
  syncer writes it on the host (tests/synced_objects_sim.py), on create and as an update that grows it, are refused;
  the policy's CEL runs in cel-python and CEL C++ (tests/tenant_sim.py).
- Honest: a Service of a few ports, a database's addresses on a few ports, the caps themselves, and an update that
  does not grow an object from before the rules, are admitted.
- Upstream, at every mirrored tag: vCluster copies a Service's ports, an Endpoints' subsets and an EndpointSlice's
  endpoints and ports as written; the API server bounds a slice at 1,000 endpoints of 100 addresses and 100 ports,
  and an Endpoints and a Service not at all; kube-state-metrics writes a series for each
  address, zone hint and port of a slice (and each address and port pair of an Endpoints), and the kube-state-metrics
  chart of every accepted kube-prometheus-stack collects EndpointSlices (not Endpoints).
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml

from components.observability_ksm import COLLECTORS
from config.synced_data import SYNCED_ENDPOINT_ENTRIES, SYNCED_SERVICE_PORTS
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, EXTRA_MIRRORED_TAGS, MIRRORED_TAGS, git, mirrored_tag
from tests.synced_objects_sim import sync_endpoint_slice, sync_endpoints, sync_service
from tests.test_observability_ksm import CHARTS, KSM, family
from tests.test_synced_objects_admission import (  # noqa: F401 (fixtures)
    created, endpoint_slice, endpoints, legal, nlp, rules, service,
)

VCLUSTER = "loft-sh/vcluster"
API = "kubernetes/api"


def public(count: int, start: int = 0) -> list[str]:
    """``count`` public IPv4 addresses, written canonically."""
    return [f"8.{8 + (i // 65536)}.{(i // 256) % 256}.{i % 256}" for i in range(start, start + count)]


def ports(count: int) -> list[dict]:
    return [{"name": f"p{i}", "port": 1000 + i, "protocol": "TCP"} for i in range(count)]


def many_ported(count: int) -> dict:
    return service("media", selector={"app": "media"}, ports=[{**port, "targetPort": port["port"]}
                                                               for port in ports(count)])


def database(addresses: int, port_count: int, subsets: int = 1) -> dict:
    obj = endpoints()
    obj["subsets"] = [{"addresses": [{"ip": ip} for ip in public(addresses, n * addresses)], "ports": ports(port_count)}
                      for n in range(subsets)]
    return obj


def piece(endpoint_count: int, port_count: int, *, addresses: int = 1, zones: int = 0) -> dict:
    obj = endpoint_slice()
    obj["endpoints"] = [{"addresses": public(addresses, n * addresses),
                         **({"hints": {"forZones": [{"name": f"zone-{z}"} for z in range(zones)]}} if zones else {})}
                        for n in range(endpoint_count)]
    obj["ports"] = ports(port_count)
    return obj


# --- attacks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("count", [SYNCED_SERVICE_PORTS + 1, 1000])
def test_a_service_of_too_many_ports_is_refused_on_create_and_on_update(nlp, legal, count):
    for tenant in (nlp, legal):
        assert rules(tenant.create(created(tenant, many_ported(count)))) == {"service-ports"}
        small = created(tenant, many_ported(3))
        grown = copy.deepcopy(small)
        grown["spec"]["ports"] = created(tenant, many_ported(count))["spec"]["ports"]
        assert rules(tenant.update(small, grown)) == {"service-ports"}
        # The syncer re-creating a missing host Service (services/translate.go) is judged the same.
        assert rules(tenant.create(sync_service(many_ported(count), tenant.team))) == {"service-ports"}


@pytest.mark.parametrize("addresses, port_count, subsets", [
    (1001, 1, 1),       # one port, past the cap
    (11, 100, 1),       # 1,100 pairs from a few addresses on many ports
    (1, 1, 1001),       # more subsets than the cap, one pair each
    (501, 1, 2),        # two subsets adding up past it
])
def test_an_endpoints_of_too_many_endpoint_ports_is_refused(nlp, legal, addresses, port_count, subsets):
    for tenant in (nlp, legal):
        hostile = sync_endpoints(database(addresses, port_count, subsets), tenant.team)
        assert rules(tenant.create(hostile)) == {"endpoint-size"}
        assert rules(tenant.update(sync_endpoints(database(2, 1), tenant.team), hostile)) == {"endpoint-size"}


def test_not_ready_addresses_count_as_well(nlp):
    hostile = database(600, 1)
    hostile["subsets"][0]["notReadyAddresses"] = [{"ip": ip} for ip in public(401, 600)]
    assert rules(nlp.create(sync_endpoints(hostile, nlp.team))) == {"endpoint-size"}


@pytest.mark.parametrize("endpoint_count, port_count, addresses, zones", [
    (1000, 2, 1, 0),    # the API server's most endpoints, on two ports
    (11, 1, 100, 0),    # extra addresses per endpoint: kube-state-metrics writes a series for each
    (200, 1, 1, 8),     # zone hints: a series for each
    (101, 10, 1, 0),    # kube-proxy programs every port for every endpoint
])
def test_an_endpoint_slice_of_too_many_endpoint_ports_is_refused(nlp, legal, endpoint_count, port_count, addresses,
                                                                  zones):
    for tenant in (nlp, legal):
        hostile = sync_endpoint_slice(piece(endpoint_count, port_count, addresses=addresses, zones=zones), tenant.team)
        assert rules(tenant.create(hostile)) == {"endpoint-size"}
        assert rules(tenant.update(sync_endpoint_slice(piece(3, 1), tenant.team), hostile)) == {"endpoint-size"}


# --- honest objects -----------------------------------------------------------------------------


def test_honest_services_and_endpoints_are_admitted(nlp, legal):
    for tenant in (nlp, legal):
        inference = service("triton", selector={"app": "triton"}, ports=[
            {"name": "http", "port": 8000, "targetPort": 8000}, {"name": "grpc", "port": 8001, "targetPort": 8001},
            {"name": "metrics", "port": 8002, "targetPort": 8002}])
        assert tenant.create(created(tenant, inference)) == []
        # A database's primary and two replicas, on the server's and the exporter's ports.
        assert tenant.create(sync_endpoints(database(3, 2), tenant.team)) == []
        assert tenant.create(sync_endpoint_slice(piece(3, 2), tenant.team)) == []


def test_the_caps_themselves_are_admitted(nlp):
    assert nlp.create(created(nlp, many_ported(SYNCED_SERVICE_PORTS))) == []
    assert nlp.create(sync_endpoints(database(SYNCED_ENDPOINT_ENTRIES // 2, 2), nlp.team)) == []
    assert nlp.create(sync_endpoint_slice(piece(SYNCED_ENDPOINT_ENTRIES // 4, 1, zones=3), nlp.team)) == []


def test_an_object_from_before_the_rules_keeps_updates_that_do_not_grow_it(nlp):
    """The syncer's updates of a Service, Endpoints or slice created before the rules: same ports or fewer pass."""
    old_service = created(nlp, many_ported(150))
    relabelled = copy.deepcopy(old_service)
    relabelled["metadata"]["labels"]["tier"] = "media"
    assert nlp.update(old_service, relabelled) == []
    fewer = copy.deepcopy(old_service)
    fewer["spec"]["ports"] = fewer["spec"]["ports"][:120]
    assert nlp.update(old_service, fewer) == []
    old_endpoints = sync_endpoints(database(1200, 1), nlp.team)
    moved = sync_endpoints(database(1100, 1), nlp.team)
    assert nlp.update(old_endpoints, moved) == []
    assert rules(nlp.update(old_endpoints, sync_endpoints(database(1201, 1), nlp.team))) == {"endpoint-size"}


# --- upstream -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_copies_ports_and_endpoints_as_written(tag):
    def source(path: str) -> str:
        return git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{path}")
    # A Service's ports: on create its whole spec (the API proxy copies the virtual Service under host metadata), on a
    # type change the tenant's ports, and on every sync the tenant's changes.
    proxy = source("pkg/server/filters/service.go")
    assert "translate.HostMetadata(vService," in proxy and "pService.Spec.Ports = newVService.Spec.Ports" in proxy
    assert "Spec.Ports, event.Host.Spec.Ports = patcher.CopyBidirectional(" in source(
        "pkg/controllers/resources/services/syncer.go")
    # An Endpoints' subsets, only pod references renamed.
    translate = source("pkg/controllers/resources/endpoints/translate.go")
    assert "translate.HostMetadata(vObj.(*corev1.Endpoints)" in translate
    assert "pObj.Subsets = translated.Subsets" in translate
    # An EndpointSlice whole on create (ports included), its endpoints on update; only pod references renamed.
    slices = source("pkg/controllers/resources/endpointslices/translate.go")
    assert "translate.HostMetadata(vObj.(*discoveryv1.EndpointSlice)" in slices
    assert "pObj.Endpoints = translated.Endpoints" in slices
    for spec in (translate, slices):
        assert set(re.findall(r"(?:Addresses\[j\]|Endpoints\[i\])\.(\w+)[.\w]*\s*=", spec)) == {"TargetRef"}
    # HostMetadata copies the whole object under the host name.
    assert "pObj := CopyObjectWithName(vObj, name, true" in source("pkg/util/translate/translate.go")


def _comment_of(types: str, field: str) -> str:
    """The doc comment above a Go struct field."""
    lines = types[:types.index(f"\t{field} ")].splitlines()
    comment = []
    for line in reversed(lines):
        if not line.strip().startswith("//"):
            break
        comment.insert(0, line.strip())
    return " ".join(comment)


@pytest.mark.parametrize("tag", [tag for tag in MIRRORED_TAGS[API]])
def test_the_api_server_bounds_a_slice_but_not_an_endpoints_or_a_service(tag):
    discovery = git(API, "show", f"{tag}:discovery/v1/types.go")
    assert "maximum of 1000 endpoints" in _comment_of(discovery, "Endpoints []Endpoint")
    assert "maximum of 100 ports" in _comment_of(discovery, "Ports []EndpointPort")
    assert "no more than 100" in re.sub(r"\s*//\s*", " ", _comment_of(discovery, "Addresses []string"))
    core = git(API, "show", f"{tag}:core/v1/types.go")
    for field in ("Ports []ServicePort", "Addresses []EndpointAddress", "Ports []EndpointPort"):
        assert not re.search(r"maximum|at most|no more than", _comment_of(core, field)), field


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_writes_a_series_per_address_hint_and_port(tag):
    store = git(KSM, "show", f"{tag}:internal/store/endpointslice.go")
    endpoints_family = family(store, "kube_endpointslice_endpoints")
    assert "for _, ep := range e.Endpoints" in endpoints_family
    assert "for _, address := range ep.Addresses" in endpoints_family
    assert "for _, zone := range ep.Hints.ForZones" in family(store, "kube_endpointslice_endpoints_hints")
    assert "for _, port := range e.Ports" in family(store, "kube_endpointslice_ports")
    # An Endpoints: one series per address for each port of its subset.
    address = family(git(KSM, "show", f"{tag}:internal/store/endpoint.go"), "kube_endpoint_address")
    assert re.search(r"for _, port := range s\.Ports \{\s*for _, available := range s\.Addresses", address)


@pytest.mark.parametrize("tag", [tag for tag in EXTRA_MIRRORED_TAGS[CHARTS] if tag.startswith("kube-state-metrics-")])
def test_every_accepted_kube_state_metrics_chart_collects_endpoint_slices(tag):
    defaults = yaml.safe_load(git(CHARTS, "show", f"{tag}:charts/kube-state-metrics/values.yaml"))
    # Slices are collected; the Endpoints collector (a series per address and port pair) is not.
    assert "endpointslices" in defaults["collectors"] and "endpoints" not in defaults["collectors"]
    assert "endpointslices" in COLLECTORS and "endpoints" not in COLLECTORS


def test_a_slice_without_endpoints_or_ports_is_admitted(nlp, legal):
    """A slice of a Service with no ready address yet, or one that names no ports. Its lists have no omitempty
    (k8s.io/api discovery/v1 EndpointSlice), and etcd's protobuf keeps no empty list, so the syncer's copy and
    the host API server's typed object carry nil ones, which a policy sees as ``endpoints: null`` and
    ``ports: null`` (tests/served_objects.py)."""
    for tenant in (nlp, legal):
        for empty in ({"endpoints": None}, {"ports": None}, {"endpoints": None, "ports": None}):
            slice_ = {**endpoint_slice("203.0.113.10"), **empty}
            assert tenant.create(sync_endpoint_slice(slice_, tenant.team)) == [], empty
