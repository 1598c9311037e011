"""Stack config: the keys of an EKS host (``cluster.eks``: the cluster, its network and node groups), declared and read.

The readers add the rules a single type cannot say: the VPC and its subnets go together, node group sizes are
ordered, the created VPC has room for its subnets, and AWS takes the node group names made of the cluster's and the
groups' names.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Optional

from config import versions
from config.errors import MISSING
from config.hosts import NODE_GROUP_NAME_PREFIX_MAX, PRIVATE_NETWORKS, SYSTEM_POOL, node_group_name_prefix
from config.key_collections import StringList, StringMap
from config.key_types import Boolean, Check, Integer, Text, refuse_names
from config.keys import REQUIRED, Block, Derived, Key, ListOf
from config.model_host import (
    AUTOSCALERS, AWS_TAG_KEY, AWS_TAG_VALUE, CLUSTER_AUTOSCALER, EBS_CSI_CLAIM_NAMESPACE_TAG, EBS_CSI_RESERVED_TAG_KEYS,
    EBS_CSI_RESERVED_TAG_PREFIXES, EDGE_SPACES, EKS_LOG_TYPES, EKS_SUPPORT_TYPES, EVERY_ADDRESS,
    LOG_RETENTION_DAYS, MAX_SITE_TAGS, NO_AUTOSCALER, STACK_TAG, TEAM_TAG, EksApiEndpoint, EksControlPlaneLogs,
    EksHost, GpuNodeGroup, NodeGroupScaling, SystemNodeGroup,
)
from config.network_types import NetworkList
from config.reader import Section
from config.sharing import PROFILES
from config.version_types import SITE_KUBERNETES


def _scaling_keys(low: int, desired: int, high: int, *, fewest_desired: int = 0,
                  desired_fix: Optional[str] = None) -> tuple[Key, ...]:
    return (
        Key("minSize", Integer(minimum=0), low, "Fewest nodes the site's Cluster Autoscaler leaves the group.",
            example="1", details="Bounds nothing with `cluster.eks.autoscaler: none`."),
        Key("desiredSize", Integer(minimum=fewest_desired), desired,
            "Nodes the group runs; minSize ≤ desiredSize ≤ maxSize.", example="1", fix=desired_fix,
            details="With `cluster.eks.autoscaler: none` every `pulumi up` sets the group to it and the capacity "
                    "checks count it; with `cluster-autoscaler` it is the group's first size, later left to the "
                    "autoscaler."),
        Key("maxSize", Integer(minimum=1), high, "Most nodes the site's Cluster Autoscaler gives the group.",
            example="2", details="The capacity checks count it with `cluster.eks.autoscaler: cluster-autoscaler`; "
                                 "bounds nothing with `none`."),
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
                "carry the taint `nvidia.com/gpu=true:NoSchedule`. The capacity warnings know the GPU count of the "
                "g4dn, g5, g6, g6e, p4d, p4de, p5, p5e, p5en and p6-b200 sizes (`config/capacity.py`); with another "
                "type the plan notes that the quotas are not checked against the site's GPUs."),
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
                "`all-balanced`); only GPUs with MIG (A100, H100, H200: p4d, p4de, p5, p5e, p5en) can be split. B200 "
                "(p6-b200) has MIG, but its layouts are not in the program yet, so a migConfig there is refused. "
                "See [the isolation tiers](isolation.md)."),
))

API_ENDPOINT = Block(keys=(
    Key("publicAccess", Boolean(), True, "Whether the API server answers from the internet.", example="false",
        details="`false`: only from inside the VPC (`privateAccess` must then be `true`), so `pulumi up` and every "
                "other `pulumi` command, the tools in `ops/`, and teams reaching their vCluster through the host "
                "(`access.exposure: none`, `vcluster connect`) must run in the VPC or a network routed to it."),
    Key("publicAccessCidrs", NetworkList(non_empty=True, ipv4_only=True, exact=True), (EVERY_ADDRESS,),
        "The addresses the public endpoint answers.", example="[203.0.113.0/24]",
        default_note="every address (EKS's default)",
        details="List where `pulumi up` runs (your CI runners, your office), and where teams run `vcluster connect` "
                "with `access.exposure: none`. With `privateAccess: false` the nodes reach the API server through "
                "the NAT gateway too, so its public address must be listed: a VPC the program creates gets its NAT "
                "gateway in the same `pulumi up`, so a shorter list needs `privateAccess: true` there. Not allowed "
                "with `publicAccess: false`."),
    Key("privateAccess", Boolean(), True, "Whether nodes and pods reach the API server inside the VPC.",
        example="false",
        details="`true` (AWS's advice): traffic from the VPC to the API server stays in the VPC, through the "
                "cluster's network interfaces there, instead of leaving through the NAT gateway for the public "
                "endpoint. An existing VPC (`vpcId`) needs DNS hostnames and DNS resolution on for it; the VPC the "
                "program creates has both."),
))

CONTROL_PLANE_LOGS = Block(keys=(
    Key("types", StringList(form="log types", unique=True, checks=(Check(
            "|".join(EKS_LOG_TYPES), "is not a control plane log type EKS sends",
            f"use {', '.join(EKS_LOG_TYPES[:-1])} or {EKS_LOG_TYPES[-1]}"),)),
        EksControlPlaneLogs.types, "The control plane logs EKS sends to CloudWatch Logs; `[]` sends none.",
        example="[api, audit, authenticator]",
        details="`audit` records every request to the host's API server: who (each team's vCluster syncer acts under "
                "its own service account, the platform's `pulumi up` and tools under their IAM identity), what, on "
                "which object, and the answer; it is the trail of what a team did on the host. `authenticator` "
                "records which IAM identity each request came from. `api`, `controllerManager` and `scheduler` are "
                "the components' own logs, for debugging the control plane. CloudWatch charges for what it takes in "
                "and keeps (a busy host's audit log is gigabytes a day). Without `audit` the plan notes that "
                "nothing records what happened on the host."),
    Key("retentionDays", Integer(choices=LOG_RETENTION_DAYS), EksControlPlaneLogs.retention_days,
        "Days CloudWatch keeps them; `0` keeps them forever.", example="365",
        details="The program creates the log group EKS writes to (`/aws/eks/<name>/cluster`) before the cluster, "
                "with this retention: a group EKS creates itself keeps everything forever. `pulumi destroy` leaves "
                "the group and its logs in place, as EKS does, so the trail outlives the cluster; a site later "
                "created again under the same `name` takes it over with `pulumi import` "
                "([data safety](operations-data.md))."),
))

EKS = Block(title="an EKS cluster the program creates", intro="""\
The program creates an explicit AWS provider for `region`, so your AWS profile's default region is
ignored. It uses API authentication mode and no default node group, and it turns on the VPC CNI's
network policy agent. All node groups share one IAM node role and run in the private subnets only.
Every node requires IMDSv2 with a hop limit of 1, so tenant pods cannot reach the instance metadata
service (and the node role's credentials). The program also installs the EBS CSI driver addon (IAM
through IRSA) and a default `gp3` StorageClass, which tenants' control planes need for their volume.
The program installs no autoscaler: see `autoscaler` for what sizes the node groups and which size the
capacity warnings count (× GPUs per instance type, from `config/capacity.py`).""", keys=(
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
                "one minor version per `pulumi up`, and never back down; the same `pulumi up` then moves every "
                "node group to it, replacing its nodes (EKS refuses the next upgrade while a group runs an older "
                "minor). The platform's kubectl Jobs and kube-prometheus-stack's CRD "
                "upgrade hook run the kubectl pinned for it (`config/versions.py` `KUBECTL_IMAGES`), within one "
                "minor version of the cluster before and after such an upgrade. Below "
                f"{versions.EKS_CONTAINERD_CDI_VERSION} the nodes run containerd with CDI off, where the device plugin of "
                f"a GPU Operator from {versions.GPU_OPERATOR_CDI_DEVICE_LIST} on (the default) cannot give a container "
                "its GPU (it would see the GPUs its image's `NVIDIA_VISIBLE_DEVICES` names, every GPU of the node in "
                "NVIDIA's CUDA images): such a site is refused; pin `gpuOperator.version` "
                f"{versions.GPU_OPERATOR_NEWEST_ENVVAR_DEVICE_LIST} until the cluster is upgraded."),
    Key("supportType", Text(choices=EKS_SUPPORT_TYPES), EKS_SUPPORT_TYPES[0],
        "What EKS does when `kubernetesVersion` leaves its standard support.", example="standard",
        details="`extended` (EKS's default): the cluster stays on its minor for 12 more months of extended support, "
                "billed at a higher rate per cluster hour, until EKS moves its control plane on by itself at the "
                "end; the plan notes a site in that window. `standard`: no extended support, so no extra cost, "
                "but EKS moves the control plane to the next minor by itself when standard support ends, leaving "
                "the node groups and this stack on the old one; from that day the plan warns. Either way, upgrade "
                "before: one minor version per `pulumi up` (the release calendar is in "
                "[versions](operations-versions.md))."),
    Key("tags", StringMap(key_checks=(
            Check(AWS_TAG_KEY, "is not an AWS tag key (letters, digits, spaces and _.:/=+-@, at most 128)",
                  "spell the key with those only"),
            Check(f"[Aa][Ww][Ss]:.*|{STACK_TAG}|{TEAM_TAG}", "is reserved: AWS's own keys start with aws:, and "
                  f"the program sets {STACK_TAG} to the stack's name and {TEAM_TAG} to a team's name on the team's "
                  "load balancers", "choose another key", refuse=True),
            Check("|".join([*map(re.escape, EBS_CSI_RESERVED_TAG_KEYS),
                            *(f"{re.escape(prefix)}.*" for prefix in EBS_CSI_RESERVED_TAG_PREFIXES)]),
                  "is reserved by the EBS CSI driver, which tags the claims' volumes with the site's tags and would "
                  f"not start with this one ({', '.join(EBS_CSI_RESERVED_TAG_KEYS)} and keys starting with "
                  f"{' or '.join(EBS_CSI_RESERVED_TAG_PREFIXES)} are its own and Kubernetes')", "choose another key",
                  refuse=True),
            Check("[^=]*", "holds '=', where the EBS CSI driver's list of tags ends a key (the claims' volumes "
                  "would get another tag)", "leave '=' out of the key"),
            Check(EDGE_SPACES, "starts or ends with a space, which the EBS CSI driver trims (the claims' volumes "
                  "would get another key, or none)", "take the spaces at its ends out")),
            value_checks=(Check(AWS_TAG_VALUE, "is not an AWS tag value (letters, digits, spaces and _.:/=+-@, at "
                                "most 256)", "spell the value with those only"),
                          Check(f"({EDGE_SPACES})?", "starts or ends with a space, which the EBS CSI driver "
                                "trims (the claims' volumes would get another value)",
                                "take the spaces at its ends out")),
            max_entries=MAX_SITE_TAGS), {},
        "Tags on every AWS resource the program creates.", example="{cost-center: ml-platform, site: lab-east}",
        details=f"Beside `{STACK_TAG}: <stack>`, which every resource carries: the AWS provider's default tags, "
                "on the cluster, its node groups and their launch templates, the VPC and its parts, the IAM roles, "
                "the EBS CSI add-on and the control plane's log group; and, through the launch templates, the nodes' "
                "instances and root volumes, which EKS starts and no default tag reaches. Activate the keys as cost "
                "allocation tags in AWS Billing to split the account's bill by site. The volumes and snapshots the "
                "EBS CSI driver creates for claims carry them too (the add-on's `extraVolumeTags`), with "
                f"`{EBS_CSI_CLAIM_NAMESPACE_TAG}`, the claim's namespace on the host: the team's, to split them by "
                f"team. So do the teams' load balancers, with `{TEAM_TAG}: <team>` (then no value may hold `=`, where "
                "the cloud provider ends it: [charging](observability-charging.md)). A change retags "
                "the program's resources in place, updates the add-on (volumes created before keep their tags) and "
                "makes a new launch template version, so EKS replaces every node of each group."),
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
    Key("autoscaler", Text(choices=AUTOSCALERS), NO_AUTOSCALER, "What sizes the node groups.",
        example=CLUSTER_AUTOSCALER, details=(
            "`none`: nothing does. Each group runs its `desiredSize` nodes, set again by every `pulumi up`, and the "
            "capacity warnings count that many. `cluster-autoscaler`: the site runs the Kubernetes Cluster "
            "Autoscaler, which finds the groups by the tags EKS gives their Auto Scaling groups "
            "(`--node-group-auto-discovery=asg:tag=k8s.io/cluster-autoscaler/enabled,"
            "k8s.io/cluster-autoscaler/<cluster>`) and sizes each between `minSize` and `maxSize`. Then `pulumi up` "
            "leaves a group's size to it (pulumi-eks `ignoreScalingChanges`: it would otherwise set `desiredSize` "
            "again, removing nodes with running work), the capacity warnings count `maxSize`, and GPU nodes carry "
            "`k8s.amazonaws.com/accelerator`, by which the autoscaler waits for a new node's GPUs to appear instead "
            "of adding more nodes, and a MIG-split or time-sliced group is tagged with what its nodes advertise "
            "(`k8s.io/cluster-autoscaler/node-template/resources/...`: the slices, or each card's replicas), which "
            "the autoscaler reads from EKS for a group with no node, where it would count the instance type's whole "
            "GPUs and never add a node for pods asking for MIG slices. The autoscaler reads a pod's whole GPUs "
            "(`nvidia.com/gpu`), not KAI's GPU fractions, which are annotations: pending fractional pods alone add "
            "no node. KAI's "
            "node-scale-adjuster, which would stand in for them, stays off: it makes placeholder pods holding "
            "whole GPUs outside every queue for any fractional pod KAI has not placed, a team's over its queue "
            "limit too. Nor does the autoscaler read KAI's queues: a team's pending pods over its limit make it add "
            "nodes too, up to `maxSize`, and it never removes a node running a pod marked not safe to evict "
            "(`cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\"`), which vCluster writes on every tenant "
            "pod without a controller (bare pods, as KAI's examples run) and a tenant may write on any: such pods "
            "keep their nodes. The program does not install the autoscaler or its IAM role.")),
    Key("apiEndpoint", API_ENDPOINT, {}, "Who reaches the cluster's Kubernetes API server."),
    Key("controlPlaneLogs", CONTROL_PLANE_LOGS, {},
        "Which control plane logs EKS keeps in CloudWatch, and for how long."),
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


def _scaling(section: Section, autoscaler: str) -> NodeGroupScaling:
    low, desired, high = section.read("minSize"), section.read("desiredSize"), section.read("maxSize")
    if None not in (low, desired, high) and not low <= desired <= high:
        section.fail("desiredSize", desired, f"must lie between minSize ({low}) and maxSize ({high})",
                     "choose sizes with minSize <= desiredSize <= maxSize")
    return NodeGroupScaling(low, desired, high, autoscaled=autoscaler == CLUSTER_AUTOSCALER)


def read_eks(section: Section) -> EksHost:
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
    autoscaler = section.read("autoscaler")
    system = section.child("systemNodeGroup")
    gpu_groups = [GpuNodeGroup(
        name=group.read("name"),
        instance_types=group.read("instanceTypes"),
        scaling=_scaling(group, autoscaler),
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
            scaling=_scaling(system, autoscaler),
            disk_size=system.read("diskSize"),
        ),
        gpu_node_groups=tuple(gpu_groups),
        ebs_csi_addon_version=addon,
        autoscaler=autoscaler,
        api_endpoint=_api_endpoint(section.child("apiEndpoint"), creates_network=vpc_id is None),
        control_plane_logs=_control_plane_logs(section.child("controlPlaneLogs")),
        support_type=section.read("supportType"),
        tags=section.read("tags"),
    )


def _control_plane_logs(section: Section) -> EksControlPlaneLogs:
    return EksControlPlaneLogs(types=section.read("types") or (), retention_days=section.read("retentionDays"))


def _api_endpoint(section: Section, creates_network: bool) -> EksApiEndpoint:
    """EKS needs one endpoint at least, and nodes need a way to theirs: the private one, or the public one from
    the NAT gateway's address."""
    public, private = section.read("publicAccess"), section.read("privateAccess")
    cidrs = section.read("publicAccessCidrs")
    if public is False and private is False:
        section.fail("privateAccess", private, "leaves the cluster with no API server endpoint (publicAccess is "
                     "false too), which EKS refuses", "set cluster.eks.apiEndpoint.privateAccess: true")
    if public is False and section.has("publicAccessCidrs"):
        section.fail("publicAccessCidrs", cidrs, "lists addresses for a public endpoint that publicAccess: false "
                     "turns off", "remove cluster.eks.apiEndpoint.publicAccessCidrs, or set publicAccess: true")
    if public and private is False and creates_network and cidrs and EVERY_ADDRESS not in cidrs:
        section.fail("publicAccessCidrs", list(cidrs), "leaves out the address of the NAT gateway the program "
                     "creates with the VPC, the only way its nodes reach a public-only API server: no node would "
                     "join the cluster and the node groups fail to create",
                     "set cluster.eks.apiEndpoint.privateAccess: true")
    return EksApiEndpoint(public_access=public is not False, public_access_cidrs=cidrs or (EVERY_ADDRESS,),
                          private_access=private is not False)


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
