"""Isolation tiers against the hardware, the KAI release and the quotas (config/isolation.py, config/mig.py)."""

from __future__ import annotations

import pytest

from config import load_platform
from config.capacity import GPUS_PER_INSTANCE_TYPE, gpu_model
from config.mig_slices import mig_slices
from config.mig import MIG_CONFIG_LABEL, MIG_LAYOUTS, kai_units, kai_units_per_gpu
from tests.config_spec import dev_config, put, rejected
from tests.isolation_spec import isolation_config


def test_the_isolation_site_loads_with_each_team_pinned_to_its_pool():
    platform = load_platform(isolation_config())
    pools = {team.name: team.vcluster.node_labels["gpu-tenancy/pool"] for team in platform.teams}
    assert pools == {"team-llm": "h100", "team-vision": "h100", "team-nlp": "l40s", "team-train": "l40s"}
    assert platform.kai_scheduler.hamicore and platform.gpu_operator.mig_split
    # Its layout's 2g.20gb slices are no mig team's, and no other team can use them (the only MIG warning).
    [warning] = [warning for warning in platform.warnings if "MIG" in warning]
    assert warning.startswith("pool h100's MIG layout all-balanced has slices no mig team pinned to it asks for "
                              "(8 2g.20gb slice(s) at its desiredSize, 16 GPU(s) as KAI counts them)")


def test_mig_slices_promised_and_present():
    rows = {(pool, profile): (present, promised) for pool, profile, present, promised, _ in
            mig_slices(load_platform(isolation_config()))}
    # 8 H100 x all-balanced (2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb); team-llm holds 4 units = 4 slices of 1g,
    # team-vision 6 units = 2 slices of 3g.
    assert rows == {("h100", "1g.10gb"): (16, 4), ("h100", "2g.20gb"): (8, 0), ("h100", "3g.40gb"): (8, 2)}


@pytest.mark.parametrize("instance_types", [["p4de.24xlarge", "p4d.24xlarge"], ["p4d.24xlarge", "p4de.24xlarge"]])
def test_a_pool_of_two_gpu_models_counts_the_fewer_slices_whatever_the_order(instance_types):
    # all-1g.10gb is 7 slices on an A100 80GB (p4de) and 4 on a 40GB one (p4d): the pool may scale on either. The
    # 80GB type listed first counted 7 and hid the warning (found opening a trial site).
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][0].update(instanceTypes=instance_types, migConfig="all-1g.10gb")
    config["teams"] = [team for team in config["teams"] if team["name"] != "team-vision"]
    config["teams"][0]["resources"]["gpu"] = {"quota": 40, "limit": 40}
    platform = load_platform(config)
    assert mig_slices(platform) == [("h100", "1g.10gb", 8 * 4, 40, ["team-llm"])]
    assert any("promised 40 1g.10gb MIG slice(s) on pool h100, but it has at most 32" in w for w in platform.warnings)


def test_more_slices_promised_than_present_is_warned():
    config = put(isolation_config(), "teams[1].resources.gpu", {"quota": 27, "limit": 27})
    warnings = load_platform(config).warnings
    assert any("promised 9 3g.40gb MIG slice(s) on pool h100, but it has at most 8" in w for w in warnings)


@pytest.mark.parametrize("instance", ["g4dn.xlarge", "g6e.xlarge"])
def test_a_mig_layout_on_a_gpu_without_mig_is_one_clear_error(instance):
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][1].update(instanceTypes=[instance], migConfig="all-1g.10gb")
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == ["cluster.eks.gpuNodeGroups[1].migConfig"]
    assert "which have no MIG" in issues[0].problem and "remove migConfig" in issues[0].fix


@pytest.mark.parametrize("instance, model", [("g4dn.xlarge", "T4"), ("g6e.12xlarge", "L40S")])
def test_a_mig_team_on_a_t4_or_l40s_pool_is_refused(instance, model):
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][1]["instanceTypes"] = [instance]
    config["teams"][2]["isolation"] = {"tier": "mig", "migProfile": "1g.10gb", "nodePool": "l40s"}
    config["teams"][2]["resources"]["gpu"] = {"quota": 1, "limit": 2}
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == ["teams[2].isolation.nodePool"]
    assert f"{model} GPUs have no MIG" in issues[0].problem


