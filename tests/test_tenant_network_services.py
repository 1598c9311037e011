"""A team given load balancers or node ports (``vcluster.services``) is reached through them by its clients.

Known defect, left failing (``xfail(strict=True)``) until the platform team decides the fix: the namespace's
workloads NetworkPolicy (components/tenant_network.py, vCluster's own rule) admits ingress only from the team's own
pods and its control plane. A LoadBalancer or NodePort Service delivers a client's connection to the pod from the
client's address (``externalTrafficPolicy: Local``) or from a node's (``Cluster``, after kube-proxy's SNAT), so
neither reaches the pods, and the Service the config granted answers nothing. Admitting those sources is a change of
the network boundary: with the VPC CNI a node's address and another team's pod's are in the same VPC range, and
Calico and the VPC CNI match an ipBlock against pods' addresses too, so an ``ipBlock`` wide enough for the node would
also admit other teams' pods (tests/test_tenant_network.py). Proposal in the branch's report.
"""

from __future__ import annotations

import ipaddress

import pytest

from components.tenant_network import tenant_network_policies
from ops.sites import platform_of
from policy.label_selectors import selector_matches
from tests.conftest import dev_config, eks_config
from tests.vcluster_pods import vcluster_sync
from tools.deployability.network_ingress import isolates_ingress
from tools.deployability.network_policy import pod_selector, port_matches


def admits(policies: list[dict], labels: dict, client: str, port: int) -> bool:
    """Whether a connection from address ``client`` (not a pod's) reaches a pod wearing ``labels`` on ``port``."""
    isolating = [policy for policy in policies
                 if isolates_ingress(policy) and selector_matches(pod_selector(policy), labels)]
    assert isolating, "the team's pods are isolated for ingress"
    return any((not rule.get("from") or any(peer.get("ipBlock") and ipaddress.ip_address(client) in
                                            ipaddress.ip_network(peer["ipBlock"]["cidr"]) and not any(
                                                ipaddress.ip_address(client) in ipaddress.ip_network(hole)
                                                for hole in peer["ipBlock"].get("except") or [])
                                            for peer in rule["from"]))
               and (not rule.get("ports") or any(port_matches(entry, port) for entry in rule["ports"]))
               for policy in isolating for rule in policy["spec"].get("ingress") or [])


def served_team(config: dict, stack: str, services: dict):
    config["gpu-tenancy:vcluster"]["services"] = services
    return next(team for team in platform_of(config, stack).teams if team.vcluster.network_policy)


# (stack, config, the team's services, a client of its Service): an EKS load balancer keeping the client's public
# address (externalTrafficPolicy: Local); a MicroK8s node port from the LAN the box is on.
CASES = {"eks-load-balancer": ("eks", eks_config, {"loadBalancers": 1}, "198.51.100.7"),
         "microk8s-node-port": ("dev", dev_config, {"nodePorts": 1}, "192.168.1.50")}


@pytest.mark.xfail(strict=True, reason="the workloads policy admits ingress from the team's own pods only: a "
                                       "granted load balancer or node port reaches nothing (design decision)")
@pytest.mark.parametrize("case", CASES)
def test_a_client_of_a_granted_load_balancer_or_node_port_reaches_the_pods_behind_it(case):
    stack, config, services, client = CASES[case]
    team = served_team(config(), stack, services)
    virtual = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "vllm-0", "namespace": "default",
                                                               "labels": {"app": "vllm"}},
               "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                        "ports": [{"containerPort": 8000}]}]}}
    host = vcluster_sync(virtual, team)
    assert admits(list(tenant_network_policies(team).values()), host["metadata"]["labels"], client, 8000)
