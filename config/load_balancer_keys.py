"""The Service annotations a load-balancer implementation reads, and which of them a team may set
(vcluster.services.loadBalancerAnnotations; the host policy's rule: components/synced_service_rules.py).

A team allowed load balancers shapes its own one: protocols, health checks, timeouts, an internal scheme. The keys
that name something of the account or the network (an Elastic IP, a private address, a subnet, a security group, a
certificate, a log bucket, cost tags, an address pool) would hand the team what belongs to the platform or to another
team, so they are refused unless a site lists them for a team. tests/test_load_balancer_keys.py and
tests/test_network_plugin_keys.py read every key the implementations read at their tags and fail on one this module
does not place.
"""

from __future__ import annotations

import re

from config.key_types import Check

# The annotation prefixes of the load-balancer implementations the policy knows. A key under one of them passes only
# if the team's list holds it.
LOAD_BALANCER_PREFIXES = (
    # Every cloud provider's own (AWS, Azure, OCI, ... under service.beta.kubernetes.io) and the AWS Load Balancer
    # Controller's second prefix.
    "service.beta.kubernetes.io/", "service.k8s.aws/",
    # MetalLB's two (MicroK8s' metallb addon).
    "metallb.io/", "metallb.universe.tf/",
    # On a kubeconfig site, kube-vip: its cloud provider's addresses, the node interface, VLAN, MAC address and egress
    # address it sets up for a Service, and a switch of its development builds that its releases still read.
    "kube-vip.io/", "development.kube-vip.io/",
    # Cilium: its LB IPAM's address and address sharing (under io.cilium/ too), how its datapath exposes the Service.
    "lbipam.cilium.io/", "service.cilium.io/", "io.cilium/",
    # Antrea: its address pool, another Service's address shared.
    "service.antrea.io/",
    # kube-router: a Service's cluster, external or load-balancer address announced to the site's routers over BGP
    # (a ClusterIP Service reachable from outside the cluster), and how its proxy serves the Service.
    "kube-router.io/",
    # OpenELB: the address or address pool (Eip) a Service names, the protocol and the node proxy that announce it.
    "lb.kubesphere.io/", "eip.openelb.kubesphere.io/", "protocol.openelb.kubesphere.io/",
    "layer2.openelb.kubesphere.io/", "node-proxy.openelb.kubesphere.io/",
    # kube-ovn: a ClusterIP announced over BGP, the VPC or subnet whose load balancer carries the Service, external
    # addresses from a subnet, the network its load-balancer pods attach to.
    "ovn.kubernetes.io/",
)
# Keys judged by how they end, for implementations that build them from a name: kube-ovn reads
# <network provider>.kubernetes.io/logical_switch for the subnet of its load-balancer pods' attached network.
LOAD_BALANCER_SUFFIXES = (".kubernetes.io/logical_switch",)
# Antrea's NodePortLocal: a Service annotated under it has every node running one of its pods forward a port of
# the node's own to that pod, whatever the team's node ports (components/synced_service_rules.py).
NODE_PORT_LOCAL_PREFIX = "nodeportlocal.antrea.io/"

AWS_PREFIX = "service.beta.kubernetes.io/aws-load-balancer-"
# The key whose "key=value,..." list the AWS cloud provider adds to a load balancer's tags: the platform's to set
# (config/load_balancer_tags.py).
AWS_ADDITIONAL_TAGS = AWS_PREFIX + "additional-resource-tags"

# The keys of the AWS cloud provider (kubernetes/cloud-provider-aws pkg/providers/v1, the controller EKS runs for
# Services without a loadBalancerClass) that shape only the team's own load balancer: the default list on EKS.
AWS_TEAM_KEYS = tuple(AWS_PREFIX + key for key in (
    "backend-protocol", "connection-draining-enabled", "connection-draining-timeout", "connection-idle-timeout",
    "cross-zone-load-balancing-enabled", "healthcheck-healthy-threshold", "healthcheck-interval",
    "healthcheck-path", "healthcheck-port", "healthcheck-protocol", "healthcheck-timeout",
    "healthcheck-unhealthy-threshold", "internal", "proxy-protocol", "ssl-negotiation-policy", "ssl-ports",
    "target-group-attributes", "target-node-labels", "type",
))

# The keys of the same provider that reach beyond the team's load balancer, with what they would hand the team.
AWS_PLATFORM_KEYS = {AWS_PREFIX + key: reason for key, reason in {
    "access-log-enabled": "access logs written to a bucket of the account",
    "access-log-emit-interval": "access logs written to a bucket of the account",
    "access-log-s3-bucket-name": "access logs written to any bucket of the account the load balancers may write to",
    "access-log-s3-bucket-prefix": "access logs written to a bucket of the account",
    "additional-resource-tags": "the account's cost-allocation tags (another team's, on its bill)",
    "eip-allocations": "any Elastic IP of the account, the platform's or another team's",
    "extra-security-groups": "any security group of the VPC, with what other resources let it reach",
    "private-ipv4-addresses": "chosen private addresses of the VPC's subnets",
    "security-groups": "any security group of the VPC in place of the one the provider manages",
    "ssl-cert": "any certificate of the account, the platform's names included",
    "subnets": "any subnet of the VPC, public ones included",
}.items()}

# A key under one of the prefixes: the name part as Kubernetes writes one (alphanumerics, '-', '_', '.').
_UNDER_A_PREFIX = "(" + "|".join(re.escape(prefix) for prefix in LOAD_BALANCER_PREFIXES) + ")"
_WITH_A_SUFFIX = "[a-z0-9]([-a-z0-9.]*[a-z0-9])?(" + "|".join(map(re.escape, LOAD_BALANCER_SUFFIXES)) + ")"
LOAD_BALANCER_KEY = Check(
    f"{_UNDER_A_PREFIX}[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?|{_WITH_A_SUFFIX}",
    "is not a load-balancer annotation key: only keys under " + ", ".join(LOAD_BALANCER_PREFIXES) + " and keys "
    "ending in " + ", ".join(LOAD_BALANCER_SUFFIXES) + " are judged (any other key passes without being listed)",
    "list full keys such as service.beta.kubernetes.io/aws-load-balancer-ssl-cert")
# spec.loadBalancerClass as the API server takes it: a label-style key with a DNS prefix.
LOAD_BALANCER_CLASS = Check(
    "[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?",
    "is not a load-balancer class (a prefixed name such as service.k8s.aws/nlb)",
    "write the class as its controller names it, e.g. service.k8s.aws/nlb")
