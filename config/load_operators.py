"""Stack config: the ``gpuOperator`` and ``kaiScheduler`` blocks, declared and read."""

from __future__ import annotations

from typing import Optional

from config import versions
from config.key_types import Boolean, Integer, Text
from config.keys import Block, Condition, Derived, Key
from config.mig import MIG_STRATEGIES
from config.model import Cluster, GpuOperator, KaiScheduler, TimeSlicing
from config.model_host import HostProfile
from config.reader import Section
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
                "node. `single`: every slice of a node is a plain `nvidia.com/gpu`; the node's layout must be one "
                "profile (`all-<profile>`). In `microk8s-addon` and `external` modes the operator's own setting must "
                "match."),
))

KAI_SCHEDULER = Block(title="KAI Scheduler", keys=(
    Key("version", Version("v", versions.KAI_RELEASES, "they cannot blank NVIDIA_VISIBLE_DEVICES in containers that "
                           "hold no GPU, so a tenant could reach every GPU of a node"),
        versions.KAI_VERSION,
        f"Pinned KAI Scheduler chart version, {versions.KAI_MINIMUM_VERSION} to {versions.KAI_VERSION}.",
        example="v0.16.4",
        details=f"Installed as Helm release `kai-scheduler` in namespace `kai-scheduler` from `{versions.KAI_CHART}`. "
                "Older releases cannot blank `NVIDIA_VISIBLE_DEVICES` (see the [security model]"
                "(security-model.md)). The program always sets "
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
    if mode == "install" and cluster is not None and cluster.eks is not None:
        _check_eks_delivers_cdi_devices(section, cluster.eks.kubernetes_version, version)
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


def _check_eks_delivers_cdi_devices(section: Section, kubernetes: Optional[str], version: Optional[str]) -> None:
    """An operator whose device plugin names GPUs to CDI only needs containerd's CDI, which nodeadm turns on from
    versions.EKS_CONTAINERD_CDI_VERSION: below it a whole-GPU container gets the devices its image's
    NVIDIA_VISIBLE_DEVICES names instead (all of the node's in NVIDIA's CUDA images):
    tests/test_cdi_device_list_contract.py reads each link."""
    if kubernetes is None or version is None:
        return
    numbers = versions.release_numbers
    if numbers(version) < numbers(versions.GPU_OPERATOR_CDI_DEVICE_LIST) or \
            numbers(kubernetes) >= numbers(versions.EKS_CONTAINERD_CDI_VERSION):
        return
    section.reader.fail(
        "cluster.eks.kubernetesVersion", kubernetes,
        f"EKS nodes below {versions.EKS_CONTAINERD_CDI_VERSION} run containerd with CDI off, and the device plugin of "
        f"gpuOperator.version {version} (from {versions.GPU_OPERATOR_CDI_DEVICE_LIST} on) names a container's GPUs to CDI "
        "only: a container requesting nvidia.com/gpu would get the GPUs its image's NVIDIA_VISIBLE_DEVICES names "
        "instead, every GPU of the node with NVIDIA's CUDA images, none with others",
        f"pin gpuOperator.version {versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST} (its device plugin also sets "
        f"NVIDIA_VISIBLE_DEVICES) until the cluster runs Kubernetes {versions.EKS_CONTAINERD_CDI_VERSION} or later "
        "(EKS upgrades one minor per pulumi up)")


def read_kai(section: Section) -> KaiScheduler:
    return KaiScheduler(version=section.read("version"), gpu_sharing=section.read("gpuSharing"))
