"""Spec of the stack-config validation in config/.

``load_platform(raw, secrets_set=..., stack=...)`` takes the ``gpu-tenancy:*`` values with the
prefix stripped and returns a ``Platform`` (with ``.warnings``) or raises one ``ConfigError``
whose issues each name the full key path, the bad value and a fix. Teams, queues and quotas are
specified in test_config_teams.py, host settings in test_config_host.py, stack-file reading in
test_stack_file.py, sharing profiles in test_sharing.py.
"""

from __future__ import annotations

import re

import pytest

from config import load_platform
from config.capacity import gpu_model
from config.mig import MIG_LAYOUTS, kai_units_per_gpu
from tests.config_spec import assert_rejected, dev_config, eks_config, issue, put, rejected


# --- valid examples ---------------------------------------------------------------------------


def test_dev_stack_is_valid_and_raises_no_warnings():
    platform = load_platform(dev_config(), secrets_set=set(), stack="dev")
    assert platform.stack == "dev" and platform.project == "gpu-tenancy"
    assert platform.organization.name == "ml-org"
    assert [team.name for team in platform.teams] == ["team-nlp", "team-vision", "team-recommender"]
    assert platform.cluster.kind == "microk8s" and platform.cluster.microk8s.gpus == 1
    assert platform.gpu_operator.mode == "microk8s-addon"
    assert platform.gpu_operator.namespace == "gpu-operator-resources"
    assert platform.kai_scheduler.version == "v0.16.4" and platform.kai_scheduler.gpu_sharing is True
    assert platform.warnings == ()


def test_eks_fixture_is_valid():
    platform = load_platform(eks_config())
    eks = platform.cluster.eks
    assert platform.cluster.kind == "eks" and eks.region == "us-east-2"
    assert [(g.name, g.instance_types, g.scaling.max_size) for g in eks.gpu_node_groups] == [
        ("gpu", ("g4dn.xlarge",), 1)]
    assert eks.creates_network
    # AL2023 NVIDIA AMIs ship the driver and the toolkit.
    assert not platform.gpu_operator.driver_enabled and not platform.gpu_operator.toolkit_enabled
    # Its three teams at the default 16 cores and 64Gi guarantee far more than one g4dn.xlarge gives: warned.
    assert [warning.split(":", 1)[0] for warning in platform.warnings] == [
        "teams[].resources.cpu.quota", "teams[].resources.memory.quota"]


# --- warnings -----------------------------------------------------------------------------------


def _eks_group(instance_type: str, nodes: int) -> dict:
    """A GPU group running ``nodes`` nodes (its desiredSize: nothing scales it)."""
    return {"name": "gpu", "instanceTypes": [instance_type], "minSize": 1, "desiredSize": nodes, "maxSize": nodes}


@pytest.mark.parametrize("make, org_quota, capacity", [
    (lambda: put(dev_config(), "cluster.microk8s.gpus", 1), 2, 1),
    (lambda: put(dev_config(), "cluster.microk8s.gpus", 2), 2, None),
    (lambda: put(dev_config(), "cluster.microk8s.gpus", 0), 1, 0),
    (lambda: eks_config(), 2, 1),
    (lambda: eks_config(), 1, None),
    (lambda: put(eks_config(), "cluster.eks.gpuNodeGroups[0]", _eks_group("g4dn.12xlarge", 2)), 8, None),
    (lambda: put(eks_config(), "cluster.eks.gpuNodeGroups[0]", _eks_group("g4dn.12xlarge", 2)), 9, 8),
    (lambda: put(eks_config(), "organization.resources.gpu.quota", -1), -1, None),
    (lambda: put(put(dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install"), 100, None),
])
def test_organization_gpu_quota_above_known_host_capacity_warns(make, org_quota, capacity):
    # A kubeconfig host without cluster.kubeconfig.gpus has no known capacity.
    platform = load_platform(put(make(), "organization.resources.gpu.quota", org_quota), secrets_set={"kubeconfig"})
    warnings = [w for w in platform.warnings if w.startswith("organization.resources.gpu.quota")]
    if capacity is None:
        assert warnings == []
    else:
        assert len(warnings) == 1
        assert f"is {org_quota:g} but the host has at most {capacity:g} GPU(s)" in warnings[0]


def test_a_b200_pool_is_counted_and_its_quotas_are_checked():
    # p6-b200.48xlarge: 8 NVIDIA B200 of 180GB (AWS EC2 P6 instance-type page). Before it was in the table a B200 site
    # got no capacity warning at all, however much its quotas promised.
    assert gpu_model("p6-b200.48xlarge") == "B200-180GB"
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0]", _eks_group("p6-b200.48xlarge", 2))
    assert _org_capacity_warnings(config, 16) == []
    assert "at most 16 GPU(s) by its config" in _org_capacity_warnings(config, 17)[0]
    assert not [n for n in load_platform(config).notes if "instance-type table" in n]


def test_an_instance_type_the_capacity_table_lacks_is_named_in_a_note():
    config = eks_config()
    config["cluster"]["eks"]["gpuNodeGroups"].append(_eks_group("gx9.4xlarge", 3) | {"name": "new"})
    platform = load_platform(put(config, "organization.resources.gpu.quota", 50))
    assert not [w for w in platform.warnings if w.startswith("organization.resources.gpu.quota")]
    [note] = [n for n in platform.notes if "instance-type table" in n]
    assert note.startswith("cluster.eks.gpuNodeGroups[1].instanceTypes: gx9.4xlarge is not in")
    assert "no warning tells when the quotas promise more GPUs" in note


def test_a_migconfig_on_b200_is_refused_without_saying_b200_has_no_mig():
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0]", {**_eks_group("p6-b200.48xlarge", 1),
                                                                "migConfig": "all-balanced"})
    found = issue(rejected(config), "cluster.eks.gpuNodeGroups[0].migConfig", "all-balanced")
    assert "whose MIG layouts the program does not know" in found.problem
    assert "which have no MIG" not in found.problem


