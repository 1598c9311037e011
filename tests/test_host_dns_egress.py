"""What a tenant can reach of the host's DNS pods (``kube-system``, ``k8s-app: kube-dns``).

vCluster's policies (``chart/templates/networkpolicy.yaml``, the same at every accepted release) open those pods to
the control plane, the tenant DNS and the snapshot pod on every port and protocol. A tenant reaches all three: its
control plane through its virtual API server's pod and service proxies, webhooks and APIServices
(tests/test_control_plane_egress.py), its DNS through the names it makes it forward. CoreDNS listens besides DNS on
its metrics (9153), health (8080) and readiness (8181) ports. Resolution needs DNS only: the tenant DNS forwards to
the host DNS Service's address with no port (components/tenant_dns.py, as vCluster's own Corefile does with
``networking.advanced.fallbackHostCluster``), so on port 53, which is also the port the host CoreDNS pods listen
on (EKS' add-on, MicroK8s' dns addon), and the control plane resolves through the host DNS like any pod; both over
UDP, and over TCP when an answer is truncated.
"""

from __future__ import annotations

import re

import pytest

from components.tenant_dns import corefile
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, dev_config, git, mirrored_tag, run
from tests.test_control_plane_egress import PRIVATE_SERVICE, control_plane_pod
from tests.test_tenant import namespace_policies
from tests.test_tenant_network import (  # noqa: F401 (site: the fixture, each committed site at each accepted tag)
    Pod, Target, dns_pod, host_addresses, reaches, site, tenant_pods,
)
from tools.offline.mocks import MOCK_CLUSTER_DNS

VCLUSTER = "loft-sh/vcluster"
COREDNS_OTHER_PORTS = (9153, 8080, 8181)


def host_dns_pod(team) -> Pod:
    """A pod of the host DNS the site states (cluster.kubeconfig.dns; kube-system's kube-dns by default)."""
    dns = team.vcluster.host_dns
    return Pod(dns.namespace, dict(dns.pod_labels))


def snapshot_pod(team) -> Pod:
    # The label vCluster's snapshot policy selects; the host admission refuses it on a tenant's pod.
    return Pod(team.namespace, {"app": "vcluster-snapshot"})


def reached_ports(policies: list[dict], source: Pod, address: str, protocol: str, pod=None) -> set[int]:
    """The ports of ``protocol`` ``source`` opens to ``address`` among the first and last port, CoreDNS' own and every
    port a policy names (with its neighbours): a rule without ports shows at port 1, a range at its ends."""
    named = {int(value) for policy in policies for rule in policy["spec"].get("egress") or []
             for entry in rule.get("ports") or [] for value in (entry.get("port"), entry.get("endPort"))
             if isinstance(value, int) or (isinstance(value, str) and value.isdigit())}
    candidates = {1, 65535, *COREDNS_OTHER_PORTS} | {port + step for port in named for step in (-1, 0, 1)}
    return {port for port in candidates
            if reaches(policies, source, Target("an address", address, port, protocol, pod=pod))}


def host_dns_reach(policies: list[dict], stack: str, team, source: Pod) -> dict[str, set[int]]:
    """By protocol, the ports ``source`` reaches on a host DNS pod beyond those it reaches at any private address
    (the control plane's and the snapshot's API server ports)."""
    address = host_addresses(stack)["pod"]
    return {protocol: reached_ports(policies, source, address, protocol, pod=host_dns_pod(team))
            - reached_ports(policies, source, PRIVATE_SERVICE, protocol) for protocol in ("UDP", "TCP")}


def test_the_control_plane_dns_and_snapshot_reach_the_host_dns_on_its_dns_port_only(site):
    stack, team, _, policies = site
    for what, source in {"the control plane": control_plane_pod(team), "the tenant DNS": dns_pod(team),
                         "the snapshot pod": snapshot_pod(team)}.items():
        port = team.vcluster.host_dns.port
        assert host_dns_reach(policies, stack, team, source) == {"UDP": {port}, "TCP": {port}}, what
        address = host_addresses(stack)["pod"]
        assert [port for port in COREDNS_OTHER_PORTS
                if reaches(policies, source, Target("CoreDNS", address, port, pod=host_dns_pod(team)))] == [], what


