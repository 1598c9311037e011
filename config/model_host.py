"""The validated host cluster: plain, immutable data about the machines the platform runs on.

Each host kind's own settings (a MicroK8s box, an EKS cluster with its node groups, an existing cluster reached by
kubeconfig), what a kind provides (its profile: node pools, storage, DNS) and the process-table limits of the nodes
the program builds. They live apart from config/model.py, the platform that runs on the host and its teams, so that
what a site says of its machines reads in one place, beside the profile config/hosts.py derives from it. Field names
follow Python style; the stack-config keys are camelCase (docs/config-reference.md). Nothing here talks to Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from config import versions
from config.access import Access

# Processes and threads one pod may hold on a node the program builds (cluster.podPidsLimit, whose declaration in
# config/load_host.py says why this much).
DEFAULT_POD_PIDS_LIMIT = 16384
# What the kubelets of the built nodes keep of the process table beside the per-pod limit (components/node_pids.py
# says how each is derived): processes and threads held back from all pods together for the kernel and the
# host's daemons (kubelet `systemReserved` `pid`), and the share of the table left free below which the kubelet
# evicts pods (hard threshold `pid.available`). The threshold is at least the reserve on every node of 5 GiB
# of memory or more (threads-max is the memory over 128 KiB), so the kubelet evicts before pods reach the
# reserve.
SYSTEM_PID_RESERVE = 4096
PID_EVICTION_THRESHOLD = "10%"
# Memory a MicroK8s box keeps from all pods together for the snap's own services (kubelet `systemReserved` `memory`;
# cluster.microk8s.systemReservedMemory, whose declaration in config/load_microk8s.py says why this much).
DEFAULT_SYSTEM_MEMORY_RESERVE = "4Gi"
# What sizes an EKS site's node groups (cluster.eks.autoscaler): nothing, so each runs its desiredSize, or the
# Kubernetes Cluster Autoscaler the site runs, within minSize and maxSize.
NO_AUTOSCALER = "none"
CLUSTER_AUTOSCALER = "cluster-autoscaler"
AUTOSCALERS = (NO_AUTOSCALER, CLUSTER_AUTOSCALER)


@dataclass(frozen=True)
class HostDns:
    """The path a tenant's control plane, DNS and snapshot pods take to the host's DNS (config/load_host.py
    ``cluster.kubeconfig.dns`` says what each field means). The default is the kube-dns layout of EKS, MicroK8s,
    kubeadm and k3s."""

    service: str = "kube-system/kube-dns"
    namespace: str = "kube-system"
    pod_labels: Mapping[str, str] = field(default_factory=lambda: {"k8s-app": "kube-dns"})
    port: int = 53
    node_local_addresses: tuple[str, ...] = ()


@dataclass(frozen=True)
class Taint:
    """A node taint in Kubernetes spelling (effect ``NoSchedule``, not EKS' ``NO_SCHEDULE``)."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodePool:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...] = ()
    gpu: bool = False
    # Label keys under these prefixes are set on the nodes by operators (node feature discovery,
    # GPU feature discovery): present, values unknown until the nodes run.
    managed_prefixes: tuple[str, ...] = ()

    def admits(self, node_selector: Mapping[str, str]) -> bool:
        """Whether a pod with this nodeSelector can be placed on the pool's nodes (labels only)."""
        return all(self.labels.get(key) == value for key, value in node_selector.items())


@dataclass(frozen=True)
class HostProfile:
    """What a host kind provides and what the platform must add to it: config/hosts.py builds it and says
    what each field means."""

    kind: str
    api_server_port: Optional[int]
    storage_class: Optional[str]
    creates_storage_class: bool
    gpu_driver_preinstalled: bool
    gpu_toolkit_preinstalled: bool
    node_pools: Optional[tuple[NodePool, ...]]
    tenant_node_labels: Mapping[str, str] = field(default_factory=dict)
    host_dns: HostDns = HostDns()
    # Node ports the nodes' container runtime pulls images from as a registry of their own.
    trusted_node_ports: tuple[int, ...] = ()
    # Where the API server's endpoints listen, where the site states it (config/hosts.py); empty: any address.
    api_server_addresses: tuple[str, ...] = ()
    # The Service ranges where the network plugin judges egress before a Service is translated (config/hosts.py).
    untranslated_service_ranges: tuple[str, ...] = ()
    # Where the `kubernetes` Service may be among them: the first address of the cluster's primary range.
    kubernetes_service_addresses: tuple[str, ...] = ()
    # The Service annotations of the host's load-balancer implementation a team given load balancers may set.
    load_balancer_annotations: tuple[str, ...] = ()


# Where a MicroK8s box's API server reads the program's audit policy (beside the snap's own admission config in
# $SNAP_DATA/args, named apart so no file of the site's is overwritten) and writes its audit log ($SNAP_COMMON, which
# the snap keeps across refreshes; the API server creates the folder, readable by root only).
MICROK8S_AUDIT_POLICY_FILE = "/var/snap/microk8s/current/args/gpu-tenancy-audit-policy.yaml"
MICROK8S_AUDIT_LOG_FILE = "/var/snap/microk8s/common/var/log/kube-apiserver/audit.log"


@dataclass(frozen=True)
class AuditLog:
    """The API server's audit log on a MicroK8s box (``cluster.microk8s.auditLog``; config/load_microk8s.py says what
    each key means, components/apiserver_audit.py how it is set)."""

    enabled: bool = True
    max_age_days: int = 30
    max_backups: int = 10
    max_size_megabytes: int = 100

    @property
    def disk_megabytes(self) -> int:
        """The most the log takes on the box's disk: the file being written and every rotated one kept."""
        return (self.max_backups + 1) * self.max_size_megabytes


@dataclass(frozen=True)
class MicroK8sHost:
    host: Optional[str]
    user: str
    port: int
    use_sudo: bool
    enable_nvidia_addon: bool
    nvidia_addon_operator_version: str
    api_server_url: Optional[str]
    gpus: int
    kubernetes_version: str
    # Left out, kubernetes_version is the oldest the program supports: an assumption, not the box's.
    kubernetes_version_stated: bool = True
    # The box's allocatable as the site states it (quantities), for the teams' cpu and memory guarantees.
    cpu: Optional[str] = None
    memory: Optional[str] = None
    audit_log: AuditLog = AuditLog()
    system_reserved_memory: str = DEFAULT_SYSTEM_MEMORY_RESERVE

    @property
    def remote(self) -> bool:
        return self.host is not None


@dataclass(frozen=True)
class NodeGroupScaling:
    min_size: int
    desired_size: int
    max_size: int
    # Whether the site's Cluster Autoscaler sizes the group (cluster.eks.autoscaler); otherwise nothing changes
    # its size after `pulumi up` sets desiredSize, and minSize and maxSize bound nothing.
    autoscaled: bool = False

    @property
    def most_nodes(self) -> int:
        return self.max_size if self.autoscaled else self.desired_size

    @property
    def may_be_empty(self) -> bool:
        return (self.min_size if self.autoscaled else self.desired_size) == 0


@dataclass(frozen=True)
class SystemNodeGroup:
    instance_types: tuple[str, ...]
    scaling: NodeGroupScaling
    disk_size: int


@dataclass(frozen=True)
class GpuNodeGroup:
    name: str
    instance_types: tuple[str, ...]
    scaling: NodeGroupScaling
    disk_size: int
    sharing_profile: Optional[str]
    labels: dict[str, str]
    # The MIG manager's layout for the group's GPUs (node label nvidia.com/mig.config); None: no MIG.
    mig_config: Optional[str] = None


# What EKS gives a cluster when its endpoint settings are left out: a public endpoint every address reaches.
EVERY_ADDRESS = "0.0.0.0/0"


@dataclass(frozen=True)
class EksApiEndpoint:
    """Who reaches the cluster's Kubernetes API server: from the internet (``public_access_cidrs``) and from inside
    the VPC (``private_access``: nodes and pods then reach it without leaving the VPC)."""
    public_access: bool = True
    public_access_cidrs: tuple[str, ...] = (EVERY_ADDRESS,)
    private_access: bool = True

    @property
    def open_to_every_address(self) -> bool:
        return self.public_access and EVERY_ADDRESS in self.public_access_cidrs


# The control plane logs EKS can send to CloudWatch Logs, and the retention periods CloudWatch takes (0: never
# expire); tests/test_eks_control_plane_logs.py reads both from the pinned pulumi-eks and pulumi-aws.
EKS_LOG_TYPES = ("api", "audit", "authenticator", "controllerManager", "scheduler")
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922,
                      3288, 3653, 0)


