"""Placement is checked from the config alone: a node selector that matches no node pool, or pools the
tenant cannot tolerate, is refused at the key that decides it, before any chart is rendered."""

from __future__ import annotations

import copy

import pytest

from config import load_platform
from config.hosts import GPU_TAINT
from config.placement import parse_toleration
from config.stack_file import PROJECT_DIR, read_stack_file
from config.vocabulary import project_config
from ops import new_site
from tests.config_spec import dev_config, eks_config, issue, put, rejected
from tests.isolation_spec import isolation_config
from tools.plan import cli as plan_cli

EKS_STACK = project_config(read_stack_file(PROJECT_DIR / "Pulumi.eks.yaml")["config"])


def cloned_eks_site_with_renamed_pools() -> dict:
    """The eks stack copied for another region, its GPU groups renamed; nodeLabels still says pool gpu."""
    config = copy.deepcopy(EKS_STACK)
    groups = config["cluster"]["eks"]["gpuNodeGroups"]
    groups[0]["name"] = "a10g"
    groups.append({**groups[0], "name": "l4", "instanceTypes": ["g6.xlarge"]})
    config["cluster"]["eks"]["region"] = "eu-west-1"
    return config


def test_a_cloned_site_whose_selector_matches_no_pool_is_refused_at_the_stack_key():
    found = issue(rejected(cloned_eks_site_with_renamed_pools()), "vcluster.nodeLabels", {"gpu-tenancy/pool": "gpu"})
    assert "selects no node pool" in found.problem and "team-legal, team-support" in found.problem
    # The fix names the pools there are and how to select them.
    assert "a10g" in found.fix and "l4" in found.fix and "gpu-tenancy/role: gpu" in found.fix


def test_a_team_override_is_refused_at_the_team_key_and_the_others_still_load():
    config = eks_config()
    put(config, "teams[2].vcluster", {"nodeLabels": {"gpu-tenancy/pool": "gpu-large"}})
    error = rejected(config)
    assert error.keys == ["teams[2].vcluster.nodeLabels"]
    put(config, "teams[2].vcluster", {"nodeLabels": {"gpu-tenancy/pool": "gpu"}})
    assert load_platform(config).teams[2].vcluster.node_labels == {"gpu-tenancy/pool": "gpu"}


def test_a_selector_on_a_label_the_nodes_get_from_elsewhere_is_not_refuted():
    # The kubelet, EKS and GPU feature discovery label nodes; the config cannot know those values.
    config = eks_config()
    put(config, "vcluster.nodeLabels", {"gpu-tenancy/role": "gpu", "nvidia.com/gpu.product": "Tesla-T4",
                                        "topology.kubernetes.io/zone": "us-east-2a"})
    load_platform(config)


def test_a_label_no_node_group_sets_is_refused_but_one_the_group_sets_is_not():
    config = eks_config()
    put(config, "vcluster.nodeLabels", {"example.com/tier": "gold"})
    assert rejected(config).keys == ["vcluster.nodeLabels"]
    put(config, "cluster.eks.gpuNodeGroups[0].labels", {"example.com/tier": "gold"})
    load_platform(config)


def test_tolerations_that_leave_only_tainted_pools_are_refused_at_enforce_tolerations():
    config = eks_config()
    put(config, "teams[0].vcluster", {"enforceTolerations": []})
    found = issue(rejected(config), "teams[0].vcluster.enforceTolerations", [])
    assert "nvidia.com/gpu=true:NoSchedule" in found.problem
    # Without a selector the system pool is open to the team: no GPU toleration needed there.
    put(config, "teams[0].vcluster", {"enforceTolerations": [], "nodeLabels": {}})
    load_platform(config)
    put(config, "teams[0].vcluster", {"enforceTolerations": ["*"]})
    load_platform(config)


