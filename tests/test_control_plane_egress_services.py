"""A team's control plane and the host's Services, where the network plugin judges a pod's egress before kube-proxy
translates a Service's address: EKS's VPC CNI.

The VPC CNI's policy agent attaches a pod's egress probe to the TC hook of the pod's host-side veth
(aws/aws-network-policy-agent ``pkg/ebpf/bpf_client.go``), which sees a connection to a Service as the pod sent it:
the Service's cluster IP and port, before kube-proxy's DNAT. Its controller adds the cluster IPs of the Services a
rule's pod selector selects for that reason (aws/amazon-network-policy-controller-k8s ``pkg/resolvers/endpoints.go``,
``getMatchingServiceClusterIPs``), and turns a rule without ``to`` into ``0.0.0.0/0`` and ``::/0`` on its ports
(``buildAllowAllEgress``). So a rule opening a port to every address opens every Service listening on that port,
whatever pod and port stand behind it. The control plane's rule for the host API server opens 443 on EKS, and every
other team's vCluster Service listens on 443 (its control plane's 8443, which admits anyone: vCluster's
``chart/templates/service.yaml``): a tenant would reach another team's virtual API server (``pods/NAME/proxy``,
``services/NAME/proxy``, a webhook or APIService), which docs/security-isolation.md (The control plane's egress)
says the program's policy prevents. Ingress is judged after the translation, at the destination pod's own port.

Without a range of its own (the program sets none, components/host.py) an EKS cluster takes its Services' addresses
from 10.100.0.0/16 or 172.20.0.0/16, the ``kubernetes`` Service the first of them; the tests place the site's
Services in each.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Mapping, Union

import pytest

from components.tenant_network import tenant_network_policies
from ops.sites import platform_of
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, stack_config
from tests.test_control_plane_egress import PRIVATE_SERVICE, control_plane_pod, network_policies, site_objects
from tests.test_tenant_network import Target, isolated_team_and_another, reaches
from tools.deployability.inputs import pod_templates
from tools.deployability.network_ingress import Pod, ingress_verdict, peer_selects
from tools.deployability.network_policy import port_matches

# EKS's two default Service ranges (the CreateCluster API's kubernetesNetworkConfig.serviceIpv4Cidr, unset).
SERVICE_RANGES = ("10.100.0.0/16", "172.20.0.0/16")
EKS_STACKS = [stack for stack in COMMITTED_STACKS if platform_of(stack_config(stack), stack).cluster.kind == "eks"]


@dataclass(frozen=True)
class Service:
    what: str
    namespace: str
    selector: Mapping[str, str]
    port: int
    target_port: Union[int, str]  # a number, or the name of the pods' container port


def reaches_before_translation(policies: list[dict], source: Pod, service: Service, address: str) -> bool:
    """Whether ``source``'s egress admits a connection to the Service at ``address`` as the VPC CNI judges it: an
    address rule (or a rule without ``to``) at the cluster IP and the Service's port; a pod-selector rule where it
    selects the Service's selector, on the port behind it (the controller's getMatchingServiceClusterIPs)."""
    if reaches(policies, source, Target(service.what, address, service.port)):
        return True
    stand_in = Pod(service.namespace, dict(service.selector))
    return any(peer_selects(peer, policy["metadata"]["namespace"], stand_in)
               and (not rule.get("ports") or any(port_matches(entry, service.target_port) for entry in rule["ports"]))
               for policy in policies if policy["metadata"]["namespace"] == source.namespace
               for rule in policy["spec"].get("egress") or [] for peer in rule.get("to") or [])


def services_and_pods(objects) -> list[tuple[Service, list[Pod]]]:
    """Every Service of the site with a cluster IP and a selector, port by port, with the pods it selects among the
    site's pod templates (else a pod wearing its selector: one an operator creates)."""
    pods = [Pod(obj.namespace, metadata.get("labels") or {}) for obj, metadata, _ in pod_templates(objects)
            if obj.namespace]
    found = []
    for obj in objects:
        spec = obj.manifest.get("spec") or {}
        if obj.kind != "Service" or not spec.get("selector") or spec.get("clusterIP") == "None":
            continue
        selected = [pod for pod in pods if pod.namespace == obj.namespace
                    and all(pod.labels.get(key) == value for key, value in spec["selector"].items())]
        for port in spec.get("ports") or []:
            service = Service(f"Service {obj.namespace}/{obj.name}:{port['port']}", obj.namespace, spec["selector"],
                              port["port"], port.get("targetPort", port["port"]))
            found.append((service, selected or [Pod(obj.namespace, dict(spec["selector"]))]))
    return found


@pytest.mark.parametrize("service_range", SERVICE_RANGES)
@pytest.mark.parametrize("stack", EKS_STACKS)
def test_on_eks_no_service_outside_the_team_answers_its_control_plane(stack, service_range, tmp_path):
    """Every Service the site's charts and the program create outside the team's namespace (the monitoring stack
    installed), each at its own address of the Service range: none admits the team's control plane, by its egress
    as the VPC CNI judges it and the ingress of the pods behind it."""
    objects = site_objects(stack, tmp_path)
    policies = network_policies(objects)
    team, other = isolated_team_and_another(stack, ACCEPTED_VCLUSTER_TAGS[-1])
    source = control_plane_pod(team)
    found = [(service, pods) for service, pods in services_and_pods(objects) if service.namespace != team.namespace]
    assert any(service.namespace == other.namespace and service.port == 443 for service, _ in found), \
        "the enumeration misses another team's vCluster Service"
    addresses = ipaddress.ip_network(service_range).hosts()
    next(addresses)  # the first is the kubernetes Service's
    answering = sorted(service.what for (service, pods), address in zip(found, addresses)
                       if reaches_before_translation(policies, source, service, str(address))
                       and any(ingress_verdict(source, pod, policies, service.target_port)[0] for pod in pods))
    assert answering == []


@pytest.mark.parametrize("stack", EKS_STACKS)
def test_on_eks_the_control_plane_still_reaches_the_api_server_and_what_it_did_outside_the_service_range(stack):
    """The honest paths of the control plane and the snapshot pods: the ``kubernetes`` Service (the first address of
    either range) on 443; an S3 backup store or a public OIDC issuer on 443; and, as before, a private address of the
    VPC on 443 (docs/security-isolation.md, The control plane's egress)."""
    team, other = isolated_team_and_another(stack, ACCEPTED_VCLUSTER_TAGS[-1])
    policies = list(tenant_network_policies(team).values())
    api_servers = [Service(f"the kubernetes Service in {block}", "default", {}, 443, 443) for block in SERVICE_RANGES]
    plane = Service("another team's vCluster Service", other.namespace,
                    {"app": "vcluster", "release": other.vcluster_name}, 443, 8443)
    for source in (control_plane_pod(team), Pod(team.namespace, {"app": "vcluster-snapshot"})):
        for service, block in zip(api_servers, SERVICE_RANGES):
            assert reaches_before_translation(policies, source, service, str(ipaddress.ip_network(block)[1]))
        for address in ("52.219.100.20", PRIVATE_SERVICE):
            assert reaches(policies, source, Target("an address outside the Service range", address, 443))
        assert not any(reaches_before_translation(policies, source, plane, str(ipaddress.ip_network(block)[77]))
                       for block in SERVICE_RANGES)
