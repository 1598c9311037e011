"""Whether the nodes the platform's own pods land on hold them: the config-time warning (config/system_pool_capacity.py),
the ``system-pool`` rule of the deployability check (tools/deployability/system_pool.py) and the upstream numbers both
rest on (config/system_pods.py, config/node_allocatable.py)."""

from __future__ import annotations

import dataclasses
import re
import tempfile

import pytest

from config import load_platform
from config.node_allocatable import GPU_NODE_PLATFORM_PODS, MEBIBYTE, CpuMemory, eks_max_pods, eks_node_allocatable
from config.system_pods import (
    EKS_NODE_PODS, KAI_ADMISSION_REPLICAS, KAI_OPERATOR_SERVICES, KUBELET_DEFAULT_MAX_PODS, unrendered_pods,
)
from config.system_pool_capacity import shortfall, system_nodes, system_nodes_from_output, system_nodes_output
from config.tenant_budget import control_plane_budget
from config.versions import KAI_RELEASES
from tests.config_spec import dev_config, eks_config, put
from tests.conftest import MIRRORED_TAGS, git, go_function, mirrored_tag, real_charts_or_skip, run
from tests.node_pid_readers import EKS_AMI, EKS_AMI_TAG, MICROK8S
from tools.charts.render import render_plan_releases
from tools.deployability import check as deployability
from tools.deployability.findings import ERROR, WARNING
from tools.deployability.inputs import HOST_KIND_FACTS, K8sObject, Site, helm_kube_version, site_from_plan
from tools.deployability.system_pool import RULE, check_system_pool, pod_requests
from tools.plan.document import build_plan

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


def test_a_system_instance_type_the_tables_lack_is_not_judged_and_the_reviewer_is_told():
    unknown = {"instanceTypes": ["x9.tiny"], "minSize": 1, "desiredSize": 1, "maxSize": 1}
    platform = load_platform(_many_teams_on_eks(12, unknown))
    assert system_nodes(platform.cluster) is None and not system_warnings(platform)
    # A trial site's t3.small passed both checks without a word.
    [note] = [note for note in platform.notes if note.startswith(f"{SYSTEM_KEY}.instanceTypes")]
    assert "x9.tiny not in the program's instance-type tables" in note and f"{SYSTEM_KEY}.desiredSize" in note
    assert not [note for note in load_platform(eks_config()).notes if note.startswith(f"{SYSTEM_KEY}.instanceTypes")]


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


# --- the deployability rule, on objects built by hand -----------------------------------------------------------


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _workload(kind: str, name: str, cpu: str, memory: str, replicas=None, tolerations=(), init=None) -> K8sObject:
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
            "tolerations": list(tolerations)}
    if init:
        spec["initContainers"] = [{"name": "i", "resources": {"requests": init}}]
    manifest = {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": "ns"},
                "spec": {"template": {"spec": spec}, **({"replicas": replicas} if replicas is not None else {})}}
    return K8sObject(manifest, "test")


def _eks_site(instance_type: str, desired: int) -> Site:
    config = put(eks_config(), "cluster.eks.systemNodeGroup",
                 {"instanceTypes": [instance_type], "minSize": 1, "desiredSize": desired, "maxSize": 3})
    plan = build_plan(run(config), "test")
    return site_from_plan(plan)


def test_an_init_container_larger_than_the_containers_sets_the_pods_requests():
    spec = _workload("Deployment", "d", "100m", "64Mi", init={"cpu": "1", "memory": "32Mi"}).manifest
    assert pod_requests(spec["spec"]["template"]["spec"]) == CpuMemory(1000, 64 * MEBIBYTE)


def test_a_sidecar_adds_to_the_containers_and_to_the_init_containers_started_after_it():
    spec = {"initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}},
                               {"name": "setup", "resources": {"requests": {"cpu": "1", "memory": "8Mi"}}}],
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]}
    assert pod_requests(spec) == CpuMemory(1010, 96 * MEBIBYTE)


