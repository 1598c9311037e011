"""Stack config: the ``gpuOperator`` and ``kaiScheduler`` blocks, declared and read."""

from __future__ import annotations

from typing import Optional

from config import versions
from config.key_types import Boolean, Integer, Text
from config.keys import Block, Condition, Derived, Key
from config.mig import MIG_STRATEGIES
from config.errors import MISSING
from config.model import Cluster, GpuOperator, KaiScheduler, TimeSlicing
from config.model_host import HostProfile
from config.reader import Reader, Section
from config.sharing import EXCLUSIVE, PROFILES
from config.version_types import Version
from config.vocabulary import MICROK8S_ADDON_NAMESPACE

OPERATOR_MODES = ("install", "microk8s-addon", "external")
GPU_OPERATOR_FLOOR_REASON = "older charts are not known to hold every value the program sets"

TIME_SLICING = Block(keys=(
    Key("replicas", Integer(2, 64), 4, "Replicas per GPU in the `time-sliced` profile.", example="2",
        fix="set it to a whole number >= 2 (1 would mean no sharing: use the exclusive profile instead)"),
    Key("defaultProfile", Text(choices=PROFILES), EXCLUSIVE,
        "Profile for nodes without a `nvidia.com/device-plugin.config` label.", example="exclusive"),
    Key("configMapName", Text(dns_label=True), "time-slicing-config", "Name of the device-plugin ConfigMap.",
        example="gpu-sharing"),
))

GPU_OPERATOR = Block(title="NVIDIA GPU Operator", conditions=(
    Condition("mode", ("microk8s-addon",), f"the MicroK8s addon installs the operator in {MICROK8S_ADDON_NAMESPACE}",
              "remove gpuOperator.namespace", pinned=(("namespace", MICROK8S_ADDON_NAMESPACE),)),
), notes="""\
The chart values the program always sets in `install` mode are `cdi.enabled: true` and
`devicePlugin.config.{name, default, create: false}`, which point at the ConfigMap.""", keys=(
    Key("mode", Text(choices=OPERATOR_MODES), "install", "Who runs the GPU Operator.", example="microk8s-addon",
        details="`install`: this program owns a Helm release `gpu-operator`. `microk8s-addon`: MicroK8s's `nvidia` "
                "addon runs the operator, and the program patches the addon's ClusterPolicy `cluster-policy` to use "
                "the sharing ConfigMap (a second release would conflict with it); only valid on `microk8s` hosts. "
                "`external`: someone else runs the operator, and the program only creates the ConfigMap in the "
                "operator's (existing) namespace and exports its name and keys. Only `install` creates the "
                "namespace. With `cluster.microk8s.enableNvidiaAddon: true`, only `microk8s-addon` is allowed: two "
                "operators would fight over the cluster-wide ClusterPolicy."),
    Key("version", Version("v", versions.GPU_OPERATOR_RELEASES, GPU_OPERATOR_FLOOR_REASON),
        versions.GPU_OPERATOR_VERSION, "Pinned chart version, used in `install` mode.", example="v26.3.3"),
    Key("namespace", Text(dns_label=True), "gpu-operator", "Where the operator and the sharing ConfigMap live.",
        example="nvidia-system", default_note=f"in `microk8s-addon` mode it is always `{MICROK8S_ADDON_NAMESPACE}`",
        details="In `microk8s-addon` mode, any other value is an error. Creation-only in `install` mode: a new "
                "namespace makes Pulumi delete the old one, with the operator's release and all in it, and install "
                "the operator again (the plan diff lists it under \"Loses state\")."),
    Key("driverEnabled", Boolean(), Derived("`false` on `eks` and `microk8s` hosts, `true` on `kubeconfig`"),
        "Chart value `driver.enabled` (`install` mode).", example="true",
        details="AL2023 NVIDIA AMIs and MicroK8s GPU boxes already have the driver."),
    Key("toolkitEnabled", Boolean(), Derived("`false` on `eks`, `true` otherwise"),
        "Chart value `toolkit.enabled` (`install` mode).", example="false",
        details="On MicroK8s, the toolkit is pointed at MicroK8s's containerd config and socket automatically."),
    Key("timeSlicing", TIME_SLICING, {}, "The device plugin's sharing profiles; see [Sharing profiles]"
        "(#sharing-profiles)."),
    Key("migStrategy", Text(choices=MIG_STRATEGIES), "mixed", "Chart value `mig.strategy`, set when a GPU node group "
        "has a `migConfig`.", example="single",
        details="`mixed`: a MIG slice is the resource `nvidia.com/mig-<profile>`, and several profiles can share a "
                "node. `single`: every slice of a node is a plain `nvidia.com/gpu`, which KAI counts as 1 GPU; the "
                "node's layout must be one profile of `1g` slices (`all-1g.<memory>gb`) on the `exclusive` sharing "
                "profile. In `microk8s-addon` and `external` modes the operator's own setting must match."),
))

