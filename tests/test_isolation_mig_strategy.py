"""What the single MIG strategy and sharing a card do to the tiers' promises (config/mig_pools.py, config/isolation.py).

Under ``single`` the device plugin advertises each slice as a plain ``nvidia.com/gpu`` and KAI, which sees a plain GPU
node, charges it as 1 GPU; time-slicing replicates ``nvidia.com/gpu``. Each test states the site a red-team probe
loaded silently, then a control the fix must leave alone.
"""

from __future__ import annotations

import pytest

from config import load_platform
from config.mig_slices import mig_slices
from config.mig import MIG_LAYOUTS, kai_units, kai_units_per_gpu
from tests.config_spec import rejected
from tests.conftest import dev_config
from tests.isolation_spec import isolation_config


def single_site(layout: str, profile: str, quota: float) -> dict:
    """One p5.48xlarge pool (8 H100) split by ``layout`` under single, one mig team of ``profile`` on it."""
    config = isolation_config()
    config["gpuOperator"] = {**config.get("gpuOperator", {}), "migStrategy": "single"}
    config["cluster"]["eks"]["gpuNodeGroups"][0]["migConfig"] = layout
    config["teams"] = [{"name": "team-llm", "resources": {"gpu": {"quota": quota, "limit": quota}},
                        "isolation": {"tier": "mig", "migProfile": profile, "nodePool": "h100"}},
                       *config["teams"][2:]]
    return config


def test_a_slice_of_several_compute_units_under_single_is_refused():
    # The probe: quota 7 read as 1 slice of 7g.80gb (promised 1 of 8, no warning), while KAI charged
    # nvidia.com/gpu: 7 as 7 GPUs, 7 whole slices, inside the quota.
    issues = rejected(single_site("all-7g.80gb", "7g.80gb", 7)).issues
    assert [(issue.key, issue.value) for issue in issues] == [("gpuOperator.migStrategy", "single")]
    assert "cluster.eks.gpuNodeGroups[0].migConfig all-7g.80gb" in issues[0].problem
    assert "KAI counts it as 1 GPU" in issues[0].problem
    assert "mixed" in issues[0].fix and "all-1g" in issues[0].fix


@pytest.mark.parametrize("layout, profile", [("all-3g.40gb", "3g.40gb"), ("all-2g.20gb", "2g.20gb")])
def test_every_layout_of_larger_slices_is_refused_under_single(layout, profile):
    assert "gpuOperator.migStrategy" in [issue.key for issue in rejected(single_site(layout, profile, 6)).issues]


@pytest.mark.parametrize("layout, profile", [("all-1g.10gb", "1g.10gb"), ("all-1g.20gb", "1g.20gb")])
def test_slices_of_one_compute_unit_count_alike_under_single(layout, profile):
    # Control: a 1g slice is one unit to the program and one nvidia.com/gpu to KAI.
    platform = load_platform(single_site(layout, profile, 7))
    slices = MIG_LAYOUTS["H100-80GB"][layout][profile]
    assert kai_units(profile) == 1 and kai_units_per_gpu("H100-80GB", layout) == slices
    assert mig_slices(platform) == [("h100", profile, 8 * slices, 7, ["team-llm"])]


def test_the_same_large_slices_under_mixed_load():
    config = single_site("all-7g.80gb", "7g.80gb", 7)
    config["gpuOperator"]["migStrategy"] = "mixed"
    assert mig_slices(load_platform(config)) == [("h100", "7g.80gb", 8, 1, ["team-llm"])]


@pytest.mark.parametrize("where", ["pool", "default"])
def test_a_time_sliced_mig_pool_under_single_is_refused(where):
    # Each slice is an nvidia.com/gpu there, which the time-sliced profile advertises `replicas` times.
    config = single_site("all-1g.10gb", "1g.10gb", 7)
    if where == "pool":
        config["cluster"]["eks"]["gpuNodeGroups"][0]["sharingProfile"] = "time-sliced"
        config["cluster"]["eks"]["gpuNodeGroups"][1]["sharingProfile"] = "exclusive"
    else:
        config["gpuOperator"]["timeSlicing"] = {"defaultProfile": "time-sliced"}
        config["cluster"]["eks"]["gpuNodeGroups"][1]["sharingProfile"] = "exclusive"
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == ["cluster.eks.gpuNodeGroups[0].sharingProfile"]
    assert "shared in time" in issues[0].problem and "exclusive" in issues[0].fix
    config["gpuOperator"]["migStrategy"] = "mixed"  # mixed slices are nvidia.com/mig-*, which are not replicated
    load_platform(config)


