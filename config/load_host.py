"""Stack config: the host readers (``cluster.*`` for each host kind, and ``ci``) of ``load_platform``."""

from __future__ import annotations

import ipaddress
import re
from typing import TYPE_CHECKING, Optional

from config import versions
from config.errors import MISSING
from config.model import (
    CiSettings,
    Cluster,
    EksHost,
    GpuNodeGroup,
    KubeconfigHost,
    MicroK8sHost,
    NodeGroupScaling,
    SystemNodeGroup,
)
from config.reader import Section, pinned_version
from config.sharing import PROFILES
from config.vocabulary import CLUSTER_KINDS

if TYPE_CHECKING:  # the secrets' bookkeeping lives with load_platform
    from config.load import Secrets

def read_cluster(section: Section, secrets: Secrets) -> Optional[Cluster]:
    kind = section.string("kind", choices=CLUSTER_KINDS,
                          fix="set cluster.kind to microk8s, eks or kubeconfig")
    for other in CLUSTER_KINDS:
        if other != kind and section.has(other) and kind is not None:
            section._fail(other, section.raw(other), f"is settings for kind {other}, but cluster.kind is {kind}",
                          f"remove cluster.{other} or set cluster.kind to {other}")
    if kind == "microk8s":
        return Cluster(kind, microk8s=_microk8s(section.child("microk8s", (
            "host", "user", "port", "useSudo", "enableNvidiaAddon", "nvidiaAddonOperatorVersion",
            "apiServerUrl", "gpus")), secrets))
    if kind == "eks":
        return Cluster(kind, eks=_eks(section.child("eks", (
            "name", "region", "kubernetesVersion", "vpcId", "publicSubnetIds", "privateSubnetIds", "vpcCidr",
            "availabilityZones", "systemNodeGroup", "gpuNodeGroups", "ebsCsiAddonVersion"))))
    if kind == "kubeconfig":
        secrets.require("kubeconfig", "cluster.kind is kubeconfig but no kubeconfig is set")
        return Cluster(kind, kubeconfig=_kubeconfig(section.child("kubeconfig", (
            "context", "gpus", "storageClass", "apiServerPort"))))
    return None


def _microk8s(section: Section, secrets: Secrets) -> MicroK8sHost:
    host = section.string("host", None, fix="set it to the GPU machine's address, or remove it to run locally")
    if host is not None:
        secrets.require("sshPrivateKey", "cluster.microk8s.host is set but no SSH private key is")
    api_server_url = section.string("apiServerUrl", None, fix="set it to https://<address>:16443")
    if api_server_url is not None and not api_server_url.startswith("https://"):
        section._fail("apiServerUrl", api_server_url, "must be an https:// URL",
                      "set it to https://<address>:16443")
    version = section.string("nvidiaAddonOperatorVersion", versions.MICROK8S_ADDON_GPU_OPERATOR_VERSION)
    return MicroK8sHost(
        host=host,
        user=section.string("user", "ubuntu"),
        port=section.integer("port", 22, minimum=1, maximum=65535),
        use_sudo=section.boolean("useSudo", True),
        enable_nvidia_addon=section.boolean("enableNvidiaAddon", False),
        nvidia_addon_operator_version=pinned_version(section, "nvidiaAddonOperatorVersion", version, prefix="v"),
        api_server_url=api_server_url,
        gpus=section.integer("gpus", 1, minimum=0),
    )


def _scaling(section: Section, defaults: tuple[int, int, int]) -> NodeGroupScaling:
    low = section.integer("minSize", defaults[0], minimum=0)
    desired = section.integer("desiredSize", defaults[1], minimum=0)
    high = section.integer("maxSize", defaults[2], minimum=1)
    if None not in (low, desired, high) and not low <= desired <= high:
        section._fail("desiredSize", desired, f"must lie between minSize ({low}) and maxSize ({high})",
                      "choose sizes with minSize <= desiredSize <= maxSize")
    return NodeGroupScaling(low, desired, high)


