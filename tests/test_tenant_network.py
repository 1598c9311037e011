"""What a hostile tenant's pods can open connections to on the host network.

The only NetworkPolicies in a tenant's host namespace are the ones vCluster's chart renders
(``chart/templates/networkpolicy.yaml``): rendered here with the values the program gives each committed
stack's teams, at every accepted vCluster release. The tenant's pods are built as vCluster 0.36.1 syncs them
(tests/vcluster_pods.py), wearing labels the host admission lets through, among them the ``release`` label the
control plane's policy selects, which the syncer renames. Each may reach its own vCluster (control plane, DNS,
other pods) and the public internet, and nothing else: not another team, not the host's API server, kubelets,
node ports, DNS, KAI, the GPU Operator, the monitoring stack or the instance metadata service.
Addresses are those of the site's host: MicroK8s' pod network (10.1.0.0/16) and a LAN node, or the created
EKS VPC (``cluster.eks.vpcCidr``), where the VPC CNI gives nodes and pods their addresses.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import Any, Mapping, NamedTuple, Optional

import pytest
import yaml

from components.observability_network import PROMETHEUS_POD_LABELS
from components.tenant import vcluster_values
from components.tenant_network import tenant_network_policies
from ops.sites import platform_of
from policy.label_selectors import selector_matches
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, mirror_chart, stack_config
from tests.vcluster_pods import vcluster_sync
from tools.charts.render import render_release
from tools.deployability.inputs import Release, vcluster_dns_pods
from tools.deployability.network_ingress import Pod, peer_selects
from tools.deployability.network_policy import isolates_egress, pod_selector, port_matches
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"


@dataclass(frozen=True)
class Target:
    what: str
    address: str
    port: int
    protocol: str = "TCP"
    pod: Optional[Pod] = None  # None: a node, a cloud service or the internet


def _in_block(block: Mapping[str, Any], address: str) -> bool:
    ip = ipaddress.ip_address(address)
    network = ipaddress.ip_network(block["cidr"], strict=False)
    if ip.version != network.version or ip not in network:
        return False
    return not any(ip in ipaddress.ip_network(hole, strict=False) for hole in block.get("except") or [])


def _peer_matches(peer: Mapping[str, Any], policy_namespace: str, target: Target) -> bool:
    """A ``to`` entry: an ipBlock matches any address in it (pods' too, as Calico and the VPC CNI match them);
    selectors match pods only, of the policy's namespace unless a namespaceSelector says otherwise."""
    if peer.get("ipBlock"):
        return _in_block(peer["ipBlock"], target.address)
    return target.pod is not None and peer_selects(peer, policy_namespace, target.pod)


def reaches(policies: list[dict], source: Pod, target: Target) -> bool:
    """Whether the source pod's egress policies let it open a connection to the target (ports after Service
    translation, as the CNIs match them)."""
    isolating = [policy for policy in policies if policy["metadata"]["namespace"] == source.namespace
                 and isolates_egress(policy) and selector_matches(pod_selector(policy), source.labels)]
    assert isolating, f"{source} is isolated for egress"
    return any((not rule.get("to") or any(_peer_matches(peer, policy["metadata"]["namespace"], target)
                                          for peer in rule["to"]))
               and (not rule.get("ports")
                    or any(port_matches(entry, target.port, target.protocol) for entry in rule["ports"]))
               for policy in isolating for rule in policy["spec"].get("egress") or [])


# --- the stack's teams and host ------------------------------------------------------------------------


def kubeconfig_with_stated_dns() -> dict:
    """An RKE2 cluster by kubeconfig that states its DNS (RKE2's Service and pod labels, NodeLocal DNSCache on the
    link-local address and the Service's) and its API server's port, with a team signing in through an OIDC issuer
    on that same port."""
    config = stack_config("dev")
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {
        "gpus": 1, "kubernetesVersion": "1.33", "apiServerPort": 443, "dns": {
            "service": "kube-system/rke2-coredns-rke2-coredns",
            "podLabels": {"app.kubernetes.io/instance": "rke2-coredns", "k8s-app": "kube-dns"},
            "nodeLocalAddresses": ["169.254.20.10", "10.43.0.10"]}}}
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    config["gpu-tenancy:gpuOperator"] = {"mode": "external"}
    config["gpu-tenancy:teams"][0]["vcluster"] = {"access": {
        "exposure": "gateway", "domain": "vc.example.com", "gateway": {"name": "platform", "namespace": "gateway-system"},
        "oidc": {"issuerUrl": "https://login.example.com/realms/ml", "clientId": "kubernetes"}}}
    return config