@pytest.mark.parametrize("profile_key, profile", [("sharingProfile", "time-sliced"), (None, "time-sliced")])
def test_an_exclusive_team_on_a_time_sliced_pool_is_refused(profile_key, profile):
    # On the time-sliced profile nvidia.com/gpu: 1 is one of a card's replicas, shared in time with other teams'
    # pods: no whole GPU (found opening a trial site, which the loader accepted).
    config = isolation_config()
    if profile_key:
        config["cluster"]["eks"]["gpuNodeGroups"][1][profile_key] = profile
    else:
        config.setdefault("gpuOperator", {}).setdefault("timeSlicing", {})["defaultProfile"] = profile
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == ["teams[3].isolation.nodePool"]
    assert "pool l40s is on the time-sliced profile" in issues[0].problem
    assert "gpuNodeGroups[1].sharingProfile to exclusive" in issues[0].fix


def test_an_unpinned_exclusive_team_reaching_a_time_sliced_pool_is_told_which_pool_to_pin():
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"].append(
        {"name": "t4", "instanceTypes": ["g4dn.xlarge"], "maxSize": 2, "sharingProfile": "time-sliced"})
    del config["teams"][3]["isolation"]["nodePool"]
    issues = rejected(config).issues
    assert [(issue.key, issue.fix) for issue in issues] == [("teams[3].isolation.nodePool", "pin the team to a pool "
                                                             "on the exclusive profile (l40s), or set those pools' "
                                                             "sharingProfile to exclusive")]
    config["cluster"]["eks"]["gpuNodeGroups"][2]["sharingProfile"] = "exclusive"
    load_platform(config)  # every pool it reaches gives whole cards (the MIG-split one takes no whole-GPU pods)


def test_an_exclusive_team_on_a_host_whose_default_profile_is_time_sliced_is_warned():
    # MicroK8s and existing clusters: the nodes' profile labels are set by hand, so a warning, not an error.
    config = put(put(dev_config(), "teams[0].isolation", {"tier": "exclusive"}), "teams[0].resources.gpu",
                 {"quota": 0, "limit": 1})
    assert not any("exclusive team(s)" in warning for warning in load_platform(config).warnings)
    config = put(config, "gpuOperator.timeSlicing.defaultProfile", "time-sliced")
    assert any(warning.startswith("exclusive team(s) team-nlp get whole GPUs only on nodes on the exclusive profile")
               and "advertised 4 times" in warning for warning in load_platform(config).warnings)


def test_a_team_guaranteed_gpus_that_reaches_only_mixed_mig_pools_is_warned():
    # Pinned there it is refused; selected there without a pin the loader was silent (found opening a trial site).
    config = isolation_config()
    del config["cluster"]["eks"]["gpuNodeGroups"][1]
    config["teams"] = config["teams"][:2] + [{"name": "team-chat", "resources": {"gpu": {"quota": 0.5, "limit": 1}}},
                                             {"name": "team-idle", "resources": {"gpu": {"quota": 0, "limit": 1}}}]
    warnings = [w for w in load_platform(config).warnings if "split into MIG slices under the mixed" in w]
    assert len(warnings) == 1 and warnings[0].startswith("team(s) team-chat are guaranteed GPUs")
    config["gpuOperator"] = {**config.get("gpuOperator", {}), "migStrategy": "single"}
    config["cluster"]["eks"]["gpuNodeGroups"][0]["migConfig"] = "all-1g.10gb"
    config["teams"][1]["isolation"]["migProfile"] = "1g.10gb"
    config["teams"][1]["resources"]["gpu"] = {"quota": 2, "limit": 4}
    assert not [w for w in load_platform(config).warnings if "under the mixed" in w]  # single: whole GPUs fit


