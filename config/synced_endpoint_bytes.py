"""What a synced Service's, Endpoints' and EndpointSlice's entries cost in the host's etcd at most, in bytes, counted
as config/synced_entry_bytes.py counts a pod's (protobuf, k8s.io/api ``core/v1`` and ``discovery/v1``
``generated.proto``; tests/test_synced_endpoint_bytes_contract.py holds the fields against it at every accepted
Kubernetes minor and has protobuf encode each largest entry).

Each string is counted at the longest value the API server's validation lets it hold, or, where it checks none, at
the cap the host's synced-objects policy holds it to (components/synced_endpoints.py, rules ``endpoint-text`` and
``service-size``). The validation read is kubernetes/kubernetes ``pkg/apis/core/validation/validation.go``
(``validateEndpointSubsets``, ``validateEndpointAddress``, ``validateEndpointPort``, ``ValidateService``) and
``pkg/apis/discovery/validation/validation.go`` (``validateEndpoints``, ``validatePorts``, ``validateHints``):
that repository is not mirrored, so it was read through the library's code search, untagged, and nothing here
rests on it that the policy does not hold itself except the DNS names, label values and qualified names below.
"""

from __future__ import annotations

from config.synced_entry_bytes import (
    DNS_LABEL_BYTES, ENUM_BYTES, IP_BYTES, LABEL_VALUE_BYTES, PORT_VALUE, QUALIFIED_NAME_BYTES, Field, Message,
    field_bytes, message_bytes, string_field,
)

# A node's name and an endpoint's nodeName (validation ValidateNodeName: a DNS subdomain).
DNS_SUBDOMAIN_BYTES = 253
# The host's policy takes canonical IPv4 addresses only (rule endpoint-addresses): 255.255.255.255.
IPV4_BYTES = 15
# The longest CIDR the API server takes unpadded (an IPv6 address and /128). Validation lets a Service's
# loadBalancerSourceRanges carry spaces around one (kube-proxy trims them: "validation mistakenly allows whitespace
# padding"), so the policy holds each to this length (rule service-size).
CIDR_BYTES = 39 + len("/128")
# A target reference's strings, none of which the API server checks on an Endpoints or EndpointSlice: each held by
# the policy to what the API server writes into the object it names (rule endpoint-text). A kind is a Go type or a
# CRD's kind, a DNS-1035 label; a namespace a DNS label; a name a DNS subdomain; a uid the UUID the API server
# generates; an apiVersion a group (a DNS subdomain) and a version (a DNS label); a resourceVersion etcd's revision,
# a uint64 in decimal; a field path a container's (``spec.containers{name}``) with room to spare.
TARGET_REF_BYTES = {"kind": DNS_LABEL_BYTES, "namespace": DNS_LABEL_BYTES, "name": DNS_SUBDOMAIN_BYTES, "uid": 36,
                    "apiVersion": DNS_SUBDOMAIN_BYTES + 1 + DNS_LABEL_BYTES, "resourceVersion": 20,
                    "fieldPath": DNS_SUBDOMAIN_BYTES}
# A slice endpoint's zone, which discovery validation does not check: a zone is a node's topology.kubernetes.io/zone
# label value (rule endpoint-text).
ZONE_BYTES = LABEL_VALUE_BYTES