def backed_up(config: dict, backup: dict) -> dict:
    """``config`` with scheduled snapshots (gpu-tenancy:backup), whose store the control plane must reach."""
    return {**config, "gpu-tenancy:backup": backup, "gpu-tenancy:backupAccessKeyId": {"secure": "v1:encrypted"},
            "gpu-tenancy:backupSecretAccessKey": {"secure": "v1:encrypted"}}


def kubeconfig_backed_up_to_s3() -> dict:
    """A cluster by kubeconfig whose API server is on 6443, snapshotting to AWS S3: 443 opens on the internet."""
    config = stack_config("dev")
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"gpus": 1, "apiServerPort": 6443}}
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    config["gpu-tenancy:gpuOperator"] = {"mode": "external"}
    return backed_up(config, {"url": "s3://kyoto-tenant-backups/gpu", "region": "ap-northeast-1"})


def box_backed_up_to_a_lan_store() -> dict:
    """The dev box snapshotting to a MinIO on its LAN, named by its address: that address and port only."""
    return backed_up(stack_config("dev"), {"url": "s3://lab-backups/gpu", "endpoint": "http://192.168.1.20:9000",
                                           "region": "us-east-1"})


def kubeconfig_on_port(api_server_port: Optional[int], **oidc) -> dict:
    """The dev site's three teams on a cluster by kubeconfig whose API server listens on ``api_server_port``
    (None: unstated), every team signing in through the OIDC issuer ``oidc`` describes, if any."""
    config = stack_config("dev")
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {
        "gpus": 1, **({"apiServerPort": api_server_port} if api_server_port else {})}}
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    config["gpu-tenancy:gpuOperator"] = {"mode": "external"}
    if oidc:
        config["gpu-tenancy:vcluster"] = {**config["gpu-tenancy:vcluster"], "access": {
            "exposure": "gateway", "domain": "vc.example.com", "gateway": {"name": "platform"},
            "oidc": {"clientId": "kubernetes", **oidc}}}
    return config


# Sites besides the committed ones whose host network differs from theirs (the generated sites of
# tests/generated_sites.py are not read here). Keycloak serves HTTPS on 8443, minikube its API server: the port every
# other team's control plane admits from anywhere.
NETWORK_SITES = {
    "kubeconfig-stated-dns": kubeconfig_with_stated_dns, "kubeconfig-backed-up-to-s3": kubeconfig_backed_up_to_s3,
    "box-backed-up-to-a-lan-store": box_backed_up_to_a_lan_store,
    "kubeconfig-issuer-on-8443": lambda: kubeconfig_on_port(6443, issuerUrl="https://login.example.com:8443/realms/ml"),
    "kubeconfig-lan-issuer-on-8443": lambda: kubeconfig_on_port(
        6443, issuerUrl="https://login.lab.example:8443/realms/ml", issuerAddresses=["192.168.1.30/32"]),
    "kubeconfig-api-server-on-8443": lambda: kubeconfig_on_port(8443),
}


def site_config(stack: str) -> dict:
    return NETWORK_SITES[stack]() if stack in NETWORK_SITES else stack_config(stack)


def network_sites() -> list[str]:
    return [*COMMITTED_STACKS, *NETWORK_SITES]


def teams(stack: str, tag: str) -> list:
    version = tag.removeprefix("v")
    return [dataclasses.replace(team, vcluster=dataclasses.replace(team.vcluster, version=version))
            for team in platform_of(site_config(stack), stack).teams]