def _org_capacity_warnings(config: dict, org_quota: float) -> list[str]:
    platform = load_platform(put(config, "organization.resources.gpu.quota", org_quota))
    return [w for w in platform.warnings if w.startswith("organization.resources.gpu.quota")]


def test_the_host_capacity_counts_time_slice_replicas_as_kai_does():
    # The device plugin advertises nvidia.com/gpu once per replica on the time-sliced profile and KAI fills queue
    # quotas from that count: two g4dn.12xlarge (8 cards) at 2 replicas meet guarantees of up to 16.
    sliced = put(put(eks_config(), "cluster.eks.gpuNodeGroups[0]", _eks_group("g4dn.12xlarge", 2)),
                 "cluster.eks.gpuNodeGroups[0].sharingProfile", "time-sliced")
    assert _org_capacity_warnings(sliced, 16) == []
    [warning] = _org_capacity_warnings(sliced, 17)
    assert "at most 16 GPU(s) as KAI counts them (8 card(s):" in warning
    # The same pool on the exclusive profile offers its cards only; so does a group left to an exclusive default.
    exclusive = put(sliced, "cluster.eks.gpuNodeGroups[0].sharingProfile", "exclusive")
    assert "at most 8 GPU(s) by its config" in _org_capacity_warnings(exclusive, 9)[0]
    # A box whose nodes take a time-sliced default: every card counts its replicas.
    box = put(put(put(dev_config(), "gpuOperator.timeSlicing.defaultProfile", "time-sliced"),
                  "gpuOperator.timeSlicing.replicas", 4), "cluster.microk8s.gpus", 1)
    assert _org_capacity_warnings(box, 4) == []
    assert "at most 4 GPU(s) as KAI counts them (1 card(s):" in _org_capacity_warnings(box, 5)[0]


def test_gpus_guaranteed_to_no_team_on_mig_slices_are_counted_and_named_as_kai_counts_them():
    # One p4d.24xlarge (8 A100s) split all-1g.5gb is 56 KAI units: the note must not call them 56 GPUs. A mig team
    # asks for the slices (else no team could use them, which is warned instead).
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0]", {**_eks_group("p4d.24xlarge", 1),
                                                                "migConfig": "all-1g.5gb"})
    config = put(config, "teams[0].isolation", {"tier": "mig", "migProfile": "1g.5gb"})
    config = put(config, "teams[0].resources.gpu", {"quota": 1, "limit": 1})
    config = put(config, "organization.resources.gpu.quota", 3)
    [note] = [n for n in load_platform(config).notes if "guaranteed to no team" in n]
    guaranteed = sum(team["resources"]["gpu"]["quota"] for team in config["teams"])
    assert note.startswith(f"{56 - guaranteed:g} of 56 GPU(s) as KAI counts them (8 card(s): 8 card(s) split into "
                           "56 MIG slice(s), each counted by its compute units (a 3g slice as 3) = 56)")