@dataclass(frozen=True)
class EksControlPlaneLogs:
    """Which control plane logs EKS sends to CloudWatch Logs, and how many days the log group keeps them."""
    types: tuple[str, ...] = ("audit", "authenticator")
    retention_days: int = 90

    def log_group(self, cluster_name: str) -> str:
        """The log group EKS writes every type to, which it would create with no retention if it did not exist."""
        return f"/aws/eks/{cluster_name}/cluster"


# The tag every AWS resource of a site carries, valued with the stack's name: a site's costs in one account's bill.
STACK_TAG = "gpu-tenancy/stack"
# The tag of a team's load balancers on EKS, valued with the team's name (config/load_balancer_tags.py).
TEAM_TAG = "gpu-tenancy/team"
# AWS's limits on a tag (its key and value: letters, digits, spaces and _.:/=+-@, at most 128 and 256 characters; keys
# starting with aws: are AWS's own), and how many a site may add: a resource takes 50, and pulumi-eks and the node
# groups' autoscaler hints add their own.
AWS_TAG_KEY = "[A-Za-z0-9 _.:/=+@-]{1,128}"
AWS_TAG_VALUE = "[A-Za-z0-9 _.:/=+@-]{0,256}"
MAX_SITE_TAGS = 40
# The keys and key prefixes the EBS CSI driver refuses among its extra tags (its controller then does not start, and
# no claim gets a volume), which are the site's tags (components/host.py): its own volume and snapshot names, and the
# prefixes it and Kubernetes tag with, "kubernetes.io" without a slash as the driver tests it
# (tests/test_ebs_csi_tags_contract.py reads them from the driver).
EBS_CSI_RESERVED_TAG_KEYS = ("CSIVolumeName", "CSIVolumeSnapshotName")
EBS_CSI_RESERVED_TAG_PREFIXES = ("kubernetes.io", "ebs.csi.aws.com/")
# A tag key or value as the EBS CSI driver keeps it: its flag parser trims the spaces at each end (component-base
# MapStringString).
EDGE_SPACES = r"\S(.*\S)?"
# The tag the EBS CSI driver gives each volume it creates for a claim: the claim's namespace on the host, the team's.
EBS_CSI_CLAIM_NAMESPACE_TAG = "kubernetes.io/created-for/pvc/namespace"


