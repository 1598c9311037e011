"""Notes for whoever reviews a site's plan: nothing wrong, but maybe not what was meant, or what the site must do
itself. Plain data in, text out."""

from __future__ import annotations

from typing import Optional

from config import versions
from config.api_endpoint import api_endpoint_notes
from config.audit_trail import audit_trail_notes
from config.backing_store import control_plane_shape
from config.capacity import GPUS_PER_INSTANCE_TYPE, known_gpu_capacity
from config.control_plane_egress import named_issuer_notes
from config.cpu_memory_capacity import cpu_memory_notes
from config.eks_support import eks_support_notes
from config.gpu_pool_pods import gpu_pool_pod_notes
from config.image_registries import unlisted_registries_notes
from config.mig_slices import unused_mig_slices
from config.hosts import MICROK8S_STORAGE_CLASS
from config.model import Cluster, Platform
from config.model_host import DEFAULT_SYSTEM_MEMORY_RESERVE, PID_EVICTION_THRESHOLD, SYSTEM_PID_RESERVE
from config.sharing import TIME_SLICED

# The control plane's volume claim values (chart values under vcluster.extraValues).
CONTROL_PLANE_CLAIM = ("controlPlane", "statefulSet", "persistence", "volumeClaim")
from config.synced_data import datastore_notes
from config.system_pool_capacity import system_pool_notes
from config.vcluster_images import dig

# How long an API server's admission plugin makes a request wait for it to be ready (k8s.io/apiserver
# pkg/admission/handler.go timeToWaitForReady): the policy plugin is ready once it has compiled every policy.
ADMISSION_READY_WAIT_SECONDS = 10
# The CPU the real plugin of Kubernetes 1.36 took to be ready, per team of a 30-team site (the site's pod-size policy
# included), on the 2-core machine of docs/security-object-sizes.md ("Compiled once for the site").
POLICY_COMPILE_SECONDS_PER_TEAM = 0.27


def review_notes(platform: Platform) -> list[str]:
    """Information for the reviewer: not wrong, but maybe not what was meant."""
    notes = _time_sliced_accounting_notes(platform) + unlisted_registries_notes(
        platform.teams[0].vcluster.allowed_registries)  # a stack-only key: every team has the stack's list
    if platform.cluster.kubeconfig is not None:
        notes += [_site_pids_note(platform.cluster.pod_pids_limit), _site_memory_reserve_note()]
    notes += _unchecked_kubernetes_notes(platform.cluster) + _unknown_instance_type_notes(platform.cluster) \
        + system_pool_notes(platform.cluster) \
        + _unscaled_bounds_notes(platform.cluster) + api_endpoint_notes(platform.cluster, platform.ci) \
        + audit_trail_notes(platform.cluster) + eks_support_notes(platform.cluster) \
        + datastore_notes(platform.cluster, platform.teams) + cpu_memory_notes(platform) \
        + gpu_pool_pod_notes(platform) + _policy_compile_notes(len(platform.teams)) \
        + _unbounded_claims_notes(platform) + _unbounded_control_plane_notes(platform) + named_issuer_notes(platform)
    capacity = known_gpu_capacity(platform.cluster, platform.gpu_operator.time_slicing)
    guaranteed = sum(max(team.resources.gpu.quota, 0) for team in platform.teams)
    # MIG slices no team can use are not there to be had over quota either (warned by config/mig_slices.py).
    unused = sum(found.kai_units for found in unused_mig_slices(platform))
    if capacity and all(team.resources.gpu.quota != -1 for team in platform.teams) \
            and capacity.kai_units - unused - guaranteed >= 0.5:
        besides = f"; besides {unused:g} in MIG slices no team can use" if unused else ""
        notes.append(f"{capacity.kai_units - unused - guaranteed:g} of {capacity.describe()} are guaranteed to no team "
                     f"(the teams' gpu quotas add up to {guaranteed:g}{besides}): teams only get them over quota, by "
                     "priority and overQuotaWeight.")
    return notes


def _policy_compile_notes(teams: int) -> list[str]:
    """Each team's own policies are compiled at every API server start, which refuses every write it admits until
    then."""
    seconds = teams * POLICY_COMPILE_SECONDS_PER_TEAM
    if seconds <= ADMISSION_READY_WAIT_SECONDS:
        return []
    return [f"teams: each API server compiles the admission policies of all {teams} teams whenever it starts, and "
            f"refuses every write it is asked to admit until it has (holding each up to {ADMISSION_READY_WAIT_SECONDS} "
            f"s first): about {seconds:.0f} s of CPU at {POLICY_COMPILE_SECONDS_PER_TEAM} s a team on a 2-core "
            "machine, so expect writes refused for some seconds after each API server start, longer on a slower "
            "control plane (docs/security-object-sizes.md, \"Compiled once for the site\")."]