def test_a_site_whose_system_nodes_do_not_hold_the_platform_is_refused():
    site = _eks_site("t3.medium", 1)
    assert site.system_nodes.max_pods == eks_max_pods("t3.medium") == 17
    # 3 replicas of a 500m controller and a 700m one surely land there; a GPU-tolerating Deployment may land on the
    # GPU node and is not counted; a DaemonSet tolerating it runs on every node, the system node too.
    objects = [_workload("Deployment", "controller", "500m", "128Mi", replicas=3),
               _workload("StatefulSet", "plane", "700m", "256Mi"),
               _workload("Deployment", "small", "1m", "1Mi", replicas=8),
               _workload("Deployment", "anywhere", "4", "1Gi", tolerations=[GPU_TOLERATION]),
               _workload("DaemonSet", "agent", "50m", "32Mi", tolerations=[GPU_TOLERATION]),
               _workload("Job", "probe", "10m", "16Mi"),
               K8sObject({"apiVersion": "v1", "kind": "Pod", "metadata": {
                   "name": "chart-test", "namespace": "ns", "annotations": {"helm.sh/hook": "test"}},
                   "spec": {"containers": [{"name": "t", "resources": {"requests": {"cpu": "8"}}}]}}, "test")]
    [finding] = check_system_pool(objects, site, {})
    # No KAI release among these objects: only EKS's own add-ons join them.
    eks = {name: entry for name, entry in unrendered_pods(eks=True).items() if not name.startswith("KAI ")}
    need = 1500 + 700 + 8 + 10 + sum(requests.millicores * replicas for replicas, requests in eks.values())
    room = site.system_nodes.allocatable.millicores - 50
    assert finding.severity == ERROR and finding.rule == RULE
    assert f"{need / 1000:.2f} CPU" in finding.message and f"{room / 1000:.2f} CPU" in finding.message
    assert "1 t3.medium node(s) (its desiredSize)" in finding.message
    assert f"raise {SYSTEM_KEY}.desiredSize" in finding.fix and f"{SYSTEM_KEY}.instanceTypes" in finding.fix
    assert "anywhere" not in finding.message and "chart-test" not in finding.message
    assert "Job ns/probe" in finding.message
    pods = 3 + 1 + 8 + 1 + sum(replicas for replicas, _ in eks.values())
    per_node = len(EKS_NODE_PODS) + 1
    assert f"{pods} pods, while each node runs at most 17 pods, {per_node} of them its per-node pods, leaving " \
           f"{17 - per_node} in all" in finding.message
    # On three m6i.2xlarge the same pods fit.
    assert not check_system_pool(objects, _eks_site("m6i.2xlarge", 3), {})


def test_the_kubeconfig_site_states_no_nodes_and_is_not_checked():
    site = Site("test", "kubeconfig", HOST_KIND_FACTS["kubeconfig"], "1.33", None)
    assert not check_system_pool([_workload("Deployment", "d", "100", "1Ti", replicas=500)], site, {})


def test_the_microk8s_node_counts_the_teams_pods_too():
    plan = build_plan(run(dev_config()), "test")
    site = site_from_plan(plan)
    assert site.system_nodes.max_pods == KUBELET_DEFAULT_MAX_PODS
    few = {f"vcluster-team-{n}": {"pods": 20} for n in range(3)}
    assert not check_system_pool([], site, few)
    [warning] = check_system_pool([], site, {**few, "vcluster-team-x": {"pods": 100}})
    # 3 x 20 and 100 pods, and each of the four teams' DNS pod.
    assert warning.severity == WARNING and "whose quotas allow 164" in warning.message
    assert "vcluster.resourceQuota.pods" in warning.fix
    crowded = [_workload("Deployment", "d", "10m", "16Mi", replicas=100)]
    [error] = check_system_pool(crowded, site, few)
    assert error.severity == ERROR and "while each node runs at most 110 pods" in error.message
    assert error.fix.startswith("run fewer teams on the box")
    # A box that states its allocatable has its requests counted too (cluster.microk8s.cpu and .memory).
    stated = dataclasses.replace(site, system_nodes=dataclasses.replace(site.system_nodes,
                                                                        allocatable=CpuMemory(2000, 8 * 2 ** 30)))
    [error] = check_system_pool([_workload("Deployment", "d", "1", "16Mi", replicas=3)], stated, few)
    assert "3.00 CPU and 0.0 GiB of requests, while the nodes give pods 2.00 CPU" in error.message


def test_a_generated_site_with_many_teams_does_not_fit_the_committed_system_group():
    config = _many_teams_on_eks(12, {"instanceTypes": ["m6i.large"], "minSize": 1, "desiredSize": 2, "maxSize": 3})
    put(config, "organization.resources.gpu.quota", 2)
    plan = build_plan(run(config), "test")
    cache = real_charts_or_skip(plan)
    with tempfile.TemporaryDirectory() as out:
        rendered = render_plan_releases(plan["resources"], cache, out, kube_version=helm_kube_version(plan))
        _, _, found = deployability.check_plan(plan, rendered, out, cache)
    [finding] = [f for f in found if f.rule == RULE]
    assert finding.severity == ERROR and "2 m6i.large node(s)" in finding.message
    assert re.search(r"do not fit: \d+\.\d\d CPU and [\d.]+ GiB of requests, while the nodes give pods 3\.54 CPU",
                     finding.message), finding.message
    assert f"raise {SYSTEM_KEY}.desiredSize" in finding.fix
    assert not system_warnings(load_platform(config)), "config alone counts less than the charts render"


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


@pytest.mark.parametrize("need, room, told", [
    (CpuMemory(1000, int(3.32 * 2 ** 30)), CpuMemory(2000, int(3.28 * 2 ** 30)), "3400 MiB, more than the 3359 MiB"),
    (CpuMemory(1000, 5 * 2 ** 30), CpuMemory(2000, 3 * 2 ** 30), "5.0 GiB, more than the 3.0 GiB"),
    (CpuMemory(1804, 0), CpuMemory(1800, 0), "1804m CPU, more than the 1800m CPU"),
    (CpuMemory(2500, 0), CpuMemory(1800, 0), "2.50 CPU, more than the 1.80 CPU")])
def test_a_shortfall_is_told_in_figures_that_differ(need, room, told):
    # A trial site was told its pods "request 3.3 GiB, more than the 3.3 GiB".
    assert shortfall(need, room) == [told]