def test_a_time_sliced_mig_pool_under_mixed_is_told_the_profile_does_nothing_not_that_it_oversubscribes():
    # A trial site got "KAI fractions on top of time-slicing oversubscribe the same card" for a split pool: the device
    # plugin replicates only nvidia.com/gpu, which a node whose GPUs are all split does not advertise.
    config = isolation_config()
    config["cluster"]["eks"]["gpuNodeGroups"][0]["sharingProfile"] = "time-sliced"
    config["observability"] = {**config.get("observability", {}), "prometheus": "install"}
    platform = load_platform(config)
    assert not [w for w in platform.warnings if "oversubscribe" in w or "time-slice replicas" in w]
    [warning] = [w for w in platform.warnings if "time-sliced" in w]
    assert warning.startswith("cluster.eks.gpuNodeGroups[0].sharingProfile is time-sliced, but group h100 is "
                              "split into MIG slices (all-balanced) under the mixed strategy, where the profile has "
                              "no effect")
    assert warning.endswith("Fix: set it to exclusive, or remove it.")
    # Nor are its GPUs said to be charged per replica.
    assert not [n for n in platform.notes if "time-sliced profile: there the usage metrics" in n]
    # A pool without MIG on the profile is still warned of: KAI fractions there do oversubscribe its cards.
    config["cluster"]["eks"]["gpuNodeGroups"][1]["sharingProfile"] = "time-sliced"
    config["teams"] = config["teams"][:3]  # the exclusive team would be refused on a time-sliced pool
    assert [w for w in load_platform(config).warnings if "oversubscribe" in w and "l40s" in w]


def unpinned_exclusive_beside(strategy: str) -> dict:
    config = single_site("all-1g.10gb", "1g.10gb", 7)
    config["gpuOperator"]["migStrategy"] = strategy
    del config["teams"][2]["isolation"]["nodePool"]
    return config


def test_an_unpinned_exclusive_team_reaching_a_single_mig_pool_is_refused():
    # Its nvidia.com/gpu: 1 would be one 1g.10gb slice there, not a card.
    issues = rejected(unpinned_exclusive_beside("single")).issues
    assert [(issue.key, issue.fix) for issue in issues] == [
        ("teams[2].isolation.nodePool", "pin the team to a pool on the exclusive profile (l40s)")]
    assert "pool h100 is split into MIG slices under the single strategy" in issues[0].problem
    load_platform(unpinned_exclusive_beside("mixed"))  # KAI places no nvidia.com/gpu pod on a mixed MIG node


@pytest.mark.parametrize("strategy, says", [("single", "each nvidia.com/gpu there is one MIG slice"),
                                            ("mixed", "KAI places no exclusive pods there under the mixed")])
def test_a_team_pinned_to_a_mig_pool_is_told_what_happens_under_its_strategy(strategy, says):
    config = unpinned_exclusive_beside(strategy)
    config["teams"][2]["isolation"]["nodePool"] = "h100"
    issues = rejected(config).issues
    assert [issue.key for issue in issues] == ["teams[2].isolation.nodePool"]
    assert says in issues[0].problem


def beside_single(strategy: str, chat_pool: str) -> list[str]:
    config = single_site("all-1g.10gb", "1g.10gb", 7)
    config["gpuOperator"]["migStrategy"] = strategy
    config["teams"].append({"name": "team-chat", "resources": {"gpu": {"quota": 1, "limit": 2}},
                            **({"isolation": {"nodePool": chat_pool}} if chat_pool else {})})
    return [w for w in load_platform(config).warnings if w.startswith("under the single MIG strategy")]


def test_teams_reaching_a_single_mig_pool_beside_a_mig_team_are_warned():
    # KAI sees a plain GPU node: a shared or memory-capped team's nvidia.com/gpu pods take the mig team's slices
    # inside their own quotas, as [no-mig] now stops under mixed.
    warnings = beside_single("single", "")
    assert len(warnings) == 1 and "team(s) team-chat, not mig, can take those slices" in warnings[0]
    assert "mig team(s) team-llm are promised" in warnings[0]
    assert beside_single("single", "l40s") == [] and beside_single("mixed", "") == []


