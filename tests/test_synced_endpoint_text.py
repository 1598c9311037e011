"""What a team's Services, Endpoints and EndpointSlices hold, not only how many entries (rules ``endpoint-text`` and
``service-size``, and ``endpoint-size`` for a slice of ports alone; components/synced_endpoints.py).

- Attack: an Endpoints or EndpointSlice whose target references (to anything but a pod, or a pod's apiVersion and
  fieldPath, which vCluster keeps) carry long strings, a slice with a long zone, many node hints or deprecated
  topology, a slice of no endpoints and 20,000 ports, a Service of thousands of selector labels or of padded or
  countless source ranges: each as vCluster's syncer writes it (tests/synced_objects_sim.py), on create and as an
  update that grows it, refused in cel-python and CEL C++ (tests/tenant_sim.py).
- Honest: a Service a real Helm chart renders, the slices the EndpointSlice controller writes for a 3-replica
  Deployment, a headless selector-less Service's manual Endpoints, every string at its cap, and an update that does
  not grow an object from before the rules, are admitted.
- The caps are what the datastore's worst case counts (config/synced_data.py): the largest Endpoints and slice the
  rules admit are admitted, and protobuf encodes them to the bytes config/synced_endpoint_bytes.py counts.
"""

from __future__ import annotations

import copy
import re

import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory

from config.synced_data import (
    ENDPOINT_SLICE_BYTES, ENDPOINTS_BYTES, SYNCED_ENDPOINT_ENTRIES, SYNCED_SERVICE_SELECTOR_LABELS,
    SYNCED_SERVICE_SOURCE_RANGES,
)
from config.synced_endpoint_bytes import (
    ADDRESS_TYPE, CIDR_BYTES, ENDPOINT_ADDRESS, ENDPOINT_HINTS, ENDPOINT_SUBSET, FOR_ZONE, SLICE_ENDPOINT,
    SLICE_ENDPOINT_ENTRY, SLICE_NODE_HINTS, SLICE_PORT_ENTRY, SUBSET_ENTRY, TARGET_REF_BYTES, ZONE_BYTES,
)
from config.synced_entry_bytes import ENUM_BYTES, Field, Message
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, eks_config, git, mirrored_tag
from tests.synced_objects_sim import create_service, sync_endpoint_slice, sync_endpoints
from tests.test_observability_ksm import KSM, family
from tests.test_synced_entry_bytes_contract import PROTO_TYPES
from tests.test_synced_endpoints import VCLUSTER, database, piece, public
from tests.test_synced_objects_admission import (  # noqa: F401 (fixtures)
    allowing, created, endpoint_slice, legal, nlp, rules, service,
)


def long_ref(**lengths: int) -> dict:
    """A reference to a virtual machine (not a pod: vCluster copies it as written), ``lengths`` its long strings."""
    ref = {"kind": "VirtualMachineInstance", "apiVersion": "kubevirt.io/v1", "namespace": "default", "name": "vm-0",
           "uid": "8f0c1f4e-3a8d-4c3e-9d0b-3d6f3f0c2a11"}
    return {**ref, **{field: "x" * length for field, length in lengths.items()}}


def referenced(obj: dict, ref: dict) -> dict:
    """``obj`` (an Endpoints or a slice) with ``ref`` on every address or endpoint."""
    result = copy.deepcopy(obj)
    for entry in ([a for s in result.get("subsets", []) for a in s["addresses"]] + result.get("endpoints", [])):
        entry["targetRef"] = copy.deepcopy(ref)
    return result


def pod_ref(name: str) -> dict:
    return {"kind": "Pod", "namespace": "default", "name": name, "uid": "5b1c2d3e-4f50-4617-8293-a4b5c6d7e8f9"}


# --- attacks ----------------------------------------------------------------------------------


@pytest.mark.parametrize("lengths", [
    {"name": 1024 * 1024},                       # one address, a reference of a megabyte
    {"fieldPath": TARGET_REF_BYTES["fieldPath"] + 1},
    {"uid": 37}, {"resourceVersion": 21}, {"kind": 64}, {"namespace": 64}, {"apiVersion": 318},
], ids=lambda lengths: next(iter(lengths)))
def test_an_endpoints_with_long_reference_strings_is_refused(nlp, legal, lengths):
    for tenant in (nlp, legal):
        hostile = sync_endpoints(referenced(database(1, 1), long_ref(**lengths)), tenant.team)
        assert rules(tenant.create(hostile)) == {"endpoint-text"}
        assert rules(tenant.update(sync_endpoints(database(1, 1), tenant.team), hostile)) == {"endpoint-text"}


