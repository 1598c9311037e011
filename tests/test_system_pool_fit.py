"""Whether the nodes the platform's own pods land on hold them: the config-time warning (config/system_pool_capacity.py)
and the upstream numbers it rests on (config/system_pods.py, config/node_allocatable.py)."""

from __future__ import annotations

import re

import pytest

from config import load_platform
from config.node_allocatable import GPU_NODE_PLATFORM_PODS, MEBIBYTE, CpuMemory, eks_max_pods, eks_node_allocatable
from config.system_pods import (
    EKS_NODE_PODS, KAI_ADMISSION_REPLICAS, KAI_OPERATOR_SERVICES, KUBELET_DEFAULT_MAX_PODS, unrendered_pods,
)
from config.system_pool_capacity import system_nodes, system_nodes_from_output, system_nodes_output
from config.tenant_budget import control_plane_budget
from config.versions import KAI_RELEASES
from tests.config_spec import dev_config, eks_config, put
from tests.conftest import MIRRORED_TAGS, git, go_function, mirrored_tag
from tests.node_pid_readers import EKS_AMI, EKS_AMI_TAG, MICROK8S

KAI = "kai-scheduler/KAI-Scheduler"
SYSTEM_KEY = "cluster.eks.systemNodeGroup"


def _many_teams_on_eks(teams: int, system: dict) -> dict:
    config = put(eks_config(), "cluster.eks.systemNodeGroup", system)
    config["teams"] = [{"name": f"team-{n}", "resources": {"gpu": {"quota": round(1 / teams, 2) - 0.01, "limit": 1}}}
                       for n in range(teams)]
    return config


def system_warnings(platform) -> list[str]:
    return [w for w in platform.warnings if w.startswith(SYSTEM_KEY)]


# --- the config-time warning ----------------------------------------------------------------------------------


def test_the_control_planes_and_kai_must_fit_on_the_system_node_groups_running_nodes():
    # The control planes carry no GPU toleration, so they run on the system group, which without an autoscaler runs
    # desiredSize nodes: twelve of them (200m and 256Mi each, the chart's requests), KAI's services and EKS's add-ons
    # do not fit on one t3.medium.
    small = {"instanceTypes": ["t3.medium"], "minSize": 1, "desiredSize": 1, "maxSize": 3}
    platform = load_platform(_many_teams_on_eks(12, small))
    others = sum(requests.millicores * replicas for replicas, requests in unrendered_pods(eks=True).values())
    need = sum(control_plane_budget(team.vcluster).millicores for team in platform.teams) + others
    node = system_nodes(platform.cluster).allocatable - GPU_NODE_PLATFORM_PODS["node-feature-discovery worker"]
    assert need > node.millicores
    [warning] = system_warnings(platform)
    assert "12 vCluster control planes" in warning and f"{need / 1000:.2f} CPU" in warning
    assert f"{node.millicores / 1000:.2f} CPU" in warning and "desiredSize" in warning and "t3.medium" in warning
    assert f"Raise {SYSTEM_KEY}.desiredSize" in warning
    assert not system_warnings(load_platform(_many_teams_on_eks(12, {**small, "desiredSize": 2})))
    autoscaled = put(_many_teams_on_eks(12, small), "cluster.eks.autoscaler", "cluster-autoscaler")
    assert not system_warnings(load_platform(autoscaled))  # it may grow the group to maxSize
    assert not system_warnings(load_platform(eks_config()))


def test_the_pods_per_node_limit_is_counted_where_cpu_and_memory_still_fit():
    # Control planes of 10m and 64Mi: 24 of them, KAI's 8 pods and EKS's 4 need 36 pods, while a t3.large runs at most
    # 3 x (12 - 1) + 2 = 35, four of them its own per-node pods.
    config = put(_many_teams_on_eks(24, {"instanceTypes": ["t3.large"], "minSize": 1, "desiredSize": 1,
                                         "maxSize": 3}),
                 "vcluster.controlPlaneResources", {"requests": {"cpu": "10m", "memory": "64Mi"}})
    [warning] = system_warnings(load_platform(config))
    assert eks_max_pods("t3.large") == 35
    assert "36 pods, more than the 31 pods (each node runs at most 35, 4 of them its own per-node pods)" in warning
    assert "CPU" not in warning.split(" give pods")[0] and "GiB" not in warning.split(" give pods")[0]
    assert not system_warnings(load_platform(put(config, "cluster.eks.systemNodeGroup.desiredSize", 2)))


def test_a_system_instance_type_the_tables_lack_is_not_judged():
    unknown = {"instanceTypes": ["x9.tiny"], "minSize": 1, "desiredSize": 1, "maxSize": 1}
    assert system_nodes(load_platform(_many_teams_on_eks(12, unknown)).cluster) is None
    assert not system_warnings(load_platform(_many_teams_on_eks(12, unknown)))