def isolated_team_and_another(stack: str, tag: str) -> tuple[Any, Any]:
    """The site's first team with its network policy on, and another team of the site (on a one-team site, the
    same team under another name, as a second team would be added)."""
    site_teams = teams(stack, tag)
    team = next(team for team in site_teams if team.vcluster.network_policy)
    others = [other for other in site_teams if other is not team]
    return team, (others[0] if others else dataclasses.replace(
        team, name=f"{team.name}-b", vcluster_name=f"{team.vcluster_name}-b", namespace=f"{team.namespace}-b"))


def isolating_sites() -> list[str]:
    """The sites with a team whose network policy is on (a team with it off is not isolated: documented)."""
    return [stack for stack in network_sites()
            if any(team.vcluster.network_policy for team in platform_of(site_config(stack), stack).teams)]


def host_addresses(stack: str) -> dict[str, str]:
    """A node, a pod of the platform and the API server's endpoint, in the stack's host networks."""
    platform = platform_of(site_config(stack), stack)
    if platform.cluster.kind == "eks":
        vpc = ipaddress.ip_network(platform.cluster.eks.vpc_cidr)
        return {"node": str(vpc[130 * 256 + 12]), "pod": str(vpc[140 * 256 + 7]),
                "api": str(vpc[150 * 256 + 9]), "api_port": "443"}
    # MicroK8s serves on 16443; an existing cluster on its stated port, or one of vCluster's three common ones.
    port = 16443 if platform.cluster.microk8s else platform.cluster.kubeconfig.api_server_port or 6443
    return {"node": "192.168.1.20", "pod": "10.1.37.9", "api": "192.168.1.20", "api_port": str(port)}


def chart_policies(tag: str, team, values: dict, target_dir) -> list[dict]:
    chart = mirror_chart(VCLUSTER, tag, "chart", target_dir)
    rendered = render_release(chart, team.vcluster_name, team.namespace, values, kube_version="1.36.0")
    policies = [doc for text in rendered.values() for doc in yaml.safe_load_all(text)
                if doc and doc.get("kind") == "NetworkPolicy"]
    for policy in policies:
        policy["metadata"].setdefault("namespace", team.namespace)
    return policies


def rendered_policies(tag: str, team, target_dir) -> list[dict]:
    """The policies of the team's host namespace: the chart's (its own are off) and the program's."""
    return [*chart_policies(tag, team, vcluster_values(team, MOCK_CLUSTER_DNS), target_dir),
            *tenant_network_policies(team).values()]


def tenant_pods(team) -> dict[str, Pod]:
    """Host pods of a team's workloads, as the syncer writes them, with labels the host admission admits."""
    wearing = {
        "a plain workload": ("default", {"app": "web"}),
        "a pod wearing its control plane's release label": ("default", {"release": team.vcluster_name,
                                                                          "app": "web"}),
        "a pod in the virtual kube-system": ("kube-system", {"k8s-app": "metrics"}),
        "a pod named like the host DNS's peers": ("default", {"app": "vcluster-kube-dns-client",
                                                              "k8s-app": "coredns"}),
    }
    pods = {}
    for what, (namespace, labels) in wearing.items():
        virtual = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "probe", "namespace": namespace, "labels": labels},
                   "spec": {"containers": [{"name": "probe", "image": "busybox"}]}}
        host = vcluster_sync(virtual, team)
        pods[what] = Pod(host["metadata"]["namespace"], host["metadata"]["labels"])
    return pods


def dns_pod(team) -> Pod:
    release = Release(team.vcluster_name, team.namespace, "vcluster", team.vcluster.version,
                      vcluster_values(team, MOCK_CLUSTER_DNS))
    [pod] = vcluster_dns_pods(release)
    return Pod(team.namespace, pod.manifest["metadata"]["labels"])


