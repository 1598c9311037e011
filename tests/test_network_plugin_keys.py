"""What the host's network plugins read of a tenant's pods and Services (components/admission_keys.py,
components/synced_service_rules.py).

vCluster copies a pod's and a Service's labels and annotations to the host, where the network plugin reads some of
them: a MicroK8s site runs Calico, an EKS site the VPC CNI, and an existing (kubeconfig) cluster may run Cilium,
Antrea, Multus, Spiderpool, OVN-Kubernetes or kube-ovn, and kube-router or OpenELB for its Services. Those keys pick
a pod's addresses, address pool, subnet, network devices or cluster network, make a pod another namespace's egress
gateway, open ports of the nodes or announce a Service's address to the site's routers, outside every NetworkPolicy
and quota the platform sets; a hostile tenant
(cluster-admin inside its vCluster) writes whatever its objects need. Each attack is the pod or Service as vCluster
syncs it, judged by the policy the program renders. Each plugin's keys are read from its source at the mirrored
tags, so a key in a new space turns this red instead of passing unjudged.
"""

from __future__ import annotations

import copy
import re

import pytest

from components.admission_keys import RESERVED_KEY_PATTERN
from config.errors import ConfigError
from config.load_balancer_keys import LOAD_BALANCER_PREFIXES, LOAD_BALANCER_SUFFIXES, NODE_PORT_LOCAL_PREFIX
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, git, mirrored_tag
from tests.go_source import KEY, code_lines, key_names, looked_up, named_keys, string_constants
from tests.tenant_sim import Tenant, platform_of, tenant_of
from tests.test_admission_attacks import on_kai, rules as pod_rules
from tests.test_synced_objects_admission import (  # noqa: F401 (legal, nlp: fixtures)
    Synced, allowing, created, legal, nlp, rules, service)

MULTUS, SPIDERPOOL, ANTREA, CILIUM = ("k8snetworkplumbingwg/multus-cni", "spidernet-io/spiderpool", "antrea-io/antrea",
                                      "cilium/cilium")
OVN_KUBERNETES, KUBE_ROUTER, OPENELB = "ovn-org/ovn-kubernetes", "cloudnativelabs/kube-router", "openelb/openelb"
KUBE_OVN = "kubeovn/kube-ovn"
# Where each plugin keeps its Go code.
CODE_PATHS = {OVN_KUBERNETES: ("go-controller/pkg", "go-controller/cmd")}
# Strings the key search finds in a plugin's code that are no key of a pod, with what they are.
NOT_POD_KEYS = {
    "netresources.spidernet.io.sock": "Spiderpool's DRA driver socket file (DRADriverName + \".sock\")",
    "cloud.network.openshift.io/egress-ipconfig": "a node's egress-address capacity, which OpenShift's cloud network "
                                                  "controller writes on nodes (OVN-Kubernetes' node_annotations.go)",
}

# Service keys a plugin reads that act on the tenant's own Service only, with why.
OWN_SERVICE_ONLY = {
    "service.kubernetes.io/service-proxy-name": "a label kube-proxy and Antrea's proxy read to leave the Service to "
                                                "another proxy: the team's own Service goes unserved",
    "k8s.ovn.org/unidled-at": "OVN-Kubernetes' record of when it last woke the Service from idling (OpenShift's "
                              "idling): it rejects traffic to the team's own idled Service without endpoints",
    "*/idled-at": "any key ending so marks the Service idled, with the same effect on the team's own Service",
}

# --- the attacks -----------------------------------------------------------------------------------------------

POD_ATTACKS = {
    "v1.multus-cni.io/default-network": "kube-system/storage-macvlan",
    "ipam.spidernet.io/ippool": '{"ipv4": ["platform-v4"]}',
    "spidernet.io/network-resource": "rdma-storage",
    "ipam.antrea.io/pod-ips": "10.10.0.5",
    "ipam.antrea.io/ippools": "platform-pool",
    "nodeportlocal.antrea.io": '[{"podPort": 8080, "nodePort": 61001, "protocol": "tcp"}]',
    # OVN-Kubernetes: the pod becomes the egress gateway of another team's namespace (its address on the network
    # Multus reports), opens its ports past a user-defined network's isolation, or takes another workload's addresses.
    "k8s.ovn.org/routing-namespaces": "team-vision",
    "k8s.ovn.org/routing-network": "ovn-kubernetes",
    "k8s.ovn.org/open-default-ports": '[{"protocol": "tcp", "port": 22}]',
    "k8s.ovn.org/primary-udn-ipamclaim": "platform-db",
}


