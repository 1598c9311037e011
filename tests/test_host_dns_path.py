"""An existing cluster's host DNS path (``cluster.kubeconfig.dns``) and what a tenant may reach of it.

The program cannot see the host before it runs. Its default is the kube-dns layout (EKS' CoreDNS add-on, MicroK8s'
dns addon, kubeadm, k3s): the Service ``kube-system/kube-dns`` answered by pods ``k8s-app: kube-dns`` on 53. A host
running NodeLocal DNSCache answers elsewhere: kubernetes/dns ``cmd/node-cache`` (1.26.x, ``app/cache_app.go``
``initIptables``) binds a hostNetwork process to ``-localip`` (169.254.20.10, and in kube-proxy's iptables mode the
kube-dns Service's address too) and marks queries to those addresses on the DNS port NOTRACK, so they skip the
Service's translation and reach no pod: a rule selecting the kube-dns pods does not match them. The site then
states the addresses, opened on 53 only; its DNS pods may also live elsewhere and listen on another port
(OpenShift: ``openshift-dns``, 5353).
"""

from __future__ import annotations

import pytest

from config import ConfigError
from ops.sites import platform_of
from tests.conftest import dev_config, run
from tests.test_control_plane_egress import PRIVATE_SERVICE, control_plane_pod
from tests.test_host_dns_egress import COREDNS_OTHER_PORTS, reached_ports, snapshot_pod
from tests.test_tenant_network import Pod, Target, dns_pod, reaches, tenant_pods
from tools.offline.recording import integral_numbers

# The default layout's DNS pods (kube-system, k8s-app: kube-dns), which a stated DNS path replaces.
HOST_DNS_POD = Pod("kube-system", {"k8s-app": "kube-dns"})

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
NODE_LOCAL = "169.254.20.10"
SERVICE_ADDRESS = "10.43.0.10"
# node-cache's own metrics (9253) and health (8080) ports, besides the DNS port.
NODE_CACHE_OTHER_PORTS = (9253, 8080)
POD_ADDRESS = "10.42.3.7"
OPENSHIFT_DNS = {"service": "openshift-dns/dns-default", "namespace": "openshift-dns",
                 "podLabels": {"dns.operator.openshift.io/daemonset-dns": "default"}, "port": 5353}


def kubeconfig_site(dns=None) -> dict:
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"storageClass": "standard",
                                                                          **({"dns": dns} if dns is not None else {})}}
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    config["gpu-tenancy:kubeconfig"] = {"secure": "v1:encrypted"}
    return config


def policies_and_team(config: dict):
    program = run(config)
    [team] = [team for team in platform_of(config, "test").teams if team.vcluster.network_policy][:1]
    policies = [integral_numbers({"metadata": p.inputs["metadata"], "spec": p.inputs["spec"]})
                for p in program.of_type(NETWORK_POLICY) if p.inputs["metadata"]["namespace"] == team.namespace]
    return program, team, policies


def sources(team) -> dict[str, Pod]:
    return {"the control plane": control_plane_pod(team), "the tenant DNS": dns_pod(team),
            "the snapshot pod": snapshot_pod(team)}


def node_reach(policies, source: Pod, address: str) -> dict[str, set[int]]:
    """By protocol, the ports ``source`` opens to a node-side address (no pod answers there), beyond those it
    opens to any private address (the API server ports)."""
    return {protocol: reached_ports(policies, source, address, protocol)
            - reached_ports(policies, source, PRIVATE_SERVICE, protocol) for protocol in ("UDP", "TCP")}


def test_with_node_local_addresses_the_control_plane_dns_and_snapshot_reach_them_on_53_only():
    _, team, policies = policies_and_team(kubeconfig_site({"nodeLocalAddresses": [NODE_LOCAL, SERVICE_ADDRESS]}))
    for what, source in sources(team).items():
        for address in (NODE_LOCAL, SERVICE_ADDRESS):
            assert node_reach(policies, source, address) == {"UDP": {53}, "TCP": {53}}, (what, address)
            assert [port for port in (*NODE_CACHE_OTHER_PORTS, *COREDNS_OTHER_PORTS)
                    if reaches(policies, source, Target("node-cache", address, port))] == [], (what, address)
        # The DNS pods stay reachable (node-cache's own upstream, and kube-proxy's IPVS mode) on 53 only.
        assert {protocol: reached_ports(policies, source, POD_ADDRESS, protocol, pod=HOST_DNS_POD)
                - reached_ports(policies, source, PRIVATE_SERVICE, protocol)
                for protocol in ("UDP", "TCP")} == {"UDP": {53}, "TCP": {53}}, what
        # Only the stated addresses: the next one over is not open.
        assert not reaches(policies, source, Target("a neighbour", "169.254.20.11", 53, "UDP")), what


