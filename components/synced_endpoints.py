"""How many ports a tenant's Service has, and how many endpoint ports its Endpoints and EndpointSlices name (rules
``service-ports`` and ``endpoint-size`` of the synced-objects policy, components/synced_objects_admission.py), and
what their entries hold (``endpoint-text``, ``service-size``).

vCluster copies a Service's ports as the tenant writes them (pkg/server/filters/service.go creates the host Service
with the tenant's spec, services/syncer.go copies later port changes), an Endpoints' subsets whole
(endpoints/translate.go renames only pod references) and an EndpointSlice whole (endpointslices/translate.go; its
endpoints again on update). The API server bounds none of the first two, and a slice only to 1,000 endpoints of up
to 100 addresses and a few zone hints each, times 100 ports (k8s.io/api discovery/v1 types.go). What they cost the
other teams grows with ports times endpoints: every node's kube-proxy programs each port of a Service for each
endpoint serving it, and kube-state-metrics writes a series for every address and zone hint of a slice and every
port (internal/store/endpointslice.go, v2.19.1 and v2.20.0; for every address and port pair of an Endpoints where
that collector is on, endpoint.go). One slice of 1,000 endpoints of 100 addresses held some 100,000 series in the
shared Prometheus and 100,000 endpoint ports on every node, and a team's ``count/endpointslices`` times that
millions.

So a Service has at most ``SYNCED_SERVICE_PORTS`` ports, and an Endpoints (its ready and not-ready addresses times
its ports, per subset) or an EndpointSlice (its addresses and zone hints times its ports) at most
``SYNCED_ENDPOINT_ENTRIES``. Judged on create and update; an update that does not grow the count passes, so an object
from before the rules keeps its syncs.

A count does not bound bytes: the strings of each entry the API server does not check (a target reference's, a
slice's zone and node hints) and a Service's selector and source ranges, which it bounds each but not how many, are
held to the caps config/synced_endpoint_bytes.py counts, so each object is at most what the datastore's worst case
counts it at (config/synced_data.py). Cost: cel-go (interpreter/runtimecost.go) charges 1 for each identifier,
field selection, has(), size(), bytes(), operator and comparison (bytes() and size() of an untyped value cost 1
whatever its length): some 10 for each of a reference's seven strings, about 100 an entry with its zone, hints and
topology, so at most 1,000 entries (past them endpoint-size refuses the object anyway). cel-go measures about
101,000 for the largest Endpoints and EndpointSlice the rules admit (tests/test_celgo_figures.py), and 319,000 for
their addresses (rule endpoint-addresses); an update past the caps sums the strings of the object and of the old
one, about as much again each. A hostile object past the API server's limit (1,000,000) is refused, which is what the rule is for.
"""

from __future__ import annotations

from components.admission_metadata import served_list
from components.synced_object_sizes import text_bytes
from config.synced_data import (
    SYNCED_ENDPOINT_ENTRIES, SYNCED_SERVICE_PORTS, SYNCED_SERVICE_SELECTOR_LABELS, SYNCED_SERVICE_SOURCE_RANGES,
)
from config.synced_endpoint_bytes import CIDR_BYTES, DNS_SUBDOMAIN_BYTES, SLICE_NODE_HINTS, TARGET_REF_BYTES, ZONE_BYTES


# The lists of an EndpointSlice a policy sees as null when the slice has none: they have no omitempty (k8s.io/api
# discovery/v1 EndpointSlice), and etcd's protobuf keeps no empty list, so the syncer's copy of a slice without
# endpoints or ports carries nil ones, which the API server hands a policy as null, and has() reports present.
SLICE_NULL_WHEN_UNSET = ("endpoints", "ports")


def listed(field: str) -> str:
    """``field`` is set: present and, for a slice's list the API server may serve as null, a list (CEL has no list-to-null
    comparison in every implementation)."""
    holder, _, name = field.partition(".")
    null = holder in ("object", "oldObject") and name in SLICE_NULL_WHEN_UNSET
    return served_list(field) if null else f"has({field})"


def _size(field: str) -> str:
    return f"({listed(field)} ? size({field}) : 0)"


def _at_least_one(field: str) -> str:
    """A list's size, one when empty or absent: an endpoint without ports still costs its addresses."""
    return f"({listed(field)} && size({field}) > 0 ? size({field}) : 1)"


def service_ports(obj: str) -> str:
    return _size(f"{obj}.spec.ports")