@pytest.fixture(scope="module", params=["dev:team-nlp", "eks:team-legal"])
def tenant(request, dev_run, eks_run) -> Tenant:
    stack, team = request.param.split(":")
    program, config = {"dev": (dev_run, dev_config()), "eks": (eks_run, eks_config())}[stack]
    return tenant_of(program, config, team)


@pytest.mark.parametrize("key", sorted(POD_ATTACKS))
def test_a_pod_may_not_name_its_network_address_or_pool(tenant, key):
    assert "reserved-keys" in pod_rules(tenant.create(on_kai(tenant, annotations={key: POD_ATTACKS[key]})))


@pytest.fixture(scope="module", params=["nlp", "legal"])
def team(request) -> Synced:
    """The dev and eks stacks' first teams, as their syncers write Services."""
    return request.getfixturevalue(request.param)


def test_a_service_may_not_open_node_ports_through_antrea(team):
    """NodePortLocal forwards a port of each node running one of the Service's pods to it, whatever the team's node
    ports (none here) or load balancers; an update may not add it either."""
    local = service()
    local["metadata"]["annotations"] = {NODE_PORT_LOCAL_PREFIX + "enabled": "true"}
    assert rules(team.create(created(team, local))) == {"node-port-local"}
    plain = created(team, service())
    annotated = copy.deepcopy(plain)
    annotated["metadata"]["annotations"] = {NODE_PORT_LOCAL_PREFIX + "enabled": "true"}
    assert rules(team.update(plain, annotated)) == {"node-port-local"}
    with_ports = allowing(team, node_ports=2, load_balancers=1)
    assert "node-port-local" in rules(with_ports.create(created(with_ports, local)))


def test_a_service_that_held_node_port_local_keeps_it_while_unchanged(team):
    held = service()
    held["metadata"]["annotations"] = {NODE_PORT_LOCAL_PREFIX + "enabled": "true"}
    held = created(team, held)
    relabelled = copy.deepcopy(held)
    relabelled["metadata"]["labels"] = {"app": "search"}
    assert team.update(held, relabelled) == []


# kube-router and kube-ovn announce a Service's cluster or external address to the site's routers over BGP when the
# Service asks, so a team given neither node ports nor load balancers is reached from outside the cluster; OpenELB
# hands a LoadBalancer Service the address or address pool (Eip) it names, or exposes it through a node proxy; Antrea
# the address pool or another Service's address it names.
SERVICE_ATTACKS = {
    "kube-router.io/service.advertise.clusterip": ("ClusterIP", "true"),
    "kube-router.io/service.advertise.externalip": ("ClusterIP", "true"),
    "eip.openelb.kubesphere.io/v1alpha1": ("LoadBalancer", "192.168.10.5"),
    "eip.openelb.kubesphere.io/v1alpha2": ("LoadBalancer", "platform-eip"),
    "node-proxy.openelb.kubesphere.io/type": ("LoadBalancer", "deployment"),
    # kube-ovn: the cluster address announced over BGP, the Service put on the load balancer of the platform's VPC or
    # another team's subnet, its load-balancer pods attached to a subnet of the site's external network.
    "ovn.kubernetes.io/bgp": ("ClusterIP", "true"),
    "ovn.kubernetes.io/vpc": ("ClusterIP", "platform-vpc"),
    "ovn.kubernetes.io/logical_switch": ("ClusterIP", "team-vision-subnet"),
    "lb-svc-attachment.kube-system.kubernetes.io/logical_switch": ("LoadBalancer", "external-uplink"),
    # Antrea: its address pool, another Service's address shared.
    "service.antrea.io/external-ip-pool": ("LoadBalancer", "platform-pool"),
    "service.antrea.io/allow-shared-load-balancer-ip": ("LoadBalancer", "true"),
}