def test_a_pod_reference_keeps_its_api_version_and_field_path_and_is_judged_too(nlp):
    """vCluster renames a pod reference and clears its uid and resourceVersion, nothing else."""
    ref = {**pod_ref("db-0"), "apiVersion": "v1" + " " * 600, "fieldPath": "f" * 600}
    hostile = database(1000, 1)
    for address in hostile["subsets"][0]["addresses"]:
        address["targetRef"] = ref
    synced = sync_endpoints(hostile, nlp.team)
    assert synced["subsets"][0]["addresses"][0]["targetRef"]["fieldPath"] == "f" * 600
    assert rules(nlp.create(synced)) == {"endpoint-text"}
    # The not-ready addresses are judged alike.
    not_ready = database(1, 1)
    not_ready["subsets"][0]["notReadyAddresses"] = [{"ip": "8.8.4.4", "targetRef": long_ref(name=300)}]
    assert rules(nlp.create(sync_endpoints(not_ready, nlp.team))) == {"endpoint-text"}


@pytest.mark.parametrize("field, value", [
    ("targetRef", long_ref(uid=100_000)),
    ("targetRef", {**pod_ref("web-0"), "resourceVersion": "9" * 4096}),   # kept on a slice's pod reference
    ("zone", "z" * (ZONE_BYTES + 1)),
    ("hints", {"forNodes": [{"name": f"node-{n}"} for n in range(SLICE_NODE_HINTS + 1)]}),
    ("hints", {"forNodes": [{"name": "n" * 254}]}),
    ("deprecatedTopology", {"example.com/rack": "r1"}),
], ids=["reference", "pod-resource-version", "zone", "node-hints", "node-hint-name", "topology"])
def test_an_endpoint_slice_with_long_endpoint_strings_is_refused(nlp, legal, field, value):
    for tenant in (nlp, legal):
        obj = piece(3, 1)
        obj["endpoints"][1][field] = value
        hostile = sync_endpoint_slice(obj, tenant.team)
        assert rules(tenant.create(hostile)) == {"endpoint-text"}
        assert rules(tenant.update(sync_endpoint_slice(piece(3, 1), tenant.team), hostile)) == {"endpoint-text"}


def test_a_slice_of_ports_alone_is_refused(nlp):
    """Discovery validation takes 20,000 ports and no endpoints; kube-state-metrics writes a series for each port."""
    hostile = piece(0, 20_000)
    assert rules(nlp.create(sync_endpoint_slice(hostile, nlp.team))) == {"endpoint-size"}
    assert nlp.create(sync_endpoint_slice(piece(0, SYNCED_ENDPOINT_ENTRIES), nlp.team)) == []
    assert rules(nlp.create(sync_endpoint_slice(piece(0, SYNCED_ENDPOINT_ENTRIES + 1), nlp.team))) == {
        "endpoint-size"}


# The longest label key prefix the API server takes: a DNS subdomain of 253 bytes.
PREFIX = ".".join(("a" * 63, "b" * 63, "c" * 63, "d" * 61))


def balancer(ranges: list[str]) -> dict:
    """A load balancer without node ports (the team has none), admitting ``ranges``."""
    return service("gateway", selector={"app": "gateway"}, type="LoadBalancer", allocateLoadBalancerNodePorts=False,
                   loadBalancerSourceRanges=ranges)


def selecting(count: int) -> dict:
    """A Service selecting by ``count`` labels of the longest key (a 253-byte prefix, a 63-byte name) and value."""
    return service("media", selector={f"{PREFIX}/{'l' * 58}{n:05}": "v" * 63 for n in range(count)})


@pytest.mark.parametrize("count", [SYNCED_SERVICE_SELECTOR_LABELS - 1, 5000])
def test_a_service_of_too_many_selector_labels_is_refused(nlp, legal, count):
    """vCluster adds its two labels to the selector on the host: 31 of the tenant's make 33."""
    for tenant in (nlp, legal):
        assert rules(tenant.create(created(tenant, selecting(count)))) == {"service-size"}
        small = created(tenant, selecting(2))
        assert rules(tenant.update(small, created(tenant, selecting(count)))) == {"service-size"}