KAI_SCHEDULER = Block(title="KAI Scheduler", keys=(
    Key("version", Version("v", versions.KAI_RELEASES, "they cannot blank NVIDIA_VISIBLE_DEVICES in containers that "
                           "hold no GPU, so a tenant could reach every GPU of a node"),
        versions.KAI_VERSION,
        f"Pinned KAI Scheduler chart version, {versions.KAI_MINIMUM_VERSION} to {versions.KAI_VERSION}.",
        example="v0.16.4",
        details=f"Installed as Helm release `kai-scheduler` in namespace `kai-scheduler` from `{versions.KAI_CHART}`. "
                "Older releases cannot blank `NVIDIA_VISIBLE_DEVICES` (see the [security model]"
                "(security-admission.md)). The program always sets "
                "`global.blockNvidiaVisibleDevices: true`."),
    Key("gpuSharing", Boolean(), True, "Chart value `global.gpuSharing`, which enables `gpu-fraction` / `gpu-memory` "
        "pods.", example="false"),
))


def read_gpu_operator(section: Section, cluster: Optional[Cluster], host: Optional[HostProfile]) -> GpuOperator:
    mode = section.read("mode")
    kind = cluster.kind if cluster else None
    if mode == "microk8s-addon" and kind not in (None, "microk8s"):
        section.fail("mode", mode, f"the MicroK8s addon only exists on a microk8s host, not on {kind}",
                     "use gpuOperator.mode install or external")
    addon_enabled = cluster is not None and cluster.microk8s is not None and cluster.microk8s.enable_nvidia_addon
    if addon_enabled and mode in ("install", "external"):
        section.fail("mode", mode, "cluster.microk8s.enableNvidiaAddon installs a GPU Operator too, and two "
                     "operators fight over the cluster-wide ClusterPolicy",
                     "set gpuOperator.mode to microk8s-addon, or turn enableNvidiaAddon off")
    # The addon picks its namespace itself (the block's condition refuses any other).
    namespace = MICROK8S_ADDON_NAMESPACE if mode == "microk8s-addon" else section.read("namespace")
    time_slicing = section.child("timeSlicing")
    version = section.read("version")
    return GpuOperator(
        mode=mode,
        version=version,
        namespace=namespace,
        # The operator installs what the host's nodes do not already have (config/hosts.py).
        driver_enabled=section.read("driverEnabled", not (host and host.gpu_driver_preinstalled)),
        toolkit_enabled=section.read("toolkitEnabled", not (host and host.gpu_toolkit_preinstalled)),
        time_slicing=TimeSlicing(
            replicas=time_slicing.read("replicas"),
            default_profile=time_slicing.read("defaultProfile"),
            config_map_name=time_slicing.read("configMapName"),
        ),
        mig_strategy=section.read("migStrategy"),
    )


# Per host kind: the first Kubernetes minor whose nodes' containerd injects CDI devices, why older ones do not, and how
# the site gets there.
CDI_CONTAINERD = {
    "eks": (versions.EKS_CONTAINERD_CDI_VERSION, "EKS nodes below {floor} run containerd with CDI off",
            "(EKS upgrades one minor per pulumi up)"),
    "microk8s": (versions.MICROK8S_CONTAINERD_CDI_VERSION,
                 "MicroK8s tracks below {floor} bundle containerd 1.6, which cannot inject CDI devices",
                 "(snap refresh microk8s --channel=<track>/stable, one track at a time, then state the track)"),
}


def _operator_installed(cluster: Cluster, operator: GpuOperator) -> Optional[tuple[str, str]]:
    """The config key and version of the GPU Operator the platform puts on the nodes, when it is known (a version
    with a problem of its own is reported at its key)."""
    installed = None
    if operator.mode == "install":
        installed = "gpuOperator.version", operator.version
    microk8s = cluster.microk8s
    if operator.mode == "microk8s-addon" and microk8s is not None and microk8s.enable_nvidia_addon:
        installed = "cluster.microk8s.nvidiaAddonOperatorVersion", microk8s.nvidia_addon_operator_version
    # Otherwise an external operator, or an addon enabled by hand: the site's to match.
    return installed if installed is not None and installed[1] is not None else None