def endpoints_entries(obj: str) -> str:
    """An Endpoints' endpoint ports: per subset, its ready and not-ready addresses times its ports."""
    per_subset = f"({_size('s.addresses')} + {_size('s.notReadyAddresses')}) * {_at_least_one('s.ports')}"
    return f"(has({obj}.subsets) ? {obj}.subsets.map(s, {per_subset}).sum() : 0)"


def slice_entries(obj: str) -> str:
    """An EndpointSlice's addresses and zone hints, one when it has none, times its ports (at most 1,000 endpoints:
    the API server's). A slice of no endpoints still costs its ports: discovery validation takes 20,000 of them, and
    kube-state-metrics writes a series for each."""
    per_endpoint = f"{_size('e.addresses')} + (has(e.hints) ? {_size('e.hints.forZones')} : 0)"
    addresses = f"({listed(f'{obj}.endpoints')} ? {obj}.endpoints.map(e, {per_endpoint}).sum() : 0)"
    return f"(({addresses} > 0 ? {addresses} : 1) * {_at_least_one(f'{obj}.ports')})"


def _bounded(count, cap: int, first: str = "") -> str:
    """``count`` of the object is within ``cap``, or an update does not grow it. ``first`` (a cheap test) comes before
    the count, so a list the API server does not bound is not walked past the cap."""
    within = f"{first} && {count('object')} <= {cap}" if first else f"{count('object')} <= {cap}"
    return f"({within}) || (request.operation == 'UPDATE' && {count('object')} <= {count('oldObject')})"


PROBLEM = ("every node's kube-proxy programs each port of a Service for each of its endpoints, and kube-state-metrics "
           "writes a series for each into the shared Prometheus")


def endpoint_rules() -> list[tuple[str, tuple[str, ...], str, str, str]]:
    """The rules as (name, kinds, expression, problem, fix)."""
    return [
        ("service-ports", ("Service",), _bounded(service_ports, SYNCED_SERVICE_PORTS),
         f"a Service may have at most {SYNCED_SERVICE_PORTS} ports (the most the host's EndpointSlice controller "
         f"writes into a slice): {PROBLEM}",
         "split the ports over several Services"),
        ("endpoint-size", ("Endpoints",),
         _bounded(endpoints_entries, SYNCED_ENDPOINT_ENTRIES,
                  f"(!has(object.subsets) || size(object.subsets) <= {SYNCED_ENDPOINT_ENTRIES})"),
         f"an Endpoints may name at most {SYNCED_ENDPOINT_ENTRIES} endpoint ports (its addresses times its ports, per "
         f"subset): {PROBLEM}",
         "name fewer addresses or ports, or split them over several Services"),
        ("endpoint-size", ("EndpointSlice",), _bounded(slice_entries, SYNCED_ENDPOINT_ENTRIES),
         f"an EndpointSlice may name at most {SYNCED_ENDPOINT_ENTRIES} endpoint ports (its addresses and zone hints "
         f"times its ports): {PROBLEM}",
         "name fewer addresses, hints or ports, or split them over several Services"),
    ]


# --- what the entries hold: rules endpoint-text and service-size ---------------------------------------------------


def _text(field: str) -> str:
    return f"(has({field}) ? {text_bytes(field)} : 0)"


def _text_within(field: str, cap: int) -> str:
    return f"(!has({field}) || {text_bytes(field)} <= {cap})"


def _reference(holder: str) -> tuple[str, str]:
    """(each string of ``holder``'s target reference within its cap, their bytes): vCluster copies a reference to
    anything but a pod as written and keeps a pod reference's apiVersion and fieldPath, and the API server checks
    none of them."""
    ref = f"{holder}.targetRef"
    within = " && ".join(_text_within(f"{ref}.{field}", cap) for field, cap in TARGET_REF_BYTES.items())
    text = " + ".join(_text(f"{ref}.{field}") for field in TARGET_REF_BYTES)
    return f"(!has({ref}) || ({within}))", f"(has({ref}) ? {text} : 0)"


def _addresses(field: str, part: int) -> str:
    """An Endpoints subset's ``field`` (addresses or notReadyAddresses): each reference within (part 0) or the
    references' bytes (part 1)."""
    check = _reference("a")[part]
    if part == 0:
        return f"(!has({field}) || {field}.all(a, {check}))"
    return f"(has({field}) ? {field}.map(a, {check}).sum() : 0)"


