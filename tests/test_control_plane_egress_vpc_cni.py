"""An existing cluster (``kind: kubeconfig``) whose network plugin judges a pod's egress before a Service's address
is translated: the VPC CNI of an EKS cluster the site brings (``networking: [aws-vpc-cni]``).

There, as on the EKS hosts the program builds (tests/test_control_plane_egress_services.py), a rule opening the API
server's port to every address opens every Service listening on it, another team's vCluster Service (443, its
control plane's 8443) among them; and a rule opening the port at the API server's endpoints alone does not admit the
control plane's own connection, which goes to the ``kubernetes`` Service's address, on the Service's port (443,
whatever port the API server listens on). So such a site states its Service ranges (``serviceRanges``), and the rule
leaves them out but for the ``kubernetes`` Service, at its first address and on 443.
"""

from __future__ import annotations

import ipaddress

import pytest

from components.tenant_network import tenant_network_policies
from config import ConfigError
from ops.sites import platform_of
from tests.test_control_plane_egress import control_plane_pod
from tests.test_control_plane_egress_services import Service, reaches_before_translation
from tests.test_deployability_api_server_addresses import with_control_planes
from tests.test_tenant_network import kubeconfig_on_port
from tests.conftest import run
from tools.deployability.inputs import program_objects, site_from_plan
from tools.deployability.site_rules import check_api_server_egress
from tools.plan.document import build_plan

SERVICE_RANGE = "10.96.0.0/12"


def vpc_cni_site(api_server_port=None, **kubeconfig) -> dict:
    config = kubeconfig_on_port(api_server_port)
    config["gpu-tenancy:cluster"]["kubeconfig"].update({"networking": ["aws-vpc-cni"], **kubeconfig})
    return config


def test_a_site_running_the_vpc_cni_without_its_service_ranges_is_refused_naming_the_key():
    with pytest.raises(ConfigError) as raised:
        platform_of(vpc_cni_site(443), "site")
    issue = next(issue for issue in raised.value.issues if issue.key == "cluster.kubeconfig.serviceRanges")
    assert "aws-vpc-cni" in issue.problem and "every other team's vCluster Service" in issue.problem
    assert "serviceIpv4Cidr" in issue.fix and "--service-cluster-ip-range" in issue.fix
    # Another plugin judges after translation (Calico's iptables rules, Cilium's socket load balancing): not asked.
    config = kubeconfig_on_port(443)
    config["gpu-tenancy:cluster"]["kubeconfig"]["networking"] = ["calico"]
    assert platform_of(config, "site").cluster.kubeconfig.service_ranges == ()


@pytest.mark.parametrize("port, stated", [(443, ()), (6443, ()), (6443, ("192.168.10.0/28",)),
                                          (443, ("10.0.5.10/32",))])
def test_the_control_plane_reaches_the_kubernetes_service_and_no_other_service_in_the_range(port, stated):
    config = vpc_cni_site(port, serviceRanges=[SERVICE_RANGE],
                          **({"apiServerAddresses": list(stated)} if stated else {}))
    team, other = platform_of(config, "site").teams[:2]
    policies = list(tenant_network_policies(team).values())
    source = control_plane_pod(team)
    first = str(ipaddress.ip_network(SERVICE_RANGE)[1])
    # The honest path: kube-apiserver serves the kubernetes Service on 443, whatever its own port.
    assert reaches_before_translation(policies, source, Service("the kubernetes Service", "default", {}, 443, port),
                                      first)
    plane = Service("another team's vCluster Service", other.namespace,
                    {"app": "vcluster", "release": other.vcluster_name}, 443, 8443)
    others = [str(ipaddress.ip_network(SERVICE_RANGE)[offset]) for offset in (2, 77, 4000)]
    assert not any(reaches_before_translation(policies, source, plane, address) for address in others)
    on_port = Service("a Service on the API server's port", other.namespace, {"app": "x"}, port, port)
    assert not any(reaches_before_translation(policies, source, on_port, address) for address in others)


def test_the_deployability_check_judges_the_control_planes_at_the_kubernetes_service():
    plan = build_plan(run(vpc_cni_site(6443, serviceRanges=[SERVICE_RANGE]), stack="site"), "site")
    site = site_from_plan(plan)
    assert site.facts.judged_at_service and site.facts.api_server_ports == (443,)
    assert site.facts.api_server_addresses == ("10.96.0.1/32",)
    objects = with_control_planes(program_objects(plan["resources"]))
    assert check_api_server_egress(objects, site) == []
    # The control planes' policies without their rule for the kubernetes Service (as before serviceRanges).
    for obj in objects:
        if obj.kind == "NetworkPolicy":
            spec = obj.manifest["spec"]
            spec["egress"] = [rule for rule in spec.get("egress") or []
                              if [peer.get("ipBlock", {}).get("cidr") for peer in rule.get("to") or []]
                              != ["10.96.0.1/32"]]
    findings = check_api_server_egress(objects, site)
    assert findings and all("10.96.0.1/32" in finding.message and "Service ranges" in finding.message
                            for finding in findings)


@pytest.mark.parametrize("ranges, stated, key", [
    (["10.100.0.0/16", "10.100.128.0/17"], (), "cluster.kubeconfig.serviceRanges[1]"),
    (["10.100.0.0/16", "10.100.0.0/16"], (), "cluster.kubeconfig.serviceRanges[1]"),
    (["10.100.0.0/16"], ("10.100.0.0/24",), "cluster.kubeconfig.apiServerAddresses[0]"),
])
def test_overlapping_ranges_and_endpoints_inside_a_range_are_refused(ranges, stated, key):
    with pytest.raises(ConfigError) as raised:
        platform_of(vpc_cni_site(443, serviceRanges=ranges,
                                 **({"apiServerAddresses": list(stated)} if stated else {})), "site")
    assert raised.value.keys == [key]


def test_a_bad_range_is_one_problem_not_also_a_missing_key():
    with pytest.raises(ConfigError) as raised:
        platform_of(vpc_cni_site(443, serviceRanges=["10.100.0.1/16"]), "site")
    assert raised.value.keys == ["cluster.kubeconfig.serviceRanges[0]"]


def test_stated_endpoints_holding_a_service_range_leave_it_out_and_only_the_primary_range_is_the_kubernetes_one():
    # A second range (the other family, a ServiceCIDR added later): its first address is any Service's.
    config = vpc_cni_site(443, serviceRanges=[SERVICE_RANGE, "fd00:10:96::/112", "10.200.0.0/16"],
                          apiServerAddresses=["10.0.0.0/8"])
    team, other = platform_of(config, "site").teams[:2]
    policies = list(tenant_network_policies(team).values())
    source = control_plane_pod(team)
    plane = Service("another team's vCluster Service", other.namespace,
                    {"app": "vcluster", "release": other.vcluster_name}, 443, 8443)
    for address in ("10.96.0.9", "fd00:10:96::1", "10.200.0.1", "10.200.7.7"):
        assert not reaches_before_translation(policies, source, plane, address), address
    api_server = Service("the kubernetes Service", "default", {}, 443, 443)
    assert reaches_before_translation(policies, source, api_server, "10.96.0.1")
    assert reaches_before_translation(policies, source, Service("an endpoint", "default", {}, 443, 443), "10.0.3.4")