def check_nodes_deliver_cdi_devices(reader: Reader, cluster: Optional[Cluster], operator: GpuOperator) -> None:
    """An operator whose device plugin names GPUs to CDI only needs a containerd that injects CDI devices: without
    one a whole-GPU container gets the devices its image's NVIDIA_VISIBLE_DEVICES names instead (all of the node's in
    NVIDIA's CUDA images) through an NVIDIA runtime: tests/test_cdi_device_list_contract.py reads each link. A host
    whose version is not stated is judged at the version the program assumes (the oldest it supports)."""
    installed = _operator_installed(cluster, operator) if cluster is not None else None
    if installed is None or cluster.kind not in CDI_CONTAINERD or cluster.kubernetes_version is None:
        return
    operator_key, release = installed
    floor, why, upgrade = CDI_CONTAINERD[cluster.kind]
    numbers = versions.release_numbers
    if numbers(release) < numbers(versions.GPU_OPERATOR_CDI_DEVICE_LIST) or \
            numbers(cluster.kubernetes_version) >= numbers(floor):
        return
    key = f"cluster.{cluster.kind}.kubernetesVersion"
    gap = (f"the device plugin of {operator_key} {release} (from {versions.GPU_OPERATOR_CDI_DEVICE_LIST} on) names a "
           "container's GPUs to CDI only: a container requesting nvidia.com/gpu would get the GPUs its image's "
           "NVIDIA_VISIBLE_DEVICES names instead, every GPU of the node with NVIDIA's CUDA images, none with others")
    pin = (f"pin {operator_key} {versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST} (its device plugin also sets "
           "NVIDIA_VISIBLE_DEVICES)")
    if cluster.microk8s is not None and not cluster.microk8s.kubernetes_version_stated:
        reader.fail(key, MISSING, f"is not stated, so the program assumes {cluster.kubernetes_version}; "
                                  f"{why.format(floor=floor)}, and {gap}",
                    f"state the version the box runs (`microk8s version`, e.g. \"{floor}\"); on one below {floor}, "
                    f"{pin}")
        return
    reader.fail(key, cluster.kubernetes_version, f"{why.format(floor=floor)}, and {gap}",
                f"{pin} until the cluster runs Kubernetes {floor} or later {upgrade}")


def cdi_warnings(cluster: Optional[Cluster], operator: GpuOperator) -> list[str]:
    """What a CDI-only operator relies on where the config does not show it: an existing cluster's containerd, and the
    version of a MicroK8s addon enabled by hand on a track whose containerd has no CDI."""
    if cluster is None:
        return []
    numbers = versions.release_numbers
    gap = ("Without it a container requesting nvidia.com/gpu gets the GPUs its image's NVIDIA_VISIBLE_DEVICES names "
           "instead, every GPU of the node with NVIDIA's CUDA images.")
    if cluster.kubeconfig is not None and operator.mode == "install" and operator.version is not None and \
            numbers(operator.version) >= numbers(versions.GPU_OPERATOR_CDI_DEVICE_LIST):
        turned_on = "which the operator's toolkit turns on" if operator.toolkit_enabled else \
            "which, with gpuOperator.toolkitEnabled false, the nodes' own toolkit setup must turn on"
        return [f"gpuOperator.version {operator.version} (from {versions.GPU_OPERATOR_CDI_DEVICE_LIST} on) names each "
                "container's GPUs to CDI only, and the program cannot see the nodes' containerd on an existing cluster: "
                f"it must be 1.7 or later with CDI on (`enable_cdi`, {turned_on}). {gap} Check the CONTAINER-RUNTIME "
                "column of `kubectl get nodes -o wide`, or pin gpuOperator.version "
                f"{versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST}."]
    microk8s = cluster.microk8s
    if microk8s is not None and operator.mode == "microk8s-addon" and not microk8s.enable_nvidia_addon and \
            numbers(microk8s.kubernetes_version) < numbers(versions.MICROK8S_CONTAINERD_CDI_VERSION):
        return [f"cluster.microk8s.kubernetesVersion is {microk8s.kubernetes_version} (stated, or the oldest the "
                f"program assumes), whose containerd 1.6 cannot inject CDI devices, and the nvidia addon was enabled "
                f"by hand: its GPU Operator must be older than {versions.GPU_OPERATOR_CDI_DEVICE_LIST}, whose device "
                f"plugin names each container's GPUs to CDI only. {gap} Check `microk8s helm list -A`, and state the "
                "track the box runs (`microk8s version`)."]
    return []


def shared_cluster_role_warnings(cluster: Optional[Cluster], operator: GpuOperator) -> list[str]:
    """A GPU Operator whose chart gives node-feature-discovery's workers, on every node, the operator's cluster role."""
    installed = _operator_installed(cluster, operator) if cluster is not None else None
    numbers = versions.release_numbers
    if installed is None or numbers(installed[1]) >= numbers(versions.GPU_OPERATOR_OWN_CLUSTER_ROLE):
        return []
    key, version = installed
    return [f"{key} {version}: its chart binds the operator's ClusterRole to node-feature-discovery's service "
            "account too, whose worker runs on every node, so whatever takes a node's worker token may write cluster "
            "roles and bindings, relabel any namespace (its Pod Security level) and create pods in any namespace. "
            f"Pin {key} {versions.GPU_OPERATOR_OWN_CLUSTER_ROLE} or later (docs/security-isolation.md, \"Who holds "
            "power over the whole host\")."]


def read_kai(section: Section) -> KaiScheduler:
    return KaiScheduler(version=section.read("version"), gpu_sharing=section.read("gpuSharing"))
