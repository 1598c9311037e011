"""The Services a tenant namespace holds before the team creates any: the control plane's own, and none per node.

Kubernetes' quota counts a NodePort Service's ports as node ports, and a LoadBalancer Service's too unless it
sets ``allocateLoadBalancerNodePorts: false``; vCluster's syncer creates a host Service per node when
``networking.advanced.proxyKubelets.byIP`` is on. Rendered from vCluster's chart at the accepted tags, the
namespace's quota must hold the control plane's Services and still leave the team what it was promised.
"""

from __future__ import annotations

import re

import pytest
import yaml

from ops.sites import platform_of
from tests.conftest import ACCEPTED_VCLUSTER_TAGS, dev_config, eks_config, git, mirror_chart, run
from tools.charts.render import render_release

VCLUSTER = "loft-sh/vcluster"
RELEASE = "kubernetes:helm.sh/v3:Release"


def quota_usage(service: dict) -> dict[str, int]:
    """What one Service counts against a ResourceQuota, as Kubernetes' service evaluator counts it."""
    spec = service.get("spec") or {}
    kind = spec.get("type", "ClusterIP")
    ports = spec.get("ports") or []
    usage = {"count/services": 1, "services.loadbalancers": int(kind == "LoadBalancer"), "services.nodeports": 0}
    if kind == "NodePort":
        usage["services.nodeports"] = len(ports)
    elif kind == "LoadBalancer":
        allocated = spec.get("allocateLoadBalancerNodePorts", True)
        usage["services.nodeports"] = len(ports) if allocated else sum(1 for p in ports if p.get("nodePort"))
    return usage


def with_exposure(config: dict, access: dict, per_team) -> dict:
    config["gpu-tenancy:vcluster"] = {**config.get("gpu-tenancy:vcluster", {}), "access": access}
    for index, team in enumerate(config["gpu-tenancy:teams"]):
        team.setdefault("vcluster", {})["access"] = per_team(index)
    return config


SITES = {
    "nodePort": lambda: with_exposure(dev_config(), {"exposure": "nodePort", "host": "gpu-box.lab.example"},
                                      lambda index: {"nodePort": 30443 + index}),
    "loadBalancer": lambda: with_exposure(eks_config(), {"exposure": "loadBalancer", "domain": "vc.example.com"},
                                          lambda index: {}),
    "none": dev_config,
}


@pytest.fixture(scope="module", params=ACCEPTED_VCLUSTER_TAGS)
def chart(request, tmp_path_factory):
    return mirror_chart(VCLUSTER, request.param, "chart", tmp_path_factory.mktemp("vcluster"))


@pytest.mark.parametrize("exposure", sorted(SITES))
def test_the_control_plane_services_fit_the_quota_and_leave_the_team_its_promise(chart, exposure):
    config = SITES[exposure]()
    teams = {team.namespace: team for team in platform_of(config, stack=exposure).teams}
    program = run(config, stack=f"services-{exposure}")
    releases = [r for r in program.of_type(RELEASE) if r.inputs.get("chart") == "vcluster"]
    assert releases
    for release in releases:
        inputs = release.inputs
        documents = [document for text in render_release(chart, inputs["name"], inputs["namespace"],
                                                          inputs["values"]).values()
                     for document in yaml.safe_load_all(text) if isinstance(document, dict)]
        [quota] = [d for d in documents if d.get("kind") == "ResourceQuota"]
        hard = quota["spec"]["hard"]
        used = {"count/services": 0, "services.loadbalancers": 0, "services.nodeports": 0}
        for service in (d for d in documents if d.get("kind") == "Service"):
            for key, value in quota_usage(service).items():
                used[key] += value
        promised = teams[inputs["namespace"]].vcluster
        assert int(hard["services.nodeports"]) == promised.services.node_ports + used["services.nodeports"]
        assert int(hard["services.loadbalancers"]) == promised.services.load_balancers + used["services.loadbalancers"]
        # The synced kube-dns Service comes later, from the syncer; no per-node Service ever does.
        assert int(hard["count/services"]) == promised.resource_quota.services + used["count/services"] + 1
        assert (exposure == "none") == (used["services.nodeports"] == 0)


@pytest.mark.parametrize("tag", ACCEPTED_VCLUSTER_TAGS)
def test_per_node_services_follow_proxy_kubelets_by_ip_which_the_program_turns_off(tag, dev_run):
    # The syncer's per-node Services exist only when byIP is on (vCluster's own config translation).
    translation = git(VCLUSTER, "show", f"{tag}:pkg/config/config.go")
    assert re.search(r"FakeKubeletIPs:\s*v\.Networking\.Advanced\.ProxyKubelets\.ByIP,", translation)
    node_sync = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/nodes/translate.go")
    assert re.search(r"if s\.fakeKubeletIPs \{\s*// create new service for this node\s*nodeIP, err := "
                     r"s\.nodeServiceProvider\.GetNodeIP", node_sync)
    for release in (r for r in dev_run.of_type(RELEASE) if r.inputs.get("chart") == "vcluster"):
        # byHostname is off too, for what a tenant reads through the kubelet proxy (tests/test_host_reads_contract.py).
        assert release.inputs["values"]["networking"]["advanced"]["proxyKubelets"] == {"byIP": False,
                                                                                     "byHostname": False}
