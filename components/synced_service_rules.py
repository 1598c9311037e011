"""The synced-objects policy's rules for Services (components/synced_objects_admission.py): which types, addresses,
node ports, annotations and load-balancer class a tenant's Service may hold on the host
(docs/security-synced-objects.md, Services).

vCluster's API proxy creates a tenant's Service on the host with its spec as written, cluster IPs and node ports
included (pkg/server/filters/service.go), and services/syncer.go later copies ``type``, ``externalIPs``, ports and
the load balancer fields.
"""

from __future__ import annotations

import ipaddress
from typing import Sequence

# Private names: each rule below is laid out as one call of _rule.
from components.admission_metadata import cel_string, unchanged_from_old
from components.synced_rule_parts import CANONICAL_IPV4, absent as _absent, kind_rule as _rule, meta_of as _meta
from components.tenant_access import EXTERNAL_DNS_PREFIX
from config.load_balancer_keys import (
    AWS_ADDITIONAL_TAGS, LOAD_BALANCER_PREFIXES, LOAD_BALANCER_SUFFIXES, NODE_PORT_LOCAL_PREFIX,
)
from config.load_balancer_tags import tags_annotation
from config.model import Team


# An IPv6 address as Go prints it (lowercase hex), and the IPv4-mapped ones among them (a zero prefix, then ffff),
# which kube-proxy routes as the IPv4 address they carry.
_IPV6_AS_PRINTED = "^[0-9a-f:]*:[0-9a-f:]*$"
_IPV4_MAPPED = "^[0:]*:ffff:"


def written_as_allocated(address: str) -> str:
    """A cluster address as the host writes the ones it allocates: canonical IPv4, IPv6 in lowercase hex and not
    IPv4-mapped, or None (headless). API servers that validate the field leniently (before 1.33, and after unless
    StrictIPCIDRValidation is on) take "010.096.000.010" and "::ffff:10.96.0.10" too, and kube-proxy routes both as
    10.96.0.10. An update may keep an address the Service already held."""
    return (f"({address} == '' || {address} == 'None' || {address}.matches('{CANONICAL_IPV4}') || "
            f"({address}.matches('{_IPV6_AS_PRINTED}') && !{address}.matches('{_IPV4_MAPPED}')) || "
            f"(request.operation == 'UPDATE' && has(oldObject.spec.clusterIPs) && "
            f"{address} in oldObject.spec.clusterIPs))")


def holds_none_of(ports: Sequence[int]) -> str:
    """The Service holds none of ``ports`` as a node port or health-check node port. On CREATE the host has
    allocated the node ports before admission runs: a port is refused whether the tenant named it or the allocator
    picked it while it was free."""
    held = sorted(ports)
    return (f"(!has(object.spec.ports) || object.spec.ports.all(p, !has(p.nodePort) || !(p.nodePort in {held}))) "
            f"&& (!has(object.spec.healthCheckNodePort) || !(object.spec.healthCheckNodePort in {held}))")


def kept_on_update(field: str, key: str) -> str:
    """The request is an UPDATE leaving ``metadata.<field>[key]`` as the object held it (the implementation's own
    writes, which the syncer echoes, and what a Service held before a rule was added)."""
    return f"(request.operation == 'UPDATE' && {unchanged_from_old(field, key)})"


def load_balancer_annotation_rule(team: Team) -> dict:
    """The keys that steer the load-balancer implementation: only those the team's settings list, on every Service,
    as Cilium reads some on a ClusterIP Service too (service.cilium.io/global: in a ClusterMesh, the Service's
    endpoints join those of the Service of the same namespace and name in the other clusters)."""
    allowed = team.vcluster.services
    governed = " || ".join([*(f"key.startsWith('{prefix}')" for prefix in LOAD_BALANCER_PREFIXES),
                            *(f"key.endsWith('{suffix}')" for suffix in LOAD_BALANCER_SUFFIXES)])
    listed = ", ".join(allowed.load_balancer_annotations) or "none"
    # The platform's tags for the team's load balancers, as the team's vCluster writes them: that value only.
    tagged = (f" || (key == '{AWS_ADDITIONAL_TAGS}' && {_meta('object', 'annotations')}[key] == "
              f"{cel_string(tags_annotation(allowed.load_balancer_tags))})" if allowed.load_balancer_tags else "")
    return _rule(
        "service-load-balancer-annotations", ("Service",),
        f"{_meta('object', 'annotations')}.all(key, !({governed}) || "
        f"key in {list(allowed.load_balancer_annotations)}{tagged} || {kept_on_update('annotations', 'key')})",
        f"of the load-balancer annotations (keys under {', '.join(LOAD_BALANCER_PREFIXES)} and keys ending in "
        f"{', '.join(LOAD_BALANCER_SUFFIXES)}), team "
        f"{team.name}'s Services, of any type, may carry only those config vcluster.services.loadBalancerAnnotations "
        f"lists: {listed}; the others hand the team something of the account or the network (an address, subnet, "
        "security group, certificate, log bucket, address pool, cost tag or a node's network interface) or, on a "
        "ClusterIP Service, another cluster's clients of a Service named as this one",
        "remove the annotation, or ask the platform team to list it for your team")


