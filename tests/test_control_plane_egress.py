"""Where a tenant can make its own virtual API server connect: the reach of the control plane's egress, pinned.

A tenant is cluster-admin of its virtual cluster, and the virtual API server (kube-apiserver inside the vCluster
control-plane pod in the team's host namespace) opens connections wherever the tenant's objects tell it to:

- ``pods/NAME/proxy`` dials the virtual pod's ``status.podIP``, which the tenant may write (``pods/status``);
  vCluster's API proxy hands only ``exec``, ``attach``, ``portforward``, ``log`` and node ``proxy`` to the host
  (``redirectResources`` in ``pkg/server/server.go``, ``WithRedirect`` in ``pkg/server/filters/redirect.go``), so
  a pod's ``proxy`` is served by the virtual API server itself;
- ``services/NAME/proxy`` dials an address of the Endpoints the tenant writes for a selector-less Service;
- an APIService, or an admission webhook's ``service``, resolves an ``ExternalName`` Service to any name or
  address, and a webhook's ``url`` names one directly.

Kubernetes refuses only loopback and link-local addresses on the proxy paths (``IsProxyableIP``), so the one
boundary left is the NetworkPolicy that selects the control-plane pod. vCluster's chart renders it
(``vc-cp-<release>``, ``chart/templates/networkpolicy.yaml``); values can add rules to it, never remove the one
that opens the API server ports to every address, and the chart has one switch for all its policies at once.
These tests pin what that policy lets the control plane reach on a site the program builds, so a release or a
value that widens it turns them red. What the reach means is in docs/security-model.md (the control plane's
egress).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from components.tenant_access import issuer_port
from tests.conftest import (
    ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, git, mirrored_tag, real_charts_or_skip, run, stack_config,
)
from tests.test_deployability_charts import with_observability
from tests.test_tenant_network import (
    Pod, Site, Target, host_addresses, isolated_team_and_another, isolating_sites, reaches, rendered_policies,
    teams, tenant_pods,
)
from tools.charts.render import render_plan_releases
from tools.deployability.inputs import helm_kube_version, pod_templates, program_objects, rendered_objects
from tools.deployability.network_ingress import ingress_verdict
from tools.plan.document import build_plan

VCLUSTER = "loft-sh/vcluster"
# An address of the site's private network that is neither a node, a pod nor the API server: a database, an
# internal web service or a VPC endpoint of the organisation.
PRIVATE_SERVICE = "10.200.30.40"


def control_plane_pod(team) -> Pod:
    # The pod labels of vCluster's control-plane StatefulSet, the ones its own policy selects.
    return Pod(team.namespace, {"app": "vcluster", "release": team.vcluster_name})


def reached_ports(policies: list[dict], source: Pod, address: str) -> set[int]:
    """The TCP ports ``source`` opens to ``address``, among the first and last port and every port a policy names
    (with its neighbours): a rule without ports would show at port 1, a range at its ends."""
    named = {int(value) for policy in policies for rule in policy["spec"].get("egress") or []
             for entry in rule.get("ports") or [] for value in (entry.get("port"), entry.get("endPort"))
             if isinstance(value, int) or (isinstance(value, str) and value.isdigit())}
    candidates = {1, 65535} | {port + step for port in named for step in (-1, 0, 1)}
    return {port for port in candidates if reaches(policies, source, Target("an address", address, port))}


def api_server_ports(team) -> set[int]:
    """The ports vCluster's control-plane policy opens to every address, with those the program adds for the host's
    API server and the OIDC issuer."""
    ports = {443, 8443, 6443}
    if team.vcluster.api_server_port:
        ports.add(team.vcluster.api_server_port)
    if team.vcluster.access.oidc.enabled:
        ports.add(issuer_port(team.vcluster.access))
    return ports


@pytest.fixture(scope="module",
                params=[(stack, tag) for stack in isolating_sites() for tag in ACCEPTED_VCLUSTER_TAGS],
                ids=lambda param: "-".join(param))
def site(request, tmp_path_factory) -> Site:
    stack, tag = request.param
    team, other = isolated_team_and_another(stack, tag)
    return Site(stack, team, other, rendered_policies(tag, team, tmp_path_factory.mktemp("vcluster-chart")))


def test_the_control_plane_reaches_every_address_on_the_api_server_ports_and_no_other_port(site):
    stack, team, other, policies = site
    source = control_plane_pod(team)
    ports = api_server_ports(team)
    assert reached_ports(policies, source, PRIVATE_SERVICE) == ports
    assert reached_ports(policies, source, "198.51.100.7") == ports
    host = host_addresses(stack)
    assert reaches(policies, source, Target("the host's API server", host["api"], int(host["api_port"])))
    # Another team's control plane listens on 8443, which its own policy admits from anywhere.
    assert reaches(policies, source, Target("another team's vCluster API server", host["pod"], 8443,
                                            pod=control_plane_pod(other)))
    out_of_reach = [
        Target("the instance metadata service", "169.254.169.254", 80),
        Target("a kubelet", host["node"], 10250),
        Target("a node port", host["node"], 30080),
        Target("another team's pod", host["pod"], 8080, pod=Pod(other.namespace, {"app": "web"})),
        Target("KAI's webhooks", host["pod"], 9443, pod=Pod("kai-scheduler", {"app": "binder"})),
        Target("the DCGM exporter", host["pod"], 9400, pod=Pod("gpu-operator", {"app": "nvidia-dcgm-exporter"})),
    ]
    assert [target.what for target in out_of_reach if reaches(policies, source, target)] == []


def test_what_the_control_plane_reaches_is_more_than_the_tenants_pods_do(site):
    """The reach is a tenant's gain: none of its own pods, whatever labels the host admits, opens a connection to a
    private address or to another team's control plane on any port."""
    stack, team, other, policies = site
    other_control_plane = Target("another team's vCluster API server", host_addresses(stack)["pod"], 8443,
                                 pod=control_plane_pod(other))
    for what, pod in tenant_pods(team).items():
        assert reached_ports(policies, pod, PRIVATE_SERVICE) == set(), what
        assert not reaches(policies, pod, other_control_plane), what


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_the_chart_has_no_switch_for_the_control_planes_policy_alone(tag):
    """The program could only narrow the control plane's egress by turning every vCluster policy off and rendering
    its own: a release that lets the control plane's policy be replaced alone turns this red."""
    schema = json.loads(git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:chart/values.schema.json"))
    definitions = schema["$defs"]
    assert set(definitions["NetworkPolicy"]["properties"]) == {
        "enabled", "annotations", "labels", "fallbackDns", "controlPlane", "workload"}
    assert set(definitions["NetworkPolicyControlPlane"]["properties"]) == {"ingress", "egress"}


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_a_pods_proxy_is_served_by_the_virtual_api_server(tag):
    """vCluster's API proxy sends these subresources to the host API server with the syncer's credentials; every
    other request, a pod's or a Service's ``proxy`` among them, goes to the virtual API server, which dials the
    address the tenant's virtual objects name from the control-plane pod."""
    source = git(VCLUSTER, "show", f"{mirrored_tag(VCLUSTER, tag)}:pkg/server/server.go")
    start = source.index("redirectResources: []delegatingauthorizer.GroupVersionResourceVerb{")
    block = source[start:source.index("\n\t\t},\n\t}", start)]
    redirected = set(re.findall(r'WithResource\("(\w+)"\),\s*Verb:\s*"\*",\s*SubResource:\s*"(\w+)"', block))
    assert redirected == {("nodes", "proxy"), ("pods", "portforward"), ("pods", "exec"), ("pods", "attach"),
                          ("pods", "log")}


# --- what a site the program builds listens on within that reach ----------------------------------------------


def listeners(objects) -> list[tuple[str, Pod, int]]:
    """(what, pod, port) for every numbered container port and every Service's numbered target port."""
    pods = [(f"{obj.kind} {obj.namespace}/{obj.name}", Pod(obj.namespace, metadata.get("labels") or {}), spec)
            for obj, metadata, spec in pod_templates(objects) if obj.namespace]
    found = [(what, pod, port["containerPort"]) for what, pod, spec in pods
             for container in spec.get("containers") or [] for port in container.get("ports") or []
             if not spec.get("hostNetwork")]
    for obj in objects:
        spec = obj.manifest.get("spec") or {}
        if obj.kind != "Service" or not spec.get("selector"):
            continue
        selected = [(what, pod) for what, pod, _ in pods if pod.namespace == obj.namespace
                    and all(pod.labels.get(key) == value for key, value in spec["selector"].items())]
        for port in spec.get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            if isinstance(target, int):
                found += [(f"{what} behind Service {obj.name}", pod, target) for what, pod in selected] or [
                    (f"Service {obj.namespace}/{obj.name}", Pod(obj.namespace, spec["selector"]), target)]
    return found


def network_policies(objects) -> list[dict[str, Any]]:
    return [obj.manifest for obj in objects if obj.kind == "NetworkPolicy"]


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_what_a_site_listens_on_within_the_control_planes_reach_is_only_the_vcluster_api_servers(stack, tmp_path):
    """Every pod the site's charts and the program start (with the monitoring stack installed), on a port the
    control plane's policy opens, and whether that pod's own ingress policies refuse the control plane of another
    team. The only ones that answer are the vCluster control planes (8443), which admit any address."""
    plan = build_plan(run(with_observability(stack_config(stack), "install"), stack=stack), stack)
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    objects = rendered_objects(rendered, tmp_path, plan["resources"]) + program_objects(plan["resources"])
    policies = network_policies(objects)
    team, _ = isolated_team_and_another(stack, ACCEPTED_VCLUSTER_TAGS[-1])
    source = control_plane_pod(team)
    open_ports = reached_ports(policies, source, PRIVATE_SERVICE)
    assert open_ports == api_server_ports(team)
    within = [(what, pod, port) for what, pod, port in listeners(objects) if port in open_ports]
    answering = sorted({(what, port) for what, pod, port in within
                        if pod.namespace != team.namespace and ingress_verdict(source, pod, policies, port)[0]})
    assert within, "no listener found: the enumeration reads nothing"
    assert answering == sorted({(what, port) for what, pod, port in within
                                if pod.namespace != team.namespace and pod.labels.get("app") == "vcluster"})
    assert {port for _, port in answering} == ({8443} if len(teams(stack, ACCEPTED_VCLUSTER_TAGS[-1])) > 1 else set())
