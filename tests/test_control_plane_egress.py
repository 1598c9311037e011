"""Where a tenant can make its own virtual API server connect: the reach of the control plane's egress.

A tenant is cluster-admin of its virtual cluster, and the virtual API server (kube-apiserver inside the vCluster
control-plane pod in the team's host namespace) opens connections wherever the tenant's objects tell it to:

- ``pods/NAME/proxy`` dials the virtual pod's ``status.podIP``, which the tenant may write (``pods/status``);
  vCluster's API proxy hands only ``exec``, ``attach``, ``portforward``, ``log`` and node ``proxy`` to the host
  (``redirectResources`` in ``pkg/server/server.go``, ``WithRedirect`` in ``pkg/server/filters/redirect.go``), so
  a pod's ``proxy`` is served by the virtual API server itself;
- ``services/NAME/proxy`` dials an address of the Endpoints the tenant writes for a selector-less Service;
- an APIService, or an admission webhook's ``service``, resolves an ``ExternalName`` Service to any name or
  address, and a webhook's ``url`` names one directly.

Kubernetes refuses only loopback and link-local addresses on the proxy paths (``IsProxyableIP``), so the boundary
is the NetworkPolicy that selects the control-plane pod. vCluster's chart opens it to every address on 443, 8443 and
6443 (``vc-cp-<release>``, ``chart/templates/networkpolicy.yaml``), its values can only add rules, and it has one
switch for all its policies; so the program renders them all (components/tenant_network.py), vCluster's own but
for that rule, which opens only the host API server's port. These tests attack that: the control plane reaches
the API server's port (and the OIDC issuer's) and nothing else outside its namespace, on a site the program builds.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from typing import Any
from urllib.parse import urlparse

import pytest

from components.tenant import vcluster_values
from components.tenant_network import backup_store_rules, network_policy_values, tenant_network_policies
from ops.sites import platform_of
from tests.conftest import (
    ACCEPTED_VCLUSTER_TAGS, COMMITTED_STACKS, git, mirrored_tag, real_charts_or_skip, run, stack_config,
)
from tests.test_deployability_charts import with_observability
from tests.test_tenant_network import (  # noqa: F401 (site: the fixture, each committed site at each accepted tag)
    Pod, Target, host_addresses, host_dns, isolated_team_and_another, network_sites, reaches, chart_policies, dns_pod,
    site, site_config, teams, tenant_pods,
)
from tools.charts.render import render_plan_releases
from tools.deployability.inputs import helm_kube_version, pod_templates, program_objects, rendered_objects
from tools.deployability.network_ingress import ingress_verdict
from tools.plan.document import build_plan

VCLUSTER = "loft-sh/vcluster"
# An address of the site's private network that is neither a node, a pod nor the API server: a database, an
# internal web service or a VPC endpoint of the organisation.
PRIVATE_SERVICE = "10.200.30.40"
# vCluster's peer for the host's DNS pods (kube-dns in kube-system, every port).
HOST_DNS_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
                 "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}


def dns_ports(port: int) -> list[dict]:
    return [{"port": port, "protocol": "UDP"}, {"port": port, "protocol": "TCP"}]


def site_dns_rules(team) -> list[dict]:
    """What the program opens in place of vCluster's host DNS rule: the DNS pods the site states
    (cluster.kubeconfig.dns; kube-dns otherwise) on their port, and each node-local address on 53."""
    dns = team.vcluster.host_dns
    peer = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": dns.namespace}},
            "podSelector": {"matchLabels": dict(dns.pod_labels)}}
    node_local = [{"ports": dns_ports(53), "to": [{"ipBlock": {"cidr": str(ipaddress.ip_network(address))}}
                                                  for address in dns.node_local_addresses]}]
    return [{"ports": dns_ports(dns.port), "to": [peer]}, *(node_local if dns.node_local_addresses else [])]


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


def api_server_ports(stack: str, team) -> set[int]:
    """The host API server's port: EKS 443, MicroK8s 16443, a kubeconfig host's stated one or vCluster's three
    common ones."""
    kind = platform_of(site_config(stack), stack).cluster.kind
    return {"eks": {443}, "microk8s": {16443}}.get(kind) or (
        {team.vcluster.api_server_port} if team.vcluster.api_server_port else {443, 8443, 6443})


def issuer_addresses(team) -> list[str]:
    """Where the team's OIDC issuer is: the addresses the site states, the URL's IP address, or (empty) somewhere on
    the public internet."""
    oidc = team.vcluster.access.oidc
    host = urlparse(oidc.issuer_url).hostname
    return list(oidc.issuer_addresses) or ([host] if re.fullmatch(r"[\d.]+", host) else [])


def issuer_ports(team, address: str, *, public: bool) -> set[int]:
    """The OIDC issuer's port where the team signs in through one and ``address`` is among the issuer's: within the
    networks stated for it, else at any public address (docs/security-isolation.md, The control plane's egress)."""
    oidc = team.vcluster.access.oidc
    if not oidc.enabled:
        return set()
    stated = issuer_addresses(team)
    opened = any(ipaddress.ip_address(address) in ipaddress.ip_network(block) for block in stated) if stated else public
    return {oidc.port} if opened else set()


def backup_store_ports(team, address: str, *, public: bool) -> set[int]:
    """The backup store's port where the site's ``backup`` block opens it to the control plane (docs/operations-data.md,
    Backing up and restoring a team): at the endpoint's own address when it names one by IP, else at any public
    address."""
    backup = team.vcluster.backup
    if backup is None:
        return set()
    opened = address == backup.endpoint_address if backup.endpoint_address else public
    return {backup.port} if opened else set()


def warned_of_open_control_plane_port(stack: str) -> bool:
    """A kubeconfig site without cluster.kubeconfig.apiServerPort keeps vCluster's 8443 to every address, and one
    stating 8443 opens it there too: other control planes included. The loader says so, and that reach is the one
    these tests then leave out."""
    return any(warning.startswith(("cluster.kubeconfig.apiServerPort is not set",
                                   "cluster.kubeconfig.apiServerPort is 8443"))
               for warning in platform_of(site_config(stack), stack).warnings)


def test_the_control_plane_reaches_the_api_server_port_and_nothing_else_outside_its_namespace(site):
    stack, team, other, policies = site
    source = control_plane_pod(team)
    ports = api_server_ports(stack, team)
    for address, public in ((PRIVATE_SERVICE, False), ("198.51.100.7", True)):
        assert reached_ports(policies, source, address) == ports | backup_store_ports(team, address, public=public) \
            | issuer_ports(team, address, public=public), address
    store = team.vcluster.backup and team.vcluster.backup.endpoint_address
    if store:
        assert reached_ports(policies, source, store) == ports | {team.vcluster.backup.port}
    for block in issuer_addresses(team) if team.vcluster.access.oidc.enabled else []:
        address = str(ipaddress.ip_network(block)[0])
        assert reached_ports(policies, source, address) == ports | issuer_ports(team, address, public=False)
    host = host_addresses(stack)
    assert reaches(policies, source, Target("the host's API server", host["api"], int(host["api_port"])))
    honest = [host_dns(stack, team),
              Target("a webhook or aggregated API of its own", host["pod"], 9443,
                     pod=tenant_pods(team)["a plain workload"]),
              Target("its own DNS", host["pod"], 1053, "UDP", pod=dns_pod(team))]
    assert [target.what for target in honest if not reaches(policies, source, target)] == []
    out_of_reach = [
        # Another team's control plane admits 8443 from anywhere: vCluster's rule, for its Service's exposure.
        Target("another team's vCluster API server", host["pod"], 8443, pod=control_plane_pod(other)),
        Target("the instance metadata service", "169.254.169.254", 80),
        Target("a kubelet", host["node"], 10250),
        Target("a node port", host["node"], 30080),
        Target("another team's pod", host["pod"], 8080, pod=Pod(other.namespace, {"app": "web"})),
        Target("KAI's webhooks", host["pod"], 9443, pod=Pod("kai-scheduler", {"app": "binder"})),
        Target("the DCGM exporter", host["pod"], 9400, pod=Pod("gpu-operator", {"app": "nvidia-dcgm-exporter"})),
    ]
    if warned_of_open_control_plane_port(stack):
        out_of_reach = out_of_reach[1:]
    assert [target.what for target in out_of_reach if reaches(policies, source, target)] == []


def test_a_tenants_pods_reach_no_private_address_nor_another_control_plane(site):
    """None of the team's own pods, whatever labels the host admits, opens a connection to a private address or to
    another team's control plane on any port: the control plane's reach is what a tenant gains."""
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


def site_objects(stack: str, tmp_path) -> list:
    """Every object the site runs with the monitoring stack installed: the real charts rendered and the program's."""
    plan = build_plan(run(with_observability(stack_config(stack), "install"), stack=stack), stack)
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    objects = rendered_objects(rendered, tmp_path, plan["resources"]) + program_objects(plan["resources"])
    return objects


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_nothing_the_site_runs_outside_the_teams_namespace_answers_its_control_plane(stack, tmp_path):
    """Every port the site's charts and the program's pods listen on (the monitoring stack installed), including
    every other team's control plane: none is open to the team's control plane, by its egress or their ingress,
    but the host's DNS pods' DNS port."""
    objects = site_objects(stack, tmp_path)
    policies = network_policies(objects)
    team, _ = isolated_team_and_another(stack, ACCEPTED_VCLUSTER_TAGS[-1])
    source = control_plane_pod(team)
    found = [(what, pod, port) for what, pod, port in listeners(objects) if pod.namespace != team.namespace]
    other_planes = {pod.namespace for what, pod, port in found if pod.labels.get("app") == "vcluster" and port == 8443}
    assert len(other_planes) == len(teams(stack, ACCEPTED_VCLUSTER_TAGS[-1])) - 1, "the enumeration misses pods"
    answering = sorted({(what, port) for what, pod, port in found
                        if reaches(policies, source, Target(what, PRIVATE_SERVICE, port, pod=pod))
                        and ingress_verdict(source, pod, policies, port)[0]})
    expected = {(what, port) for what, pod, port in found if pod.namespace == "kube-system"
                and pod.labels.get("k8s-app") == "kube-dns" and port == 53}
    if warned_of_open_control_plane_port(stack):
        expected |= {(what, port) for what, pod, port in found if pod.labels.get("app") == "vcluster" and port == 8443}
    assert answering == sorted(expected)


def expected_api_server_rules(team, ports: list[dict]) -> list[dict]:
    """The program's rules in place of the chart's: the API server's ports at the stated addresses, else everywhere;
    where the network plugin judges before translation (EKS, a kubeconfig site on the VPC CNI), without the Service
    ranges, and with the kubernetes Service's addresses on 443 (tests/test_control_plane_egress_services.py,
    tests/test_control_plane_egress_vpc_cni.py)."""
    ranges = team.vcluster.untranslated_service_ranges
    stated = team.vcluster.api_server_addresses
    if not ranges:
        return [{"ports": ports, **({"to": [{"ipBlock": {"cidr": block}} for block in stated]} if stated else {})}]
    v4 = [block for block in ranges if ipaddress.ip_network(block).version == 4]
    def inside(block: str) -> list[str]:
        # Stated addresses never lie inside a range (the config refuses it); a range inside one is left out of it.
        return [found for found in ranges if ipaddress.ip_network(found).version == ipaddress.ip_network(block).version
                and ipaddress.ip_network(found).subnet_of(ipaddress.ip_network(block))]
    everywhere = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": v4}},
                  *([{"ipBlock": {"cidr": "::/0", "except": [block for block in ranges if block not in v4]}}]
                    if len(v4) < len(ranges) else [])]
    to = [{"ipBlock": {"cidr": block, **({"except": inside(block)} if inside(block) else {})}}
          for block in stated] if stated else everywhere
    kubernetes = [{"ipBlock": {"cidr": address}} for address in team.vcluster.kubernetes_service_addresses]
    service = [{"port": 443, "protocol": "TCP"}]
    return [{"ports": ports, "to": to + kubernetes}] if ports == service else [
        {"ports": ports, "to": to}, {"ports": service, "to": kubernetes}]


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
@pytest.mark.parametrize("stack", network_sites())
def test_the_programs_policies_are_vclusters_own_but_for_the_api_server_rule(stack, tag, tmp_path):
    """vCluster's chart, given the values the program would have given it, renders the program's policies (names
    and metadata aside) with two differences: its rule opening 443, 8443 and 6443 to every address, and its rules
    opening the host's DNS pods on every port; and a site's backup store, which the chart does not know of."""
    for team in teams(stack, tag):
        if not team.vcluster.network_policy:
            assert tenant_network_policies(team) == {}
            continue
        values = vcluster_values(team, "10.152.183.10")
        values["policies"]["networkPolicy"] = network_policy_values(team)
        chart = {policy["metadata"]["name"]: policy["spec"] for policy in chart_policies(tag, team, values, tmp_path)}
        ours = tenant_network_policies(team)
        chart_rule = {"ports": [{"port": port, "protocol": "TCP"} for port in (443, 8443, 6443)]}
        # The port the site states, or (a kubeconfig site that states none) vCluster's three in the chart's order; an
        # OIDC issuer's port has a rule of its own, even where it is the same port.
        ports = api_server_ports(stack, team)
        api_rules = expected_api_server_rules(team, [{"port": port, "protocol": "TCP"} for port in sorted(
            ports, key=lambda port: (443, 8443, 6443, port).index(port))])
        for role, prefix in {"workloads": "vc-work", "control-plane": "vc-cp", "dns": "vc-kube-dns",
                             "snapshot": "vc-snapshot"}.items():
            expected = chart.pop(f"{prefix}-{team.vcluster_name}")
            expected["egress"] = [replaced for rule in expected["egress"] for replaced in (
                api_rules if rule == chart_rule else site_dns_rules(team) if rule == {"to": [HOST_DNS_PEER]} else [rule])]
            spec = copy.deepcopy(ours[role]["spec"])
            if role in ("control-plane", "snapshot"):
                # The site's backup store, which vCluster's chart does not know of (its reach: the test above).
                store = backup_store_rules(team)
                assert all(rule in spec["egress"] for rule in store), (team.name, role)
                spec["egress"] = [rule for rule in spec["egress"] if rule not in store]
            assert spec == expected, (team.name, role)
        assert chart == {}, "the chart renders a policy the program does not"

