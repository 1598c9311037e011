"""The ``api-server-egress`` rule of tools.deployability on an existing cluster that states where its API server
listens (cluster.kubeconfig.apiServerAddresses): the program opens the API server's port at those addresses only
(components/tenant_network.py), so the check holds each control plane to every one of them, and to the private ranges
where the site does not state them. Found by a new-site trial, whose plan the check refused though its policies
opened 6443 at each stated address.

The control planes' policies are the program's own, from its plan; the control planes stand in for the vCluster
chart's (labelled ``app: vcluster`` and selected as the chart's are), except in the last test, which renders the real
charts."""

from __future__ import annotations

import copy

from tests.conftest import dev_config, real_charts_or_skip, run
from tools.charts.render import render_plan_releases
from tools.deployability import check as deployability
from tools.deployability.findings import ERROR, INFO
from tools.deployability.inputs import K8sObject, helm_kube_version, program_objects, site_from_plan
from tools.plan.document import build_plan

ADDRESSES = ["10.20.0.10/32", "10.20.0.11/32", "10.20.0.12/32"]
RULE = "api-server-egress"


def existing_cluster(**kubeconfig) -> dict:
    """The dev site's teams on a cluster reached by kubeconfig whose API server serves on 6443, with ``kubeconfig``'s
    further keys (cluster.kubeconfig)."""
    config = {**{key: value for key, value in dev_config().items() if key != "gpu-tenancy:cluster"},
              "gpu-tenancy:cluster": {"kind": "kubeconfig", "kubeconfig": {"gpus": 1, "apiServerPort": 6443,
                                                                           **kubeconfig}},
              "gpu-tenancy:kubeconfig": {"secure": "v1:encrypted"}, "gpu-tenancy:gpuOperator": {"mode": "external"}}
    return config


def with_team_extra_values(config: dict, extra_values: dict) -> dict:
    config = copy.deepcopy(config)
    config["gpu-tenancy:teams"][0].setdefault("vcluster", {})["extraValues"] = extra_values
    return config


def planned(config: dict) -> tuple:
    plan = build_plan(run(config, stack="site"), "site")
    return plan, site_from_plan(plan), program_objects(plan["resources"])


def control_plane_policies(objects: list[K8sObject]) -> list[K8sObject]:
    return [obj for obj in objects if obj.kind == "NetworkPolicy" and obj.name.endswith("-control-plane")]


def with_control_planes(objects: list[K8sObject]) -> list[K8sObject]:
    """The objects and a stand-in for each team's vCluster control plane, which its control-plane policy selects."""
    planes = [K8sObject({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": policy.name.removesuffix("-control-plane"), "namespace": policy.namespace,
                                      "labels": {"app": "vcluster",
                                                 **policy.manifest["spec"]["podSelector"]["matchLabels"]}},
                         "spec": {"containers": [{"name": "syncer", "image": "vcluster"}]}}, "test: control plane")
              for policy in control_plane_policies(objects)]
    assert planes, "the program renders a control-plane policy for each team"
    return objects + planes


def egress_findings(objects: list[K8sObject], site) -> list:
    return [finding for finding in deployability.check(with_control_planes(objects), site) if finding.rule == RULE]


def api_server_rule(policy: K8sObject) -> dict:
    """The program's rule opening the API server's port: the control-plane policy's first on 6443 (the site's own
    rules, from extraValues, follow the program's)."""
    return next(rule for rule in policy.manifest["spec"]["egress"]
                if any(entry.get("port") == 6443 for entry in rule.get("ports") or []))


def test_a_site_that_states_its_api_servers_addresses_passes_where_the_program_opens_them():
    _, site, objects = planned(existing_cluster(apiServerAddresses=ADDRESSES))
    assert site.facts.api_server_addresses == tuple(ADDRESSES) and site.facts.api_server_ports == (6443,)
    assert all([peer["ipBlock"]["cidr"] for peer in api_server_rule(policy)["to"]] == ADDRESSES
               for policy in control_plane_policies(objects))
    assert not egress_findings(objects, site)


