"""How many of the teams' pods an EKS site's GPU node groups run at once (config/gpu_pool_pods.py): a node runs at
most nodeadm's maxPods, its own per-node pods included, and vCluster pins each team's pods and DNS to its pools."""

from __future__ import annotations

from pathlib import Path

from config import load_platform
from config.gpu_pool_pods import GPU_OPERATOR_NODE_OPERANDS, node_platform_pods, team_pod_room
from config.node_allocatable import GPU_NODE_PLATFORM_PODS, eks_max_pods
from config.stack_file import read_stack_file
from config.vocabulary import project_config
from tests.config_spec import dev_config, put

EKS_STACK = Path(__file__).resolve().parent.parent / "Pulumi.eks.yaml"

SIGN = "Too many pods"


def _pod_notes(config: dict) -> list[str]:
    return [note for note in load_platform(config).notes if SIGN in note]


def eks_config() -> dict:
    """The committed eks stack: one g4dn.xlarge, two teams."""
    return project_config(read_stack_file(EKS_STACK)["config"])


def _eks_with_pods(pods: int) -> dict:
    return put(eks_config(), "vcluster.resourceQuota.pods", pods)


def test_the_committed_eks_stack_gives_its_teams_no_more_pods_than_its_gpu_node_runs():
    platform = load_platform(eks_config())
    [group] = platform.cluster.eks.gpu_node_groups
    allowed = sum(team.vcluster.resource_quota.pods + 1 for team in platform.teams)
    assert allowed <= team_pod_room(platform, group)
    assert not _pod_notes(eks_config())


def test_pod_allowances_past_what_the_nodes_run_are_noted_with_the_numbers_and_the_fix():
    config = _eks_with_pods(18)
    platform = load_platform(config)
    [group] = platform.cluster.eks.gpu_node_groups
    # A g4dn.xlarge: 3 network interfaces of 10 addresses each.
    assert eks_max_pods("g4dn.xlarge") == 29
    per_node = node_platform_pods(platform, group)
    assert per_node == len(GPU_NODE_PLATFORM_PODS) + len(GPU_OPERATOR_NODE_OPERANDS)  # no toolkit, driver or MIG
    [note] = _pod_notes(config)
    assert note.startswith("cluster.eks.gpuNodeGroups[0]: the 2 team(s) running there (team-legal, team-support)")
    assert f"may run {2 * 19} pods" in note and f"at most {29 - per_node} of theirs" in note
    assert "resourceQuota.pods" in note and "cluster.eks.gpuNodeGroups[0].desiredSize" in note
    assert not [warning for warning in platform.warnings if SIGN in warning], "a ceiling, not a guarantee: a note"


def test_each_operand_the_site_turns_on_takes_a_pod_of_every_gpu_node():
    base = _eks_with_pods(18)
    [group] = load_platform(base).cluster.eks.gpu_node_groups
    per_node = node_platform_pods(load_platform(base), group)
    for path, value in (("gpuOperator.toolkitEnabled", True), ("observability.prometheus", "install")):
        platform = load_platform(put(_eks_with_pods(18), path, value))
        assert node_platform_pods(platform, platform.cluster.eks.gpu_node_groups[0]) == per_node + 1, path


def test_more_nodes_make_room_and_the_autoscaler_counts_max_size():
    fits = put(put(_eks_with_pods(18), "cluster.eks.gpuNodeGroups[0].desiredSize", 2),
               "cluster.eks.gpuNodeGroups[0].maxSize", 2)
    assert not _pod_notes(fits)
    scaled = put(put(_eks_with_pods(18), "cluster.eks.gpuNodeGroups[0].maxSize", 2), "cluster.eks.autoscaler",
                 "cluster-autoscaler")
    assert not _pod_notes(scaled)
    assert "cluster.eks.gpuNodeGroups[0].desiredSize" in _pod_notes(
        put(_eks_with_pods(18), "cluster.eks.gpuNodeGroups[0].maxSize", 2))[0]


def test_an_instance_type_the_tables_lack_is_not_judged():
    config = put(_eks_with_pods(18), "cluster.eks.gpuNodeGroups[0].instanceTypes", ["g9.mystery"])
    assert not _pod_notes(config)


def test_teams_are_judged_on_the_groups_they_run_on():
    assert _pod_notes(_eks_with_pods(18)), "both teams on the one g4dn.xlarge"
    config = _eks_with_pods(18)
    groups = config["cluster"]["eks"]["gpuNodeGroups"]
    groups.append({**groups[0], "name": "big", "instanceTypes": ["g5.12xlarge"]})
    put(config, "teams[0].vcluster.nodeLabels", {"gpu-tenancy/pool": "big"})
    # Each group now holds one team: 19 pods of the g4dn.xlarge's 21, and of the g5.12xlarge's many more.
    assert eks_max_pods("g5.12xlarge") > eks_max_pods("g4dn.xlarge")
    assert not _pod_notes(config)


def test_microk8s_and_existing_clusters_have_no_pod_table_here():
    assert not _pod_notes(dev_config())