_COUNTED = re.compile(r"at most (\d+) GPU\(s\) as KAI counts them \((\d+) card\(s\): (\d+) unsplit card\(s\) x 1 = "
                      r"(\d+); (\d+) card\(s\) split into (\d+) MIG slice\(s\), each counted by its compute units "
                      r"\(a 3g slice as 3\) = (\d+); (\d+) card\(s\) on the time-sliced profile x (\d+) replicas = "
                      r"(\d+)\)")


def test_the_kai_count_says_what_it_counts_and_its_parts_add_up():
    # A trial site (p4d all-balanced beside T4s) read "each MIG slice ... counts as one" under 56 units of 32 slices:
    # KAI counts a slice by its compute units. Here 2 T4 cards, 8 A100s split all-balanced (2 x 1g.5gb, 2g.10gb,
    # 3g.20gb: 4 slices, 7 units a card) and a g4dn.12xlarge's 4 cards at 2 time-slice replicas.
    config = put(eks_config(), "cluster.eks.gpuNodeGroups", [
        _eks_group("g4dn.xlarge", 2), {**_eks_group("p4d.24xlarge", 1), "name": "a100", "migConfig": "all-balanced"},
        {**_eks_group("g4dn.12xlarge", 1), "name": "sliced", "sharingProfile": "time-sliced"}])
    config = put(config, "teams[0].isolation", {"tier": "mig", "migProfile": "1g.5gb"})
    config = put(config, "teams[0].resources.gpu", {"quota": 1, "limit": 1})
    [warning] = _org_capacity_warnings(config, 67)
    total, cards, whole, whole_units, split, slices, split_units, sliced, replicas, sliced_units = map(
        int, _COUNTED.search(warning).groups())
    balanced = MIG_LAYOUTS["A100-40GB"]["all-balanced"]
    assert (split, slices, split_units) == (8, 8 * sum(balanced.values()), 8 * kai_units_per_gpu("A100-40GB",
                                                                                                "all-balanced"))
    assert (whole, whole_units, sliced, replicas, sliced_units) == (2, 2, 4, 2, 8)
    assert cards == whole + split + sliced == 14 and total == whole_units + split_units + sliced_units == 66


@pytest.mark.parametrize("profile, gpu_sharing, warns", [
    ("time-sliced", True, True),
    ("time-sliced", False, False),
    ("exclusive", True, False),
])
def test_time_slicing_under_kai_gpu_sharing_warns(profile, gpu_sharing, warns):
    config = put(dev_config(), "gpuOperator.timeSlicing.defaultProfile", profile)
    platform = load_platform(put(config, "kaiScheduler.gpuSharing", gpu_sharing))
    sliced = [w for w in platform.warnings if w.startswith("gpuOperator.timeSlicing.defaultProfile")]
    assert len(sliced) == int(warns)
    if warns:
        assert "4 time-slice replicas" in sliced[0]


@pytest.mark.parametrize("replicas, ok", [(2, True), (64, True), (1, False), (0, False), ("4", False), (2.5, False)])
def test_time_slicing_replicas_are_a_whole_number_of_at_least_two(replicas, ok):
    config = put(dev_config(), "gpuOperator.timeSlicing.replicas", replicas)
    if ok:
        assert load_platform(config).gpu_operator.time_slicing.replicas == replicas
    else:
        assert_rejected(config, "gpuOperator.timeSlicing.replicas", replicas, fix=">= 2")


# --- chart versions -----------------------------------------------------------------------------


@pytest.mark.parametrize("path, version", [
    ("kaiScheduler.version", "v0.16.4"),
    ("kaiScheduler.version", "v0.16.0"),
    ("gpuOperator.version", "v26.3.3"),
    ("vcluster.version", "0.36.1"),
    ("vcluster.version", "0.35.1"),
])
def test_pinned_chart_versions_pass(path, version):
    platform = load_platform(put(dev_config(), path, version))
    assert version in (platform.kai_scheduler.version, platform.gpu_operator.version,
                       platform.teams[0].vcluster.version)


