"""config/virtual_cluster.py and the services/storage keys: what a tenant's vCluster may sync and run inside."""

from __future__ import annotations

import pytest

from config import load_platform, versions
from config.virtual_cluster import virtual_kubernetes_version
from tests.config_spec import assert_rejected, dev_config, put, rejected


def test_the_defaults_open_nothing_and_use_the_hosts_storage_class():
    for team in load_platform(dev_config()).teams:
        assert (team.vcluster.services.node_ports, team.vcluster.services.load_balancers) == (0, 0)
        assert team.vcluster.storage_classes == () and team.vcluster.storage_class == "microk8s-hostpath"
        assert virtual_kubernetes_version(team.vcluster) == "v1.36.0"


def test_a_team_may_be_given_node_ports_load_balancers_and_storage_classes():
    config = put(dev_config(), "teams[1].vcluster", {"services": {"nodePorts": 2, "loadBalancers": 1},
                                                     "storageClasses": ["fast", "bulk"]})
    put(config, "vcluster.services", {"nodePorts": 1})
    nlp, vision, _ = load_platform(config).teams
    assert (nlp.vcluster.services.node_ports, nlp.vcluster.services.load_balancers) == (1, 0)
    assert (vision.vcluster.services.node_ports, vision.vcluster.services.load_balancers) == (2, 1)
    assert vision.vcluster.storage_classes == ("fast", "bulk")


@pytest.mark.parametrize("path, value", [("vcluster.services.nodePorts", -1),
                                         ("vcluster.services.loadBalancers", "yes"),
                                         ("vcluster.storageClasses", "gp3")])
def test_bad_service_and_storage_values_are_refused(path, value):
    assert_rejected(put(dev_config(), path, value), path, value)


@pytest.mark.parametrize("sync, kind", [
    ({"ingresses": {"enabled": True}}, "ingresses"),
    ({"networkPolicies": {"enabled": True}}, "networkPolicies"),
    ({"serviceAccounts": {"enabled": True}}, "serviceAccounts"),
    ({"customResources": {"widgets.example.com": {"enabled": True}}}, "customResources.widgets.example.com"),
])
def test_a_sync_to_the_host_no_policy_covers_is_refused(sync, kind):
    config = put(dev_config(), "teams[2].vcluster.extraValues", {"sync": {"toHost": sync}})
    assert_rejected(config, f"teams[2].vcluster.extraValues.sync.toHost.{kind}.enabled", True,
                    fix="remove it")


def test_covered_and_disabled_syncs_pass():
    config = put(dev_config(), "vcluster.extraValues", {"sync": {"toHost": {
        "configMaps": {"all": True}, "secrets": {"all": True}, "ingresses": {"enabled": False},
        "pods": {"enforceTolerations": []}}}})
    assert load_platform(config).teams


@pytest.mark.parametrize("version, k8s", [
    ("0.27.0", None), ("0.30.0", None), ("0.36.1", "v1.35.4"), ("0.36.1", "1.33"),
])
def test_a_virtual_cluster_without_ga_mutating_admission_policy_is_refused(version, k8s):
    config = put(dev_config(), "vcluster.version", version)
    if k8s:
        put(config, "vcluster.extraValues.controlPlane.distro.k8s.version", k8s)
    error = rejected(config)
    found = [issue for issue in error.issues if issue.key == "teams[0].vcluster.version"]
    assert found and found[0].value == version
    assert "1.36" in str(found[0]) and versions.VCLUSTER_VERSION in found[0].fix


@pytest.mark.parametrize("version, k8s, expected", [
    ("0.27.0", "v1.36.0", "v1.36.0"),
    ("0.37.0", None, "v1.36.0"),
    ("0.36.1", "v1.37.1", "v1.37.1"),
])
def test_a_virtual_cluster_on_kubernetes_1_36_or_later_passes(version, k8s, expected):
    config = put(dev_config(), "vcluster.version", version)
    if k8s:
        put(config, "vcluster.extraValues.controlPlane.distro.k8s.image.tag", k8s)
    assert {virtual_kubernetes_version(team.vcluster) for team in load_platform(config).teams} == {expected}