def host_dns(stack: str, team) -> Target:
    """The host's DNS pods as the site states them (cluster.kubeconfig.dns; the kube-dns layout otherwise)."""
    dns = team.vcluster.host_dns
    return Target("the host's DNS pods", host_addresses(stack)["pod"], dns.port, "UDP",
                  pod=Pod(dns.namespace, dict(dns.pod_labels)))


def out_of_reach(stack: str, team, other) -> list[Target]:
    """Everything on the host a tenant's pod must not open a connection to."""
    host = host_addresses(stack)
    other_pod = tenant_pods(other)["a plain workload"]
    return [
        Target("another team's pod", host["pod"], 8080, pod=other_pod),
        Target("another team's vCluster API server", host["pod"], 8443,
               pod=Pod(other.namespace, {"app": "vcluster", "release": other.vcluster_name})),
        Target("another team's DNS", host["pod"], 1053, "UDP", pod=dns_pod(other)),
        host_dns(stack, team),
        Target("the host's API server", host["api"], int(host["api_port"])),
        Target("a kubelet", host["node"], 10250),
        Target("a node port", host["node"], 30080),
        Target("KAI's binder webhook", host["pod"], 9443, pod=Pod("kai-scheduler", {"app": "binder"})),
        Target("the DCGM exporter", host["pod"], 9400,
               pod=Pod("gpu-operator", {"app": "nvidia-dcgm-exporter"})),
        Target("Prometheus", host["pod"], 9090, pod=Pod("monitoring", PROMETHEUS_POD_LABELS)),
        Target("the instance metadata service", "169.254.169.254", 80),
        Target("the instance metadata service over IPv6", "fd00:ec2::254", 80),
        Target("the node's loopback", "127.0.0.1", 10248),
    ]


class Site(NamedTuple):
    stack: str
    team: Any
    other: Any  # another team of the same site
    policies: list[dict]  # the team's host namespace's


@pytest.fixture(scope="module",
                params=[(stack, tag) for stack in isolating_sites() for tag in ACCEPTED_VCLUSTER_TAGS],
                ids=lambda param: "-".join(param))
def site(request, tmp_path_factory) -> Site:
    stack, tag = request.param
    team, other = isolated_team_and_another(stack, tag)
    return Site(stack, team, other, rendered_policies(tag, team, tmp_path_factory.mktemp("vcluster-chart")))


def test_a_tenant_pod_reaches_its_own_vcluster_and_the_internet_only(site):
    stack, team, other, policies = site
    host = host_addresses(stack)
    own = [Target("its own vCluster API server", host["pod"], 8443,
                  pod=Pod(team.namespace, {"app": "vcluster", "release": team.vcluster_name})),
           Target("its own DNS", host["pod"], 1053, "UDP", pod=dns_pod(team)),
           Target("its own pods", host["pod"], 8080, pod=tenant_pods(team)["a plain workload"]),
           Target("the public internet", "198.51.100.7", 443)]
    for what, pod in tenant_pods(team).items():
        assert [target.what for target in own if not reaches(policies, pod, target)] == [], what
        assert [target.what for target in out_of_reach(stack, team, other) if reaches(policies, pod, target)] == [], \
            what


def test_the_tenant_dns_reaches_the_host_dns_and_nothing_else_of_the_host(site):
    stack, team, other, policies = site
    dns = dns_pod(team)
    host = host_dns(stack, team)
    node_local = [Target(f"the node-local DNS cache at {address}", address, 53, protocol)
                  for address in team.vcluster.host_dns.node_local_addresses for protocol in ("UDP", "TCP")]
    assert [target.what for target in [host, *node_local] if not reaches(policies, dns, target)] == []
    assert [target.what for target in out_of_reach(stack, team, other)
            if target.what != host.what and reaches(policies, dns, target)] == []


def test_the_syncer_renames_the_release_label_the_control_planes_policy_selects():
    [team] = teams("dev", ACCEPTED_VCLUSTER_TAGS[-1])[:1]
    labels = tenant_pods(team)["a pod wearing its control plane's release label"].labels
    assert "release" not in labels and labels["vcluster.loft.sh/managed-by"] == team.vcluster_name