@pytest.mark.parametrize("key", sorted(SERVICE_ATTACKS))
def test_load_balancer_keys_of_other_implementations_are_refused_unless_listed(team, key):
    kind, value = SERVICE_ATTACKS[key]
    annotated = service(type="LoadBalancer", allocateLoadBalancerNodePorts=False) if kind == "LoadBalancer" \
        else service()
    annotated["metadata"]["annotations"] = {key: value}
    holder = allowing(team, load_balancers=int(kind == "LoadBalancer"), load_balancer_annotations=())
    assert rules(holder.create(created(holder, annotated))) == {"service-load-balancer-annotations"}
    listed = allowing(holder, load_balancer_annotations=(key,))
    assert listed.create(created(listed, annotated)) == []


# --- the keys are the plugins' own ---------------------------------------------------------------------------------

@pytest.mark.parametrize("repository, tag", [(repository, tag)
                                             for repository in (MULTUS, SPIDERPOOL, ANTREA, OVN_KUBERNETES)
                                             for tag in MIRRORED_TAGS[repository]])
def test_every_key_a_network_plugin_names_is_in_a_reserved_space(repository, tag):
    keys = named_keys(repository, mirrored_tag(repository, tag), CODE_PATHS.get(repository, ("pkg", "cmd")))
    assert keys
    assert sorted(key for key in keys if not re.match(RESERVED_KEY_PATTERN, key) and key not in NOT_POD_KEYS) \
        == []


@pytest.mark.parametrize("tag", MIRRORED_TAGS[ANTREA])
def test_every_service_key_antrea_reads_is_judged(tag):
    """Antrea reads a Service's annotations for its address pools and shared addresses (judged with the load
    balancers' keys) and for NodePortLocal (refused), by constants of its own; each such key is judged."""
    tag = mirrored_tag(ANTREA, tag)
    # (the bare nodeportlocal.antrea.io is the pods' key, where Antrea writes the ports it forwarded)
    keys = {key for key in named_keys(ANTREA, tag) if "/" in key and key.startswith(("service.", "nodeportlocal."))}
    assert keys and all(key.startswith((*LOAD_BALANCER_PREFIXES, NODE_PORT_LOCAL_PREFIX)) or key in OWN_SERVICE_ONLY
                        for key in keys), sorted(keys)
    read = looked_up(ANTREA, tag, objects="svc|service|oldSvc|newSvc", metadata="Annotations")
    values = key_names(ANTREA, tag, KEY)
    assert read and {values[name] for name in read} <= keys


@pytest.mark.parametrize("tag", MIRRORED_TAGS[CILIUM])
def test_every_key_space_of_cilium_is_reserved(tag):
    """Cilium names every pod, namespace and node key it reads from the prefix constants of pkg/annotation/k8s.go
    (an address pool, a conntrack bypass, a source-address check, ...); those of its Service and LB IPAM keys, and
    the older io.cilium spelling of both, are judged with the load balancers' keys."""
    source = git(CILIUM, "show", f"{mirrored_tag(CILIUM, tag)}:pkg/annotation/k8s.go")
    prefixes = dict(re.findall(r'^\s*(\w*Prefix)\s*=\s*"([^"]+)"', source, re.MULTILINE))
    assert prefixes.get("Prefix") == "io.cilium" and len(prefixes) > 1
    keys = [prefix + ("name" if "/" in prefix else "/name") for prefix in prefixes.values()]
    keys.append("io.cilium.no-track-port")
    assert [key for key in keys if not re.match(RESERVED_KEY_PATTERN, key)] == []
    # Older releases name their Service and LB IPAM keys under io.cilium/ only (the two newer prefixes came later).
    service_prefixes = {prefixes[name] for name in ("Prefix", "ServicePrefix", "LBIPAMPrefix") if name in prefixes}
    assert {f"{prefix}/" for prefix in service_prefixes} <= set(LOAD_BALANCER_PREFIXES)


# Service labels an implementation reads (the policy judges the load balancers' annotations, not labels), with why
# a tenant's own is harmless.
HARMLESS_SERVICE_LABELS = {
    "eip.openelb.kubesphere.io/v1alpha2": "OpenELB's record of the Eip it allocated from: its speaker announces only "
                                          "the Service's status addresses that lie in that Eip, which its controller "
                                          "allocated",
    **OWN_SERVICE_ONLY,
}


