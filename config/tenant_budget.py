"""What a tenant namespace must hold besides the team's own pods: its vCluster control plane and its DNS.

A team's ``vcluster.resourceQuota`` is what its workloads get. The control plane (a StatefulSet with a data
volume) and the tenant's CoreDNS (one pod, scheduled by KAI in the team's queue) run in the same host
namespace and pay out of the same ResourceQuota, so the namespace's quota is the team's allowance plus this
overhead, and the team's KAI queue is the allowance plus the DNS (the control plane is not scheduled by KAI).
The same holds for the objects the quota counts: the Secrets, ConfigMaps and EndpointSlices the platform keeps
in the namespace (:func:`platform_objects`) are paid on top of what vCluster may copy there for the team.
Pure arithmetic on config; the vCluster values are written in components/tenant_quota.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from config import versions
from config.key_types import quantity_value
from config.access import Access
from config.backing_store import control_plane_shape
from config.model import TenantResourceQuota, VClusterSettings
from config.snapshots import JOB_LIMITS, JOB_REQUESTS, JOB_SECRETS, PROXY_LIMITS, PROXY_REQUESTS
from config.vocabulary import HELM_MAX_HISTORY

# The tenant CoreDNS container (components/tenant_dns.py): one replica.
DNS_REQUESTS = {"cpu": "50m", "memory": "64Mi"}
DNS_LIMITS = {"cpu": "500m", "memory": "170Mi"}
DNS_REPLICAS = 1
# The API Service's ports that take a node port: `https` only. The chart adds a `kubelet` port to a NodePort
# Service while proxyKubelets.byHostname is on, which the program turns off (components/tenant.py).
CONTROL_PLANE_NODE_PORTS = {"nodePort": 1, "loadBalancer": 1}

MEBIBYTE = 2 ** 20

# The objects the platform keeps in a tenant namespace at every accepted vCluster release (VCLUSTER_RELEASES;
# tests/test_tenant_object_counts.py renders the chart at each and reads the syncer's source at each tag):
# - the chart renders one Secret, the control plane's config (vc-config-<release>), and no ConfigMap;
# - the syncer writes two Secrets at start: its certificates (<release>-certs, pkg/certs/ensure.go) and the
#   tenant's kubeconfig (vc-<release>, pkg/util/kubeconfig/kubeconfig.go);
# - Helm keeps at most HELM_MAX_HISTORY release Secrets (helm pkg/storage/storage.go Create prunes to one fewer
#   before it writes a revision; the Secret driver is the default one);
# - the host's controller-manager publishes kube-root-ca.crt into every namespace;
# - every pod with a service-account token names its virtual namespace's kube-root-ca.crt, and vCluster copies it
#   to the host as it copies any ConfigMap, one per virtual namespace: kube-root-ca.crt-x-<namespace>-x-<release>
#   (pkg/mappings/resources/configmaps.go keeps one shared name only for a host name that would stay
#   kube-root-ca.crt, which the program's single-namespace sync never gives). The platform pays for the copies of
#   the tenant DNS's namespace and of `default`, where a team's pods run unless it makes namespaces; each further
#   virtual namespace with pods costs the team one ConfigMap of its allowance;
# - vCluster copies the tenant CoreDNS's config, which its pod names.
CHART_SECRETS = 1
SYNCER_SECRETS = 2
ROOT_CA_VIRTUAL_NAMESPACES = ("kube-system", "default")
ROOT_CA_CONFIG_MAPS = 1 + len(ROOT_CA_VIRTUAL_NAMESPACES)
DNS_CONFIG_MAPS = 1
# With GPU sharing on, KAI's binder writes two ConfigMaps in the pod's namespace for each fractional pod it binds,
# its device list and its -evar environment (KAI pkg/binder/plugins/gpusharing/gpu_sharing.go, UpsertJobConfigMap),
# owned by the pod. They are the team's pods' own, so they count against its configMaps allowance.
KAI_SHARING_CONFIG_MAPS = 2
# The host makes each Service's EndpointSlices, one per IP family on a dual-stack cluster (its EndpointSlice
# controller for a Service with a selector, its mirroring controller from the Endpoints vCluster copies for one
# without); the team's allowance pays for what vCluster copies beyond that and for slices past 100 endpoints.
IP_FAMILIES = 2
# ConfigMaps and Secrets vCluster may copy for each pod the team is promised, and EndpointSlices for each of its
# Services, where the team states no allowance (vcluster.resourceQuota configMaps, secrets, endpointSlices).
OBJECTS_PER_POD = 2
SLICES_PER_SERVICE = 2


@dataclass(frozen=True)
class Budget:
    """Amounts in base units: millicores, bytes, objects."""

    millicores: int
    memory: int
    pods: int
    services: int
    claims: int
    storage: int
    # The sum of the containers' ephemeral-storage limits (``limits.ephemeral-storage``).
    ephemeral_storage: int = 0
    config_maps: int = 0
    secrets: int = 0
    endpoint_slices: int = 0

    def __add__(self, other: "Budget") -> "Budget":
        return Budget(*(getattr(self, name) + getattr(other, name) for name in self.__dataclass_fields__))


def _millicores(quantity: str) -> int:
    return round(quantity_value(str(quantity)) * 1000)


def _bytes(quantity: str) -> int:
    return round(quantity_value(str(quantity)))


def dns_budget(settings: Optional[VClusterSettings] = None) -> Budget:
    """The DNS pod; with ``settings``, also its one container's ephemeral-storage limit (the LimitRange's default)."""
    return Budget(millicores=_millicores(DNS_REQUESTS["cpu"]) * DNS_REPLICAS,
                  memory=_bytes(DNS_REQUESTS["memory"]) * DNS_REPLICAS, pods=DNS_REPLICAS, services=0, claims=0,
                  storage=0, ephemeral_storage=_bytes(settings.limit_range.default_ephemeral_storage) * DNS_REPLICAS
                  if settings else 0)


def control_plane_budget(settings: VClusterSettings) -> Budget:
    """The control plane and, with a deployed etcd, etcd's replicas (config/backing_store.py): their requests,
    ephemeral-storage limits, claims and Services."""
    shape = control_plane_shape(settings)
    requests = settings.control_plane_resources.requests
    defaults = settings.limit_range
    # The chart sets the syncer's ephemeral-storage limit itself (config/versions.py); a site may override it. Its
    # init container (which copies the Kubernetes binaries) sets none and takes the LimitRange's default, and the
    # quota charges a pod the larger of its containers' sum and its largest init container.
    syncer = settings.control_plane_resources.limits.get(
        "ephemeral-storage", versions.VCLUSTER_CONTROL_PLANE_LIMITS.get("ephemeral-storage",
                                                                     defaults.default_ephemeral_storage))
    ephemeral = max(_bytes(syncer), _bytes(defaults.default_ephemeral_storage))
    plane = Budget(millicores=_millicores(requests.get("cpu", defaults.default_request_cpu)),
                   memory=_bytes(requests.get("memory", defaults.default_request_memory)), pods=1,
                   services=shape.services, claims=len(shape.volumes),
                   storage=sum(map(_bytes, shape.volumes)), ephemeral_storage=ephemeral)
    if not shape.deployed_etcd:
        return plane
    # etcd's one container sets no ephemeral-storage limit: it takes the LimitRange's default.
    etcd = shape.etcd_replicas
    return plane + Budget(
        millicores=_millicores(shape.etcd_requests.get("cpu", defaults.default_request_cpu)) * etcd,
        memory=_bytes(shape.etcd_requests.get("memory", defaults.default_request_memory)) * etcd, pods=etcd,
        services=0, claims=len(shape.etcd_volumes) * etcd,
        storage=sum(map(_bytes, shape.etcd_volumes)) * etcd,
        ephemeral_storage=_bytes(defaults.default_ephemeral_storage) * etcd)


def control_plane_node_ports(access: Access) -> int:
    """Node ports the control plane's API Service holds: Kubernetes' quota counts every port of a NodePort
    Service, and of a LoadBalancer Service unless it sets ``allocateLoadBalancerNodePorts: false`` (the
    program does not: an instance-target load balancer reaches the pod through them)."""
    return CONTROL_PLANE_NODE_PORTS.get(access.exposure, 0)


def control_plane_load_balancers(access: Access) -> int:
    return int(access.exposure == "loadBalancer")


def team_ephemeral_storage(settings: VClusterSettings) -> int:
    """The total of the team's ephemeral-storage limits: as configured, else what its pods hold at the default."""
    quota, limits = settings.resource_quota, settings.limit_range
    if quota.ephemeral_storage is not None:
        return _bytes(quota.ephemeral_storage)
    return quota.pods * _bytes(limits.default_ephemeral_storage)