def _unbounded_claims_notes(platform: Platform) -> list[str]:
    """MicroK8s' hostpath class makes each claim a plain directory of the node's disk, whatever size it asks for, and
    the kubelet does not count a claim's volume as a pod's disk use: a team's claims can fill the disk the node's
    pods, images and every team's control plane write to."""
    if platform.cluster.microk8s is None:
        return []
    teams = [team.name for team in platform.teams if team.vcluster.resource_quota.persistent_volume_claims > 0
             and (not team.vcluster.claim_storage_classes
                  or MICROK8S_STORAGE_CLASS in team.vcluster.claim_storage_classes)]
    if not teams:
        return []
    return [f"teams {', '.join(teams)}: their volume claims may use {MICROK8S_STORAGE_CLASS}, whose volumes are "
            "directories of the node's disk that no size limit or eviction bounds (the claim's size is a number "
            "only), so one team's claims can fill the disk that every team's pods, images and vCluster control "
            "plane write to. Give the teams a class that enforces sizes (LVM, ZFS or XFS-quota local volumes) in "
            "vcluster.storageClasses, or a disk of its own for the hostpath directory (docs/security-pressure.md, "
            "\"Volume claims on MicroK8s\")."]


def _unbounded_control_plane_notes(platform: Platform) -> list[str]:
    """The same class under a control plane's data volume: the virtual API server's store, which a tenant (its own
    cluster's admin, with no quota it cannot remove) grows by writing objects that are never synced to the host."""
    if platform.cluster.microk8s is None:
        return []
    teams = [team.name for team in platform.teams if control_plane_shape(team.vcluster).volumes and (dig(
        team.vcluster.extra_values, *CONTROL_PLANE_CLAIM).get("storageClass") or team.vcluster.storage_class)
        == MICROK8S_STORAGE_CLASS]
    if not teams:
        return []
    return [f"teams {', '.join(teams)}: their vCluster control planes keep their store (every object of the virtual "
            f"cluster) on a {MICROK8S_STORAGE_CLASS} volume, whose size is not enforced, and a tenant can write "
            "objects into its own virtual cluster without limit: one team can fill the node's disk that every team "
            "uses. Give the control planes a class that enforces sizes in vcluster.extraValues."
            f"{'.'.join(CONTROL_PLANE_CLAIM)}.storageClass (docs/security-pressure.md, \"Volume claims on "
            "MicroK8s\")."]


def _unknown_instance_type_notes(cluster: Cluster) -> list[str]:
    """An instance type the capacity table lacks makes the site's GPU count unknown: the quota checks stay silent."""
    if cluster.eks is None:
        return []
    return [f"cluster.eks.gpuNodeGroups[{index}].instanceTypes: {kind} is not in the program's instance-type table "
            "(config/capacity.py), so the site's GPU count is not known and no warning tells when the quotas "
            "promise more GPUs than the node groups have. Check the sum of the quotas against the instance type's GPU "
            f"count times {cluster.eks.most_nodes_key} yourself."
            for index, group in enumerate(cluster.eks.gpu_node_groups)
            for kind in group.instance_types if kind not in GPUS_PER_INSTANCE_TYPE]


def _unscaled_bounds_notes(cluster: Cluster) -> list[str]:
    """Node group bounds no autoscaler reads: a site may believe its groups grow to maxSize."""
    eks = cluster.eks
    if eks is None or eks.autoscaled:
        return []
    groups = [("systemNodeGroup", eks.system_node_group.scaling)] + [
        (f"gpuNodeGroups[{index}]", group.scaling) for index, group in enumerate(eks.gpu_node_groups)]
    unscaled = [f"cluster.eks.{key} ({scaling.min_size}/{scaling.desired_size}/{scaling.max_size})"
                for key, scaling in groups if not scaling.min_size == scaling.desired_size == scaling.max_size]
    if not unscaled:
        return []
    return [f"{', '.join(unscaled)}: minSize/desiredSize/maxSize differ, but nothing scales the node groups "
            "(cluster.eks.autoscaler: none): each runs its desiredSize, which every pulumi up sets again, and the "
            "capacity checks count that. Set cluster.eks.autoscaler: cluster-autoscaler if the site runs the Cluster "
            "Autoscaler."]