def _eks(section: Section) -> EksHost:
    region = section.string("region", fix="set cluster.eks.region, e.g. us-east-2")
    vpc_id = section.string("vpcId", None, fix="set it to an existing VPC id (vpc-...), or remove it")
    public = section.string_list("publicSubnetIds", ())
    private = section.string_list("privateSubnetIds", ())
    if vpc_id is not None and not (public or private):
        section._fail("vpcId", vpc_id, "an existing VPC needs its subnets",
                      "set cluster.eks.privateSubnetIds (and publicSubnetIds for public load balancers)")
    elif vpc_id is not None and not private:
        section._fail("privateSubnetIds", MISSING, "node groups run in private subnets only",
                      "set cluster.eks.privateSubnetIds to the VPC's private subnets (with a NAT route)")
    if vpc_id is None and (public or private):
        section._fail("vpcId", MISSING, "subnet ids are set without their VPC", "set cluster.eks.vpcId")
    system = section.child("systemNodeGroup", ("instanceTypes", "minSize", "desiredSize", "maxSize", "diskSize"))
    gpu_groups = []
    for path, value in section.items("gpuNodeGroups", required=True):
        group = section.reader.section(path, value, ("name", "instanceTypes", "minSize", "desiredSize", "maxSize",
                                                     "diskSize", "sharingProfile", "labels"))
        gpu_groups.append(GpuNodeGroup(
            name=group.string("name", dns_label=True, fix="give the node group a short DNS-1123 name, e.g. gpu"),
            instance_types=group.string_list("instanceTypes", non_empty=True),
            scaling=_scaling(group, (0, 1, 1)),
            disk_size=group.integer("diskSize", 100, minimum=20),
            sharing_profile=group.string("sharingProfile", None, choices=PROFILES),
            labels=group.string_map("labels", {}),
        ))
    if section.has("gpuNodeGroups") and isinstance(section.raw("gpuNodeGroups"), list) and not gpu_groups:
        section._fail("gpuNodeGroups", [], "an EKS host needs at least one GPU node group",
                      "add an entry with name, instanceTypes (e.g. [g4dn.xlarge]) and sizes")
    names = [group.name for group in gpu_groups]
    for index, name in enumerate(names):
        if name == "system":
            section.reader.fail(f"{section.key('gpuNodeGroups')}[{index}].name", name,
                                "is the name of the CPU system node group", "give the GPU node group another name")
        elif name is not None and names.index(name) != index:
            section.reader.fail(f"{section.key('gpuNodeGroups')}[{index}].name", name, "duplicate node group name",
                                "give every GPU node group its own name")
    version = section.string("kubernetesVersion", versions.EKS_KUBERNETES_VERSION)
    if version is not None and not re.fullmatch(r"1\.\d+", version):
        section._fail("kubernetesVersion", version, "must be a pinned Kubernetes minor version",
                      "use the form 1.NN, e.g. 1.33")
    zones = section.integer("availabilityZones", 2, minimum=2, maximum=6)
    addon = section.string("ebsCsiAddonVersion", versions.EBS_CSI_ADDON_VERSION)
    if addon is not None and not re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", addon):
        section._fail("ebsCsiAddonVersion", addon, "is not an exact EKS add-on version",
                      "use the form vX.Y.Z-eksbuild.N that `aws eks describe-addon-versions --addon-name "
                      "aws-ebs-csi-driver --kubernetes-version 1.NN` lists")
    return EksHost(
        name=section.string("name", "gpu-tenancy", dns_label=True),
        region=region,
        kubernetes_version=version,
        vpc_id=vpc_id,
        public_subnet_ids=public or (),
        private_subnet_ids=private or (),
        vpc_cidr=_vpc_cidr(section, zones),
        availability_zones=zones,
        system_node_group=SystemNodeGroup(
            instance_types=system.string_list("instanceTypes", ("m6i.large",), non_empty=True),
            scaling=_scaling(system, (1, 2, 3)),
            disk_size=system.integer("diskSize", 50, minimum=20),
        ),
        gpu_node_groups=tuple(gpu_groups),
        ebs_csi_addon_version=addon,
    )


def _vpc_cidr(section: Section, zones: Optional[int]) -> Optional[str]:
    """The created VPC is cut into /20 subnets: one public and one private per zone."""
    value = section.string("vpcCidr", "10.0.0.0/16")
    if value is None:
        return None
    try:
        network = ipaddress.IPv4Network(value)
    except ValueError:
        section._fail("vpcCidr", value, "is not an IPv4 network", "use a block such as 10.0.0.0/16")
        return None
    if zones and (network.prefixlen > 20 or 2 ** (20 - network.prefixlen) < 2 * zones):
        section._fail("vpcCidr", value, f"has no room for {2 * zones} /20 subnets",
                      "use a larger block such as a /16, or fewer availabilityZones")
        return None
    return value


_STORAGE_CLASS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _kubeconfig(section: Section) -> KubeconfigHost:
    storage_class = section.string("storageClass", None,
                                   fix="set it to the name of a StorageClass of the cluster, e.g. standard")
    if storage_class is not None and (len(storage_class) > 253 or not _STORAGE_CLASS_NAME.fullmatch(storage_class)):
        section._fail("storageClass", storage_class, "is not a valid StorageClass name",
                      "use the name `kubectl get storageclass` shows (lowercase letters, digits, '-' and '.')")
        storage_class = None
    return KubeconfigHost(
        context=section.string("context", None),
        gpus=section.integer("gpus", None, minimum=0),
        storage_class=storage_class,
        api_server_port=section.integer("apiServerPort", None, minimum=1, maximum=65535),
    )


def read_ci(section: Section) -> CiSettings:
    """Where this site's CI jobs run: a site only reachable on-prem names its self-hosted runner."""
    return CiSettings(runner=section.string_list("runner", (), non_empty=True) or ())
