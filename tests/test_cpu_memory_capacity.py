"""The teams' guaranteed CPU and memory against what the nodes their pods run on can give
(config/cpu_memory_capacity.py, config/node_allocatable.py)."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from config import ConfigError, load_platform
from config.capacity import CPU_MEMORY_PER_INSTANCE_TYPE, CPU_MEMORY_PER_SYSTEM_INSTANCE_TYPE, GPUS_PER_INSTANCE_TYPE
from config.cpu_memory_capacity import pool_guarantees
from config.node_allocatable import (
    CPU_RESERVE_STEPS, ENIS_PER_INSTANCE_TYPE, EVICTION_MEMORY_AVAILABLE, GIBIBYTE, GPU_NODE_PLATFORM_REQUESTS,
    MEBIBYTE, MEMORY_RESERVE_BASE_MIB, MEMORY_RESERVE_PER_POD_MIB, eks_max_pods, eks_node_allocatable,
    kube_reserved_millicores, kube_reserved_memory,
)
from config.tenant_budget import control_plane_budget
from config.versions import GPU_OPERATOR_VERSION, KAI_RELEASES
from tests.config_spec import dev_config, eks_config, put
from tests.conftest import git, go_function, mirrored_tag, run
from tests.node_pid_readers import EKS_AMI, EKS_AMI_TAG
from tools.plan import cli as plan
from tools.plan.summary import render_summary

KAI = "kai-scheduler/KAI-Scheduler"
GPU_OPERATOR = "NVIDIA/gpu-operator"
CPU_KEY, MEMORY_KEY = "teams[].resources.cpu.quota", "teams[].resources.memory.quota"


def capacity_warnings(platform) -> list[str]:
    return [w for w in platform.warnings if w.startswith((CPU_KEY, MEMORY_KEY))]


def capacity_notes(platform) -> list[str]:
    return [note for note in platform.notes if "by their KAI queues" in note]


def eks_site(instance_type: str, max_size: int, teams: int, **quota: str) -> dict:
    """An EKS site of one GPU group its Cluster Autoscaler grows to ``max_size`` and ``teams`` teams of a quarter GPU
    each (their default cpu and memory)."""
    config = put(eks_config(), "cluster.eks.gpuNodeGroups[0]", {
        "name": "gpu", "instanceTypes": [instance_type], "minSize": 1, "desiredSize": 1, "maxSize": max_size})
    put(config, "cluster.eks.autoscaler", "cluster-autoscaler")
    put(config, "organization.resources.gpu.quota", -1)
    config["teams"] = [{"name": f"team-{index}", "resources": {"gpu": {"quota": 0.25, "limit": 1}}}
                       for index in range(teams)]
    if quota:
        put(config, "vcluster.resourceQuota", dict(quota))
    return config


# --- the EKS AMI's reservations, read from nodeadm ------------------------------------------------


def test_nodeadm_reserves_what_the_program_takes_out():
    """kubeReserved cpu and memory, the pods per node they are computed on and the memory eviction threshold, as
    nodeadm writes them at the mirrored AMI release: a change to any constant fails here."""
    tag = mirrored_tag(EKS_AMI, EKS_AMI_TAG)
    config = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/kubelet/config.go")
    cpu = go_function(config, "getCPUMillicoresToReserve")
    ranges = re.search(r"cpuRanges := \[\]int\{([^}]*)\}", cpu).group(1)
    shares = re.search(r"cpuPercentageReservedForRanges := \[\]int\{([^}]*)\}", cpu).group(1)
    assert [part.strip() for part in ranges.split(",")] == ["0", *(str(end) for end, _ in CPU_RESERVE_STEPS[:-1]),
                                                          "totalCPUMillicores"]
    assert [int(part) for part in shares.split(",")] == [share for _, share in CPU_RESERVE_STEPS]
    assert "(reserved - startRange) * percentage / 10000" in go_function(config, "getResourceToReserveInRange")
    memory = go_function(config, "getMemoryMebibytesToReserve")
    assert f"return {MEMORY_RESERVE_PER_POD_MIB}*maxPods + {MEMORY_RESERVE_BASE_MIB}" in memory
    reserved = go_function(config, "(ksc *kubeletConfig) withDefaultReservedResources")
    assert '"memory":            fmt.Sprintf("%dMi", getMemoryMebibytesToReserve(ksc.MaxPods))' in reserved
    assert "SystemReserved =" not in config  # no cpu or memory kept for the system besides kubeReserved
    assert re.search(r'"memory\.available":\s*"100Mi"', config) and EVICTION_MEMORY_AVAILABLE == 100 * MEBIBYTE
    max_pods = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/kubelet/eni_max_pods.go")
    assert "return instanceInfo.DefaultMaxENIs*(instanceInfo.Ipv4AddressesPerInterface-1) + 2" in max_pods


def test_the_pods_per_node_come_from_nodeadm_s_instance_table():
    tag = mirrored_tag(EKS_AMI, EKS_AMI_TAG)
    lines = git(EKS_AMI, "show", f"{tag}:nodeadm/internal/kubelet/instance-info.jsonl").splitlines()
    table = {entry["instanceType"]: (entry["defaultMaxENIs"], entry["ipv4AddressesPerInterface"])
             for entry in map(json.loads, lines)}
    assert {kind: table.get(kind) for kind in ENIS_PER_INSTANCE_TYPE} == ENIS_PER_INSTANCE_TYPE
    assert set(CPU_MEMORY_PER_INSTANCE_TYPE) == set(GPUS_PER_INSTANCE_TYPE)
    assert set(ENIS_PER_INSTANCE_TYPE) == set(CPU_MEMORY_PER_INSTANCE_TYPE) | set(CPU_MEMORY_PER_SYSTEM_INSTANCE_TYPE)


def test_the_reservations_follow_the_formula():
    # 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% above: 60 + 10 + 10 + 470 on 192 cores.
    assert [kube_reserved_millicores(m) for m in (500, 1000, 2000, 4000, 8000, 192000)] == [30, 60, 70, 80, 90, 550]
    assert eks_max_pods("g6e.48xlarge") == 10 * 49 + 2
    assert kube_reserved_memory(492) == (11 * 492 + 255) * MEBIBYTE
    node = eks_node_allocatable("g6e.48xlarge")
    assert node.millicores == 192000 - 550
    assert node.memory == 1536 * GIBIBYTE - (11 * 492 + 255) * MEBIBYTE - 100 * MEBIBYTE
    assert eks_node_allocatable("x9.tiny") is None


def test_the_gpu_operator_operands_request_nothing_but_feature_discovery():
    """The per-node requests the program counts for the GPU Operator: its operands set none, its NFD worker some."""
    tag = mirrored_tag(GPU_OPERATOR, GPU_OPERATOR_VERSION)
    values = git(GPU_OPERATOR, "show", f"{tag}:deployments/gpu-operator/values.yaml")
    chart = yaml.safe_load(values)
    for operand in ("devicePlugin", "dcgmExporter", "gfd", "migManager", "validator", "nodeStatusExporter"):
        assert not chart[operand].get("resources"), operand
    nfd = yaml.safe_load(git(GPU_OPERATOR, "show", f"{tag}:deployments/gpu-operator/charts/node-feature-discovery/"
                                                   "values.yaml"))
    assert nfd["worker"]["resources"]["requests"] == {"cpu": "5m", "memory": "64Mi"}
    assert not (chart.get("node-feature-discovery", {}).get("worker", {}) or {}).get("resources")


@pytest.mark.parametrize("tag", KAI_RELEASES)
def test_kai_neither_caps_guarantees_at_the_cluster_nor_reclaims_from_a_queue_inside_its_own(tag):
    """What the warning says KAI does: every queue's fair share is min(quota, request) whatever the total, and a
    reclaim needs a victim over its quota or its fair share."""
    tag = mirrored_tag(KAI, tag)
    division = git(KAI, "show", f"{tag}:pkg/scheduler/plugins/proportion/resource_division/resource_division.go")
    deserved = go_function(division, "setDeservedResource")
    assert "amount := math.Min(deserved, resourceShare.GetRequestableShare())" in deserved
    assert "remainingAmount -= amount" in deserved and "totalResourceAmount" in deserved
    strategies = git(KAI, "show", f"{tag}:pkg/scheduler/plugins/proportion/reclaimable/strategies/strategies.go")
    assert "var strategies = []ReclaimStrategy{&MaintainFairShareStrategy{}, &GuaranteeDeservedQuotaStrategy{}}" \
        in strategies
    # The victim must stay over its quota (v0.16.3 moved the test into ReclaimeeExceedsDeservedQuota).
    guarantee = go_function(strategies, "(gdqs *GuaranteeDeservedQuotaStrategy) Reclaimable")
    if "ReclaimeeExceedsDeservedQuota(" in guarantee:
        guarantee = go_function(strategies, "ReclaimeeExceedsDeservedQuota")
        assert "return !reclaimeeRemainingShare.LessEqual(reclaimeeQueue.GetDeservedShare())" in guarantee
    else:
        assert re.search(r"if reclaimeeRemainingShare\.LessEqual\(reclaimeeQueue\.GetDeservedShare\(\)\) \{\s*"
                         r"return false", guarantee)


# --- EKS -------------------------------------------------------------------------------------------


def test_thirty_two_teams_on_one_g6e_48xlarge_are_warned():
    platform = load_platform(eks_site("g6e.48xlarge", 1, 32))
    cpu, memory = capacity_warnings(platform)
    node = eks_node_allocatable("g6e.48xlarge")
    free = node.millicores - GPU_NODE_PLATFORM_REQUESTS.millicores
    assert cpu.startswith(f"{CPU_KEY}: the teams whose pods run on pool gpu (team-0, team-1,")
    assert f"are guaranteed {32 * 16.05:,.2f} CPU in all, more than the {free / 1000:,.2f} CPU" in cpu
    assert "1 node(s) (cluster.eks.gpuNodeGroups[0].maxSize) of g6e.48xlarge" in cpu
    assert "vcluster.resourceQuota.cpu" in cpu and "nothing is reclaimed" in cpu
    assert "raise cluster.eks.gpuNodeGroups[0].maxSize" in cpu
    assert memory.startswith(f"{MEMORY_KEY}: ") and "vcluster.resourceQuota.memory" in memory


def test_a_site_that_fits_is_not_warned_and_two_nodes_count_twice():
    assert not capacity_warnings(load_platform(eks_site("g6e.48xlarge", 1, 8)))
    # 16 teams guarantee 256.8 cores: one node is not enough, two (maxSize) are.
    assert len(capacity_warnings(load_platform(eks_site("g6e.48xlarge", 1, 16)))) == 1
    assert not capacity_warnings(load_platform(eks_site("g6e.48xlarge", 2, 16)))
    # Without an autoscaler the group runs its one desired node, whatever its maxSize.
    [cpu] = capacity_warnings(load_platform(put(eks_site("g6e.48xlarge", 2, 16), "cluster.eks.autoscaler", "none")))
    assert "1 node(s) (cluster.eks.gpuNodeGroups[0].desiredSize)" in cpu


def test_unlimited_quotas_are_not_summed_and_written_quotas_count_as_written():
    config = eks_site("g6e.48xlarge", 1, 32)
    for index in range(32):
        put(config, f"teams[{index}].resources.cpu", {"quota": -1, "limit": -1})
        put(config, f"teams[{index}].resources.memory", {"quota": 10000, "limit": -1})
    platform = load_platform(config)
    assert not capacity_warnings(platform)
    [found] = pool_guarantees(platform)
    assert found.guaranteed == {"cpu": 0, "memory": 32 * 10000 * 1_000_000}
    assert len(found.unlimited["cpu"]) == 32 and found.unlimited["memory"] == ()


def test_teams_pinned_to_a_small_pool_are_judged_on_it():
    config = eks_site("g6e.48xlarge", 1, 3, cpu="10", memory="16Gi")
    config["cluster"]["eks"]["gpuNodeGroups"].append(
        {"name": "small", "instanceTypes": ["g4dn.xlarge"], "minSize": 1, "desiredSize": 1, "maxSize": 1})
    put(config, "teams[0].isolation", {"nodePool": "small"})
    platform = load_platform(config)
    [cpu] = [w for w in capacity_warnings(platform) if w.startswith(CPU_KEY)]
    assert "run on pool small (team-0)" in cpu and "cluster.eks.gpuNodeGroups[1].maxSize" in cpu
    rows = {found.pools: found.teams for found in pool_guarantees(platform)}
    assert rows[("gpu", "small")] == ("team-0", "team-1", "team-2")


def test_a_pool_of_an_unknown_instance_type_gets_a_note():
    platform = load_platform(put(eks_site("g6e.48xlarge", 1, 2), "cluster.eks.gpuNodeGroups[0].instanceTypes",
                                 ["g7.48xlarge"]))
    assert not capacity_warnings(platform)
    [note] = capacity_notes(platform)
    assert "guaranteed 32.10 CPU and 128.1 GiB" in note and "instanceTypes has a type the program's tables lack" in note


def test_the_committed_stacks():
    """dev: a box of unstated size, a note with the totals; the eks fixture: one g4dn.xlarge under three teams of
    16 cores and 64Gi, warned (a finding about the committed stacks, not changed here)."""
    dev = load_platform(dev_config())
    assert not capacity_warnings(dev)
    [note] = capacity_notes(dev)
    assert "guaranteed 48.15 CPU and 192.2 GiB" in note and "cluster.microk8s.cpu" in note
    eks = load_platform(eks_config())
    assert [w.split(":", 1)[0] for w in capacity_warnings(eks)] == [CPU_KEY, MEMORY_KEY]


# --- MicroK8s and existing clusters: stated sizes --------------------------------------------------


def box(cpu: str, memory: str) -> dict:
    return put(put(dev_config(), "cluster.microk8s.cpu", cpu), "cluster.microk8s.memory", memory)


def test_team_guarantees_past_a_microk8s_box_of_stated_size_warn():
    platform = load_platform(box("32", "128Gi"))
    cpu, memory = capacity_warnings(platform)
    assert "run on pool microk8s" in cpu and "(cluster.microk8s.cpu and cluster.microk8s.memory as stated, less the " \
        "3 vCluster control planes'" in cpu
    assert "guaranteed 48.15 CPU in all" in cpu and "vcluster.resourceQuota.memory" in memory
    assert not capacity_warnings(load_platform(box("64", "256Gi")))
    assert not capacity_notes(load_platform(box("64", "256Gi")))


def test_the_control_planes_on_the_box_come_first():
    """A box exactly the size of the guarantees cannot hold them: the control planes run there too."""
    platform = load_platform(dev_config())
    [found] = pool_guarantees(platform)
    planes = sum(control_plane_budget(team.vcluster).millicores for team in platform.teams)
    assert planes > 0
    exact = f"{found.guaranteed['cpu'] + 5}m"  # plus the feature-discovery worker, not the control planes
    assert [w.split(":", 1)[0] for w in capacity_warnings(load_platform(box(exact, "1Ti")))] == [CPU_KEY]
    roomy = f"{found.guaranteed['cpu'] + 5 + planes}m"
    assert not capacity_warnings(load_platform(box(roomy, "1Ti")))


def test_an_existing_cluster_states_its_allocatable():
    config = put(put(dev_config(), "cluster", {"kind": "kubeconfig", "kubeconfig": {"cpu": 40, "memory": "1Ti"}}),
                 "gpuOperator.mode", "install")
    platform = load_platform(config, secrets_set={"kubeconfig"})
    [cpu] = capacity_warnings(platform)
    assert "run on the cluster's nodes" in cpu and "(cluster.kubeconfig.cpu and cluster.kubeconfig.memory as stated)" \
        in cpu and "40.00 CPU" in cpu
    unstated = put(put(dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install")
    [note] = capacity_notes(load_platform(unstated, secrets_set={"kubeconfig"}))
    assert "State cluster.kubeconfig.cpu and cluster.kubeconfig.memory" in note


@pytest.mark.parametrize("key, value, problem", [
    ("cluster.microk8s.cpu", "0", "states no CPU at all"),
    ("cluster.microk8s.memory", "256", "is 256 bytes, less than 1Gi"),
    ("cluster.microk8s.memory", "lots", "is not a Kubernetes quantity"),
])
def test_a_stated_size_that_cannot_be_one_is_refused(key, value, problem):
    with pytest.raises(ConfigError) as raised:
        load_platform(put(dev_config(), key, value))
    [issue] = [issue for issue in raised.value.issues if issue.key == key]
    assert problem in issue.problem and str(value) in str(issue.value) and issue.fix


# --- the plan's summary ----------------------------------------------------------------------------


def test_the_summary_shows_each_pool_s_guarantees_against_its_allocatable():
    config = eks_site("g6e.48xlarge", 1, 32)
    summary = render_summary(plan.build_plan(run(config), "test"))
    section = summary.split("## CPU and memory guarantees", 1)[1].split("\n## ", 1)[0]
    free = eks_node_allocatable("g6e.48xlarge").millicores - GPU_NODE_PLATFORM_REQUESTS.millicores
    [row] = [line for line in section.splitlines() if line.startswith("| `gpu`")]
    assert f"{32 * 16.05:,.2f} CPU of {free / 1000:,.2f} CPU: **over**" in row
    assert "GiB: **over**" in row  # 32 x 64Gi of memory do not fit in 1.5 TiB either
    fits = render_summary(plan.build_plan(run(eks_site("g6e.48xlarge", 1, 8)), "test"))
    assert "**over**" not in fits.split("## CPU and memory guarantees", 1)[1].split("\n## ", 1)[0]