@pytest.mark.parametrize("text, tolerated", [
    ("nvidia.com/gpu:NoSchedule", True), ("nvidia.com/gpu=true:NoSchedule", True), ("*", True),
    ("nvidia.com/gpu=false:NoSchedule", False), ("nvidia.com/gpu:NoExecute", False),
    # No effect: vCluster leaves the operator empty (Equal), so the value must match.
    ("nvidia.com/gpu", False), ("nvidia.com/gpu=true", True),
])
def test_tolerations_are_read_as_vcluster_parses_them(text, tolerated):
    assert parse_toleration(text).tolerates(GPU_TAINT) is tolerated


def test_microk8s_has_none_of_the_programs_pool_labels():
    config = dev_config()
    put(config, "vcluster.nodeLabels", {"gpu-tenancy/pool": "gpu"})
    assert "remove nodeLabels" in issue(rejected(config), "vcluster.nodeLabels", {"gpu-tenancy/pool": "gpu"}).fix
    # A label an admin may have put on the box by hand is not refuted.
    put(config, "vcluster.nodeLabels", {"example.com/gpu-box": "yes"})
    load_platform(config)


def test_gpu_groups_that_may_all_scale_to_zero_warn_with_the_fix():
    config = put(eks_config(), "cluster.eks.autoscaler", "cluster-autoscaler")
    put(config, "cluster.eks.gpuNodeGroups[0].minSize", 0)
    warnings = [w for w in load_platform(config).warnings if "minSize 0" in w]
    assert len(warnings) == 1 and "DNS" in warnings[0] and "set minSize: 1" in warnings[0]
    # Teams allowed onto the system nodes are not stranded.
    put(config, "vcluster.nodeLabels", {})
    assert not [w for w in load_platform(config).warnings if "minSize 0" in w]
    put(config, "vcluster.nodeLabels", {"gpu-tenancy/role": "gpu"})
    put(config, "cluster.eks.gpuNodeGroups[0].minSize", 1)
    assert not [w for w in load_platform(config).warnings if "minSize 0" in w]


def test_without_an_autoscaler_a_group_runs_its_desired_size_so_only_desired_zero_strands():
    """Nothing scales an EKS managed node group but an autoscaler: minSize 0 empties nothing, desiredSize 0 always."""
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0].minSize", 0)
    assert load_platform(config).cluster.eks.autoscaler == "none"
    assert not [w for w in load_platform(config).warnings if "minSize 0" in w or "desiredSize 0" in w]
    put(config, "cluster.eks.gpuNodeGroups[0].desiredSize", 0)
    [warning] = [w for w in load_platform(config).warnings if "desiredSize 0" in w]
    assert "nothing scales the groups (cluster.eks.autoscaler: none)" in warning
    assert "cluster.eks.gpuNodeGroups[0].desiredSize" in warning and "cluster-autoscaler" in warning
    # The same sizes under an autoscaler: the group may grow from zero, and is warned of as scaling to zero.
    put(config, "cluster.eks.autoscaler", "cluster-autoscaler")
    [warning] = [w for w in load_platform(config).warnings if "minSize 0" in w]
    assert "when those groups scale to zero" in warning


def test_bounds_no_autoscaler_reads_are_noted_and_an_unknown_autoscaler_is_refused():
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0].maxSize", 3)
    [note] = [n for n in load_platform(config).notes if "nothing scales the node groups" in n]
    assert "cluster.eks.gpuNodeGroups[0] (1/1/3)" in note and "cluster.eks.autoscaler: cluster-autoscaler" in note
    put(config, "cluster.eks.autoscaler", "cluster-autoscaler")
    assert not [n for n in load_platform(config).notes if "nothing scales the node groups" in n]
    found = issue(rejected(put(config, "cluster.eks.autoscaler", "karpenter")), "cluster.eks.autoscaler", "karpenter")
    assert "cluster-autoscaler" in found.fix