def kai_config_maps(pods: int, gpu_sharing: bool) -> int:
    """The ConfigMaps KAI writes for the team's pods were every promised pod fractional."""
    return KAI_SHARING_CONFIG_MAPS * pods if gpu_sharing else 0


def team_objects(settings: VClusterSettings) -> tuple[int, int, int]:
    """(ConfigMaps, Secrets, EndpointSlices) the team's pods and Services may bring to the host namespace: as
    configured, else derived (ConfigMaps with KAI's for fractional pods)."""
    quota = settings.resource_quota
    derived = (OBJECTS_PER_POD * quota.pods + kai_config_maps(quota.pods, settings.gpu_sharing),
               OBJECTS_PER_POD * quota.pods, SLICES_PER_SERVICE * quota.services)
    stated = (quota.config_maps, quota.secrets, quota.endpoint_slices)
    return tuple(derived[i] if stated[i] is None else stated[i] for i in range(3))


def team_allowance(settings: VClusterSettings) -> Budget:
    quota = settings.resource_quota
    config_maps, secrets, endpoint_slices = team_objects(settings)
    return Budget(millicores=_millicores(quota.cpu), memory=_bytes(quota.memory), pods=quota.pods,
                  services=quota.services, claims=quota.persistent_volume_claims, storage=_bytes(quota.storage),
                  ephemeral_storage=team_ephemeral_storage(settings), config_maps=config_maps, secrets=secrets,
                  endpoint_slices=endpoint_slices)