def test_a_mig_split_pool_no_mig_team_uses_is_warned_as_usable_by_no_team_not_noted_as_spare():
    # Found opening a trial site: with its mig team removed, the split pool's 56 units were only noted as
    # "guaranteed to no team: teams only get them over quota", though KAI places no other pod on a mixed MIG node.
    config = isolation_config()
    config["teams"] = config["teams"][2:]
    platform = load_platform(config)
    [warning] = [w for w in platform.warnings if "no team can use them" in w]
    assert warning.startswith("pool h100 is split into MIG slices (all-balanced) but no mig team is pinned to it "
                              "(16 1g.10gb, 8 2g.20gb, 8 3g.40gb slice(s) at its desiredSize, 56 GPU(s) as KAI "
                              "counts them)")
    assert "remove cluster.eks.gpuNodeGroups[0].migConfig" in warning and "nodePool h100" in warning
    # The note counts only what a team can get over quota: the 4 L40S less the 3.5 guaranteed.
    [note] = [n for n in platform.notes if "guaranteed to no team" in n]
    assert note.startswith("0.5 of 60 GPU(s)") and "besides 56 in MIG slices no team can use" in note
    # Under single each slice is an nvidia.com/gpu other teams' pods can take: not warned.
    config["gpuOperator"] = {**config.get("gpuOperator", {}), "migStrategy": "single"}
    config["cluster"]["eks"]["gpuNodeGroups"][0]["migConfig"] = "all-1g.10gb"
    assert not [w for w in load_platform(config).warnings if "no team can use them" in w]


def test_profiles_of_a_layout_no_mig_team_asks_for_are_warned_with_a_layout_of_the_asked_ones():
    config = put(isolation_config(), "teams[1].isolation.migProfile", "1g.10gb")
    config = put(config, "teams[1].resources.gpu", {"quota": 6, "limit": 12})
    [warning] = [w for w in load_platform(config).warnings if "no team can use them" in w]
    assert "(8 2g.20gb, 8 3g.40gb slice(s) at its desiredSize, 40 GPU(s) as KAI counts them)" in warning
    assert "migConfig to a layout of the profiles its mig teams ask for (1g.10gb; e.g. all-1g.10gb)" in warning


def test_a_mig_config_label_set_by_hand_is_refused():
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][0]["labels"] = {MIG_CONFIG_LABEL: "all-1g.10gb"}
    issue = next(i for i in rejected(config).issues if i.key == "cluster.eks.gpuNodeGroups[0].labels")
    assert "migConfig" in issue.fix


@pytest.mark.parametrize("path, value, key", [
    ("teams[0].isolation.migProfile", "2g.10gb", "teams[0].isolation.migProfile"),  # a 40 GB card's profile
    ("teams[0].isolation.migProfile", "1g.10gb+me", "teams[0].isolation.migProfile"),  # KAI would count it as 0
    ("cluster.eks.gpuNodeGroups[0].migConfig", "all-1g.5gb", "cluster.eks.gpuNodeGroups[0].migConfig"),
    ("teams[1].resources.gpu.quota", 4, "teams[1].resources.gpu.quota"),  # not a multiple of 3 (3g.40gb)
    ("teams[3].resources.gpu.quota", 1.5, "teams[3].resources.gpu.quota"),  # exclusive: whole GPUs
    ("teams[3].isolation.nodePool", "h100", "teams[3].isolation.nodePool"),  # KAI places no whole GPUs there
    ("teams[2].isolation.migProfile", "1g.10gb", "teams[2].isolation.migProfile"),  # only mig teams have one
    ("kaiScheduler.gpuSharing", False, "teams[2].isolation.tier"),  # memory-capped needs fractions
    ("gpuOperator.migStrategy", "single", "gpuOperator.migStrategy"),  # all-balanced mixes profiles
    ("teams[2].isolation.nodePool", "a100", "teams[2].isolation.nodePool"),
], ids=lambda value: str(value))
def test_wrong_combinations_name_their_key(path, value, key):
    issues = rejected(put(isolation_config(), path, value)).issues
    assert key in [issue.key for issue in issues]
    assert all(issue.fix for issue in issues)


def test_mig_needs_a_pool_of_known_gpus():
    config = put(dev_config(), "teams[0].isolation", {"tier": "mig", "migProfile": "1g.10gb"})
    assert [issue.key for issue in rejected(config).issues] == ["teams[0].isolation.tier"]