def load_balancer_tags_rule(team: Team) -> dict:
    """A Service that becomes a load balancer carries the platform's tags for the team's load balancers (the team's
    vCluster sets them, config/load_balancer_tags.py): one without would be on nobody's bill. A load balancer keeps
    syncing while its annotation stays as it was: none, from before the rule, or the site's tags before a change."""
    value = cel_string(tags_annotation(team.vcluster.services.load_balancer_tags))
    annotations, old_annotations = _meta('object', 'annotations'), _meta('oldObject', 'annotations')
    key = f"'{AWS_ADDITIONAL_TAGS}'"
    return _rule(
        "service-load-balancer-tags", ("Service",),
        f"variables.serviceType != 'LoadBalancer' || ({key} in {annotations} && {annotations}[{key}] == {value}) || "
        f"(request.operation == 'UPDATE' && has(oldObject.spec.type) && oldObject.spec.type == 'LoadBalancer' && "
        f"({key} in {annotations}) == ({key} in {old_annotations}) && "
        f"(!({key} in {annotations}) || {annotations}[{key}] == {old_annotations}[{key}]))",
        f"team {team.name}'s load balancers carry the site's and the team's AWS tags, annotation "
        f"{AWS_ADDITIONAL_TAGS}: {tags_annotation(team.vcluster.services.load_balancer_tags)} (set inside your "
        "vCluster by the MutatingAdmissionPolicy gpu-tenancy-load-balancer-tags), so the account's bill finds "
        "its owner",
        "create the Service with that annotation and value (the policy gpu-tenancy-load-balancer-tags in your "
        "vCluster writes it; if it was deleted, ask the platform team to restore it)")


def load_balancer_class_rule(team: Team) -> dict:
    """The class that hands a LoadBalancer Service to another controller (the API server takes one on no other
    type): only those the team's settings list."""
    classes = team.vcluster.services.load_balancer_classes
    return _rule(
        "service-load-balancer-class", ("Service",),
        f"{_absent('loadBalancerClass')} || object.spec.loadBalancerClass in {list(classes)} || "
        "(request.operation == 'UPDATE' && has(oldObject.spec.loadBalancerClass) && "
        "oldObject.spec.loadBalancerClass == object.spec.loadBalancerClass)",
        f"team {team.name}'s Services may name only the load-balancer classes config "
        f"vcluster.services.loadBalancerClasses lists ({', '.join(classes) or 'none'}): a class hands the Service to "
        "another controller, which reads annotations the platform does not judge",
        "remove spec.loadBalancerClass so the host's own load balancer serves the Service")