@pytest.mark.parametrize("path, version", [
    ("kaiScheduler.version", "latest"),
    ("kaiScheduler.version", ""),
    ("kaiScheduler.version", "^0.16"),
    ("kaiScheduler.version", "v0.16.x"),
    ("kaiScheduler.version", "v0.16"),
    ("kaiScheduler.version", "0.16.4"),
    ("gpuOperator.version", "26.3.3"),
    ("gpuOperator.version", "stable"),
    ("vcluster.version", "v0.36.1"),
    ("vcluster.version", "latest"),
    ("vcluster.version", "~0.36"),
])
def test_unpinned_or_misprefixed_chart_versions_fail(path, version):
    assert_rejected(put(dev_config(), path, version), path, version)


@pytest.mark.parametrize("path, version", [
    ("kaiScheduler.version", "0.16.4"),
    ("gpuOperator.version", "26.3.3"),
    ("vcluster.version", "v0.36.1"),
    ("kaiScheduler.version", "^0.16"),
])
def test_a_version_fix_that_says_write_it_as_names_a_valid_version(path, version):
    fix = assert_rejected(put(dev_config(), path, version), path, version).fix
    if not fix.startswith("write it as "):
        assert "exact version" in fix
        return
    fixed = fix[len("write it as "):]
    platform = load_platform(put(dev_config(), path, fixed))
    assert fixed in (platform.kai_scheduler.version, platform.gpu_operator.version, platform.teams[0].vcluster.version)


# --- unknown keys and malformed types ----------------------------------------------------------


@pytest.mark.parametrize("parent, typo, known", [
    ("", "organisation", "organization"),
    ("teams[0].", "resourcs", "resources"),
    ("cluster.microk8s.", "hots", "host"),
    ("kaiScheduler.", "gpuSharng", "gpuSharing"),
    ("teams[0].", "colour", None),
])
def test_unknown_keys_are_rejected_with_a_suggestion(parent, typo, known):
    value = {"name": "x"}
    found = assert_rejected(put(dev_config(), parent + typo, value), parent + typo, value)
    assert found.problem == "unknown key"
    assert found.fix == (f"did you mean '{known}'?" if known else "remove it")


@pytest.mark.parametrize("path, value, fix", [
    ("cluster.microk8s.gpus", "two", "whole number"),
    ("cluster.microk8s.gpus", True, "whole number"),
    ("teams[0].priority", True, "whole number"),
    ("teams[0].resources", [{"gpu": 1}], "YAML map"),
    ("cluster", ["microk8s"], "YAML map"),
    ("teams", {}, "YAML list"),
    ("teams", [], "add at least one team"),
    ("teams[0]", "team-nlp", "YAML map"),
    ("teams[0].name", 42, "quote it"),
    ("organization.name", ["ml-org"], "ml-org"),
    ("kaiScheduler.gpuSharing", 1, "true or false"),
    ("teams[0].vcluster.nodeLabels", ["gpu"], "map"),
])
def test_values_of_the_wrong_type_are_rejected(path, value, fix):
    assert_rejected(put(dev_config(), path, value), path, value, fix=fix)


def test_all_problems_are_reported_together():
    config = dev_config()
    put(config, "teams[0].resources.gpu.quota", "one")
    put(config, "cluster.microk8s.gpus", "two")
    put(config, "kaiScheduler.version", "latest")
    put(config, "organisation", {})
    error = rejected(config)
    assert set(error.keys) >= {"teams[0].resources.gpu.quota", "cluster.microk8s.gpus", "kaiScheduler.version",
                               "organisation"}
    assert f"({len(error.issues)} problem(s))" in str(error) and len(error.issues) >= 4


# --- known bugs ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path, value", [("teams[0].name", "team-nlp\n"), ("vcluster.version", "0.36.1\n")])
def test_a_trailing_newline_is_not_part_of_a_valid_name_or_version(path, value):
    assert_rejected(put(dev_config(), path, value), path, value)


# --- one problem, one message -----------------------------------------------------------------


def test_a_misspelt_quota_is_one_problem_without_a_limit_follow_on():
    config = dev_config()
    config["teams"][0]["resources"]["gpu"] = {"qouta": 0.33, "limit": 1}
    error = rejected(config)
    assert error.keys == ["teams[0].resources.gpu.qouta"]
    assert "did you mean 'quota'?" in error.issues[0].fix


def test_a_duplicate_team_name_is_one_problem():
    config = dev_config()
    config["teams"][1]["name"] = config["teams"][0]["name"]
    error = rejected(config)
    assert error.keys == ["teams[1].name"]