def test_the_host_registers_its_system_nodes_for_the_check():
    eks = load_platform(eks_config()).cluster
    nodes = system_nodes(eks)
    assert system_nodes_from_output(system_nodes_output(eks)) == nodes
    assert (nodes.nodes, nodes.max_pods, nodes.node_pods) == (2, eks_max_pods("m6i.large"), len(EKS_NODE_PODS))
    assert nodes.allocatable == eks_node_allocatable("m6i.large") - sum(EKS_NODE_PODS.values(), CpuMemory(0, 0))
    box = system_nodes(load_platform(dev_config()).cluster)
    assert (box.nodes, box.max_pods, box.allocatable, box.size_key) == (1, 110, None, None)
    stated = put(put(dev_config(), "cluster.microk8s.cpu", "32"), "cluster.microk8s.memory", "128Gi")
    assert system_nodes(load_platform(stated).cluster).allocatable == CpuMemory(32000, 128 * 1024 * MEBIBYTE)


# --- the upstream numbers ---------------------------------------------------------------------------------------


_REQUEST = re.compile(r'Requests\[v1\.Resource(CPU|Memory)\] = resource\.MustParse\("([^"]+)"\)')
_SHARED_DEFAULTS = re.compile(r"\.(Service\.SetDefaultsWhereNeeded\(|Service\.Resources\.SetDefaultsWhereNeeded\(|"
                              r"Resources\.SetDefaultsWhereNeeded\(\))")
KAI_FILES = {"scheduler": "scheduler/scheduler.go", "binder": "binder/binder.go",
             "admission": "admission/admission.go", "pod-grouper": "pod_grouper/pod_grouper.go",
             "podgroup-controller": "pod_group_controller/pod_group_controller.go",
             "queue-controller": "queue_controller/queue_controller.go",
             "node-scale-adjuster": "node_scale_adjuster/node_scale_adjuster.go"}


def _effective_requests(body: str, shared: dict[str, str]) -> dict[str, str]:
    """The requests a defaulting function leaves, in the order it runs: each sets a resource only while unset, and a
    call of the shared Service or Resources defaults sets the shared values of what is still unset."""
    found: dict[str, str] = {}
    events = sorted([(m.start(), "shared", None) for m in _SHARED_DEFAULTS.finditer(body)]
                    + [(m.start(), m.group(1), m.group(2)) for m in _REQUEST.finditer(body)])
    for _, what, value in events:
        if what == "shared":
            for resource, amount in shared.items():
                found.setdefault(resource, amount)
        else:
            found.setdefault(what, value)
    return found


@pytest.mark.parametrize("tag", KAI_RELEASES)
def test_kai_s_operator_made_services_request_what_the_program_counts(tag):
    tag = mirrored_tag(KAI, tag)
    shared = dict(_REQUEST.findall(go_function(git(KAI, "show", f"{tag}:pkg/apis/kai/v1/common/resources.go"),
                                               "(r *Resources) SetDefaultsWhereNeeded")))
    service = git(KAI, "show", f"{tag}:pkg/apis/kai/v1/common/service.go")
    assert "s.Enabled = SetDefault(s.Enabled, ptr.To(true))" in service  # each service runs unless turned off
    assert "s.Resources.SetDefaultsWhereNeeded()" in go_function(service, "(s *Service) SetDefaultsWhereNeeded")
    for name, path in KAI_FILES.items():
        source = git(KAI, "show", f"{tag}:pkg/apis/kai/v1/{path}")
        # The service's own defaulting function: the one that takes the global VPA settings.
        body = source[re.search(r"\) SetDefaultsWhereNeeded\([^)]*globalVPA", source).start():]
        body = body[:body.index("\n}\n")]
        requests = _effective_requests(body, shared)
        replicas, counted = KAI_OPERATOR_SERVICES[name]
        assert counted == CpuMemory(int(requests["CPU"].rstrip("m")), int(requests["Memory"].rstrip("Mi")) * MEBIBYTE), \
            name
        if name != "node-scale-adjuster":
            assert "Replicas = common.SetDefault(" in body and "ptr.Deref(replicaCount, 1)" in body, name
        assert replicas == (KAI_ADMISSION_REPLICAS if name == "admission" else 1)


def test_the_kubelets_default_of_110_pods_holds_on_microk8s_and_is_nodeadm_s_fallback():
    source = git(EKS_AMI, "show", f"{mirrored_tag(EKS_AMI, EKS_AMI_TAG)}:nodeadm/internal/kubelet/eni_max_pods.go")
    assert re.search(r"// default value from kubelet\n.*\nconst defaultMaxPods = (\d+)", source).group(1) \
        == str(KUBELET_DEFAULT_MAX_PODS)
    for tag in MIRRORED_TAGS[MICROK8S]:
        args = git(MICROK8S, "show", f"{mirrored_tag(MICROK8S, tag)}:microk8s-resources/default-args/kubelet")
        assert "--max-pods" not in args, tag