def service_rules(team: Team, cluster_dns: str, endpoint_node_ports: Sequence[int],
                  trusted_node_ports: Sequence[int]) -> list[dict]:
    allowed = team.vcluster.services
    dns = str(ipaddress.ip_address(cluster_dns))
    types = ["ClusterIP"] + (["NodePort"] if allowed.node_ports else []) + \
        (["LoadBalancer"] if allowed.load_balancers else [])
    rules = [
        _rule("service-external-ips", ("Service",),
              "!has(object.spec.externalIPs) || size(object.spec.externalIPs) == 0",
              "spec.externalIPs makes every node and pod of the cluster send traffic for those addresses to this "
              "Service", "remove spec.externalIPs"),
        _rule("service-type", ("Service",), f"variables.serviceType in {types} && {_absent('externalName')}",
              f"team {team.name}'s Services may be of type {', '.join(types)} (config vcluster.services.nodePorts "
              "and loadBalancers); ExternalName Services are not copied to the host",
              "use type ClusterIP, or ask the platform team for node ports or load balancers; an ExternalName "
              "Service still resolves inside your vCluster"),
        # The program names each vCluster's endpoint this way; external-dns resolves two Services claiming one name
        # by its own ordering, not by who the name belongs to.
        _rule("external-dns", ("Service",),
              f"!{_meta('object', 'annotations')}.exists(key, key.startsWith('{EXTERNAL_DNS_PREFIX}'))",
              f"annotations {EXTERNAL_DNS_PREFIX}* have the site's external-dns publish DNS names (any name of its "
              "zones, another team's vCluster endpoint included) for this Service",
              f"remove the {EXTERNAL_DNS_PREFIX}* annotations; ask the platform team for a DNS name"),
        _rule("node-port-local", ("Service",),
              f"{_meta('object', 'annotations')}.all(key, !key.startsWith('{NODE_PORT_LOCAL_PREFIX}') || "
              f"{kept_on_update('annotations', 'key')})",
              f"annotations {NODE_PORT_LOCAL_PREFIX}* have Antrea forward a port of each node running one of the "
              "Service's pods to that pod (NodePortLocal): node ports outside the team's quota and the site's "
              "node-port rules",
              f"remove the {NODE_PORT_LOCAL_PREFIX}* annotations; ask the platform team for node ports or a load "
              "balancer"),
        _rule("service-load-balancer-ip", ("Service",), _absent("loadBalancerIP"),
              "spec.loadBalancerIP claims an address the platform did not give this team",
              "remove spec.loadBalancerIP and use the address the load balancer assigns"),
        # vCluster's API proxy creates the host Service with the tenant's clusterIP and clusterIPs. The host
        # allocates an address before validating admission runs, so a chosen address cannot be told from an
        # allocated one; the address every pod's resolver uses is refused whoever picked it.
        _rule("service-cluster-ip", ("Service",),
              f"(!has(object.spec.clusterIP) || (object.spec.clusterIP != '{dns}' && "
              f"{written_as_allocated('object.spec.clusterIP')})) && "
              f"(!has(object.spec.clusterIPs) || (!('{dns}' in object.spec.clusterIPs) && "
              f"object.spec.clusterIPs.all(a, {written_as_allocated('a')})))",
              f"a Service may not hold the host cluster's DNS address {dns} (spec.clusterIP, spec.clusterIPs), "
              "in any spelling: every pod of the cluster would send its name lookups to it; a chosen address is "
              "written as the host writes addresses (canonical IPv4, or lowercase IPv6 that does not map an IPv4 "
              "address)",
              "remove spec.clusterIP and spec.clusterIPs and let the host allocate an address (or use clusterIP: "
              "None for a headless Service)"),
    ]
    fix = ("remove nodePort and healthCheckNodePort and let the host allocate free ones; if you did not choose the "
           "port, the host's allocator did: create the Service again")
    # The chart, not the syncer, writes each control plane's Service, so no endpoint is ever judged here.
    held = (("service-endpoint-node-ports", endpoint_node_ports,
             f"the node ports {', '.join(map(str, sorted(endpoint_node_ports)))} are the site's vCluster endpoints "
             "(config teams[].vcluster.access.nodePort): a Service holding one keeps that team's control plane off its "
             "port or takes its members' connections"),
            ("service-trusted-node-ports", trusted_node_ports,
             f"the host's nodes pull images from localhost on the node ports {', '.join(map(str, trusted_node_ports))} "
             "(MicroK8s' registry): a Service holding one would serve its images to every pod of the cluster that "
             "names them"))
    rules += [_rule(name, ("Service",), holds_none_of(ports), problem, fix)
              for name, ports, problem in held if allowed.node_ports and ports]
    rules.append(load_balancer_annotation_rule(team))
    if allowed.load_balancers:
        rules.append(load_balancer_class_rule(team))
    if allowed.load_balancer_tags:
        rules.append(load_balancer_tags_rule(team))
    if not allowed.node_ports:
        rules.append(_rule(
            "service-node-ports", ("Service",),
            "(!has(object.spec.ports) || object.spec.ports.all(p, !has(p.nodePort) || p.nodePort == 0)) && "
            "(!has(object.spec.healthCheckNodePort) || object.spec.healthCheckNodePort == 0) && "
            "(variables.serviceType != 'LoadBalancer' || (has(object.spec.allocateLoadBalancerNodePorts) && "
            "!object.spec.allocateLoadBalancerNodePorts))",
            f"team {team.name} may hold no node ports (config vcluster.services.nodePorts: 0)",
            "remove nodePort and healthCheckNodePort; a LoadBalancer Service sets allocateLoadBalancerNodePorts: "
            "false and externalTrafficPolicy: Cluster"))
    return rules
