"""The validated platform settings: plain, immutable data that components consume.

Field names follow Python style; the stack-config keys they come from are camelCase and are
documented in docs/config-reference.md. Nothing here talks to Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from config import versions
from config.access import Access
from config.mirrors import Mirrors
from config.observability import Observability
from config.team_alerting import TeamAlerting
from config.vocabulary import KAI_NAMESPACE

# Resource units follow KAI's Queue spec: gpu = devices, cpu = millicores, memory = MB.
UNLIMITED = -1
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


@dataclass(frozen=True)
class QueueResource:
    quota: float = UNLIMITED
    limit: float = UNLIMITED
    over_quota_weight: float = 1


@dataclass(frozen=True)
class QueueResources:
    gpu: QueueResource = QueueResource()
    cpu: QueueResource = QueueResource()
    memory: QueueResource = QueueResource()


@dataclass(frozen=True)
class Organization:
    name: str
    display_name: str
    priority: int
    resources: QueueResources


@dataclass(frozen=True)
class ControlPlaneResources:
    requests: dict[str, str]
    limits: dict[str, str]


@dataclass(frozen=True)
class TenantResourceQuota:
    """What the team's own workloads may use in its host namespace (``policies.resourceQuota``); the
    namespace's quota adds the control plane and the DNS (config/tenant_budget.py)."""

    cpu: str
    memory: str
    pods: int
    services: int
    persistent_volume_claims: int
    storage: str = "100Gi"
    # The total of the team's ephemeral-storage limits; None: its pods times the LimitRange's default limit.
    ephemeral_storage: Optional[str] = None
    # What vCluster copies into the host namespace for the team (config/tenant_budget.py derives None).
    config_maps: Optional[int] = None
    secrets: Optional[int] = None
    endpoint_slices: Optional[int] = None
    # The most bytes one ConfigMap's or Secret's copy, and one pod's container text, hold (config/synced_data.py).
    synced_object_bytes: str = "512Ki"
    synced_pod_text_bytes: str = "256Ki"


@dataclass(frozen=True)
class TenantLimitRange:
    """Container defaults for pods that set no requests/limits (``policies.limitRange``)."""

    default_cpu: str
    default_memory: str
    default_request_cpu: str
    default_request_memory: str
    # Ephemeral storage (writable layer, logs, disk-backed emptyDir): the kubelet evicts a pod past its own limit
    # before the node's disk fills (docs/security-model.md#node-pressure).
    default_ephemeral_storage: str = "8Gi"
    default_request_ephemeral_storage: str = "0"
    max_ephemeral_storage: str = "20Gi"


@dataclass(frozen=True)
class TenantServices:
    """What a tenant's synced Services may open on the host: node ports and load balancers (0: none)."""

    node_ports: int = 0
    load_balancers: int = 0


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
class VClusterSettings:
    """A tenant's vCluster settings: the stack's ``vcluster`` defaults merged with team overrides."""

    version: str
    node_labels: dict[str, str]
    sync_runtime_classes: bool
    enforce_tolerations: tuple[str, ...]
    control_plane_resources: ControlPlaneResources
    resource_quota: TenantResourceQuota
    limit_range: TenantLimitRange
    network_policy: bool
    pod_security: str
    extra_values: dict
    services: TenantServices = TenantServices()
    # Classes a tenant's volume claims may use; empty: the host's volume-claim class below, else any.
    storage_classes: tuple[str, ...] = ()
    # From the host, not from the vcluster block: the class of the control plane's volume
    # claim (None: the cluster's default) and the API server port its egress must reach.
    storage_class: Optional[str] = None
    api_server_port: Optional[int] = None
    # From KAI's settings: with GPU sharing on, KAI's binder writes ConfigMaps for each fractional pod here.
    gpu_sharing: bool = False
    host_dns: HostDns = HostDns()
    # Endpoint and identity (config/access.py); the endpoint host is resolved against the host kind.
    access: Access = Access()
    # Every tenant container pulls its image on start (a stack setting: it protects a team only if all comply).
    always_pull_images: bool = False
    # The registries (host[:port][/path prefix]) tenant images may come from; None: any (a stack setting).
    allowed_registries: Optional[tuple[str, ...]] = None
    # The site's mirrors (config/mirrors.py): the platform's images in the virtual cluster are pulled from them.
    mirrors: Mirrors = Mirrors()
    # The longest terminationGracePeriodSeconds a tenant pod may set (config/load_vcluster.py says why).
    max_termination_grace_seconds: int = 600


# A team's GPU isolation tier (config/isolation.py says what each one needs and promises).
SHARED = "shared"
MEMORY_CAPPED = "memory-capped"
MIG = "mig"
EXCLUSIVE = "exclusive"
ISOLATION_TIERS = (SHARED, MEMORY_CAPPED, MIG, EXCLUSIVE)


