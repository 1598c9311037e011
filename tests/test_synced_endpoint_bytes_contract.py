"""The per-entry bytes of a Service's, an Endpoints' and an EndpointSlice's worst case (config/synced_endpoint_bytes.py)
against how the API server stores each: its message's fields in k8s.io/api ``core/v1`` and ``discovery/v1``
``generated.proto`` at every accepted Kubernetes minor, and the size protobuf itself encodes the largest entry to."""

from __future__ import annotations

import re

import pytest

from config.synced_data import (
    ENDPOINT_SLICE_BYTES, ENDPOINTS_BYTES, SERVICE_BYTES, SYNCED_ENDPOINT_ENTRIES, SYNCED_SERVICE_PORTS,
    SYNCED_SERVICE_SELECTOR_LABELS, SYNCED_SERVICE_SOURCE_RANGES,
)
from config.synced_endpoint_bytes import (
    ADDRESS_TYPE, CLIENT_IP_CONFIG, CORE_ENDPOINT_PORT, ENDPOINT_ADDRESS, ENDPOINT_CONDITIONS, ENDPOINT_HINTS,
    ENDPOINT_SUBSET, FOR_NODE, FOR_ZONE, LISTED_SERVICE_FIELDS, OBJECT_REFERENCE, REFUSED_SERVICE_FIELDS,
    SELECTOR_ENTRY, SELECTOR_ENTRY_BYTES, SERVICE_SPEC_REST, SERVICE_SPEC_REST_BYTES, SESSION_AFFINITY_CONFIG,
    SLICE_ENDPOINT, SLICE_ENDPOINT_BYTES, SLICE_ENDPOINT_ENTRY, SLICE_NODE_HINTS, SLICE_PORT, SLICE_PORT_BYTES,
    SLICE_PORT_ENTRY, SOURCE_RANGE_BYTES, SOURCE_RANGE_ENTRY, SUBSET_BYTES, SUBSET_ENTRY, TARGET_REF_BYTES,
    ZONE_BYTES,
)
from config.stack_file import PROJECT_DIR
from config.tenant_budget import namespace_budget
from config.synced_entry_bytes import SERVICE_PORT_BYTES, Field, field_bytes, message_bytes
from tests.conftest import MIRRORED_TAGS, dev_config, git, mirrored_tag
from tests.test_synced_entry_bytes_contract import (
    API, core_proto, declared, proto_fields, test_the_largest_entry_encodes_to_the_bytes_counted as encodes,
)
from tests.tenant_sim import platform_of


def discovery_proto(tag: str) -> str:
    return git(API, "show", f"{mirrored_tag(API, tag)}:discovery/v1/generated.proto")


