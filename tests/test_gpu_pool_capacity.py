"""The teams' guaranteed GPUs against the GPU node groups their pods can run on (config/gpu_pool_capacity.py).

KAI judges a queue's gpu quota against the whole cluster and reclaims only from a queue above its quota or fair share
(tests/test_cpu_memory_capacity.py reads that in KAI's source); a team kept on some node groups can only be given
GPUs there."""

from __future__ import annotations

from config import load_platform
from tests.config_spec import eks_config, put

GPU_POOL_KEY = "teams[].resources.gpu.quota"
SITE_WIDE = "the teams' gpu quotas add up to"


def gpu_pool_warnings(platform) -> list[str]:
    return [warning for warning in platform.warnings if warning.startswith(GPU_POOL_KEY)]


def two_group_site(*teams: tuple[str, float, str | None]) -> dict:
    """An EKS site of a big group (one g6e.48xlarge: 8 GPUs) and a small one (one g4dn.xlarge: 1 GPU), and teams
    (name, gpu quota, the group they are pinned to or None for both)."""
    config = put(eks_config(), "cluster.eks.gpuNodeGroups", [
        {"name": "big", "instanceTypes": ["g6e.48xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1},
        {"name": "small", "instanceTypes": ["g4dn.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1}])
    put(config, "organization.resources.gpu.quota", -1)
    config["teams"] = [{"name": name, "resources": {"gpu": {"quota": quota, "limit": -1}},
                        **({"isolation": {"nodePool": pool}} if pool else {})}
                       for name, quota, pool in teams]
    return config


def test_teams_kept_on_a_group_guaranteed_more_gpus_than_it_holds_are_warned():
    # 2.25 GPUs guaranteed on a host of 9: the site-wide sum fits, the small group does not.
    platform = load_platform(two_group_site(("team-a", 0.75, "small"), ("team-b", 0.5, "small"),
                                            ("team-c", 1, None)))
    [warning] = gpu_pool_warnings(platform)
    assert "only from GPU node group(s) small (team-a, team-b)" in warning
    assert "guaranteed 1.25 GPU(s) in all, more than the 1 GPU(s)" in warning
    assert "cluster.eks.gpuNodeGroups[1].desiredSize" in warning and "add up to at most 1," in warning
    assert not any(SITE_WIDE in other for other in platform.warnings)


def test_a_group_counts_its_desired_size_unless_the_sites_autoscaler_may_grow_it_to_max_size():
    config = two_group_site(("team-a", 1.5, "small"), ("team-b", 1, None))
    put(config, "cluster.eks.gpuNodeGroups[1].maxSize", 2)
    # Nothing grows the group past the one node it runs.
    [warning] = gpu_pool_warnings(load_platform(config))
    assert "guaranteed 1.5 GPU(s) in all, more than the 1 GPU(s)" in warning and "at their desiredSize" in warning
    put(config, "cluster.eks.autoscaler", "cluster-autoscaler")
    assert not gpu_pool_warnings(load_platform(config))
    put(config, "teams[0].resources.gpu.quota", 2.5)
    [warning] = gpu_pool_warnings(load_platform(config))
    assert "more than the 2 GPU(s)" in warning and "(cluster.eks.gpuNodeGroups[1].maxSize)" in warning


def test_teams_that_fit_their_group_exactly_are_not_warned():
    platform = load_platform(two_group_site(("team-a", 0.5, "small"), ("team-b", 0.5, "small"),
                                            ("team-c", 8, "big")))
    assert not gpu_pool_warnings(platform)


def test_a_team_that_can_also_run_on_another_group_is_not_counted_on_one():
    platform = load_platform(two_group_site(("team-a", 1, "small"), ("team-c", 7, None)))
    assert not gpu_pool_warnings(platform)


def mixed_site(*quotas: float) -> dict:
    """A g6e.12xlarge group (4 L40S) beside a p4d.24xlarge split all-1g.10gb (8 A100 40GB of 4 slices each, 32 in
    KAI's units), and shared teams of these quotas whose pods may run on both."""
    config = two_group_site(*((f"team-{index}", quota, None) for index, quota in enumerate(quotas)))
    put(config, "cluster.eks.gpuNodeGroups", [
        {"name": "l40s", "instanceTypes": ["g6e.12xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1},
        {"name": "a100", "instanceTypes": ["p4d.24xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1,
         "migConfig": "all-1g.10gb"}])
    return config


def test_teams_that_reach_a_mig_group_can_use_only_the_groups_without_mig():
    # 5 GPUs guaranteed on a host of 4 cards and 32 slices: the site-wide sum fits, the cards do not.
    platform = load_platform(mixed_site(2, 3))
    [warning] = gpu_pool_warnings(platform)
    assert "only from GPU node group(s) a100, l40s (team-0, team-1) are guaranteed 5 GPU(s)" in warning
    assert "more than the 4 GPU(s) of group(s) l40s at their desiredSize (cluster.eks.gpuNodeGroups[0].desiredSize)" in warning
    assert "(a100: MIG slices, for mig teams only)" in warning
    assert not any(SITE_WIDE in other for other in platform.warnings)
    assert not gpu_pool_warnings(load_platform(mixed_site(2, 2)))


def test_mig_teams_are_left_to_the_mig_slice_check():
    config = mixed_site(1)
    config["teams"].append({"name": "team-mig", "resources": {"gpu": {"quota": 33, "limit": -1}},
                            "isolation": {"tier": "mig", "migProfile": "1g.10gb", "nodePool": "a100"}})
    platform = load_platform(config)
    assert not gpu_pool_warnings(platform)
    assert any("promised 33 1g.10gb MIG slice(s) on pool a100" in warning for warning in platform.warnings)


def test_a_group_of_an_instance_type_the_tables_lack_is_not_judged():
    config = two_group_site(("team-a", 3, "small"))
    put(config, "cluster.eks.gpuNodeGroups[1].instanceTypes", ["g7.xlarge"])
    assert not gpu_pool_warnings(load_platform(config))


def test_every_group_together_is_left_to_the_site_wide_check():
    platform = load_platform(two_group_site(("team-a", 5, None), ("team-b", 5, None)))
    assert not gpu_pool_warnings(platform)
    assert any(SITE_WIDE in warning for warning in platform.warnings)


def test_a_larger_set_over_only_through_a_warned_one_is_not_warned_again():
    config = two_group_site(("team-a", 2, "small"), ("team-b", 1, "mid"), ("team-c", 1, "big"))
    config["cluster"]["eks"]["gpuNodeGroups"].append(
        {"name": "mid", "instanceTypes": ["g4dn.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1})
    [warning] = gpu_pool_warnings(load_platform(config))
    assert "only from GPU node group(s) small (team-a)" in warning


def test_one_gpu_group_is_the_whole_host():
    config = put(eks_config(), "organization.resources.gpu.quota", -1)
    for index in range(len(config["teams"])):
        put(config, f"teams[{index}].resources.gpu.quota", 1)
    platform = load_platform(config)
    assert not gpu_pool_warnings(platform) and any(SITE_WIDE in warning for warning in platform.warnings)


def test_the_fix_for_a_pinned_team_names_its_node_pool_not_its_node_labels():
    # A pool label in a pinned team's nodeLabels other than its nodePool is refused: its nodePool moves it.
    platform = load_platform(two_group_site(("team-a", 0.75, None), ("team-b", 2, "small"), ("team-c", 1, None)))
    [warning] = gpu_pool_warnings(platform)
    assert "reach another GPU node group (teams[1].isolation.nodePool)" in warning
    assert "vcluster.nodeLabels" not in warning