def test_a_policy_that_leaves_out_one_stated_address_is_reported():
    """The kubernetes Service spreads the control plane's connections over every endpoint: one left closed fails the
    connections sent to it."""
    config = existing_cluster(apiServerAddresses=ADDRESSES)
    _, site, objects = planned(config)
    first = control_plane_policies(objects)[0]
    rule = api_server_rule(first)
    rule["to"] = rule["to"][:2]
    [finding] = egress_findings(objects, site)
    assert finding.severity == ERROR and finding.object.startswith(f"Pod {first.namespace}/")
    assert f"NetworkPolicies {first.name} allow no egress to TCP 6443" in finding.message
    assert "at 10.20.0.12/32, where the site states the API server listens" in finding.message
    assert "10.20.0.10/32" not in finding.message and "10.20.0.11/32" not in finding.message
    # Another rule opening the port at the address left out makes up for it: each address by some rule.
    opened = with_team_extra_values(config, {"policies": {"networkPolicy": {"controlPlane": {"egress": [
        {"ports": [{"port": 6443}], "to": [{"ipBlock": {"cidr": "10.20.0.12/32"}}]}]}}}})
    _, site, objects = planned(opened)
    rule = api_server_rule(control_plane_policies(objects)[0])
    rule["to"] = rule["to"][:2]
    assert not egress_findings(objects, site)


def test_a_block_holding_the_stated_addresses_opens_them_unless_an_exception_cuts_one_out():
    _, site, objects = planned(existing_cluster(apiServerAddresses=ADDRESSES))
    policy = control_plane_policies(objects)[0]
    api_server_rule(policy)["to"] = [{"ipBlock": {"cidr": "10.20.0.0/24"}}]
    assert not egress_findings(objects, site)
    api_server_rule(policy)["to"] = [{"ipBlock": {"cidr": "10.20.0.0/24", "except": ["10.20.0.11/32"]}}]
    [finding] = egress_findings(objects, site)
    assert "at 10.20.0.11/32," in finding.message


def test_a_site_that_does_not_state_them_is_held_to_the_private_ranges_as_before():
    _, site, objects = planned(existing_cluster())
    assert site.facts.api_server_addresses == ()
    assert not egress_findings(objects, site), "the program opens the port at every address"
    policy = control_plane_policies(objects)[0]
    # Open at the trial's addresses only: the API server may be anywhere in the private ranges.
    api_server_rule(policy)["to"] = [{"ipBlock": {"cidr": block}} for block in ADDRESSES]
    [finding] = egress_findings(objects, site)
    assert finding.severity == ERROR
    assert ("allow no egress to TCP 6443, the kubeconfig API server port, anywhere in 10.0.0.0/8, 172.16.0.0/12, "
            "192.168.0.0/16, the private ranges the API server's address may be in") in finding.message
    api_server_rule(policy)["to"] = [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["192.168.0.0/16"]}}]
    [finding] = egress_findings(objects, site)
    assert "anywhere in 192.168.0.0/16, the private range the API server's address may be in" in finding.message


def test_the_fix_names_the_config_keys_that_shape_the_programs_policy():
    """The program renders the control planes' policies itself (vCluster's own are off): the fix names where a site
    states the API server's endpoints and adds rules of its own, not the chart's values."""
    _, site, objects = planned(existing_cluster(apiServerAddresses=ADDRESSES))
    api_server_rule(control_plane_policies(objects)[0])["to"].pop()
    [finding] = egress_findings(objects, site)
    assert finding.fix.startswith("set cluster.kubeconfig.apiServerPort and apiServerAddresses to the API server's "
                                  "endpoints (kubectl get endpointslices -n default")
    assert "vcluster.extraValues.policies.networkPolicy.controlPlane.egress (teams[].vcluster.extraValues for one " \
        "team)" in finding.fix and "vcluster.networkPolicy: false" in finding.fix
    assert "vCluster values" not in finding.fix


def test_the_trials_site_is_deployable_with_the_real_charts(tmp_path):
    # The trial's site: an existing cluster stating its API server's port and three addresses.
    plan, _, _ = planned(existing_cluster(apiServerAddresses=ADDRESSES))
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    _, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    problems = [f for f in found if f.severity != INFO]
    assert not problems, "\n".join(map(str, problems))