def test_a_team_guaranteed_gpus_that_can_reach_no_gpu_node_is_warned():
    """Valid (its CPU pods run on the system nodes), but the GPUs its queue guarantees can never be used."""
    config = put(put(eks_config(), "vcluster.nodeLabels", {}), "vcluster.enforceTolerations", [])
    [warning] = [w for w in load_platform(config).warnings if "can reach no GPU node" in w]
    guaranteed = [team.name for team in load_platform(config).teams if team.resources.gpu.quota > 0]
    assert guaranteed and all(name in warning for name in guaranteed)
    assert "nvidia.com/gpu:NoSchedule" in warning and "gpu-tenancy/role" in warning
    # Tolerating the GPU taint again reaches the GPU groups: no warning; nor on the committed stacks.
    fixed = put(copy.deepcopy(config), "vcluster.enforceTolerations", ["nvidia.com/gpu:NoSchedule"])
    for site in (fixed, eks_config(), dev_config()):
        assert not [w for w in load_platform(site).warnings if "can reach no GPU node" in w]


def test_tools_plan_refuses_the_cloned_site_without_any_chart(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GPU_TENANCY_CHART_CACHE", str(tmp_path / "no-charts"))
    config = {f"gpu-tenancy:{key}": value for key, value in cloned_eks_site_with_renamed_pools().items()}
    assert plan_cli.main(["eu", "--out", str(tmp_path / "plan")], config=config) == 2
    err = capsys.readouterr().err
    assert "gpu-tenancy:vcluster.nodeLabels" in err and "selects no node pool" in err
    assert not (tmp_path / "plan" / "plan.json").exists()


def test_new_site_refuses_renaming_the_pool_the_selector_names(tmp_path, capsys):
    for name in ("Pulumi.yaml", "Pulumi.eks.yaml"):
        (tmp_path / name).write_text((PROJECT_DIR / name).read_text())
    assert new_site.main(["eu", "--from", "eks", "--project-dir", str(tmp_path),
                          "--set", "cluster.eks.gpuNodeGroups[0].name=a10g"]) == 2
    assert "gpu-tenancy:vcluster.nodeLabels" in capsys.readouterr().err
    assert not (tmp_path / "Pulumi.eu.yaml").exists()


def test_a_team_pinned_to_a_group_that_may_scale_to_zero_is_warned_though_another_group_stays():
    config = put(put(eks_config(), "cluster.eks.autoscaler", "cluster-autoscaler"), "cluster.eks.gpuNodeGroups", [
        {"name": "gpu", "instanceTypes": ["g4dn.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1},
        {"name": "burst", "instanceTypes": ["g6e.xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 3}])
    put(config, "vcluster.nodeLabels", {"gpu-tenancy/role": "gpu"})
    put(config, f"teams[{len(config['teams']) - 1}].isolation", {"nodePool": "burst"})
    [warning] = [w for w in load_platform(config).warnings if "minSize 0" in w]
    assert "GPU node group(s) burst have minSize 0" in warning
    assert f"team(s) {config['teams'][-1]['name']} can only run there" in warning
    assert "cluster.eks.gpuNodeGroups[1].minSize" in warning and "isolation.nodePool" in warning
    # Teams that may also use the group that stays are not stranded.
    put(config, f"teams[{len(config['teams']) - 1}].isolation", {})
    assert not [w for w in load_platform(config).warnings if "minSize 0" in w]


def _two_pools() -> dict:
    config = eks_config()
    groups = config["cluster"]["eks"]["gpuNodeGroups"]
    groups.append({**groups[0], "name": "big", "instanceTypes": ["g4dn.12xlarge"]})
    return config


@pytest.mark.parametrize("make, keys", [
    # An EKS team pinned to a node group that does not exist (trial t8badpool).
    (lambda: put(eks_config(), "teams[1].isolation", {"nodePool": "l40s"}),
     ["teams[1].isolation.nodePool"]),
    # Two MicroK8s teams pinned to two pools (trial t9twopools): nodePool is for eks hosts only.
    (lambda: put(put(dev_config(), "teams[0].isolation", {"nodePool": "pool-a"}), "teams[1].isolation",
                 {"nodePool": "pool-b"}), ["teams[0].isolation.nodePool", "teams[1].isolation.nodePool"]),
], ids=["eks-no-such-group", "microk8s-two-pools"])
def test_a_refused_node_pool_is_one_problem_not_also_a_selector_matching_no_pool(make, keys):
    # The refused pool was still pinned into the selector, and a second error blamed vcluster.nodeLabels, which
    # neither stack sets, showing the first team's pool for both teams.
    assert rejected(make()).keys == keys


def test_a_selector_matching_no_pool_shows_its_own_key_value_not_another_teams_pool():
    config = put(_two_pools(), "vcluster.nodeLabels", {"example.com/tier": "gold"})
    put(put(config, "teams[0].isolation", {"nodePool": "gpu"}), "teams[1].isolation", {"nodePool": "big"})
    error = rejected(config)
    assert error.keys == ["vcluster.nodeLabels"]
    found = issue(error, "vcluster.nodeLabels", {"example.com/tier": "gold"})
    assert "team(s) team-nlp, team-vision, team-recommender" in found.problem


def test_a_node_pool_the_inherited_node_labels_do_not_select_is_refused_at_the_node_pool():
    # The stack's nodeLabels select pool gpu for every team; one team pinned to big selects nothing. The stack key
    # serves the other teams: the team's nodePool is what contradicts it.
    config = put(put(_two_pools(), "cluster.eks.gpuNodeGroups[0].labels", {"example.com/tier": "gold"}),
                 "vcluster.nodeLabels", {"example.com/tier": "gold"})
    put(config, "teams[1].isolation", {"nodePool": "big"})
    found = issue(rejected(config), "teams[1].isolation.nodePool", "big")
    assert "vcluster.nodeLabels {'example.com/tier': 'gold'}" in found.problem and "select only gpu" in found.problem
    assert found.fix.startswith("pin the team to one of gpu, or give it nodeLabels of its own")


def test_a_node_pool_contradicting_the_teams_own_pool_label_is_refused_naming_both_keys():
    # nodePool used to win silently over the team's own gpu-tenancy/pool label (found on a trial site).
    config = put(_two_pools(), "teams[0].isolation", {"nodePool": "gpu"})
    put(config, "teams[0].vcluster", {"nodeLabels": {"gpu-tenancy/pool": "big"}})
    error = rejected(config)
    assert error.keys == ["teams[0].isolation.nodePool"]
    found = issue(error, "teams[0].isolation.nodePool", "gpu")
    assert "contradicts teams[0].vcluster.nodeLabels, whose gpu-tenancy/pool is big" in found.problem
    assert "set nodePool to big" in found.fix
    assert "remove gpu-tenancy/pool from teams[0].vcluster.nodeLabels" in found.fix
    # Labels that agree load; so does a pool label in the stack's nodeLabels, the default a team's nodePool refines.
    put(config, "teams[0].vcluster", {"nodeLabels": {"gpu-tenancy/pool": "gpu"}})
    assert load_platform(config).teams[0].vcluster.node_labels == {"gpu-tenancy/pool": "gpu"}
    config = put(put(config, "teams[0].vcluster", {}), "vcluster.nodeLabels", {"gpu-tenancy/pool": "big"})
    assert load_platform(config).teams[0].vcluster.node_labels == {"gpu-tenancy/pool": "gpu"}


def test_a_pool_label_naming_no_pool_is_to_be_removed_not_pinned_to():
    config = put(_two_pools(), "teams[0].isolation", {"nodePool": "gpu"})
    put(config, "teams[0].vcluster", {"nodeLabels": {"gpu-tenancy/pool": "nosuch"}})
    found = issue(rejected(config), "teams[0].isolation.nodePool", "gpu")
    assert "set nodePool" not in found.fix
    assert found.fix.startswith("remove gpu-tenancy/pool from teams[0].vcluster.nodeLabels (nodePool adds it)")
    assert "no GPU node group is named nosuch" in found.fix


def test_a_mig_teams_own_pool_label_naming_another_pool_than_its_mig_pool_is_refused():
    config = isolation_config()
    config["teams"][0]["isolation"].pop("nodePool")  # the only MIG-split pool, h100, is implied
    put(config, "teams[0].vcluster", {"nodeLabels": {"gpu-tenancy/pool": "l40s"}})
    found = issue(rejected(config), "teams[0].vcluster.nodeLabels", {"gpu-tenancy/pool": "l40s"})
    assert "the only MIG-split pool" in found.problem and "h100" in found.fix
