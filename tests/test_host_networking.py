"""An existing cluster says what it runs for its pods' network and its load balancers (config/host_networking.py).

The host policies judge the pod and Service keys of the network plugins and load balancers read in
tests/test_network_plugin_keys.py and tests/test_load_balancer_keys.py. A kubeconfig site that names another one, or
names none, is warned: that one's keys reach it unjudged. What the list claims to judge is what the policies hold.
"""

from __future__ import annotations

import re
from typing import Optional

import pytest

from components.admission_keys import RESERVED_DOMAINS, RESERVED_KEY_PATTERN, RESERVED_KEY_STARTS
from config import ConfigError
from config.host_networking import JUDGED
from config.load_balancer_keys import LOAD_BALANCER_PREFIXES, LOAD_BALANCER_SUFFIXES, NODE_PORT_LOCAL_PREFIX
from ops.sites import platform_of
from tests.conftest import MIRRORED_TAGS, dev_config, eks_config, mirrored_tag
from tests.go_source import code_lines
from tests.test_host_dns_path import kubeconfig_site

# The reserved domains whose keys no network plugin gives meaning to (KAI's, NVIDIA's, Kubernetes', vCluster's).
NOT_NETWORKING = ("kai.scheduler", "kai", "run.ai", "nvidia.com", "kubernetes.io", "k8s.io", "loft.sh")
FLANNEL = "flannel-io/flannel"


def site(networking=None) -> dict:
    config = kubeconfig_site()
    if networking is not None:
        config["gpu-tenancy:cluster"]["kubeconfig"]["networking"] = networking
    return config


def networking_warnings(config: dict) -> list[str]:
    return [warning for warning in platform_of(config, "test").warnings if "cluster.kubeconfig.networking" in warning]


def test_a_site_that_does_not_say_what_it_runs_is_warned_what_is_judged():
    [warning] = networking_warnings(site())
    assert "is not set" in warning and all(name in warning for name in JUDGED)


@pytest.mark.parametrize("networking", (["calico", "metallb"], ["cilium"], ["ovn-kubernetes", "multus", "openelb"],
                                        ["flannel", "kube-vip"]))
def test_a_site_running_judged_implementations_is_not_warned(networking):
    assert networking_warnings(site(networking)) == []


def test_an_implementation_the_policies_do_not_know_is_named():
    [warning] = networking_warnings(site(["cilium", "weave-net", "purelb"]))
    assert warning.startswith("cluster.kubeconfig.networking names weave-net, purelb, whose keys")


def test_committed_hosts_of_other_kinds_are_not_asked():
    assert networking_warnings(dev_config()) == [] and networking_warnings(eks_config()) == []


@pytest.mark.parametrize("networking, words", [(["Cilium"], "is not an implementation name"),
                                               ("cilium", "expected a list of strings"), ([], "must not be empty")])
def test_a_malformed_list_is_refused_naming_key_value_and_fix(networking, words):
    with pytest.raises(ConfigError) as refused:
        platform_of(site(networking), "test")
    message = str(refused.value)
    assert "cluster.kubeconfig.networking" in message and words in message and "Fix:" in message


def test_what_each_judged_implementation_reads_is_what_the_policies_hold():
    for name, implementation in JUDGED.items():
        for domain in implementation.pod_domains:
            assert domain in RESERVED_DOMAINS or domain in RESERVED_KEY_STARTS, (name, domain)
            assert re.match(RESERVED_KEY_PATTERN, f"{domain}/name") or re.match(RESERVED_KEY_PATTERN, f"{domain}.name")
        for prefix in implementation.service_prefixes:
            assert prefix in LOAD_BALANCER_PREFIXES or prefix == NODE_PORT_LOCAL_PREFIX, (name, prefix)
        assert set(implementation.service_suffixes) <= set(LOAD_BALANCER_SUFFIXES), name


def test_every_network_plugin_space_and_load_balancer_prefix_belongs_to_a_judged_implementation():
    """A space reserved or a prefix judged for an implementation this list does not name would leave a site that
    runs it warned for nothing, or one that names it unwarned for the wrong reason."""
    domains = {domain for implementation in JUDGED.values() for domain in implementation.pod_domains}
    prefixes = {prefix for implementation in JUDGED.values() for prefix in implementation.service_prefixes}
    suffixes = {suffix for implementation in JUDGED.values() for suffix in implementation.service_suffixes}
    assert set(RESERVED_DOMAINS) - set(NOT_NETWORKING) <= domains
    assert set(LOAD_BALANCER_PREFIXES) <= prefixes and set(LOAD_BALANCER_SUFFIXES) <= suffixes


@pytest.mark.parametrize("tag", MIRRORED_TAGS[FLANNEL])
def test_flannel_reads_keys_of_nodes_only(tag):
    """Flannel reads its backend's settings from each node's annotations, and no label or annotation of a pod or a
    Service."""
    lines = code_lines(FLANNEL, mirrored_tag(FLANNEL, tag), r"(Annotations|Labels)(\(\))?\[", (".",))
    lookup = r"(\w+)\.(?:Get)?(?:Annotations|Labels)(?:\(\))?\["
    owners = {owner for line in lines for owner in re.findall(lookup, line)}
    assert owners and owners <= {"n", "o", "node"}, sorted(owners)


# --- load balancers on the nodes' own ports ----------------------------------------------------------------------


def with_load_balancers(config: dict, team: Optional[int] = None) -> dict:
    if team is None:
        config["gpu-tenancy:vcluster"]["services"] = {"loadBalancers": 1}
    else:
        config["gpu-tenancy:teams"][team]["vcluster"] = {"services": {"loadBalancers": 2}}
    return config


@pytest.mark.parametrize("team", [None, 0])
def test_teams_get_no_load_balancers_where_servicelb_serves_them_on_the_nodes_ports(team):
    """k3s' ServiceLB takes each port of a LoadBalancer Service as a hostPort on every node: the node's own API server
    (6443) and kubelet (10250) ports included, for every connection from another host."""
    config = with_load_balancers(site(["flannel", "servicelb"]), team)
    with pytest.raises(ConfigError) as refused:
        platform_of(config, "test")
    [issue] = [issue for issue in refused.value.issues if issue.key == "cluster.kubeconfig.networking"]
    holding = [t["name"] for t in config["gpu-tenancy:teams"]] if team is None else [config["gpu-tenancy:teams"][0][
        "name"]]
    assert issue.value == ["flannel", "servicelb"] and f"team(s) {', '.join(holding)} may hold" in issue.problem
    assert "hostPort" in issue.problem and "6443" in issue.problem
    assert "loadBalancers: 0" in issue.fix and "--disable servicelb" in issue.fix


def test_servicelb_without_teams_holding_load_balancers_is_judged_and_not_warned():
    assert networking_warnings(site(["flannel", "servicelb"])) == []


def test_load_balancers_that_hand_out_addresses_of_their_own_are_not_refused():
    platform = platform_of(with_load_balancers(site(["flannel", "metallb"])), "test")
    assert all(team.vcluster.services.load_balancers == 1 for team in platform.teams)