def _token_secrets(settings: VClusterSettings) -> int:
    """A site's ``sync.toHost.pods.useSecretsForSATokens`` makes the syncer keep one Secret per synced pod for its
    service-account token (pkg/controllers/resources/pods/token/sa_token_secret.go): the team's and the DNS's."""
    pods = ((settings.extra_values.get("sync") or {}).get("toHost") or {}).get("pods") or {}
    return settings.resource_quota.pods + DNS_REPLICAS if pods.get("useSecretsForSATokens") is True else 0


def platform_objects(settings: VClusterSettings) -> Budget:
    """The Secrets and ConfigMaps the platform keeps in the namespace: the chart's, the syncer's, Helm's history,
    the root CA ConfigMaps, the DNS's config and, with OIDC, the program's authentication ConfigMap."""
    oidc = settings.access.exposed and settings.access.oidc.enabled
    return Budget(millicores=0, memory=0, pods=0, services=0, claims=0, storage=0,
                  config_maps=ROOT_CA_CONFIG_MAPS + DNS_CONFIG_MAPS + int(oidc),
                  secrets=CHART_SECRETS + SYNCER_SECRETS + HELM_MAX_HISTORY + _token_secrets(settings))


def backup_budget(settings: VClusterSettings) -> Budget:
    """With scheduled snapshots (config/snapshots.py): the snapshot job's pod (runs never overlap; its container and
    its sidecar run together), its options Secret and the request it writes, and the requests' ConfigMaps the
    control plane keeps for a day and more. Paid on top of the team's allowance, so a team at its quota cannot stop
    its own backups."""
    backup = settings.backup
    if backup is None:
        return Budget(millicores=0, memory=0, pods=0, services=0, claims=0, storage=0)
    requests, limits = (JOB_REQUESTS, PROXY_REQUESTS), (JOB_LIMITS, PROXY_LIMITS)
    return Budget(millicores=sum(_millicores(each["cpu"]) for each in requests),
                  memory=sum(_bytes(each["memory"]) for each in requests), pods=1, services=0, claims=0, storage=0,
                  ephemeral_storage=sum(_bytes(each["ephemeral-storage"]) for each in limits),
                  config_maps=backup.request_config_maps, secrets=JOB_SECRETS)


def namespace_budget(settings: VClusterSettings) -> Budget:
    """The tenant namespace's ResourceQuota: the team's allowance, its control plane, its DNS, its snapshot job and
    the platform's objects, with the host's EndpointSlices for every Service the namespace may hold."""
    budget = team_allowance(settings) + control_plane_budget(settings) + dns_budget(settings) \
        + backup_budget(settings) + platform_objects(settings)
    return dataclasses.replace(budget, endpoint_slices=budget.endpoint_slices + IP_FAMILIES * budget.services)


def queue_budget(quota: TenantResourceQuota) -> tuple[int, int]:
    """(millicores, bytes) the team's KAI queue must hold: its workloads and its DNS."""
    dns = dns_budget()
    return _millicores(quota.cpu) + dns.millicores, _bytes(quota.memory) + dns.memory


def cpu_quantity(millicores: int) -> str:
    return f"{millicores // 1000}" if millicores % 1000 == 0 else f"{millicores}m"


def bytes_quantity(amount: int) -> str:
    if amount == 0:
        return "0"
    for suffix, factor in (("Gi", 2 ** 30), ("Mi", MEBIBYTE), ("Ki", 2 ** 10)):
        if amount % factor == 0:
            return f"{amount // factor}{suffix}"
    return str(amount)