def _unchecked_kubernetes_notes(cluster: Cluster) -> list[str]:
    """A site on a Kubernetes newer than the program was checked against: not refused (EKS and MicroK8s move on), but
    the reviewer should know that nothing here has read that release."""
    newest = versions.KUBERNETES_NEWEST_CHECKED_VERSION
    if versions.release_order(cluster.kubernetes_version) <= versions.release_order(newest):
        return []
    return [f"cluster.{cluster.kind}.kubernetesVersion is {cluster.kubernetes_version}, newer than Kubernetes {newest}, "
            f"the newest whose API server the host's admission policies and the tenant boundary were checked against: "
            f"read the release's notes on ValidatingAdmissionPolicy, Pod and NetworkPolicy fields before `pulumi up`, "
            f"or wait for a release of this program that checks {cluster.kubernetes_version}."]


def _site_pids_note(limit: int) -> str:
    """A kubeconfig host's nodes are the site's: the program cannot set their kubelets' process limits."""
    return (f"cluster.kind is kubeconfig, so this stack does not set the nodes' process limits: set, on every node "
            f"tenant pods run on, the kubelet's podPidsLimit: {limit} (KubeletConfiguration; the flag "
            f"--pod-max-pids={limit}; cluster.podPidsLimit), systemReserved pid: {SYSTEM_PID_RESERVE} (--system-reserved "
            f"pid={SYSTEM_PID_RESERVE}, kept with any other entries) and evictionHard pid.available: "
            f"{PID_EVICTION_THRESHOLD} (--eviction-hard pid.available<{PID_EVICTION_THRESHOLD}; the kubelet's other "
            "signals must be restated, since a map given replaces its defaults). Without the limit one team's pod can "
            "use up a node's process IDs and stop the other teams' pods there from starting processes; without the "
            "reserve and the threshold several of its pods still can, and the kubelet and containerd with them. A "
            "kubelet's running values show in `kubectl get --raw /api/v1/nodes/NODE/proxy/configz`.")


def _site_memory_reserve_note() -> str:
    """A kubeconfig host's kubelets are the site's, and the kubelet keeps no memory from pods unless told to."""
    return ("cluster.kind is kubeconfig, so this stack does not keep any of the nodes' memory from pods: reserve, on "
            "every node tenant pods run on, memory for the kubelet, the container runtime and the node's own services "
            "(KubeletConfiguration systemReserved or kubeReserved memory, none unless set; this program gives a "
            f"MicroK8s box {DEFAULT_SYSTEM_MEMORY_RESERVE}, cluster.microk8s.systemReservedMemory), with "
            "enforceNodeAllocatable keeping `pods` (the kubelet's default). Without it, memory a tenant pod holds "
            "that killing no process frees (a memory-backed emptyDir, SysV shared memory) can send the kernel's OOM "
            "killer past every pod to the kubelet, the runtime, or etcd on a node that runs it. The reserve shows in "
            "`kubectl describe node` as Capacity less Allocatable.")


def time_sliced_keys(platform: Platform) -> list[tuple[str, Optional[str]]]:
    """Where the config puts GPUs on the time-sliced profile: each config key, with its EKS node group's name."""
    places: list[tuple[str, Optional[str]]] = []
    if platform.gpu_operator.time_slicing.default_profile == TIME_SLICED:
        places.append(("gpuOperator.timeSlicing.defaultProfile", None))
    if platform.cluster.eks is not None:
        # A MIG-split group's nodes advertise no nvidia.com/gpu to replicate: the profile does nothing there
        # (config/mig_pools.py, time_sliced_mig_warnings; under single it is refused).
        places += [(f"cluster.eks.gpuNodeGroups[{index}].sharingProfile", group.name)
                   for index, group in enumerate(platform.cluster.eks.gpu_node_groups)
                   if group.sharing_profile == TIME_SLICED and group.mig_config is None]
    return places


def _time_sliced_accounting_notes(platform: Platform) -> list[str]:
    """GPUs on the time-sliced profile are not charged per team (docs/observability-charging.md)."""
    if platform.observability.prometheus == "off":
        return []
    keys = [key if group is None else f"{key} ({group})" for key, group in time_sliced_keys(platform)]
    if not keys:
        return []
    return [f"{', '.join(keys)} put GPUs on the {TIME_SLICED} profile: there the usage metrics charge each GPU's "
            "busy time to one of the pods time-slicing it (the DCGM exporter maps a GPU to one pod) and KAI counts "
            "each replica as a GPU, so the teams' used GPU-hours and utilisation on those nodes are not theirs. "
            "Where chargeback matters, share GPUs with KAI fractions on the exclusive profile (docs/observability-charging.md)."]