def capped_site(shared_pool: str | None) -> dict:
    config = isolation_config()
    shared = {"name": "team-chat", "resources": {"gpu": {"quota": 1, "limit": 2}}}
    if shared_pool:
        shared["isolation"] = {"nodePool": shared_pool}
    config["teams"].append(shared)
    return config


@pytest.mark.parametrize("shared_pool", ["l40s", None], ids=["pinned", "selected"])
def test_a_memory_capped_pool_that_shared_teams_reach_is_warned(shared_pool):
    # HAMi-core caps the memory-capped team's containers only; KAI packs the shared team's uncapped fractions onto
    # the same cards.
    warnings = [w for w in load_platform(capped_site(shared_pool)).warnings if w.startswith("memory-capped team(s)")]
    assert len(warnings) == 1 and "team-nlp share pool l40s with shared team(s) team-chat" in warnings[0]


def test_a_memory_capped_pool_that_no_shared_team_reaches_is_not_warned():
    config = capped_site(None)
    config["cluster"]["eks"]["gpuNodeGroups"].append({"name": "l4", "instanceTypes": ["g6.xlarge"], "maxSize": 1})
    config["teams"][-1]["isolation"] = {"nodePool": "l4"}
    assert not [w for w in load_platform(config).warnings if w.startswith("memory-capped team(s)")]


def capped_warnings(config: dict, **loaded) -> list[str]:
    return [w for w in load_platform(config, **loaded).warnings if w.startswith("memory-capped team(s)")]


def test_a_memory_capped_team_not_pinned_to_a_pool_is_warned_where_it_meets_shared_teams():
    # A trial site: the capped team reached the shared team's pool by its node selector alone and nothing was said.
    config = capped_site("l40s")
    del config["teams"][2]["isolation"]["nodePool"]
    config["teams"] = [team for team in config["teams"] if team["name"] != "team-train"]
    warnings = capped_warnings(config)
    assert len(warnings) == 1 and "team-nlp share pool l40s with shared team(s) team-chat" in warnings[0]
    assert "isolation.nodePool" in warnings[0]


def lab_box(shared_limit: float) -> dict:
    """The dev box with team-nlp memory-capped beside two shared teams."""
    config = {key.removeprefix("gpu-tenancy:"): value for key, value in dev_config().items()}
    config["teams"][0]["isolation"] = {"tier": "memory-capped"}
    for team in config["teams"][1:]:
        team["resources"]["gpu"]["limit"] = shared_limit
        team["resources"]["gpu"]["quota"] = min(team["resources"]["gpu"]["quota"], shared_limit)
    return config


def test_on_a_single_box_a_memory_capped_team_beside_shared_ones_is_warned_and_told_what_it_can_do():
    warnings = capped_warnings(lab_box(1))
    assert len(warnings) == 1
    assert "team-nlp share pool microk8s with shared team(s) team-vision, team-recommender" in warnings[0]
    # One pool: there is nowhere else to keep the shared teams.
    assert "resources.gpu.limit: 0" in warnings[0] and "isolation.nodePool" not in warnings[0]
    assert capped_warnings(lab_box(0)) == []


@pytest.mark.parametrize("shared_labels, warned", [({}, True), ({"gpu-tenancy/pool": "shared"}, False),
                                                   ({"other": "x"}, True)])
def test_on_an_existing_cluster_teams_meet_unless_their_node_labels_part_them(shared_labels, warned):
    config = lab_box(1)
    config["cluster"] = {"kind": "kubeconfig", "kubeconfig": {"kubernetesVersion": "1.36"}}
    config["gpuOperator"] = {"mode": "install"}
    config["teams"][0]["vcluster"] = {"nodeLabels": {"gpu-tenancy/pool": "capped"}}
    for team in config["teams"][1:]:
        team["vcluster"] = {"nodeLabels": shared_labels}
    warnings = capped_warnings(config, secrets_set={"kubeconfig"})
    assert bool(warnings) == warned
    if warned:
        assert "may share GPU nodes" in warnings[0] and "vcluster.nodeLabels" in warnings[0]