@pytest.mark.parametrize("ranges", [
    ["203.0.113.0/24" + " " * 1_000_000],                     # validation lets a range carry padding
    [f"198.51.{n // 256}.{n % 256}/32" for n in range(SYNCED_SERVICE_SOURCE_RANGES + 1)],
], ids=["padded", "countless"])
def test_a_load_balancer_of_padded_or_countless_source_ranges_is_refused(nlp, ranges):
    tenant = allowing(nlp, load_balancers=1)
    assert rules(tenant.create(created(tenant, balancer(ranges)))) == {"service-size"}


# --- honest objects -----------------------------------------------------------------------------


def controller_slice(replicas: int = 3) -> dict:
    """The slice the EndpointSlice controller writes for a Deployment's pods (pod references, node, zone, conditions,
    zone and node hints for a Service preferring them); the addresses public, as the policy takes for a synced
    slice."""
    obj = endpoint_slice()
    obj["endpoints"] = [{"addresses": [ip], "conditions": {"ready": True, "serving": True, "terminating": False},
                         "nodeName": f"ip-10-0-{n}-17.eu-west-1.compute.internal", "zone": f"eu-west-1{'abc'[n]}",
                         "hints": {"forZones": [{"name": f"eu-west-1{'abc'[n]}"}],
                                   "forNodes": [{"name": f"ip-10-0-{n}-17.eu-west-1.compute.internal"}]},
                         "targetRef": pod_ref(f"web-7d4b9c8f6d-{'qwx'[n]}k2p{n}")}
                        for n, ip in enumerate(public(replicas))]
    obj["ports"] = [{"name": "http", "port": 8080, "protocol": "TCP", "appProtocol": "http"}]
    return obj


def test_honest_slices_endpoints_and_services_are_admitted(nlp, legal):
    for tenant in (nlp, legal):
        assert tenant.create(sync_endpoint_slice(controller_slice(), tenant.team)) == []
        # A headless, selector-less Service's manual Endpoints: three database members by hostname on two ports.
        members = database(3, 2)
        for n, address in enumerate(members["subsets"][0]["addresses"]):
            address.update(hostname=f"db-{n}", nodeName=f"db-host-{n}.example.com")
        assert tenant.create(sync_endpoints(members, tenant.team)) == []
        assert tenant.create(created(tenant, service("db", clusterIP="None"))) == []
    # A load balancer admitting an office and a VPN range.
    tenant = allowing(nlp, load_balancers=1)
    assert tenant.create(created(tenant, balancer(["203.0.113.0/24", "2001:db8::/32"]))) == []


def test_a_service_at_its_caps_is_admitted(nlp):
    """The Endpoints and slices at theirs: test_the_largest_objects_the_rules_admit_are_what_the_worst_case_counts."""
    assert nlp.create(created(nlp, selecting(SYNCED_SERVICE_SELECTOR_LABELS - 2))) == []
    tenant = allowing(nlp, load_balancers=1)
    widest = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128"
    assert len(widest) == CIDR_BYTES
    assert tenant.create(created(tenant, balancer([widest] * SYNCED_SERVICE_SOURCE_RANGES))) == []


def test_an_object_from_before_the_rules_keeps_updates_that_do_not_grow_it(nlp):
    old = sync_endpoint_slice(referenced(piece(10, 1), long_ref(name=10_000)), nlp.team)
    fewer = copy.deepcopy(old)
    fewer["endpoints"] = fewer["endpoints"][:5]
    assert nlp.update(old, fewer) == []
    relabelled = copy.deepcopy(old)
    relabelled["metadata"]["labels"]["tier"] = "db"
    assert nlp.update(old, relabelled) == []
    grown = copy.deepcopy(old)
    grown["endpoints"][0]["targetRef"]["name"] += "x"
    assert rules(nlp.update(old, grown)) == {"endpoint-text"}
    old_endpoints = sync_endpoints(referenced(database(4, 1), long_ref(fieldPath=5_000)), nlp.team)
    assert nlp.update(old_endpoints, copy.deepcopy(old_endpoints)) == []
    old_service = created(nlp, selecting(100))
    narrower = copy.deepcopy(old_service)
    narrower["spec"]["selector"] = dict(list(narrower["spec"]["selector"].items())[:50])
    assert nlp.update(old_service, narrower) == []
    assert rules(nlp.update(narrower, old_service)) == {"service-size"}


