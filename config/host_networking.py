"""What an existing (kubeconfig) cluster runs for its pods' network and its load balancers, as the site states it
(cluster.kubeconfig.networking), and what the host policies judge of each.

vCluster copies a tenant's pod and Service labels and annotations to the host, where the network plugin and the
load-balancer implementation read some of them: an address, an address pool, a network, a gateway, a BGP
announcement. The pod policy reserves the key spaces of the implementations below (components/admission_keys.py)
and the synced-objects policy judges their Service keys (config/load_balancer_keys.py); tests read each one's keys
from its source (tests/test_network_plugin_keys.py, tests/test_load_balancer_keys.py). The keys of an
implementation not listed here reach it unjudged, so the plan warns of one a site names, and of a site that names
none.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Optional, Sequence

from config.key_types import Check
from config.model import Cluster, Team
from config.reader import Reader, within


@dataclass(frozen=True)
class Implementation:
    """A network plugin or load-balancer implementation: the key domains it reads of pods (reserved there) and the
    annotation keys it reads of Services (judged by the team's list)."""

    pod_domains: tuple[str, ...] = ()
    service_prefixes: tuple[str, ...] = ()
    # Service keys it builds from a name, judged by how they end.
    service_suffixes: tuple[str, ...] = ()
    # It judges a pod's egress at a Service's own address and port, before kube-proxy translates them (config/hosts.py
    # EKS_SERVICE_RANGES says where the VPC CNI's policy agent does): a port opened to every address opens every
    # Service on it.
    judges_before_translation: bool = False


JUDGED = {
    "calico": Implementation(pod_domains=("projectcalico.org",)),
    "cilium": Implementation(pod_domains=("cilium.io", "io.cilium"),
                             service_prefixes=("lbipam.cilium.io/", "service.cilium.io/", "io.cilium/")),
    "antrea": Implementation(pod_domains=("antrea.io",),
                             service_prefixes=("service.antrea.io/", "nodeportlocal.antrea.io/")),
    "multus": Implementation(pod_domains=("cncf.io", "multus-cni.io")),
    "spiderpool": Implementation(pod_domains=("spidernet.io",)),
    "ovn-kubernetes": Implementation(pod_domains=("ovn.org",)),
    # kube-ovn's pod keys are under ovn.kubernetes.io, which the kubernetes.io reservation holds.
    "kube-ovn": Implementation(pod_domains=("kubernetes.io",), service_prefixes=("ovn.kubernetes.io/",),
                               service_suffixes=(".kubernetes.io/logical_switch",)),
    "aws-vpc-cni": Implementation(pod_domains=("amazonaws.com",), judges_before_translation=True),
    # Flannel reads keys of nodes only.
    "flannel": Implementation(),
    "kube-router": Implementation(service_prefixes=("kube-router.io/",)),
    "metallb": Implementation(service_prefixes=("metallb.io/", "metallb.universe.tf/")),
    "kube-vip": Implementation(service_prefixes=("kube-vip.io/", "development.kube-vip.io/")),
    "openelb": Implementation(service_prefixes=(
        "lb.kubesphere.io/", "eip.openelb.kubesphere.io/", "protocol.openelb.kubesphere.io/",
        "layer2.openelb.kubesphere.io/", "node-proxy.openelb.kubesphere.io/")),
    # k3s' ServiceLB (klipper-lb): it acts on LoadBalancer Services only, which no team is given where it runs
    # (HOST_PORT_LOAD_BALANCERS); its one Service key, a priority class for its pods, then reaches nothing.
    "servicelb": Implementation(),
    # The AWS cloud provider (a self-managed cluster on EC2) and the AWS Load Balancer Controller.
    "aws-cloud-provider": Implementation(service_prefixes=("service.beta.kubernetes.io/",)),
    "aws-load-balancer-controller": Implementation(service_prefixes=("service.beta.kubernetes.io/",
                                                                     "service.k8s.aws/")),
}

# Load-balancer implementations that serve a LoadBalancer Service on the nodes' own addresses: k3s' ServiceLB runs, for
# each one, a DaemonSet whose pods take every port of the Service as a hostPort on every node (k3s-io/k3s
# pkg/cloudprovider/servicelb.go ``newDaemonSet``, read in the project's stored copy, untagged: the repository is too
# large to mirror here). A hostPort is a DNAT of the node's own addresses, so a team's Service on port 6443 or 10250
# would take the connections other hosts make to the node's API server or kubelet. Teams get no load balancers there.
HOST_PORT_LOAD_BALANCERS = {"servicelb": "k3s' ServiceLB (klipper-lb)"}

IMPLEMENTATION_NAME = Check(
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?",
    "is not an implementation name (lowercase letters, digits and '-')",
    "name each as its project does, e.g. [calico, metallb]; the judged ones: " + ", ".join(JUDGED))


def networking_warnings(networking: Optional[tuple[str, ...]]) -> list[str]:
    """A kubeconfig site that does not say what its network plugin and load balancer are, or names one whose keys
    the host policies do not judge (``networking`` is None when the site did not state it)."""
    judged = ", ".join(JUDGED)
    if networking is None:
        return [
            "cluster.kubeconfig.networking is not set: the host policies judge the pod and Service keys of "
            f"{judged}; another network plugin or load balancer the cluster runs reads a tenant's keys unjudged "
            "(an address, an address pool, a gateway, an announcement to the routers). State what the cluster runs, "
            "e.g. networking: [calico, metallb]."]
    unknown = [name for name in networking if name not in JUDGED]
    if not unknown:
        return []
    return [
        f"cluster.kubeconfig.networking names {', '.join(unknown)}, whose keys of pods and Services the host "
        f"policies do not judge (they judge those of {judged}): a tenant's pods and Services reach "
        f"{'it' if len(unknown) == 1 else 'them'} with any key vCluster copies to the host. Read which keys "
        f"{'it reads' if len(unknown) == 1 else 'they read'} before giving teams this cluster "
        "(docs/security-admission.md, The key allowlist)."]


def check_host_port_load_balancers(reader: Reader, cluster: Optional[Cluster], teams: Sequence[Team]) -> None:
    """A kubeconfig site running a load balancer that serves on the nodes' own ports, with teams given load
    balancers."""
    existing = cluster.kubeconfig if cluster is not None else None
    running = [name for name in (existing.networking or ()) if name in HOST_PORT_LOAD_BALANCERS] if existing else []
    holding = [team.name for team in teams if (team.vcluster.services.load_balancers or 0) > 0]
    if not running or not holding:
        return
    names = ", ".join(HOST_PORT_LOAD_BALANCERS[name] for name in running)
    reader.fail("cluster.kubeconfig.networking", list(existing.networking),
                f"{names} serves each LoadBalancer Service on every node's own addresses, with pods that take each "
                f"of the Service's ports as a hostPort, and team(s) {', '.join(holding)} may hold load balancers: a "
                "Service on port 6443 or 10250 would take the connections other hosts make to a node's API server or "
                "kubelet (a hostPort rewrites them before the node's own services see them)",
                "give those teams vcluster.services.loadBalancers: 0, or run a load balancer that hands out "
                "addresses of its own (k3s: --disable servicelb, then MetalLB, and name metallb here)")


def untranslating_plugins(networking: Optional[tuple[str, ...]]) -> list[str]:
    """The listed network plugins that judge egress before a Service's address is translated."""
    return [name for name in networking or () if name in JUDGED and JUDGED[name].judges_before_translation]


def check_service_ranges(reader: Reader, cluster: Optional[Cluster], teams: Sequence[Team]) -> None:
    """A kubeconfig site whose network plugin judges egress before Service translation must state its Service ranges,
    or the control planes' rule for the API server's port opens every Service on that port, another team's virtual
    API server among them (components/tenant_network.py ``api_server_rules``). Ranges that overlap would make a
    range's first address (the kubernetes Service's, in the first) any Service's, and API server addresses inside
    a range would be Service addresses."""
    existing = cluster.kubeconfig if cluster is not None else None
    key = "cluster.kubeconfig.serviceRanges"
    if existing is None or any(within(issue.key, key) or issue.key == "cluster.kubeconfig" for issue in reader.issues):
        return
    ranges = [ipaddress.ip_network(block) for block in existing.service_ranges]
    for index, block in enumerate(ranges):
        if any(block.version == other.version and block.overlaps(other) for other in ranges[:index]):
            reader.fail(f"{key}[{index}]", str(block), "overlaps a range listed before it: a cluster's Service ranges "
                        "(its primary range and the ServiceCIDRs added to it) never overlap",
                        "list each range once, the primary range (the kubernetes Service's) first")
    for index, address in enumerate(existing.api_server_addresses):
        block = ipaddress.ip_network(address, strict=False)
        inside = next((str(found) for found in ranges if found.version == block.version and block.subnet_of(found)),
                      None)
        if inside is not None:
            reader.fail(f"cluster.kubeconfig.apiServerAddresses[{index}]", address, f"lies in the Service range "
                        f"{inside}: the API server's endpoints are node or control-plane addresses, not Services'",
                        "state the endpoints' addresses (kubectl get endpointslices -n default -l "
                        "kubernetes.io/service-name=kubernetes)")
    plugins = untranslating_plugins(existing.networking)
    if plugins and not ranges and any(team.vcluster.network_policy for team in teams):
        reader.fail(key, None,
                    f"is required with networking {', '.join(plugins)}, which judges a pod's egress at a Service's "
                    "own address before it is translated: without the ranges the control planes' rule for the API "
                    "server's port opens every Service listening on it, every other team's vCluster Service (443) "
                    "among them",
                    "set it to the cluster's Service ranges, the primary one first (the API server's "
                    "--service-cluster-ip-range; on EKS `aws eks describe-cluster --name NAME --query "
                    "cluster.kubernetesNetworkConfig`, serviceIpv4Cidr or serviceIpv6Cidr; `kubectl get service "
                    "kubernetes -n default` shows the primary range's first address), e.g. [10.100.0.0/16]")
