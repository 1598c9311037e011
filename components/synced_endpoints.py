"""How many ports a tenant's Service has, and how many endpoint ports its Endpoints and EndpointSlices name (rules
``service-ports`` and ``endpoint-size`` of the synced-objects policy, components/synced_objects_admission.py).

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
"""

from __future__ import annotations

from config.synced_data import SYNCED_ENDPOINT_ENTRIES, SYNCED_SERVICE_PORTS


def _size(field: str) -> str:
    return f"(has({field}) ? size({field}) : 0)"


def _at_least_one(field: str) -> str:
    """A list's size, one when empty or absent: an endpoint without ports still costs its addresses."""
    return f"(has({field}) && size({field}) > 0 ? size({field}) : 1)"


def service_ports(obj: str) -> str:
    return _size(f"{obj}.spec.ports")


def endpoints_entries(obj: str) -> str:
    """An Endpoints' endpoint ports: per subset, its ready and not-ready addresses times its ports."""
    per_subset = f"({_size('s.addresses')} + {_size('s.notReadyAddresses')}) * {_at_least_one('s.ports')}"
    return f"(has({obj}.subsets) ? {obj}.subsets.map(s, {per_subset}).sum() : 0)"


def slice_entries(obj: str) -> str:
    """An EndpointSlice's addresses and zone hints, times its ports (at most 1,000 endpoints: the API server's)."""
    per_endpoint = f"{_size('e.addresses')} + (has(e.hints) ? {_size('e.hints.forZones')} : 0)"
    addresses = f"(has({obj}.endpoints) ? {obj}.endpoints.map(e, {per_endpoint}).sum() : 0)"
    return f"({addresses} * {_at_least_one(f'{obj}.ports')})"


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