def test_memory_capped_and_exclusive_work_on_a_microk8s_box():
    config = put(dev_config(), "teams[0].isolation", {"tier": "memory-capped"})
    config = put(config, "teams[1].isolation", {"tier": "exclusive"})
    config = put(config, "teams[1].resources.gpu", {"quota": 0, "limit": 1})
    platform = load_platform(config)
    assert platform.kai_scheduler.hamicore and not platform.gpu_operator.mig_split


def test_every_instance_type_has_a_gpu_model_and_mig_models_have_layouts():
    assert all(gpu_model(kind) for kind in GPUS_PER_INSTANCE_TYPE)
    for model, layouts in MIG_LAYOUTS.items():
        for name, slices in layouts.items():
            # No layout gives more than the 7 compute slices of a GPU.
            assert 0 < kai_units_per_gpu(model, name) <= 7, (model, name)
            assert all(kai_units(profile) for profile in slices)


def test_a_mig_split_pool_counts_in_kais_units():
    # 8 H100 x 7 units + 4 L40S: the organization's gpu quota is compared with this.
    config = put(isolation_config(), "organization.resources.gpu", {"quota": 61, "limit": -1})
    assert any("61 but the host has at most 60" in warning for warning in load_platform(config).warnings)


@pytest.mark.parametrize("path, value, key", [
    ("teams[0].isolation.tier", "hard", "teams[0].isolation.tier"),
    ("cluster.kind", "gke", "cluster.kind"),
    ("cluster.eks.gpuNodeGroups[0].instanceTypes", 5, "cluster.eks.gpuNodeGroups[0].instanceTypes"),
    ("cluster.eks.gpuNodeGroups[0].migConfig", 5, "cluster.eks.gpuNodeGroups[0].migConfig"),
    ("teams[0].resources.gpu.quota", "x", "teams[0].resources.gpu.quota"),
    ("kaiScheduler.gpuSharing", "yes", "kaiScheduler.gpuSharing"),
], ids=["tier", "cluster-kind", "instance-types", "mig-config", "gpu-quota", "gpu-sharing"])
def test_a_value_with_its_own_problem_is_reported_once_without_follow_on_isolation_errors(path, value, key):
    """The loader reports every problem in one pass; the isolation rules skip what another rule refused."""
    assert [issue.key for issue in rejected(put(isolation_config(), path, value)).issues] == [key]


def test_a_team_pinned_to_a_pool_its_own_node_labels_do_not_match_is_refused():
    """nodePool is added to the team's selector before placement is judged: together they select no pool."""
    config = put(isolation_config(), "cluster.eks.gpuNodeGroups[0].labels", {"site/rack": "a"})
    config = put(config, "teams[2].vcluster", {"nodeLabels": {"site/rack": "a"}})
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == ["teams[2].vcluster.nodeLabels"]
    assert issues[0].value["gpu-tenancy/pool"] == "l40s"


def test_fractions_of_a_gpu_without_kai_gpu_sharing_are_warned_per_team():
    # gpuSharing off: pods ask whole nvidia.com/gpu only. dev's teams hold 0.33 each (limit 1): a whole-GPU pod runs
    # over quota, preemptible; a team limited to half a GPU can start none.
    config = put(dev_config(), "kaiScheduler.gpuSharing", False)
    config = put(config, "teams[1].resources.gpu", {"quota": 0.33, "limit": 0.5})
    config = put(config, "teams[2].resources.gpu", {"quota": 0, "limit": 1})
    warnings = [w for w in load_platform(config).warnings if "kaiScheduler.gpuSharing is off" in w]
    assert len(warnings) == 2
    assert warnings[0].startswith("teams[0] (team-nlp) has gpu quota 0.33") and "0 whole GPU(s)" in warnings[0]
    assert warnings[1].startswith("teams[1] (team-vision) has gpu limit 0.5") and "none of its GPU pods" in warnings[1]
    # With sharing on, fractions are what KAI shares.
    sharing = put(config, "kaiScheduler.gpuSharing", True)
    assert not [w for w in load_platform(sharing).warnings if "kaiScheduler.gpuSharing is off" in w]
