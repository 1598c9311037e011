"""Every problem the loader can see comes in one run: field errors and cross-field errors together, and a
key written in the wrong place is pointed to the place it belongs."""

from __future__ import annotations

import pytest

from tests.config_spec import dev_config, drop, eks_config, issue, put, rejected


def _broken(base, *changes) -> dict:
    config = base()
    for path, value in changes:
        if value is drop:
            drop(config, path)
        else:
            put(config, path, value)
    return config


# Each site and every key the loader must name for it, all in the same run.
BROKEN_SITES = {
    "a team above the org's quota and a limit below its own quota": (
        _broken(dev_config, ("teams[0].resources.gpu", {"quota": 0.9, "limit": 0.5}),
                ("teams[1].priority", "high")),
        {"organization.resources.gpu.quota", "teams[0].resources.gpu.limit", "teams[1].priority"}),
    "duplicate team names next to a bad version and a misplaced key": (
        _broken(dev_config, ("teams[1].name", "team-nlp"), ("kaiScheduler.version", "latest"),
                ("teams[2].gpu", {"quota": 0.1})),
        {"teams[1].name", "kaiScheduler.version", "teams[2].gpu"}),
    "a team namespace taken by the operator, a bad quantity and the org's queue name": (
        _broken(dev_config, ("teams[0].namespace", "gpu-operator-resources"),
                ("vcluster.resourceQuota", {"cpu": "lots"}), ("teams[2].name", "ml-org")),
        {"teams[0].namespace", "vcluster.resourceQuota.cpu", "teams[2].name"}),
    "an EKS site: unmatched selector, system group at zero, a bad region type and a microk8s block": (
        _broken(eks_config, ("vcluster.nodeLabels", {"gpu-tenancy/pool": "gpu-a"}),
                ("cluster.eks.systemNodeGroup", {"minSize": 0, "desiredSize": 0}),
                ("cluster.eks.region", 3), ("cluster.microk8s", {"gpus": 1})),
        {"vcluster.nodeLabels", "cluster.eks.systemNodeGroup.desiredSize", "cluster.eks.region", "cluster.microk8s"}),
    "observability: external without its label, fairness without a URL, a namespace of a team": (
        _broken(dev_config, ("observability", {"prometheus": "external", "namespace": "vcluster-team-nlp",
                                               "timeAwareFairness": {"enabled": True}}),
                ("organization.priority", -1)),
        {"observability.external.releaseLabel", "observability.timeAwareFairness.enabled",
         "observability.namespace", "organization.priority"}),
    "kind eks without its block: no placement error follows from the node groups it lacks": (
        _broken(dev_config, ("cluster.kind", "eks"), ("gpuOperator.mode", "install")),
        {"cluster.eks", "cluster.microk8s"}),
    "mirrors missing registries, a bad Kubernetes version, a bad tier and a team name of the wrong type": (
        _broken(dev_config, ("mirrors.images", {"nvcr.io": "harbor.corp.example/nvcr"}),
                ("cluster.microk8s.kubernetesVersion", "1.2"), ("teams[0].isolation", {"tier": "gold"}),
                ("teams[1].name", 5)),
        {"mirrors.images", "cluster.microk8s.kubernetesVersion", "teams[0].isolation.tier", "teams[1].name"}),
}


@pytest.mark.parametrize("name", BROKEN_SITES)
def test_a_broken_site_gets_all_of_its_problems_in_one_run(name):
    config, expected = BROKEN_SITES[name]
    assert set(rejected(config).keys) == expected


def test_quota_over_the_org_and_limit_under_its_quota_come_together():
    config, _ = BROKEN_SITES["a team above the org's quota and a limit below its own quota"]
    error = rejected(config)
    assert "add up to 1.56" in issue(error, "organization.resources.gpu.quota", 1).problem
    assert "below the quota (0.9)" in issue(error, "teams[0].resources.gpu.limit", 0.5).problem


@pytest.mark.parametrize("path, value, where", [
    ("teams[0].gpu", {"quota": 0.33}, "teams[0].resources.gpu"),
    ("teams[0].resources.nodeLabels", {"a": "b"}, "teams[0].vcluster.nodeLabels"),
    ("teams[0].resources.priority", 5, "teams[0].priority"),
    ("nodeLabels", {"a": "b"}, "vcluster.nodeLabels"),
    ("cluster.microk8s.replicas", 2, "gpuOperator.timeSlicing.replicas"),
])
def test_a_misplaced_key_is_pointed_to_where_it_belongs(path, value, where):
    found = issue(rejected(put(dev_config(), path, value)), path, value)
    assert found.problem == "unknown key"
    assert found.fix == f"did you mean {where}? Move it there"


@pytest.mark.parametrize("path, value", [("observability.alerting.teams", True),
                                         ("gpuOperator.organization", "ml-org")])
def test_a_key_named_like_a_section_elsewhere_is_not_sent_there_unless_it_has_its_shape(path, value):
    """``teams: true`` is not the list of teams misplaced: pointing there would send the user to a wrong fix."""
    found = issue(rejected(put(dev_config(), path, value)), path, value)
    assert found.problem == "unknown key" and found.fix == "remove it"


def test_a_key_that_exists_in_several_places_lists_them_and_a_typo_keeps_its_spelling_fix():
    found = issue(rejected(put(dev_config(), "teams[0].resources.quota", 1)), "teams[0].resources.quota", 1)
    assert found.fix == ("it belongs in one of teams[0].resources.gpu.quota, teams[0].resources.cpu.quota, "
                         "teams[0].resources.memory.quota")
    assert issue(rejected(put(dev_config(), "teams[0].priorty", 1)), "teams[0].priorty", 1).fix == \
        "did you mean 'priority'?"
    assert issue(rejected(put(dev_config(), "teams[0].colour", 1)), "teams[0].colour", 1).fix == "remove it"