def holds(proto: str, holder: str, field: str, kind: str, number: int) -> bool:
    """``holder`` declares ``field`` as a repeated ``kind`` (or a map, kind ``map``) numbered ``number``."""
    body = proto[proto.index(f"\nmessage {holder} {{"):]
    body = body[:body.index("\n}")]
    if kind == "map":
        return re.search(rf"\n  map<string, string> {field} = {number};", body) is not None
    return re.search(rf"\n  repeated (?:\S+\.)?{kind} {field} = {number};", body) is not None


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_each_entry_declares_every_field_the_api_server_stores(tag):
    core, discovery = core_proto(tag), discovery_proto(tag)
    for message in (OBJECT_REFERENCE, ENDPOINT_ADDRESS, CORE_ENDPOINT_PORT):
        assert declared(message) == proto_fields(core, message.name), (tag, message.name)
    for message in (ENDPOINT_CONDITIONS, FOR_ZONE, SLICE_PORT):
        assert declared(message) == proto_fields(discovery, message.name), (tag, message.name)
    # A subset is counted with one address and one port; its not-ready addresses are addresses alike.
    subset = proto_fields(core, ENDPOINT_SUBSET.name)
    assert set(subset) == {"addresses", "notReadyAddresses", "ports"}
    assert declared(ENDPOINT_SUBSET).items() <= subset.items()
    assert holds(core, ENDPOINT_SUBSET.name, "notReadyAddresses", "EndpointAddress", 2)
    # A slice endpoint: every field but deprecatedTopology (a map, which rule endpoint-text refuses).
    endpoint = proto_fields(discovery, SLICE_ENDPOINT.name)
    assert set(declared(SLICE_ENDPOINT)) == set(endpoint)
    assert declared(SLICE_ENDPOINT).items() <= endpoint.items()
    assert holds(discovery, SLICE_ENDPOINT.name, "deprecatedTopology", "map", 5)
    # Its hints: zone hints count as entries of endpoint-size; node hints (1.33 on) are counted in the endpoint.
    hints = proto_fields(discovery, "EndpointHints")
    assert hints["forZones"] == (1, "message")
    if "ForNode" in discovery:
        assert declared(ENDPOINT_HINTS) == {"forNodes": hints["forNodes"]}
        assert declared(FOR_NODE) == proto_fields(discovery, FOR_NODE.name)
    else:
        assert set(hints) == {"forZones"}
    # Each entry in the list holding it.
    assert holds(core, "Endpoints", "subsets", "EndpointSubset", SUBSET_ENTRY.number)
    assert holds(discovery, "EndpointSlice", "endpoints", "Endpoint", SLICE_ENDPOINT_ENTRY.number)
    assert holds(discovery, "EndpointSlice", "ports", "EndpointPort", SLICE_PORT_ENTRY.number)
    assert proto_fields(discovery, "EndpointSlice")["addressType"] == (ADDRESS_TYPE.number, "string")
    # A Service's spec: every field counted as a list, refused, or in the rest at its largest.
    spec = proto_fields(core, "ServiceSpec")
    spec.update({"selector": (SELECTOR_ENTRY.number, "map")})
    assert set(spec) == set(LISTED_SERVICE_FIELDS) | set(REFUSED_SERVICE_FIELDS) | set(SERVICE_SPEC_REST.fields)
    assert declared(SERVICE_SPEC_REST).items() <= spec.items(), tag
    for message in (SESSION_AFFINITY_CONFIG, CLIENT_IP_CONFIG):
        assert declared(message) == proto_fields(core, message.name), (tag, message.name)
    assert holds(core, "ServiceSpec", "clusterIPs", "string", 18)
    assert holds(core, "ServiceSpec", "ipFamilies", "string", 19)
    assert holds(core, "ServiceSpec", "selector", "map", SELECTOR_ENTRY.number)
    assert holds(core, "ServiceSpec", "loadBalancerSourceRanges", "string", SOURCE_RANGE_ENTRY.number)


HOLDERS = (("Endpoints", "subsets", SUBSET_ENTRY, SUBSET_BYTES),
           ("EndpointSlice", "endpoints", SLICE_ENDPOINT_ENTRY, SLICE_ENDPOINT_BYTES),
           ("EndpointSlice", "ports", SLICE_PORT_ENTRY, SLICE_PORT_BYTES),
           ("ServiceSpec", "selector", SELECTOR_ENTRY, SELECTOR_ENTRY_BYTES))


@pytest.mark.parametrize("holder,field,entry,entry_bytes", HOLDERS, ids=[h[0] + "." + h[1] for h in HOLDERS])
def test_the_largest_entry_encodes_to_the_bytes_counted(holder, field, entry, entry_bytes):
    encodes(holder, field, entry, entry_bytes)


def test_the_rest_of_a_service_spec_encodes_to_the_bytes_counted():
    """Every field at its largest, and a second cluster IP and IP family (dual stack)."""
    spec = Field(2, "message", SERVICE_SPEC_REST)
    encodes("Service", "spec", spec, field_bytes(spec))
    second = field_bytes(SERVICE_SPEC_REST.fields["clusterIPs"]) + field_bytes(SERVICE_SPEC_REST.fields["ipFamilies"])
    assert SERVICE_SPEC_REST_BYTES == message_bytes(SERVICE_SPEC_REST) + second


def test_a_source_range_is_a_string_of_the_longest_cidr():
    assert SOURCE_RANGE_BYTES == 1 + 1 + len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")