# Whether an EKS cluster stays on its minor in extended support (EKS's default) or is moved on at the end of standard
# support (cluster.eks.supportType); EKS's own spelling of each is the upper case.
EKS_SUPPORT_TYPES = ("extended", "standard")


@dataclass(frozen=True)
class EksHost:
    name: str
    region: str
    kubernetes_version: str
    vpc_id: Optional[str]
    public_subnet_ids: tuple[str, ...]
    private_subnet_ids: tuple[str, ...]
    vpc_cidr: str
    availability_zones: int
    system_node_group: SystemNodeGroup
    gpu_node_groups: tuple[GpuNodeGroup, ...]
    # The EBS CSI add-on builds EKS publishes differ by Kubernetes version: a site can pin its own; None
    # looks up the newest build for kubernetes_version when the add-on is created.
    ebs_csi_addon_version: Optional[str]
    # What sizes the node groups: "none" (desiredSize, set by `pulumi up`) or the site's "cluster-autoscaler".
    autoscaler: str = NO_AUTOSCALER
    api_endpoint: EksApiEndpoint = EksApiEndpoint()
    control_plane_logs: EksControlPlaneLogs = EksControlPlaneLogs()
    support_type: str = EKS_SUPPORT_TYPES[0]
    # The site's tags on every AWS resource the program creates, besides the stack's own (STACK_TAG).
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def autoscaled(self) -> bool:
        return self.autoscaler == CLUSTER_AUTOSCALER

    @property
    def most_nodes_key(self) -> str:
        """The key holding the most nodes a group runs (``NodeGroupScaling.most_nodes``)."""
        return "maxSize" if self.autoscaled else "desiredSize"

    @property
    def fewest_nodes_key(self) -> str:
        """The key holding the fewest nodes a group may run (``NodeGroupScaling.may_be_empty``)."""
        return "minSize" if self.autoscaled else "desiredSize"

    @property
    def creates_network(self) -> bool:
        return self.vpc_id is None


@dataclass(frozen=True)
class KubeconfigHost:
    context: Optional[str]
    gpus: Optional[int]
    # The allocatable of the nodes tenant pods run on, added up, as the site states it (quantities).
    cpu: Optional[str] = None
    memory: Optional[str] = None
    storage_class: Optional[str] = None
    api_server_port: Optional[int] = None
    # Where the API server's endpoints listen (network blocks); empty: not stated.
    api_server_addresses: tuple[str, ...] = ()
    # The cluster's Service ranges (network blocks); empty: not stated.
    service_ranges: tuple[str, ...] = ()
    # From KAI's settings: with GPU sharing on, KAI's binder writes ConfigMaps for each fractional pod here.
    gpu_sharing: bool = False
    # Endpoint and identity (config/access.py); the endpoint host is resolved against the host kind.
    access: Access = Access()
    kubernetes_version: str = versions.KUBERNETES_MINIMUM_VERSION
    dns: HostDns = HostDns()
    # Whether the site stated ``dns`` (a warning says what the program assumes when it did not).
    dns_stated: bool = False
    # The network plugins and load balancers the site says the cluster runs (config/host_networking.py); None: not
    # stated.
    networking: Optional[tuple[str, ...]] = None
