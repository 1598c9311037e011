"""What `cluster.eks.autoscaler: cluster-autoscaler` relies on, read upstream: the Cluster Autoscaler a site runs, and
KAI's node-scale-adjuster at every accepted release, which the program leaves off; and what the program sets.

A managed node group's Auto Scaling group changes size only when an autoscaler asks: without one, each group runs its
desiredSize. With the site's Cluster Autoscaler, `pulumi up` must leave the size alone, the autoscaler must know a new
GPU node for one before its GPUs are advertised, and must know each group's labels and taint when it has no node (the
teams select pools by label and tolerate the GPU taint)."""

from __future__ import annotations

import re

import yaml

from config.hosts import AUTOSCALER_GPU_LABEL, AUTOSCALER_NODE_RESOURCE_TAG
from tests.conftest import ACCEPTED_TAGS, ACCEPTED_VCLUSTER_TAGS, MIRRORED_TAGS, eks_config, git, go_function, run

AUTOSCALER = "kubernetes/autoscaler"
KAI = "kai-scheduler/KAI-Scheduler"
VCLUSTER = "loft-sh/vcluster"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
AWS_PROVIDER = "cluster-autoscaler/cloudprovider/aws"


def autoscaled_site() -> dict:
    config = eks_config()
    config["gpu-tenancy:cluster"]["eks"]["autoscaler"] = "cluster-autoscaler"
    return config


def node_groups(program) -> dict:
    return {group.name: group.inputs for group in program.of_type("eks:index:ManagedNodeGroup")}


def kai_values(program) -> dict:
    return next(release.inputs["values"] for release in program.of_type("kubernetes:helm.sh/v3:Release")
                if release.inputs["name"] == "kai-scheduler")


# --- upstream ---------------------------------------------------------------------------------------


def test_the_autoscaler_takes_a_node_with_its_gpu_label_for_a_gpu_node_before_the_gpus_appear():
    for tag in MIRRORED_TAGS[AUTOSCALER]:
        provider = git(AUTOSCALER, "show", f"{tag}:{AWS_PROVIDER}/aws_cloud_provider.go")
        [label] = re.findall(r'GPULabel\s*=\s*"([^"]+)"', provider)
        assert label == AUTOSCALER_GPU_LABEL, tag
        has_gpu = go_function(git(AUTOSCALER, "show", f"{tag}:cluster-autoscaler/utils/gpu/gpu.go"), "NodeHasGpu")
        # The label alone makes a GPU node; allocatable GPUs are only the other way.
        assert re.search(r"_, hasGpuLabel := node\.Labels\[GPULabel\]\s*if hasGpuLabel \{\s*return true", has_gpu), tag


def test_the_autoscaler_learns_a_managed_groups_labels_and_taints_from_eks_for_an_empty_group():
    """A group at zero nodes is known by a template node: from its instance type, its Auto Scaling group's tags and,
    for a managed node group, EKS' DescribeNodegroup, which returns the labels and taints the program sets on it."""
    for tag in MIRRORED_TAGS[AUTOSCALER]:
        manager = git(AUTOSCALER, "show", f"{tag}:{AWS_PROVIDER}/aws_manager.go")
        template = go_function(manager, "(m *AwsManager) buildNodeFromTemplate")
        assert "gpu.ResourceNvidiaGPU" in template and "template.InstanceType.GPU" in template, tag
        assert "getManagedNodegroupLabels(nodegroupName, clusterName)" in template, tag
        assert "getManagedNodegroupTaints(nodegroupName, clusterName)" in template, tag
        # ... and the resources the group's own EKS tags state, over the instance type's.
        assert "extractAllocatableResourcesFromTags(mngTags)" in template, tag
        tags = go_function(manager, "extractAllocatableResourcesFromTags")
        assert f'strings.Split(k, "{AUTOSCALER_NODE_RESOURCE_TAG}")' in tags and "resource.ParseQuantity(v)" in tags, tag


def test_a_teams_bare_pod_keeps_its_node_from_the_autoscalers_scale_down():
    """What the docs tell a site of the autoscaler (config/load_eks.py): vCluster marks every synced pod without a
    controller (a bare pod, as KAI's own examples run) not safe to evict, and keeps a value the tenant wrote; the
    autoscaler never removes a node holding such a pod."""
    for tag in ACCEPTED_VCLUSTER_TAGS:
        translator = git(VCLUSTER, "show", f"{tag}:pkg/controllers/resources/pods/translate/translator.go")
        assert f'ClusterAutoScalerAnnotation          = "{SAFE_TO_EVICT}"' in translator, tag
        assert re.search(r"if _, ok := pPod\.Annotations\[ClusterAutoScalerAnnotation\]; !ok \{\s*"
                         r"// check if the vPod would be evictable\s*controller := metav1\.GetControllerOf\(vPod\)\s*"
                         r"isEvictable := controller != nil\s*"
                         r"pPod\.Annotations\[ClusterAutoScalerAnnotation\] = strconv\.FormatBool\(isEvictable\)",
                         translator), tag
    for tag in MIRRORED_TAGS[AUTOSCALER]:
        drain = git(AUTOSCALER, "show", f"{tag}:cluster-autoscaler/utils/drain/drain.go")
        assert f'PodSafeToEvictKey = "{SAFE_TO_EVICT}"' in drain, tag
        assert 'pod.GetAnnotations()[PodSafeToEvictKey] == "false"' in go_function(drain, "HasNotSafeToEvictAnnotation")
        rule = git(AUTOSCALER, "show", f"{tag}:cluster-autoscaler/simulator/drainability/rules/notsafetoevict/rule.go")
        assert re.search(r"if drain\.HasNotSafeToEvictAnnotation\(pod\) \{\s*return drainability\.NewBlockedStatus",
                         rule), tag


