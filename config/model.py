"""The validated platform settings: plain, immutable data that components consume.

The platform, its operators, its queue tree and its teams with their vCluster settings; the host cluster they run on
(each host kind's settings, node pools, DNS) is config/model_host.py. Field names follow Python style; the
stack-config keys they come from are camelCase and are documented in docs/config-reference.md. Nothing here talks
to Pulumi.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from config import versions
from config.access import Access
from config.mirrors import Mirrors
from config.model_host import DEFAULT_POD_PIDS_LIMIT, EksHost, HostDns, HostProfile, KubeconfigHost, MicroK8sHost
from config.observability import Observability
from config.snapshots import Backup
from config.team_alerting import TeamAlerting
from config.vocabulary import KAI_NAMESPACE

# Resource units follow KAI's Queue spec: gpu = devices, cpu = millicores, memory = MB.
UNLIMITED = -1


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
    # Huge pages of each size the team's pods may request: none unless the site grants them (no queue charges them).
    hugepages2mi: str = "0"
    hugepages1gi: str = "0"
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
    # before the node's disk fills (docs/security-pressure.md#node-pressure).
    default_ephemeral_storage: str = "8Gi"
    default_request_ephemeral_storage: str = "0"
    max_ephemeral_storage: str = "20Gi"


@dataclass(frozen=True)
class TenantServices:
    """What a tenant's synced Services may open on the host: node ports and load balancers (0: none), and the
    load-balancer annotation keys and classes its Services may carry (config/load_balancer_keys.py)."""

    node_ports: int = 0
    load_balancers: int = 0
    load_balancer_annotations: tuple[str, ...] = ()
    load_balancer_classes: tuple[str, ...] = ()
    # The AWS tags the platform puts on the team's load balancers, as (key, value) pairs in the order written
    # (config/load_balancer_tags.py); empty where it puts none.
    load_balancer_tags: tuple[tuple[str, str], ...] = ()


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
    # claim (None: the cluster's default), the API server port its egress must reach, and the Service ranges its
    # network plugin judges before translation (config/hosts.py).
    storage_class: Optional[str] = None
    api_server_port: Optional[int] = None
    api_server_addresses: tuple[str, ...] = ()
    untranslated_service_ranges: tuple[str, ...] = ()
    kubernetes_service_addresses: tuple[str, ...] = ()
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
    # The site's scheduled snapshots (gpu-tenancy:backup, config/snapshots.py), None without.
    backup: Optional[Backup] = None

    @property
    def claim_storage_classes(self) -> tuple[str, ...]:
        """The classes a tenant's claim may name; empty means any class the cluster has."""
        return self.storage_classes or ((self.storage_class,) if self.storage_class else ())


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
    # The device-plugin MIG strategy where a pool is split (config/isolation.py): how a mig team's slices are named
    # to pods; a shared team is then refused MIG slices (None: no pool is split).
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