OBJECT_REFERENCE = Message("ObjectReference", {
    name: string_field(number, TARGET_REF_BYTES[name]) for number, name in enumerate(
        ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"), start=1)})
# core/v1: an address's hostname a DNS label, its nodeName a node's name (validateEndpointAddress).
ENDPOINT_ADDRESS = Message("EndpointAddress", {
    "ip": string_field(1, IPV4_BYTES), "hostname": string_field(3, DNS_LABEL_BYTES),
    "nodeName": string_field(4, DNS_SUBDOMAIN_BYTES),
    "targetRef": Field(2, "message", OBJECT_REFERENCE)})
# A port's name a DNS label, its app protocol a qualified name (validateEndpointPort; discovery validatePorts).
CORE_ENDPOINT_PORT = Message("EndpointPort", {
    "name": string_field(1, DNS_LABEL_BYTES), "port": Field(2, "int32", PORT_VALUE),
    "protocol": string_field(3, ENUM_BYTES),
    "appProtocol": string_field(4, QUALIFIED_NAME_BYTES)})
SLICE_PORT = Message("EndpointPort", {
    "name": string_field(1, DNS_LABEL_BYTES), "protocol": string_field(2, ENUM_BYTES), "port": Field(3,
    "int32", PORT_VALUE),
    "appProtocol": string_field(4, QUALIFIED_NAME_BYTES)})
# A subset as the worst case counts it: one address and one port (entries of the count rule endpoint-size).
ENDPOINT_SUBSET = Message("EndpointSubset", {
    "addresses": Field(1, "message", ENDPOINT_ADDRESS), "ports": Field(3, "message", CORE_ENDPOINT_PORT)})
ENDPOINT_CONDITIONS = Message("EndpointConditions", {
    "ready": Field(1, "bool"), "serving": Field(2, "bool"), "terminating": Field(3, "bool")})
FOR_NODE = Message("ForNode", {"name": string_field(1, DNS_SUBDOMAIN_BYTES)})
FOR_ZONE = Message("ForZone", {"name": string_field(1, LABEL_VALUE_BYTES)})
# The node hints an endpoint may carry (rule endpoint-text): the EndpointSlice controller writes one, the endpoint's
# own node, for a Service preferring it (trafficDistribution PreferSameNode).
SLICE_NODE_HINTS = 1
ENDPOINT_HINTS = Message("EndpointHints", {"forNodes": Field(2, "message", FOR_NODE)})
# A slice endpoint as the worst case counts it: one address, its conditions, hostname, reference, node, zone and
# node hint. More addresses or zone hints each cost less than another endpoint and count as entries of endpoint-size;
# deprecatedTopology is refused (rule endpoint-text; the v1 API drops writes to it).
SLICE_ENDPOINT = Message("Endpoint", {
    "addresses": string_field(1, IPV4_BYTES), "conditions": Field(2, "message", ENDPOINT_CONDITIONS),
    "hostname": string_field(3, DNS_LABEL_BYTES), "targetRef": Field(4, "message", OBJECT_REFERENCE),
    "nodeName": string_field(6, DNS_SUBDOMAIN_BYTES), "zone": string_field(7, ZONE_BYTES),
    "hints": Field(8, "message", ENDPOINT_HINTS)})
# A Service selector's entry: a label key (a qualified name) and value (ValidateService: ValidateLabels), stored as
# a map entry message.
SELECTOR_ENTRY_MESSAGE = Message("SelectorEntry", {"key": string_field(1, QUALIFIED_NAME_BYTES),
                                                   "value": string_field(2, LABEL_VALUE_BYTES)})

# The rest of a Service's spec at its largest: its cluster IPs and IP families (validation: two of each at most, the
# second counted below), values of fixed sets, the load balancer class a qualified name, a session's timeout at most a
# day (MaxClientIPServiceAffinitySeconds). Its ports, selector and source ranges are counted as lists
# (LISTED_SERVICE_FIELDS); its externalIPs, loadBalancerIP and externalName are refused (rules service-external-ips,
# service-load-balancer-ip, service-type).
LISTED_SERVICE_FIELDS = ("ports", "selector", "loadBalancerSourceRanges")
REFUSED_SERVICE_FIELDS = ("externalIPs", "loadBalancerIP", "externalName")
CLIENT_IP_CONFIG = Message("ClientIPConfig", {"timeoutSeconds": Field(1, "int32", 86400)})
SESSION_AFFINITY_CONFIG = Message("SessionAffinityConfig", {"clientIP": Field(1, "message", CLIENT_IP_CONFIG)})
SERVICE_SPEC_REST = Message("ServiceSpec", {
    "clusterIP": string_field(3, IP_BYTES), "clusterIPs": string_field(18, IP_BYTES),
    "type": string_field(4, ENUM_BYTES),
    "sessionAffinity": string_field(7, ENUM_BYTES), "externalTrafficPolicy": string_field(11, ENUM_BYTES),
    "healthCheckNodePort": Field(12, "int32", PORT_VALUE), "publishNotReadyAddresses": Field(13, "bool"),
    "sessionAffinityConfig": Field(14, "message", SESSION_AFFINITY_CONFIG), "ipFamilies": string_field(19, ENUM_BYTES),
    "ipFamilyPolicy": string_field(17, ENUM_BYTES), "allocateLoadBalancerNodePorts": Field(20, "bool"),
    "loadBalancerClass": string_field(21, QUALIFIED_NAME_BYTES), "internalTrafficPolicy": string_field(22, ENUM_BYTES),
    "trafficDistribution": string_field(23, ENUM_BYTES)})
SERVICE_SPEC_REST_BYTES = message_bytes(SERVICE_SPEC_REST) + field_bytes(SERVICE_SPEC_REST.fields["clusterIPs"]) + \
    field_bytes(SERVICE_SPEC_REST.fields["ipFamilies"])

# Each as an entry of the list holding it: EndpointSubset in Endpoints.subsets, Endpoint and EndpointPort in
# EndpointSlice.endpoints and .ports, ServiceSpec.selector and .loadBalancerSourceRanges.
SUBSET_ENTRY = Field(2, "message", ENDPOINT_SUBSET)
SLICE_ENDPOINT_ENTRY = Field(2, "message", SLICE_ENDPOINT)
SLICE_PORT_ENTRY = Field(3, "message", SLICE_PORT)
SELECTOR_ENTRY = Field(2, "message", SELECTOR_ENTRY_MESSAGE)
SOURCE_RANGE_ENTRY = string_field(9, CIDR_BYTES)
# A slice's addressType: IPv4, the only one the policy takes (rule endpoint-addresses).
ADDRESS_TYPE = string_field(4, len("IPv4"))
SUBSET_BYTES = field_bytes(SUBSET_ENTRY)
SLICE_ENDPOINT_BYTES = field_bytes(SLICE_ENDPOINT_ENTRY)
SLICE_PORT_BYTES = field_bytes(SLICE_PORT_ENTRY)
SELECTOR_ENTRY_BYTES = field_bytes(SELECTOR_ENTRY)
SOURCE_RANGE_BYTES = field_bytes(SOURCE_RANGE_ENTRY)


def endpoints_bytes(entries: int) -> int:
    """An Endpoints of at most ``entries`` endpoint ports (addresses times ports, per subset, each subset holding an
    address: the API server's): a subset of one address and one port per entry is the most it stores, since a
    subset's addresses times its ports is at least its addresses, its ports and one."""
    return entries * SUBSET_BYTES


def endpoint_slice_bytes(entries: int) -> int:
    """An EndpointSlice of at most ``entries`` endpoint ports (its addresses and zone hints, or one, times its ports,
    or one): linear in endpoints and in ports, so at most at one end, every entry an endpoint of one address on one
    port or one endpoint on every port."""
    return field_bytes(ADDRESS_TYPE) + max(entries * SLICE_ENDPOINT_BYTES + SLICE_PORT_BYTES,
                                           SLICE_ENDPOINT_BYTES + entries * SLICE_PORT_BYTES)