def test_a_tenants_workloads_reach_the_host_dns_on_no_port(site):
    """Workloads resolve through their own DNS (1053); the host's DNS pods sit in the private ranges their public
    egress leaves out."""
    stack, team, _, policies = site
    address = host_addresses(stack)["pod"]
    for what, pod in tenant_pods(team).items():
        assert {protocol: reached_ports(policies, pod, address, protocol, pod=host_dns_pod(team))
                for protocol in ("UDP", "TCP")} == {"UDP": set(), "TCP": set()}, what


def test_name_resolution_still_works_end_to_end(site):
    """A workload asks its DNS (service names of the virtual cluster), which forwards the rest (external names, the
    host's names) to the host DNS; the control plane resolves webhook, issuer and ExternalName hosts there. Each hop
    over UDP and over TCP, which resolvers use when an answer is truncated."""
    stack, team, _, policies = site
    address = host_addresses(stack)["pod"]
    hops = [(what, pod, Target("its own DNS", address, 1053, protocol, pod=dns_pod(team)))
            for what, pod in tenant_pods(team).items() for protocol in ("UDP", "TCP")]
    hops += [(what, source, Target("the host DNS", address, team.vcluster.host_dns.port, protocol,
                                   pod=host_dns_pod(team)))
             for what, source in {"the tenant DNS": dns_pod(team), "the control plane": control_plane_pod(team)}.items()
             for protocol in ("UDP", "TCP")]
    assert [(what, target.what, target.protocol) for what, source, target in hops
            if not reaches(policies, source, target)] == []


def test_the_old_all_port_rule_is_caught(site):
    """vCluster's rule (the host DNS peer with no ports) put back: the reach check sees CoreDNS' other ports."""
    stack, team, _, policies = site
    opened = [{**policy, "spec": {**policy["spec"], "egress": [
        {key: value for key, value in rule.items() if key != "ports"}
        if any(peer.get("podSelector") == {"matchLabels": host_dns_pod(team).labels} for peer in rule.get("to") or [])
        else rule for rule in policy["spec"].get("egress") or []]}} for policy in policies]
    reach = host_dns_reach(opened, stack, team, dns_pod(team))
    assert set(COREDNS_OTHER_PORTS) <= reach["TCP"] and 1 in reach["UDP"]


def test_the_tenant_dns_forwards_to_the_host_dns_services_dns_port():
    """The program's Corefile names the host DNS Service's address without a port: CoreDNS' forward plugin then
    uses 53, the port the policies open."""
    [upstream] = re.findall(r"^\s*forward \. (\S+)$", corefile(MOCK_CLUSTER_DNS), re.MULTILINE)
    assert upstream == MOCK_CLUSTER_DNS


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_vclusters_own_corefile_forwards_to_the_host_dns_without_a_port(tag):
    """vCluster's path to the host DNS (``fallbackHostCluster``) is the same: its Service address, no port."""
    template = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/coredns/template.go")
    assert "forward . {{ .HOST_CLUSTER_DNS }}\n" in template


def test_a_sites_control_plane_rules_still_apply_beside_the_narrowed_dns_rule():
    config = dev_config()
    rule = {"to": [{"ipBlock": {"cidr": "10.9.0.0/16"}}], "ports": [{"port": 5432, "protocol": "TCP"}]}
    config["gpu-tenancy:vcluster"]["extraValues"] = {"policies": {"networkPolicy": {"controlPlane": {
        "egress": [rule]}}}}
    egress = namespace_policies(run(config), "vcluster-team-nlp")["team-nlp-control-plane"]["egress"]
    assert egress[-1] == rule
    assert {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
            "to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}]} in egress