def test_the_syncer_copies_what_the_rules_judge(nlp):
    """The simulated syncer keeps a non-pod reference, a slice's zone and hints, and the selector's keys (plus its
    own two labels): what the attacks above rely on, read in the vCluster source by tests/test_synced_endpoints.py."""
    obj = piece(1, 1)
    obj["endpoints"][0].update(zone="z", targetRef=long_ref(name=10))
    host = sync_endpoint_slice(obj, nlp.team)
    assert host["endpoints"][0]["targetRef"]["name"] == "x" * 10 and host["endpoints"][0]["zone"] == "z"
    assert len(create_service(selecting(3), nlp.team)["spec"]["selector"]) == 5


# --- upstream -----------------------------------------------------------------------------------


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_writes_the_strings_into_every_address_series(tag):
    """Each address's series carries the endpoint's reference, node and zone as label values: before endpoint-text,
    1,000 series of a megabyte each in the shared Prometheus."""
    store = family(git(KSM, "show", f"{tag}:internal/store/endpointslice.go"), "kube_endpointslice_endpoints")
    keys = re.search(r"labelKeys := \[\]string\{([^}]*)\}", store)
    assert keys and {"targetref_kind", "targetref_name", "targetref_namespace", "endpoint_nodename",
                     "endpoint_zone", "hostname"} <= set(re.findall(r'"(\w+)"', keys.group(1)))
    assert "targetrefName = ep.TargetRef.Name" in store


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vcluster_copies_the_selector_and_source_ranges(tag):
    def source(path: str) -> str:
        return git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:{path}")
    translate = source("pkg/controllers/resources/services/translate.go")
    assert "Spec.Selector = translate.HostLabelsMap(vObj.Spec.Selector" in translate
    syncer = source("pkg/controllers/resources/services/syncer.go")
    assert ("event.Virtual.Spec.LoadBalancerSourceRanges, event.Host.Spec.LoadBalancerSourceRanges = "
            "patcher.CopyBidirectional(") in syncer
    assert "event.Host.Spec.Selector = translate.HostLabelsMap(event.Virtual.Spec.Selector" in syncer
    # A pod reference keeps its apiVersion and fieldPath (and, in a slice, its uid and resourceVersion).
    slices = source("pkg/controllers/resources/endpointslices/translate.go")
    assert not re.search(r"TargetRef\.(APIVersion|FieldPath|UID|ResourceVersion)\s*=", slices)
    endpoints = source("pkg/controllers/resources/endpoints/translate.go")
    assert not re.search(r"TargetRef\.(APIVersion|FieldPath)\s*=", endpoints)


@pytest.fixture(scope="module")
def chart_services(tmp_path_factory) -> list[dict]:
    """Every Service the kube-prometheus-stack chart renders (the platform's release of it): what a team installing
    the chart inside its vCluster has synced."""
    from tests.release_renders import rendered
    config = eks_config()
    config["gpu-tenancy:teams"] = config["gpu-tenancy:teams"][:1]
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    manifests = rendered(config, tmp_path_factory.mktemp("services"), stack="eks")
    return [doc for path, text in manifests.items() if path.startswith("kube-prometheus-stack/") and
            path.endswith("service.yaml") for doc in yaml.safe_load_all(text) if doc and doc["kind"] == "Service"]


def test_a_real_charts_services_are_admitted(nlp, chart_services):
    assert len(chart_services) >= 6
    for chart_service in chart_services:
        virtual = copy.deepcopy(chart_service)
        # As the API server stores it: a template's empty annotations are none.
        virtual["metadata"] = {**{k: v for k, v in virtual["metadata"].items() if v is not None},
                               "namespace": "monitoring"}
        assert nlp.create(created(nlp, virtual)) == [], virtual["metadata"]["name"]


# --- the largest objects the rules admit are what the worst case counts -------------------------------------------

REPEATED = {"subsets", "addresses", "notReadyAddresses", "ports", "endpoints", "forNodes", "forZones"}
NODE = ".".join(("a" * 63, "b" * 63, "c" * 63, "d" * 61))  # the longest node name: a 253-byte DNS subdomain


