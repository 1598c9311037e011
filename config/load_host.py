"""Stack config: the host keys (``cluster``, one block per host kind, and ``ci``), declared and read.

The definitions say what each key is (config/keys.py); the readers below turn them into the model
and add the rules a single type cannot say (the VPC and its subnets go together, sizes are ordered).
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from config import versions
from config.errors import MISSING
from config.key_types import Boolean, Check, Integer, StringList, StringMap, Text, refuse_names
from config.keys import REQUIRED, Block, Condition, Derived, Key, ListOf
from config.load_operators import GPU_OPERATOR_FLOOR_REASON
from config.model import (
    DEFAULT_POD_PIDS_LIMIT,
    CiSettings,
    Cluster,
    EksHost,
    GpuNodeGroup,
    KubeconfigHost,
    MicroK8sHost,
    NodeGroupScaling,
    SystemNodeGroup,
)
from config.reader import Section
from config.secrets import Secrets
from config.sharing import PROFILES
from config.hosts import NODE_GROUP_NAME_PREFIX_MAX, PRIVATE_NETWORKS, SYSTEM_POOL, node_group_name_prefix
from config.version_types import KubernetesVersion, Version
from config.vocabulary import CLUSTER_KINDS

# A DNS-1123 subdomain: what `kubectl get storageclass` names may be.
STORAGE_CLASS_NAME = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
# The site's Kubernetes minor version (cluster.<kind>.kubernetesVersion) and why older ones are refused.
SITE_KUBERNETES = KubernetesVersion(versions.KUBERNETES_MINIMUM_VERSION,
                                    "every tenant namespace is guarded by ValidatingAdmissionPolicy v1, GA from 1.30")
KUBERNETES_VERSION_DETAILS = (
    "The program cannot ask the cluster before it runs, so the site states it: `--render-charts` renders the "
    "charts for it and the deployability check validates every object against it. Left out, both assume the "
    "oldest version the program supports, and may report a field a newer cluster accepts. Read it with "
    "`{command}` and quote it in YAML (`\"1.36\"`).")

MICROK8S = Block(title="a single GPU machine running MicroK8s", intro="""\
The program runs the setup steps in order: `snap refresh --hold microk8s`, `microk8s enable dns`,
`microk8s enable hostpath-storage`, then optionally `microk8s enable nvidia`, then `microk8s config` to
read the kubeconfig. Each step waits for `microk8s status --wait-ready`.""", keys=(
    Key("host", Text(), None, "The GPU machine to drive over SSH.", example="192.0.2.10",
        default_note="run locally",
        details="If unset, the commands run on the machine running `pulumi up`. If set, the `sshPrivateKey` secret "
                "is required.",
        fix="set it to the GPU machine's address, or remove it to run locally"),
    Key("user", Text(), "ubuntu", "SSH user.", example="ops"),
    Key("port", Integer(1, 65535), 22, "SSH port.", example="2222"),
    Key("useSudo", Boolean(), True, "Prefix every command with `sudo`.", example="false",
        details="The commands run non-interactively, so sudo must not ask for a password."),
    Key("enableNvidiaAddon", Boolean(), False,
        "Run `microk8s enable nvidia --gpu-operator-version <nvidiaAddonOperatorVersion>` once.", example="true",
        details="Then wait up to 5 minutes for the addon's ClusterPolicy `cluster-policy` (the addon ignores Helm "
                "failures, so the step fails with an explanation if no operator appeared). Leave it `false` if the "
                "addon is already enabled (the `dev` box). Use it with `gpuOperator.mode: microk8s-addon`."),
    Key("nvidiaAddonOperatorVersion", Version("v", versions.GPU_OPERATOR_RELEASES, GPU_OPERATOR_FLOOR_REASON),
        versions.MICROK8S_ADDON_GPU_OPERATOR_VERSION,
        "Pinned GPU Operator version for the addon.", example="v26.3.3",
        details="Only used when `enableNvidiaAddon` is true."),
    Key("apiServerUrl", Text(form="`https://` URL", checks=(
        Check("https://.*", "must be an https:// URL", "set it to https://<address>:16443"),)), None,
        "Rewrites the server of every cluster entry in the kubeconfig.", example="https://gpu-box.example:16443",
        default_note="keep what `microk8s config` prints",
        details="Use it when the address MicroK8s prints (its internal IP) can't be reached from where `pulumi` "
                "runs.",
        fix="set it to https://<address>:16443"),
    Key("gpus", Integer(minimum=0), 1, "GPUs in the box.", example="2",
        details="Only used for the capacity warning."),
    Key("kubernetesVersion", SITE_KUBERNETES,
        versions.KUBERNETES_MINIMUM_VERSION, "The Kubernetes minor version MicroK8s runs.", example='"1.36"',
        default_note="the oldest version the program supports",
        details=KUBERNETES_VERSION_DETAILS.format(command="microk8s version")),
))


def _scaling_keys(low: int, desired: int, high: int, *, fewest_desired: int = 0,
                  desired_fix: Optional[str] = None) -> tuple[Key, ...]:
    return (
        Key("minSize", Integer(minimum=0), low, "Fewest nodes of the group.", example="1"),
        Key("desiredSize", Integer(minimum=fewest_desired), desired,
            "Nodes the group starts with; minSize ≤ desiredSize ≤ maxSize.", example="1", fix=desired_fix),
        Key("maxSize", Integer(minimum=1), high, "Most nodes of the group.", example="2"),
    )


SYSTEM_NODE_GROUP = Block(keys=(
    Key("instanceTypes", StringList(non_empty=True), ("m6i.large",),
        "CPU nodes for system pods and vCluster control planes.", example="[m6i.xlarge]",
        details="They use the AL2023 standard AMI, carry no taint, and are labelled `gpu-tenancy/pool=system` and "
                "`gpu-tenancy/role=system`. Tenant pods do not run here by default."),
    *_scaling_keys(1, 2, 3, fewest_desired=1, desired_fix=(
        "set desiredSize (and minSize) to at least 1: the system node group holds the only untainted nodes, so "
        "without one KAI, the queue-webhook probe Job and every vCluster control plane have nowhere to run")),
    Key("diskSize", Integer(minimum=20), 50, "Node disk size in GiB.", example="80"),
))

GPU_NODE_GROUP = Block(keys=(
    Key("name", Text(dns_label=True, checks=(refuse_names(
            [SYSTEM_POOL], "is the name of the CPU system node group", "give the GPU node group another name"),)),
        REQUIRED, "Group name, unique and not `system`.", example="gpu",
        details="Nodes are labelled `gpu-tenancy/pool=<name>` and `gpu-tenancy/role=gpu`. `system` belongs to the "
                "CPU node group. With `cluster.eks.name` it names the EKS node group: the two together take at most "
                f"{NODE_GROUP_NAME_PREFIX_MAX - 2} characters.",
        fix="give the node group a short DNS-1123 name, e.g. gpu"),
    Key("instanceTypes", StringList(non_empty=True), REQUIRED, "GPU instance types.", example="[g4dn.xlarge]",
        details="These nodes use the `AL2023_x86_64_NVIDIA` AMI, which ships the driver and container toolkit, and "
                "carry the taint `nvidia.com/gpu=true:NoSchedule`."),
    *_scaling_keys(0, 1, 1),
    Key("diskSize", Integer(minimum=20), 100, "Node disk size in GiB.", example="200"),
    Key("sharingProfile", Text(choices=PROFILES), None,
        "Labels the group's nodes `nvidia.com/device-plugin.config=<profile key>`.", example="exclusive",
        default_note="nodes use the ConfigMap's default profile", details="See [Sharing profiles](#sharing-profiles)."),
    Key("labels", StringMap(), {}, "Extra node labels.", example="{team: research}",
        details="Setting `nvidia.com/device-plugin.config` (use `sharingProfile`), `nvidia.com/mig.config` (use "
                "`migConfig`), `gpu-tenancy/pool` (the program sets it to the group's name) or `gpu-tenancy/role` "
                "here is an error."),
    Key("migConfig", Text(form="MIG layout name"), None,
        "Splits the group's GPUs into MIG slices: labels its nodes `nvidia.com/mig.config=<migConfig>`.",
        example="all-1g.10gb", default_note="no MIG",
        details="A layout of the GPU Operator's default MIG config for the group's GPU model (`all-<profile>` or "
                "`all-balanced`); only GPUs with MIG (A100, H100, H200: p4d, p4de, p5, p5e, p5en) can be split. "
                "See [the isolation tiers](isolation.md)."),
))

EKS = Block(title="an EKS cluster the program creates", intro="""\
The program creates an explicit AWS provider for `region`, so your AWS profile's default region is
ignored. It uses API authentication mode and no default node group, and it turns on the VPC CNI's
network policy agent. All node groups share one IAM node role and run in the private subnets only.
Every node requires IMDSv2 with a hop limit of 1, so tenant pods cannot reach the instance metadata
service (and the node role's credentials). The program also installs the EBS CSI driver addon (IAM
through IRSA) and a default `gp3` StorageClass, which tenants' control planes need for their volume.
`maxSize` × GPUs per instance type (from `config/capacity.py`) gives the capacity used for the
capacity warning.""", keys=(
    Key("name", Text(dns_label=True), "gpu-tenancy", "EKS cluster name, also the prefix of the node group names.",
        example="vcluster-gpu",
        details="Creation-only: EKS cannot rename a cluster, so a new name is a new cluster (`pulumi preview` shows the "
                "replacement). Each node group is named `<name>-<group>-` plus a 26-character suffix, at most 63 in "
                f"all, so the name and a group's name together take at most {NODE_GROUP_NAME_PREFIX_MAX - 2} characters "
                f"(the name alone at most {NODE_GROUP_NAME_PREFIX_MAX - 2 - len(SYSTEM_POOL)}, for the `system` group)."),
    Key("region", Text(), REQUIRED, "AWS region.", example="us-east-2", fix="set cluster.eks.region, e.g. us-east-2"),
    Key("kubernetesVersion", SITE_KUBERNETES, versions.EKS_KUBERNETES_VERSION,
        "Pinned Kubernetes minor version.", example='"1.33"',
        details="Quote it in YAML, because an unquoted `1.33` is a number and is rejected. EKS upgrades a cluster "
                "one minor version per `pulumi up`."),
    Key("vpcId", Text(), None, "Use an existing VPC.", example="vpc-0abc…", default_note="the program creates a VPC",
        details="If set, `privateSubnetIds` must be set too: the nodes run there. Its CIDR blocks must lie inside "
                f"{', '.join(PRIVATE_NETWORKS)} (the program cannot read them): tenant pods' public egress leaves out "
                "only those, and nodes and pods take their addresses from the VPC.",
        fix="set it to an existing VPC id (vpc-...), or remove it"),
    Key("publicSubnetIds", StringList(), (), "Public subnets of `vpcId`.", example="[subnet-a, subnet-b]",
        details="Not allowed without `vpcId`."),
    Key("privateSubnetIds", StringList(), (), "Private subnets of `vpcId`, where every node group runs.",
        example="[subnet-c, subnet-d]",
        details="They need a route to a NAT gateway (nodes pull images). Not allowed without `vpcId`."),
    Key("vpcCidr", Text(form="IPv4 CIDR", checks=(Check(
            r"\d{1,3}(\.\d{1,3}){3}/\d{1,2}", "is not an IPv4 network", "use a block such as 10.0.0.0/16"),)),
        "10.0.0.0/16", "CIDR of the created VPC.", example="10.20.0.0/16",
        details="The program carves out one public and one private `/20` per zone, so the block must hold "
                "2 × `availabilityZones` `/20`s. A `/16` is enough for up to 6 zones. It must lie inside "
                f"{', '.join(PRIVATE_NETWORKS)}, the ranges tenant pods' public egress leaves out: nodes and pods "
                "take their addresses from it."),
    Key("availabilityZones", Integer(2, 6), 2, "How many zones the created VPC spans.", example="3",
        details="It gets one NAT gateway."),
    Key("systemNodeGroup", SYSTEM_NODE_GROUP, {}, "The CPU node group of the platform's own pods."),
    Key("gpuNodeGroups", ListOf(GPU_NODE_GROUP, empty=(
            "an EKS host needs at least one GPU node group",
            "add an entry with name, instanceTypes (e.g. [g4dn.xlarge]) and sizes")), REQUIRED,
        "GPU node groups, at least one; each becomes its own EKS managed node group."),
    Key("ebsCsiAddonVersion", Text(form="string `vX.Y.Z-eksbuild.N`", checks=(Check(
            r"v\d+\.\d+\.\d+-eksbuild\.\d+", "is not an exact EKS add-on version",
            "use the form vX.Y.Z-eksbuild.N that `aws eks describe-addon-versions --addon-name aws-ebs-csi-driver "
            "--kubernetes-version 1.NN` lists"),)),
        Derived("the newest build EKS offers for `kubernetesVersion`, looked up when the add-on is created"),
        "The EBS CSI driver add-on build.", example="v1.50.1-eksbuild.2",
        details="Without a pin, the build found when the add-on is created stays until you pin another one "
                "(later lookups do not update it). EKS publishes builds per Kubernetes version: list them with "
                "`aws eks describe-addon-versions --addon-name aws-ebs-csi-driver --kubernetes-version 1.NN`."),
))

KUBECONFIG = Block(title="an existing cluster", intro="The `kubeconfig` secret is required.", keys=(
    Key("context", Text(), None, "Context to use.", example="gpu-prod",
        default_note="the kubeconfig's current context"),
    Key("gpus", Integer(minimum=0), None, "GPUs in the cluster, only used for the capacity warning.", example="8",
        default_note="no capacity warning"),
    Key("storageClass", Text(form="StorageClass name", checks=tuple(Check(
            pattern, "is not a valid StorageClass name",
            "use the name `kubectl get storageclass` shows (lowercase letters, digits, '-' and '.')")
            for pattern in (r"[\s\S]{1,253}", STORAGE_CLASS_NAME))), None,
        "Class of each tenant control plane's 5Gi volume claim.", example="standard",
        default_note="the cluster's default class",
        details="It must exist: `kubectl get storageclass`. Leave it out only if one class there is marked "
                "`(default)`; otherwise every tenant release waits 15 minutes and rolls back.",
        fix="set it to the name of a StorageClass of the cluster, e.g. standard"),
    Key("kubernetesVersion", SITE_KUBERNETES,
        versions.KUBERNETES_MINIMUM_VERSION, "The Kubernetes minor version of the cluster's API server.",
        example='"1.33"', default_note="the oldest version the program supports",
        details=KUBERNETES_VERSION_DETAILS.format(command="kubectl version")),
    Key("apiServerPort", Integer(1, 65535), None, "Port the API server's endpoints listen on.", example="16443",
        default_note="443, 6443 or 8443",
        details="See `kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes`. Set it when it "
                "is not 443, 6443 or 8443, e.g. a MicroK8s cluster reached by kubeconfig: with "
                "`vcluster.networkPolicy` on, tenant control planes get an egress rule for it."),
))

# Fewer processes and threads than this and honest pods fail: one PyTorch rank with NCCL already starts hundreds of
# threads, and the platform's own pods (DNS, vCluster control planes, the GPU Operator's agents) share the limit.
POD_PIDS_FLOOR = 1024
# The kernel's largest pid_max on 64-bit machines (PID_MAX_LIMIT, 2^22): a per-pod limit above it limits nothing.
KERNEL_PID_MAX_LIMIT = 4194304

CLUSTER = Block(title="the host", conditions=(
    *(Condition("kind", (kind,), "is settings for kind {name}, but cluster.kind is {value}",
                "remove cluster.{name} or set cluster.kind to {name}",
                forbidden=tuple(other for other in CLUSTER_KINDS if other != kind)) for kind in CLUSTER_KINDS),
    Condition("kind", ("eks",), "cluster.kind is eks, but the EKS settings are missing",
              "add cluster.eks with at least region and gpuNodeGroups (entries with name and instanceTypes)",
              required=("eks",)),
), keys=(
    Key("kind", Text(choices=CLUSTER_KINDS), REQUIRED, "Which host to use.", example="microk8s",
        details="Only the settings block for this kind may be present: `cluster.eks` under kind `microk8s` is an "
                "error.",
        fix="set cluster.kind to microk8s, eks or kubeconfig"),
    Key("microk8s", MICROK8S, {}, "Settings of a `microk8s` host."),
    Key("eks", EKS, {}, "Settings of an `eks` host: `region` and `gpuNodeGroups` are required."),
    Key("kubeconfig", KUBECONFIG, {}, "Settings of a `kubeconfig` host."),
    Key("podPidsLimit", Integer(POD_PIDS_FLOOR, KERNEL_PID_MAX_LIMIT), DEFAULT_POD_PIDS_LIMIT,
        "Most processes and threads one pod may run at once on a node (the kubelet's `podPidsLimit`).",
        example="32768",
        details="Every pod of a node takes its processes and threads from one kernel table (`pid_max`, "
                "`threads-max`), and the kubelet limits a pod only when this is set (its default is no limit, with "
                "no PID eviction threshold either): without it, a fork bomb or a thread leak in one team's pod "
                "leaves every other team's pods on that node, and the kubelet, containerd and the NVIDIA stack, "
                f"unable to start a process or thread. {DEFAULT_POD_PIDS_LIMIT} leaves room for an 8-GPU training "
                "pod whose ranks each run a PyTorch DataLoader with a dozen workers plus NCCL and OpenMP thread pools "
                "sized to the node's cores; a pod that reaches the limit gets `fork`/`pthread_create` errors (EAGAIN) "
                "and no other pod notices. On `microk8s` the program writes `--pod-max-pids` into the snap's kubelet "
                "arguments and restarts kubelite; on `eks` every node group's launch template carries it as a nodeadm "
                "`NodeConfig`, so changing it rolls every node group's nodes. Either way, pods keep the limit their "
                "node had when they started. On `kubeconfig` the program does not own the nodes: the plan's notes "
                "ask you to set it on their kubelets. See [Node pressure](security-model.md#node-pressure).",
        fix=f"set it to a whole number between {POD_PIDS_FLOOR} (fewer and honest training pods, and the "
            f"platform's own, fail to start threads) and {KERNEL_PID_MAX_LIMIT} (the kernel's largest pid_max: a "
            "higher limit limits nothing)"),
))

CI = Block(title="where CI reaches the site", keys=(
    Key("runner", StringList(non_empty=True, form="runner labels"), None,
        "`runs-on` labels of the runner that previews and deploys this site.", example="[self-hosted, gpu-lab]",
        default_note="a GitHub-hosted `ubuntu-latest` runner",
        details="Set it for a site only reachable on-prem (a MicroK8s box, a private cluster) to a self-hosted "
                "runner that can reach it. Read by `python -m ops.sites matrix` (see [CI follows the stack files]"
                "(ci-and-sites.md#ci-follows-the-stack-files)); the program itself ignores it."),
))


def read_cluster(section: Section, secrets: Secrets) -> Optional[Cluster]:
    kind = section.read("kind")
    pids = section.read("podPidsLimit")
    if kind == "microk8s":
        return Cluster(kind, microk8s=_microk8s(section.child("microk8s"), secrets), pod_pids_limit=pids)
    if kind == "eks":
        return Cluster(kind, eks=_eks(section.child("eks")), pod_pids_limit=pids)
    if kind == "kubeconfig":
        secrets.require("kubeconfig", "cluster.kind is kubeconfig but no kubeconfig is set")
        return Cluster(kind, kubeconfig=_kubeconfig(section.child("kubeconfig")), pod_pids_limit=pids)
    return None


def _microk8s(section: Section, secrets: Secrets) -> MicroK8sHost:
    host = section.read("host")
    if host is not None:
        secrets.require("sshPrivateKey", "cluster.microk8s.host is set but no SSH private key is")
    api_server_url = section.read("apiServerUrl")
    return MicroK8sHost(
        host=host,
        user=section.read("user"),
        port=section.read("port"),
        use_sudo=section.read("useSudo"),
        enable_nvidia_addon=section.read("enableNvidiaAddon"),
        nvidia_addon_operator_version=section.read("nvidiaAddonOperatorVersion"),
        api_server_url=api_server_url,
        gpus=section.read("gpus"),
        kubernetes_version=section.read("kubernetesVersion"),
    )


def _scaling(section: Section) -> NodeGroupScaling:
    low, desired, high = section.read("minSize"), section.read("desiredSize"), section.read("maxSize")
    if None not in (low, desired, high) and not low <= desired <= high:
        section.fail("desiredSize", desired, f"must lie between minSize ({low}) and maxSize ({high})",
                     "choose sizes with minSize <= desiredSize <= maxSize")
    return NodeGroupScaling(low, desired, high)


def _eks(section: Section) -> EksHost:
    region = section.read("region")
    vpc_id = section.read("vpcId")
    public = section.read("publicSubnetIds")
    private = section.read("privateSubnetIds")
    if vpc_id is not None and not (public or private):
        section.fail("vpcId", vpc_id, "an existing VPC needs its subnets",
                     "set cluster.eks.privateSubnetIds (and publicSubnetIds for public load balancers)")
    elif vpc_id is not None and not private:
        section.fail("privateSubnetIds", MISSING, "node groups run in private subnets only",
                     "set cluster.eks.privateSubnetIds to the VPC's private subnets (with a NAT route)")
    if vpc_id is None and (public or private):
        section.fail("vpcId", MISSING, "subnet ids are set without their VPC", "set cluster.eks.vpcId")
    system = section.child("systemNodeGroup")
    gpu_groups = [GpuNodeGroup(
        name=group.read("name"),
        instance_types=group.read("instanceTypes"),
        scaling=_scaling(group),
        disk_size=group.read("diskSize"),
        sharing_profile=group.read("sharingProfile"),
        labels=group.read("labels"),
        mig_config=group.read("migConfig"),
    ) for group in section.entries("gpuNodeGroups")]
    names = [group.name for group in gpu_groups]
    for index, name in enumerate(names):
        if name is not None and names.index(name) != index:
            section.reader.fail(f"{section.key('gpuNodeGroups')}[{index}].name", name, "duplicate node group name",
                                "give every GPU node group its own name")
    cluster_name = section.read("name")
    _check_node_group_names(section, cluster_name, names)
    version = section.read("kubernetesVersion")
    zones = section.read("availabilityZones")
    addon = section.read("ebsCsiAddonVersion", None)
    return EksHost(
        name=cluster_name,
        region=region,
        kubernetes_version=version,
        vpc_id=vpc_id,
        public_subnet_ids=public or (),
        private_subnet_ids=private or (),
        vpc_cidr=_vpc_cidr(section, zones),
        availability_zones=zones,
        system_node_group=SystemNodeGroup(
            instance_types=system.read("instanceTypes"),
            scaling=_scaling(system),
            disk_size=system.read("diskSize"),
        ),
        gpu_node_groups=tuple(gpu_groups),
        ebs_csi_addon_version=addon,
    )


def _check_node_group_names(section: Section, cluster_name: Optional[str], gpu_groups: list) -> None:
    """Every managed node group is named after the cluster and its pool: AWS refuses the group when the two are long."""
    if cluster_name is None:
        return
    room = NODE_GROUP_NAME_PREFIX_MAX - len(node_group_name_prefix(cluster_name, ""))
    if len(SYSTEM_POOL) > room:
        section.fail("name", cluster_name, f"is {len(cluster_name)} characters: the system node group's name prefix "
                     f"'{node_group_name_prefix(cluster_name, SYSTEM_POOL)}' is longer than the "
                     f"{NODE_GROUP_NAME_PREFIX_MAX} characters AWS takes (it adds a 26-character suffix to make a "
                     "node group name of at most 63), so creating the node group fails",
                     f"use a cluster name of at most {room + len(cluster_name) - len(SYSTEM_POOL)} characters")
        return
    for index, pool in enumerate(gpu_groups):
        if pool is not None and len(pool) > room:
            section.fail(f"gpuNodeGroups[{index}].name", pool, f"makes the node group name prefix "
                         f"'{node_group_name_prefix(cluster_name, pool)}' longer than the {NODE_GROUP_NAME_PREFIX_MAX} "
                         "characters AWS takes (it adds a 26-character suffix to make a node group name of at most "
                         "63), so creating the node group fails",
                         f"use a group name of at most {room} characters, or a shorter cluster.eks.name")


def _vpc_cidr(section: Section, zones: Optional[int]) -> Optional[str]:
    """The created VPC is cut into /20 subnets: one public and one private per zone."""
    value = section.read("vpcCidr")
    if value is None:
        return None
    try:
        network = ipaddress.IPv4Network(value)
    except ValueError as error:
        section.fail("vpcCidr", value, f"is not a valid IPv4 network block ({error})",
                     "use a block such as 10.0.0.0/16")
        return None
    if not any(network.subnet_of(ipaddress.IPv4Network(cidr)) for cidr in PRIVATE_NETWORKS):
        # Nodes and, with the VPC CNI, pods take their addresses from the VPC: outside the ranges tenant egress
        # leaves out, every tenant pod could open connections to every node (kubelet) and every platform pod.
        section.fail("vpcCidr", value, f"is not inside {', '.join(PRIVATE_NETWORKS)}, the ranges tenant pods' "
                     "public egress leaves out: every tenant pod could reach every node and pod of the VPC",
                     "use a private block such as 10.0.0.0/16")
        return None
    if zones and (network.prefixlen > 20 or 2 ** (20 - network.prefixlen) < 2 * zones):
        section.fail("vpcCidr", value, f"has no room for {2 * zones} /20 subnets",
                     "use a larger block such as a /16, or fewer availabilityZones")
        return None
    return value


def _kubeconfig(section: Section) -> KubeconfigHost:
    return KubeconfigHost(
        context=section.read("context"),
        gpus=section.read("gpus"),
        storage_class=section.read("storageClass"),
        api_server_port=section.read("apiServerPort"),
        kubernetes_version=section.read("kubernetesVersion"),
    )


def read_ci(section: Section) -> CiSettings:
    """Where this site's CI jobs run: a site only reachable on-prem names its self-hosted runner."""
    return CiSettings(runner=section.read("runner") or ())