@pytest.mark.parametrize("repository, tag", [(repository, tag) for repository in (KUBE_ROUTER, OPENELB)
                                             for tag in MIRRORED_TAGS[repository]])
def test_every_key_kube_router_and_openelb_read_of_a_service_is_judged(repository, tag):
    """Each reads a Service's annotations by constants of its own (kube-router's shouldAdvertiseService takes the key
    as a parameter, from constants at its call sites): each is under a judged prefix. A label either reads is one
    listed here as harmless."""
    tag = mirrored_tag(repository, tag)
    constants = key_names(repository, tag, KEY)
    annotations = looked_up(repository, tag, objects="svc|service", metadata="Annotations")
    if "annotation" in annotations:
        calls = code_lines(repository, tag, r"shouldAdvertiseService\(")
        annotations = (annotations - {"annotation"}) | {
            argument for line in calls for argument in re.findall(r"shouldAdvertiseService\(\w+, *(\w+)", line)}
    labels = looked_up(repository, tag, objects="svc|service", metadata="Labels")
    judged = {constants.get(name, name) for name in annotations}
    assert judged and all(key.startswith(LOAD_BALANCER_PREFIXES) for key in judged), sorted(judged)
    assert {constants.get(name, name) for name in labels} <= set(HARMLESS_SERVICE_LABELS)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[OVN_KUBERNETES])
def test_every_key_ovn_kubernetes_reads_of_a_service_acts_on_that_service_only(tag):
    """OVN-Kubernetes reads a Service's annotations for idling only (unidling/unidled_annotation_controller.go): a
    key it names, or any key ending in the suffix it matches."""
    tag = mirrored_tag(OVN_KUBERNETES, tag)
    paths = CODE_PATHS[OVN_KUBERNETES]
    names = string_constants(OVN_KUBERNETES, tag, r"[a-z0-9./-]+", paths)
    read = looked_up(OVN_KUBERNETES, tag, paths, objects="svc|service|oldSvc|newSvc", metadata="Annotations")
    assert read and {"k8s.ovn.org" + names["UnidledAtSuffix"] if name == "UnidledAtAnnotation" else name
                     for name in read} <= set(OWN_SERVICE_ONLY)
    assert "*" + names["IdledAtSuffix"] in OWN_SERVICE_ONLY


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KUBE_OVN])
def test_every_key_kube_ovn_reads_of_a_service_is_judged(tag):
    """kube-ovn reads a Service's annotations by constants of its own, and for its load-balancer pods by a key built
    from the network provider's name (LogicalSwitchAnnotationTemplate): each is under a judged prefix or ends in a
    judged suffix."""
    tag = mirrored_tag(KUBE_OVN, tag)
    constants = string_constants(KUBE_OVN, tag, r"[A-Za-z0-9%._/-]+")
    read = looked_up(KUBE_OVN, tag, objects="svc|service|oldSvc|newSvc", metadata="Annotations")
    built = {line.split(":=")[0].strip(): template for line in code_lines(KUBE_OVN, tag, r":= *fmt\.Sprintf\(util\.")
             for template in re.findall(r"Sprintf\(util\.(\w+),", line)}
    keys = {constants[built.get(name, name)] for name in read}
    assert keys and all(key.startswith(LOAD_BALANCER_PREFIXES) or key.replace("%s", "provider").endswith(
        LOAD_BALANCER_SUFFIXES) for key in keys), sorted(keys)


def test_a_site_may_list_a_built_kube_ovn_key_for_a_team():
    """The config takes a key ending in a judged suffix as it takes one under a judged prefix."""
    config = dev_config()
    key = "lb-svc-attachment.kube-system.kubernetes.io/logical_switch"
    config["gpu-tenancy:teams"][0]["vcluster"] = {"services": {"loadBalancers": 1, "loadBalancerAnnotations": [key]}}
    assert platform_of(config).teams[0].vcluster.services.load_balancer_annotations == (key,)
    config["gpu-tenancy:teams"][0]["vcluster"]["services"]["loadBalancerAnnotations"] = ["example.com/logical_switch"]
    with pytest.raises(ConfigError) as refused:
        platform_of(config)
    assert "is not a load-balancer annotation key" in str(refused.value) and ".kubernetes.io/logical_switch" in str(
        refused.value)