def _slice_endpoint(part: int) -> str:
    """A slice endpoint's reference, zone, node hints and deprecated topology within their caps (part 0), or their
    bytes and counts (part 1)."""
    within, text = _reference("e")
    nodes = "e.hints.forNodes"
    if part == 0:
        return (f"{within} && {_text_within('e.zone', ZONE_BYTES)} && (!has(e.hints) || !has({nodes}) || "
                f"(size({nodes}) <= {SLICE_NODE_HINTS} && "
                f"{nodes}.all(n, {_text_within('n.name', DNS_SUBDOMAIN_BYTES)})))"
                " && (!has(e.deprecatedTopology) || size(e.deprecatedTopology) == 0)")
    return (f"{text} + {_text('e.zone')} + (has(e.hints) && has({nodes}) ? {nodes}.map(n, 1 + {_text('n.name')}).sum()"
            " : 0) + (has(e.deprecatedTopology) ? size(e.deprecatedTopology) : 0)")


def endpoints_text(obj: str) -> str:
    each = " + ".join(_addresses(f"s.{field}", 1) for field in ("addresses", "notReadyAddresses"))
    return f"(has({obj}.subsets) ? {obj}.subsets.map(s, {each}).sum() : 0)"


def slice_text(obj: str) -> str:
    return f"({listed(f'{obj}.endpoints')} ? {obj}.endpoints.map(e, {_slice_endpoint(1)}).sum() : 0)"


def _source_ranges(obj: str) -> str:
    ranges = f"{obj}.spec.loadBalancerSourceRanges"
    return f"(has({ranges}) ? {ranges}.map(r, 1 + {text_bytes('r')}).sum() : 0)"


def _not_grown(text) -> str:
    """An update whose entries hold no more than before: an object from before the rule keeps the syncer's updates."""
    return f"(request.operation == 'UPDATE' && {text('object')} <= {text('oldObject')})"


def text_rules() -> list[tuple[str, tuple[str, ...], str, str, str]]:
    """The rules bounding what each entry holds, as (name, kinds, expression, problem, fix): each string the API
    server does not check at its cap (config/synced_endpoint_bytes.py), so the entries endpoint-size and
    service-ports count are each as large as the datastore's worst case counts them at most."""
    reference = ", ".join(f"{field} {cap}" for field, cap in TARGET_REF_BYTES.items())
    subsets = " && ".join(_addresses(f"s.{field}", 0) for field in ("addresses", "notReadyAddresses"))
    selector, ranges = "object.spec.selector", "object.spec.loadBalancerSourceRanges"
    etcd = "every copy lands in the host's etcd, which turns the whole cluster read-only when full"
    return [
        ("endpoint-text", ("Endpoints",),
         f"(!has(object.subsets) || object.subsets.all(s, {subsets})) || {_not_grown(endpoints_text)}",
         f"an Endpoints address's targetRef may hold at most these bytes: {reference} (the API server checks none, "
         f"and vCluster copies a reference as written): {etcd}",
         "name the object a reference points to by its real kind, namespace, name and uid, or leave targetRef out"),
        ("endpoint-text", ("EndpointSlice",),
         f"({listed('object.endpoints')} ? object.endpoints.all(e, {_slice_endpoint(0)}) : true) || "
         f"{_not_grown(slice_text)}",
         f"an EndpointSlice endpoint's targetRef may hold at most these bytes: {reference}; its zone at most "
         f"{ZONE_BYTES}, at most {SLICE_NODE_HINTS} node hint of a node's name, and no deprecatedTopology (the API "
         f"server checks none of these, and vCluster copies them as written): {etcd}",
         "name the object a reference points to by its real kind, namespace, name and uid, and a zone and node "
         "hint as the EndpointSlice controller writes them"),
        ("service-size", ("Service",),
         f"({_size(selector)} <= {SYNCED_SERVICE_SELECTOR_LABELS} && {_size(ranges)} <= "
         f"{SYNCED_SERVICE_SOURCE_RANGES} && (!has({ranges}) || "
         f"{ranges}.all(r, {text_bytes('r')} <= {CIDR_BYTES}))) || "
         f"(request.operation == 'UPDATE' && {_size(selector)} <= {_size('oldObject.spec.selector')} && "
         f"{_source_ranges('object')} <= {_source_ranges('oldObject')})",
         f"a Service may have at most {SYNCED_SERVICE_SELECTOR_LABELS} selector labels on the host (vCluster adds "
         f"two) and {SYNCED_SERVICE_SOURCE_RANGES} loadBalancerSourceRanges of at most {CIDR_BYTES} bytes each (the "
         "API server bounds neither count and lets a range carry padding): the host's EndpointSlice controller "
         f"matches the selector against every pod of the namespace, and {etcd}",
         "select pods by fewer labels (an app and an instance label), and merge source ranges into wider CIDRs"),
    ]