def test_a_tenants_workloads_reach_no_node_local_address():
    """Workloads resolve through their own DNS; the stated addresses are opened to the three system pods only."""
    _, team, policies = policies_and_team(kubeconfig_site({"nodeLocalAddresses": [NODE_LOCAL, SERVICE_ADDRESS]}))
    for what, pod in tenant_pods(team).items():
        for address in (NODE_LOCAL, SERVICE_ADDRESS):
            assert {protocol: reached_ports(policies, pod, address, protocol) for protocol in ("UDP", "TCP")} \
                == {"UDP": set(), "TCP": set()}, (what, address)


def test_without_the_setting_a_node_local_cache_is_out_of_reach_and_nothing_changes():
    """The failure the setting is for: by default a query to the node-local cache (its link-local address, or the
    Service address it binds in iptables mode) matches no rule. And a kubeconfig site's policies are those of the
    kube-dns layout every other host gets."""
    _, team, policies = policies_and_team(kubeconfig_site())
    for what, source in sources(team).items():
        assert [address for address in (NODE_LOCAL, SERVICE_ADDRESS) for protocol in ("UDP", "TCP")
                if reaches(policies, source, Target("node-cache", address, 53, protocol))] == [], what
        assert reaches(policies, source, Target("kube-dns", POD_ADDRESS, 53, "UDP", pod=HOST_DNS_POD)), what
    _, _, dev_policies = policies_and_team(dev_config())
    assert dns_rules(team, policies) == dns_rules(team, dev_policies) == {
        name: [{"to": [{"podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}],
                "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]}]
        for name in ("control-plane", "dns", "snapshot")}


def dns_rules(team, policies) -> dict[str, list[dict]]:
    """By role, the egress rules naming the DNS port."""
    return {policy["metadata"]["name"].removeprefix(f"{team.vcluster_name}-"): rules for policy in policies
            if (rules := [rule for rule in policy["spec"]["egress"]
                          if any(entry.get("port") == 53 for entry in rule.get("ports") or [])])}


def test_stated_dns_pods_are_reached_on_their_port_and_the_default_ones_not_at_all():
    program, team, policies = policies_and_team(kubeconfig_site(OPENSHIFT_DNS))
    openshift_pod = Pod("openshift-dns", OPENSHIFT_DNS["podLabels"])
    for what, source in sources(team).items():
        assert {protocol: reached_ports(policies, source, POD_ADDRESS, protocol, pod=openshift_pod)
                - reached_ports(policies, source, PRIVATE_SERVICE, protocol)
                for protocol in ("UDP", "TCP")} == {"UDP": {5353}, "TCP": {5353}}, what
        assert not any(reaches(policies, source, Target("kube-dns", POD_ADDRESS, 53, protocol, pod=HOST_DNS_POD))
                       for protocol in ("UDP", "TCP")), what
        # The same labels in another namespace are not the DNS.
        assert not reaches(policies, source, Target("a look-alike", POD_ADDRESS, 5353, "UDP",
                                                    pod=Pod("default", OPENSHIFT_DNS["podLabels"]))), what
    [read] = [resource for resource in program.resources if resource.name.endswith("-cluster-dns")]
    assert read.inputs["id"] == "openshift-dns/dns-default"


def test_an_ipv6_node_local_address_is_one_address():
    _, team, policies = policies_and_team(kubeconfig_site({"nodeLocalAddresses": ["fd00::a"]}))
    source = dns_pod(team)
    assert reaches(policies, source, Target("node-cache", "fd00::a", 53, "UDP"))
    assert not reaches(policies, source, Target("a neighbour", "fd00::b", 53, "UDP"))


@pytest.mark.parametrize("dns, key", [
    ({"nodeLocalAddresses": ["169.254.20.0/24"]}, "nodeLocalAddresses"),
    ({"nodeLocalAddresses": ["node-local.dns"]}, "nodeLocalAddresses"),
    ({"nodeLocalAddresses": "169.254.20.10"}, "nodeLocalAddresses"),
    ({"podLabels": {}}, "podLabels"),
    ({"port": 0}, "port"),
    ({"port": 70000}, "port"),
    ({"service": "kube-dns"}, "service"),
    ({"namespace": "Kube_System"}, "namespace"),
    ({"namespace": "vcluster-team-nlp"}, "namespace"),
    ({"nodelocal": True}, "nodelocal"),
])
def test_a_bad_dns_path_is_refused_naming_the_key(dns, key):
    with pytest.raises(ConfigError) as error:
        run(kubeconfig_site(dns))
    assert f"cluster.kubeconfig.dns.{key}" in error.value.keys
    [issue] = [issue for issue in error.value.issues if issue.key == f"cluster.kubeconfig.dns.{key}"]
    assert issue.problem and issue.fix


def test_a_kubeconfig_site_without_the_setting_is_warned_what_the_program_assumes():
    def warned(config):
        return [warning for warning in run(config).warnings if "cluster.kubeconfig.dns" in warning]

    [warning] = warned(kubeconfig_site())
    assert "kube-system/kube-dns" in warning and "NodeLocal DNSCache" in warning
    assert warned(kubeconfig_site({"nodeLocalAddresses": [NODE_LOCAL]})) == []
    assert warned(dev_config()) == []