def _describe(file, message: Message, seen: set[str]) -> None:
    if message.name in seen:
        return
    seen.add(message.name)
    described = file.message_type.add(name=message.name)
    for name, field in message.fields.items():
        label = (descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED if name in REPEATED
                 else descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        added = described.field.add(name=name, json_name=name, number=field.number, type=PROTO_TYPES[field.kind],
                                    label=label)
        if field.kind == "message":
            added.type_name = f".stored.{field.largest.name}"
            _describe(file, field.largest, seen)


def stored_bytes(kind: Message, obj: dict) -> int:
    """``obj``'s body (its fields ``kind`` declares) as protobuf stores it."""
    file = descriptor_pb2.FileDescriptorProto(name=f"{kind.name}.proto", package="stored", syntax="proto2")
    _describe(file, kind, set())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"stored.{kind.name}"))()
    json_format.ParseDict({key: value for key, value in obj.items() if key in kind.fields}, message)
    return len(message.SerializeToString())


# The stored kinds, with the lists the worst case counts as one entry of many (not-ready addresses, zone hints).
ENDPOINTS = Message("Endpoints", {"subsets": Field(SUBSET_ENTRY.number, "message", ENDPOINT_SUBSET._replace(fields={
    **ENDPOINT_SUBSET.fields, "notReadyAddresses": Field(2, "message", ENDPOINT_ADDRESS)}))})
SLICE = Message("EndpointSlice", {
    "addressType": ADDRESS_TYPE, "ports": SLICE_PORT_ENTRY,
    "endpoints": Field(SLICE_ENDPOINT_ENTRY.number, "message", SLICE_ENDPOINT._replace(fields={
        **SLICE_ENDPOINT.fields, "hints": Field(8, "message", ENDPOINT_HINTS._replace(fields={
            **ENDPOINT_HINTS.fields, "forZones": Field(1, "message", FOR_ZONE)}))}))})
# A port at its largest: the longest protocol is SCTP, where the worst case counts any value of a fixed set at 40.
LARGEST_PORT = {"name": "p" * 63, "port": 65535, "protocol": "SCTP", "appProtocol": f"{PREFIX}/{'q' * 63}"}
PROTOCOL_SLACK = ENUM_BYTES - len("SCTP")


def largest_address(n: int) -> str:
    """A public IPv4 address of 15 characters, the longest."""
    return f"223.255.{200 + n // 100}.{100 + n % 100}"


def test_the_largest_objects_the_rules_admit_are_what_the_worst_case_counts(nlp):
    """Every string at the longest the API server or the rules let it be, every entry the most endpoint-size lets an
    object hold, admitted, and encoded by protobuf to the bytes the worst case counts, but for the protocol."""
    at_cap = {field: "x" * cap for field, cap in TARGET_REF_BYTES.items()}
    endpoints = database(1, 1)
    endpoints["subsets"] = [{"addresses": [{"ip": largest_address(n), "hostname": "h" * 63, "nodeName": NODE,
                                            "targetRef": at_cap}], "ports": [LARGEST_PORT]}
                            for n in range(SYNCED_ENDPOINT_ENTRIES)]
    host = sync_endpoints(endpoints, nlp.team)
    assert nlp.create(host) == []
    assert stored_bytes(ENDPOINTS, host) == ENDPOINTS_BYTES - SYNCED_ENDPOINT_ENTRIES * PROTOCOL_SLACK
    obj = piece(1, 1)
    obj["endpoints"] = [{"addresses": [largest_address(n)], "hostname": "h" * 63, "nodeName": NODE,
                         "conditions": {"ready": True, "serving": True, "terminating": True}, "zone": "z" * ZONE_BYTES,
                         "targetRef": at_cap, "hints": {"forNodes": [{"name": NODE}] * SLICE_NODE_HINTS}}
                        for n in range(SYNCED_ENDPOINT_ENTRIES)]
    obj["ports"] = [LARGEST_PORT]
    host = sync_endpoint_slice(obj, nlp.team)
    assert nlp.create(host) == []
    assert stored_bytes(SLICE, host) == ENDPOINT_SLICE_BYTES - PROTOCOL_SLACK