@dataclass(frozen=True)
class Isolation:
    tier: str = SHARED
    # The MIG profile a `mig` team's pods may ask for, e.g. 1g.10gb.
    mig_profile: Optional[str] = None
    # The GPU node pool the team's pods are pinned to (None: every GPU pool the vCluster syncs).
    node_pool: Optional[str] = None
    # A mig team's device-plugin MIG strategy: how its slices are named to pods (config/isolation.py).
    mig_strategy: Optional[str] = None


@dataclass(frozen=True)
class Team:
    name: str
    display_name: str
    priority: int
    resources: QueueResources
    vcluster_name: str
    namespace: str
    protect: bool
    vcluster: VClusterSettings
    isolation: Isolation = Isolation()
    alerting: TeamAlerting = TeamAlerting()

    @property
    def queue_name(self) -> str:
        return self.name


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
    # The box's allocatable as the site states it (quantities), for the teams' cpu and memory guarantees.
    cpu: Optional[str] = None
    memory: Optional[str] = None

    @property
    def remote(self) -> bool:
        return self.host is not None


@dataclass(frozen=True)
class NodeGroupScaling:
    min_size: int
    desired_size: int
    max_size: int


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
    # From KAI's settings: with GPU sharing on, KAI's binder writes ConfigMaps for each fractional pod here.
    gpu_sharing: bool = False
    # Endpoint and identity (config/access.py); the endpoint host is resolved against the host kind.
    access: Access = Access()
    kubernetes_version: str = versions.KUBERNETES_MINIMUM_VERSION
    dns: HostDns = HostDns()
    # Whether the site stated ``dns`` (a warning says what the program assumes when it did not).
    dns_stated: bool = False


@dataclass(frozen=True)
class Cluster:
    kind: str
    microk8s: Optional[MicroK8sHost] = None
    eks: Optional[EksHost] = None
    kubeconfig: Optional[KubeconfigHost] = None
    # The kubelet's podPidsLimit: set on the nodes of a microk8s or eks host, the site's to set on a kubeconfig one.
    pod_pids_limit: int = DEFAULT_POD_PIDS_LIMIT

    @property
    def kubernetes_version(self) -> str:
        """The Kubernetes minor version the site runs (``1.NN``), as its settings state it."""
        host = self.microk8s or self.eks or self.kubeconfig
        return host.kubernetes_version if host is not None else versions.KUBERNETES_MINIMUM_VERSION

    @property
    def kubectl_image(self) -> str:
        """The kubectl the platform's Jobs and hooks run: the one pinned for the site's Kubernetes, within kubectl's
        one-minor skew of its API server (every version the config accepts has one)."""
        return versions.KUBECTL_IMAGES[self.kubernetes_version]


@dataclass(frozen=True)
class TimeSlicing:
    replicas: int
    default_profile: str
    config_map_name: str


@dataclass(frozen=True)
class GpuOperator:
    mode: str
    version: str
    namespace: str
    driver_enabled: bool
    toolkit_enabled: bool
    time_slicing: TimeSlicing
    # The device plugin's MIG strategy (chart value mig.strategy), rendered when a pool is split.
    mig_strategy: str = "mixed"
    # Whether a GPU node group is split into MIG slices (config/isolation.py).
    mig_split: bool = False


@dataclass(frozen=True)
class KaiScheduler:
    version: str
    gpu_sharing: bool
    namespace: str = KAI_NAMESPACE
    # KAI's hamicore binder and pod-webhook plugins, on when a team is memory-capped (config/isolation.py).
    hamicore: bool = False
    # Where its images and chart come from (config/versions.py, under the site's mirrors).
    image_registry: str = versions.KAI_IMAGE_REGISTRY
    chart: str = versions.KAI_CHART
    repo: Optional[str] = None


@dataclass(frozen=True)
class CiSettings:
    # Labels of the self-hosted runner that can reach this site; empty: a GitHub-hosted runner.
    runner: tuple[str, ...] = ()


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
    nvidia_default_runtime: Optional[bool]
    node_pools: Optional[tuple[NodePool, ...]]
    tenant_node_labels: Mapping[str, str] = field(default_factory=dict)
    host_dns: HostDns = HostDns()


@dataclass(frozen=True)
class Platform:
    project: str
    stack: str
    cluster: Cluster
    gpu_operator: GpuOperator
    kai_scheduler: KaiScheduler
    organization: Organization
    teams: tuple[Team, ...]
    warnings: tuple[str, ...] = field(default=())
    host: Optional[HostProfile] = None
    # Information for the reviewer (logged, not warned): e.g. GPUs guaranteed to no team.
    notes: tuple[str, ...] = field(default=())
    ci: CiSettings = field(default=CiSettings())
    # Secret keys this site needs that are not set yet (only where placeholders were allowed).
    missing_secrets: tuple[str, ...] = field(default=())
    observability: Observability = field(default_factory=Observability)
    mirrors: Mirrors = field(default_factory=Mirrors)

    @property
    def kubectl_image(self) -> str:
        """The site's kubectl (Cluster.kubectl_image) under its mirror."""
        return self.mirrors.image(self.cluster.kubectl_image)