def test_kais_node_scale_adjuster_would_hold_whole_gpus_outside_every_queue_for_a_team_over_its_limit():
    """Why the program leaves ``global.clusterAutoscaling`` off: the adjuster takes every pending fractional pod KAI
    marked unschedulable, whatever the reason (KAI marks a pod of a queue over its limit so too), and stands in for it
    with a pod in its own namespace asking for whole GPUs, placed by the default scheduler (no schedulerName), with
    the pod's node selector and tolerations. On a free GPU that pod holds the card outside every queue, while the
    team's own pod waits."""
    for tag in ACCEPTED_TAGS[KAI]:
        values = yaml.safe_load(git(KAI, "show", f"{tag}:deployments/kai-scheduler/values.yaml"))
        assert values["global"]["clusterAutoscaling"] is False, tag
        adjuster = git(KAI, "show", f"{tag}:pkg/nodescaleadjuster/scale_adjuster/scale_adjuster.go")
        unschedulable = go_function(adjuster, "isPodUnschedulable")
        assert "condition.Reason == corev1.PodReasonUnschedulable" in unschedulable and "Message" not in unschedulable
        placeholder = go_function(git(KAI, "show", f"{tag}:pkg/nodescaleadjuster/scaler/scaling_pod.go"),
                                  "createScalingPodSpec")
        assert "constants.NvidiaGpuResource" in placeholder and "SchedulerName" not in placeholder, tag
        assert "Tolerations:   unschedulablePod.Spec.Tolerations" in placeholder, tag
        status = git(KAI, "show", f"{tag}:pkg/scheduler/cache/status_updater/default_status_updater.go")
        # Every pending pod of a job KAI did not place, job-level (queue) fit errors included, gets that condition.
        recorded = go_function(status, "(su *defaultStatusUpdater) recordUnschedulablePodsEvents")
        assert "job.JobFitErrors" in recorded and "su.markTaskUnschedulable(" in recorded, tag
        assert "Reason:  v1.PodReasonUnschedulable" in go_function(status, "(su *defaultStatusUpdater) markTaskUnschedulable")


# --- what the program sets ----------------------------------------------------------------------------


def test_with_the_sites_autoscaler_pulumi_up_leaves_each_groups_size_to_it():
    groups = node_groups(run(autoscaled_site()))
    assert groups and all(group["ignoreScalingChanges"] is True for group in groups.values())
    # The sizes are still the group's first ones and the autoscaler's bounds.
    assert groups["host-gpu-gpu"]["scalingConfig"] == {"minSize": 1, "desiredSize": 1, "maxSize": 1}


def test_with_the_sites_autoscaler_gpu_nodes_carry_its_gpu_label_and_kai_keeps_its_adjuster_off():
    program = run(autoscaled_site())
    groups = node_groups(program)
    assert groups["host-gpu-gpu"]["labels"][AUTOSCALER_GPU_LABEL] == "nvidia-t4"
    assert AUTOSCALER_GPU_LABEL not in groups["host-system"].get("labels", {})
    assert "clusterAutoscaling" not in kai_values(program)["global"]


def test_an_empty_group_tells_the_autoscaler_the_slices_and_replicas_its_nodes_will_advertise():
    """The autoscaler takes an empty group's GPUs from its instance type: 8 whole GPUs for a p4d.24xlarge, whose nodes
    advertise 56 1g.5gb slices and no whole GPU once split, and 4 for a g4dn.12xlarge, whose time-sliced nodes
    advertise each card's replicas. Without the tags, pods asking for slices never get a node."""
    config = autoscaled_site()
    config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"] += [
        {"name": "a100", "instanceTypes": ["p4d.24xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2,
         "migConfig": "all-1g.5gb"},
        {"name": "sliced", "instanceTypes": ["g4dn.12xlarge"], "minSize": 0, "desiredSize": 0, "maxSize": 2,
         "sharingProfile": "time-sliced"}]
    config["gpu-tenancy:kaiScheduler"]["gpuSharing"] = False
    program = run(config)
    groups = node_groups(program)
    sharing = program.outputs["timeSlicing"]
    [config_map] = [found for found in program.of_type("kubernetes:core/v1:ConfigMap")
                    if found.inputs["metadata"]["name"] == sharing["configMap"]]
    profile = yaml.safe_load(config_map.inputs["data"][sharing["profileKeys"]["time-sliced"]])
    [replicas] = [entry["replicas"] for entry in profile["sharing"]["timeSlicing"]["resources"]]
    assert groups["host-gpu-a100"]["tags"] == {f"{AUTOSCALER_NODE_RESOURCE_TAG}nvidia.com/gpu": "0",
                                               f"{AUTOSCALER_NODE_RESOURCE_TAG}nvidia.com/mig-1g.5gb": "56"}
    assert groups["host-gpu-sliced"]["tags"] == {f"{AUTOSCALER_NODE_RESOURCE_TAG}nvidia.com/gpu": str(4 * replicas)}
    # A group whose nodes advertise their instance type's GPUs needs no tag; nor does any group without an autoscaler.
    assert "tags" not in groups["host-gpu-gpu"] and "tags" not in groups["host-system"]
    config["gpu-tenancy:cluster"]["eks"]["autoscaler"] = "none"
    assert all("tags" not in group for group in node_groups(run(config)).values())


def test_without_an_autoscaler_the_groups_keep_their_desired_size_and_nothing_is_added(eks_run):
    groups = node_groups(eks_run)
    assert all("ignoreScalingChanges" not in group for group in groups.values())
    assert all(AUTOSCALER_GPU_LABEL not in group.get("labels", {}) for group in groups.values())