def test_the_worst_case_counts_each_object_at_its_caps():
    """A Service of every list at its cap and every other field at its largest; an Endpoints of 1,000 one-address,
    one-port subsets; the larger end of a slice's endpoints times ports: 1,000 endpoints on one port (not one endpoint
    on 1,000 ports)."""
    assert SERVICE_BYTES == SYNCED_SERVICE_PORTS * SERVICE_PORT_BYTES + \
        SYNCED_SERVICE_SELECTOR_LABELS * SELECTOR_ENTRY_BYTES + SYNCED_SERVICE_SOURCE_RANGES * SOURCE_RANGE_BYTES + \
        SERVICE_SPEC_REST_BYTES
    assert ENDPOINTS_BYTES == SYNCED_ENDPOINT_ENTRIES * SUBSET_BYTES
    assert ENDPOINT_SLICE_BYTES == field_bytes(ADDRESS_TYPE) + SYNCED_ENDPOINT_ENTRIES * SLICE_ENDPOINT_BYTES + \
        SLICE_PORT_BYTES
    assert SLICE_ENDPOINT_BYTES > SLICE_PORT_BYTES


def test_the_docs_give_the_figures_the_code_counts():
    """docs/security-object-sizes.md's sizes, the rules table of docs/security-synced-objects.md and docs/team-guide.md's
    caps, from the constants the rules and the sum share."""
    model = " ".join(" ".join((PROJECT_DIR / "docs" / page).read_text() for page in
                              ("security-object-sizes.md", "security-synced-objects.md")).split())
    assert (f"its ports ({SYNCED_SERVICE_PORTS}; {SERVICE_PORT_BYTES} bytes each), its selector "
            f"({SYNCED_SERVICE_SELECTOR_LABELS} labels; {SELECTOR_ENTRY_BYTES} bytes each") in model
    assert f"source ranges ({SYNCED_SERVICE_SOURCE_RANGES}; {SOURCE_RANGE_BYTES} bytes each) and the rest" in model
    assert f"are refused: {SERVICE_SPEC_REST_BYTES} bytes), {round(SERVICE_BYTES / 2 ** 10)} KiB" in model
    assert f"{SUBSET_BYTES:,} bytes each" in model
    assert f"{ENDPOINTS_BYTES / 2 ** 20:.1f} MiB. Per EndpointSlice" in model
    assert f"({SLICE_ENDPOINT_BYTES:,} bytes an endpoint" in model
    assert f"{SLICE_PORT_BYTES} a port): {ENDPOINT_SLICE_BYTES / 2 ** 20:.1f} MiB" in model
    team = next(t for t in platform_of(dev_config()).teams if t.name == "team-nlp")
    budget = namespace_budget(team.vcluster)
    total = budget.services * (SERVICE_BYTES + ENDPOINTS_BYTES) + budget.endpoint_slices * ENDPOINT_SLICE_BYTES
    assert f"{total / 2 ** 20:.1f} MiB for its Services, Endpoints and EndpointSlices" in model
    guide = " ".join((PROJECT_DIR / "docs" / "team-guide.md").read_text().split())
    assert f"at most {SYNCED_SERVICE_SELECTOR_LABELS} labels on the host ({SYNCED_SERVICE_SELECTOR_LABELS - 2} of " \
           f"yours" in guide and f"at most {SYNCED_SERVICE_SOURCE_RANGES} `loadBalancerSourceRanges`" in guide
    limits = ", ".join(f"{field} ({cap})" for field, cap in TARGET_REF_BYTES.items()).replace(
        f"kind ({TARGET_REF_BYTES['kind']})", f"kind ({TARGET_REF_BYTES['kind']} bytes)")
    assert limits.replace(", fieldPath", " and fieldPath") in guide
    assert limits.replace(", fieldPath", " or fieldPath") in model  # the rules table
    assert f"zone at most {ZONE_BYTES} bytes" in guide and SLICE_NODE_HINTS == 1 and "one node hint" in guide


def test_the_security_model_gives_the_endpoint_ports_of_a_dev_teams_services():
    """What every node programs for one team's Services at the dev stack's quota: the Services' ports times its pods."""
    model = " ".join((PROJECT_DIR / "docs" / "security-isolation.md").read_text().split())
    budget = namespace_budget(next(t for t in platform_of(dev_config()).teams if t.name == "team-nlp").vcluster)
    assert (f"{SYNCED_SERVICE_PORTS * budget.services * budget.pods:,} endpoint ports for a team of the `dev` stack "
            f"({budget.services} Services, {budget.pods} pods;") in model
