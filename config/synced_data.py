"""How many bytes a team's vCluster may write into the host's datastore through the objects it copies.

The namespace's ResourceQuota bounds how many ConfigMaps and Secrets exist there (config/tenant_budget.py), not how
big they are: the API server takes each up to 1 MiB of values (k8s.io/api core/v1 types.go MaxSecretSize, which its
validation holds ConfigMap ``data`` plus ``binaryData`` and Secret ``data`` to) and, beside them, keys limited only
by the request's size. vCluster copies every ConfigMap and Secret a pod names with its data, updates included, so a
team's cluster-admin could write its counts times that into the host's etcd, and a full etcd makes the whole host
read-only. The host's synced-objects policy (components/synced_objects_admission.py, rule ``object-size``) refuses a
copy above the team's ``vcluster.resourceQuota.syncedObjectBytes``, its labels and annotations counted in.

Labels and annotations are copied on every kind (pkg/util/translate translate.go ``HostMetadata``: every annotation
but vCluster's own, plus its bookkeeping) and the API server bounds only annotations, at 256 KiB an object
(apimachinery ``TotalAnnotationSizeLimitB``). The host policies hold those of every other synced kind (pods,
Services, Endpoints, EndpointSlices, claims) to ``SYNCED_METADATA_BYTES`` (rule ``metadata-size``). This module
holds the arithmetic and the datastore limits the program knows. Pure arithmetic on config.
"""

from __future__ import annotations

from typing import Optional, Sequence

from config.key_types import quantity_value
from config.model import Cluster, Team, TenantResourceQuota, VClusterSettings
from config.synced_endpoint_bytes import (
    SELECTOR_ENTRY_BYTES, SERVICE_SPEC_REST_BYTES, SOURCE_RANGE_BYTES, endpoint_slice_bytes, endpoints_bytes,
)
from config.pod_entry_bytes import SYNCED_POD_ENTRY_BYTES
from config.pod_own_bytes import CONTAINER_OWN_BYTES, POD_OWN_BYTES
from config.synced_entry_bytes import CONTAINER_PORT_BYTES, REFERENCE_BYTES, SERVICE_PORT_BYTES, TOLERATION_BYTES
from config.tenant_budget import MEBIBYTE, namespace_budget

# k8s.io/api core/v1 MaxSecretSize: what the API server's validation lets a ConfigMap's or a Secret's values hold.
API_DATA_LIMIT = MEBIBYTE
DEFAULT_OBJECT_BYTES = TenantResourceQuota.synced_object_bytes
DEFAULT_POD_TEXT_BYTES = TenantResourceQuota.synced_pod_text_bytes
# The most keys a copied ConfigMap or Secret may hold. Keys, unlike values, are bounded only by the request's size
# (3 MiB, k8s.io/apiserver pkg/server/config.go MaxRequestBodyBytes): hundreds of thousands of short ones would
# take the policy's sum over them past the API server's CEL cost limit for one expression (components/
# synced_objects_admission.py works it out). Thousands of files in one ConfigMap is not what a pod mounts.
SYNCED_OBJECT_KEYS = 4096
# The labels and annotations of a synced pod, Service, Endpoints, EndpointSlice or claim, keys and values in bytes.
# What vCluster adds is small beside it: the object's virtual name, namespace, uid and kind, the list of the keys it
# copied (managed-annotations), and on a pod its virtual labels again (vcluster.loft.sh/labels), its owner references
# and a service-account token (about 1 KiB) for each projected token it rewrites. Beside them an honest object
# carries a tool's few keys (Helm's meta.helm.sh, app.kubernetes.io labels) or, created by `kubectl apply`, the whole
# object again in kubectl.kubernetes.io/last-applied-configuration: a few KiB for a Service or a claim, tens of KiB
# for a bare pod with a long spec. KAI's keys on a pod do not count (components/admission_metadata.py).
SYNCED_METADATA_BYTES = 64 * 2 ** 10
# The most labels plus annotations a synced object may carry, checked before the policy sums their bytes: annotations
# of one byte each could number 262,144 and labels are bounded only by the request's size, past the CEL cost limit.
SYNCED_METADATA_KEYS = 1024
# A synced pod's status conditions: vCluster copies a tenant's changed virtual conditions onto the host pod whole,
# through pods/status (pods/translate/diff.go Diff: CopyBidirectional over Status.Conditions), and the API server checks
# only a custom condition's type (validation.go validatePodConditions): its status, reason and message are bounded by
# the request's size alone. The host's kubelet writes five conditions of a few short words (the names of unready
# containers at most), KAI one with a short reason (a failed binding's error), and a tenant's readiness gates one each.
SYNCED_POD_CONDITIONS = 64
SYNCED_POD_CONDITION_BYTES = 16 * 2 ** 10
# A synced pod's tolerations, the team's own: the API server bounds each (a key, a value, an effect) but not how many a
# pod has, pod-size counts none, and vCluster carries tolerations a tenant adds to a running pod onto the host pod
# (pods/translate/diff.go calcSpecDiff), so one pod could be grown to the request's size. An honest pod tolerates the
# taints of the nodes it may run on: a few. The host adds its own on top (vCluster's enforced ones, the API server's
# two DefaultTolerationSeconds: not-ready and unreachable).
SYNCED_POD_TOLERATIONS = 64
HOST_DEFAULT_TOLERATIONS = 2
# A synced pod's containers, init and ephemeral ones included, the team's own: the API server does not bound how many,
# and pod-size counts a bare container as one of its 8,192 list entries. Every container of a pod bound to a shared GPU
# node is started by that node's kubelet and runtime, and is a few kube-state-metrics series of its requests, limits
# and status; a team setting its requests to zero and its ephemeral-storage limits to a byte passes its quota with
# thousands. An honest pod has a main container and a few sidecars, init steps and debug shells; vCluster adds one
# init container (rewriting /etc/hosts) to a pod with a subdomain.
SYNCED_POD_CONTAINERS = 64
HOST_ADDED_CONTAINERS = 1
# A synced pod's volumes and its containers' ports. The API server bounds neither count (each volume and port only by
# its names), they are not text pod-size counts (a volume is one of its 8,192 list entries, a port none), and a pod's
# spec cannot change them afterwards (ephemeral containers have no ports). kube-state-metrics writes two series for
# each claim volume of every pod, Pending ones included (kube_pod_spec_volumes_persistentvolumeclaims_info and
# _readonly, internal/store/pod.go v2.19.1 and v2.20.0), an ephemeral volume becoming one on the host: a pod of 8,192
# claim volumes held 16,384 series, a team's count/pods times that over a million. Ports cost the host's etcd only (a
# container receives on any port without listing it; hostPort needs Pod Security privileged), up to the request's size
# per pod. An honest pod mounts its config, secrets, claims and scratch space (tens at most) and lists the few ports
# its Services name. The platform adds up to three volumes: vCluster's /etc/hosts emptyDir to a pod with a subdomain
# (pods/translate/hosts.go), KAI's device-list ConfigMap to a fractional pod (gpusharing webhook, SetConfigMapVolume),
# the HAMi-core image volume the in-vCluster defaults add to a memory-capped team's fractional pod.
SYNCED_POD_VOLUMES = 128
HOST_ADDED_VOLUMES = 3
SYNCED_POD_PORTS = 256
# The ConfigMaps and Secrets a synced pod names (volumes, projected sources, env and envFrom references, pull secrets).
# The node's kubelet opens a list and a watch of its own on the host API server for each object a pod it runs names
# (kubernetes pkg/kubelet/util/manager/watch_based_manager.go ``AddReference``: one reflector per namespace and name,
# read untagged, that repository is not mirrored), kept while the pod's volumes are read and re-opened on each mount
# retry, whether the object exists or not. A projected volume takes any number of sources and an env any number of
# references (k8s.io/api types.go sets no maximum), only pod-size's 8,192 entries bound them: one pod had a node's
# kubelet hold some 8,000 watches on the API server every team shares, a team's count/pods times that close to a
# million. An honest pod names its config, its credentials and a pull secret, and takes a few keys by reference: tens.
# The platform adds at most eight: KAI's device-list ConfigMap as a volume, an envFrom and three env references to a
# fractional container, HAMi-core's memory limit reference, vCluster's token Secret where a site has it write one.
SYNCED_POD_REFERENCES = 256
HOST_ADDED_REFERENCES = 8
POD_REFERENCE_CAP = SYNCED_POD_REFERENCES + HOST_ADDED_REFERENCES
# A synced Service's ports, and a synced Endpoints' or EndpointSlice's endpoint ports. The API server bounds neither a
# Service's ports nor an Endpoints' addresses and ports, and an EndpointSlice only to 1,000 endpoints of up to 100
# addresses and zone hints each, times 100 ports (k8s.io/api discovery/v1 types.go). What they cost others is a
# product: every node's kube-proxy programs each port of a Service for each endpoint serving it, and kube-state-metrics
# writes a series for each address (and zone hint) of a slice and each port (internal/store/endpointslice.go), each
# address and port pair of an Endpoints where its collector is on (endpoint.go). The host's own EndpointSlice
# controller writes a Service's ports into every slice, so a Service of more than 100 has no endpoints on the host
# anyway; an honest one has a few (HTTP, gRPC, metrics). An honest selector-less Service names a few external
# addresses (a database's primary and replicas) on a few ports.
SYNCED_SERVICE_PORTS = 100
SYNCED_ENDPOINT_ENTRIES = 1000
# A synced Service's selector, on the host (vCluster adds two labels: its own and the virtual namespace's), and its
# loadBalancerSourceRanges. The API server bounds each label and lets each range carry padding spaces, but neither's
# count: a selector of thousands of labels is a Service of megabytes in the host's etcd, matched against every pod of
# the namespace by the host's EndpointSlice controller. An honest selector names an app, an instance and a component
# (a Helm chart's three labels); an honest load balancer admits a few office and VPN ranges.
SYNCED_SERVICE_SELECTOR_LABELS = 32
SYNCED_SERVICE_SOURCE_RANGES = 64
# Far above what the objects an honest tenant's pods name hold (a TLS chain and key, a registry's pull secret, a
# service-account token with its CA, a config file: a few KiB each) and what the platform has the syncer copy (each
# virtual namespace's kube-root-ca.crt, the tenant DNS's Corefile).
MINIMUM_OBJECT_BYTES = 64 * 2 ** 10
# The most entries of the lists holding a pod's free text (env variables, command and args strings, mounts, volumes'
# items, node affinity values, ...: components/pod_text_paths.py) a pod may hold, counted before the policy sums their
# bytes: like keys, they are bounded only by the request's size. An honest pod has tens to hundreds of its own; vCluster adds eight to every container and, unless the pod turns service
# links off, about eight for each port of each Service of its namespace (translator.go ServicesToEnvironmentVariables):
# some 1,500 in each of three containers for a hundred two-port Services.
SYNCED_POD_TEXT_ITEMS = 8192
# Honest pods carry a few KiB of text: a framework's JSON config in one variable (a DeepSpeed or accelerate file), a
# launcher's command line, the downward-API variables vCluster adds, images, mount and item paths (some 9 KiB for three
# containers mounting twenty volumes of ten items each, tests/test_pod_text_attacks.py). The default (256Ki) holds twice the largest one
# variable or argument the Linux kernel starts a process with (MAX_ARG_STRLEN, 128 KiB); the floor is ten times an
# honest pod's text.
MINIMUM_POD_TEXT_BYTES = 64 * 2 ** 10
# Datastore sizes documented for a host kind. EKS: "etcd storage is limited to 8 GiB" (Amazon EKS User Guide,
# clusters.html). MicroK8s keeps its state in dqlite, whose size limit the program cannot read; a kubeconfig host's
# datastore is the site's own (kubeadm's etcd, k3s' SQLite or etcd...). Those get a review note instead.
DATASTORE_LIMITS = {"eks": 8 * 2 ** 30}
# etcd's default backend quota (--quota-backend-bytes; etcd.io docs, dev-guide/limit): what an etcd nobody tuned
# holds before it raises its NOSPACE alarm.
ETCD_DEFAULT_QUOTA = 2 * 2 ** 30


def object_bytes(settings: VClusterSettings) -> int:
    return round(quantity_value(settings.resource_quota.synced_object_bytes))


def pod_text_bytes(settings: VClusterSettings) -> int:
    return round(quantity_value(settings.resource_quota.synced_pod_text_bytes))


def pod_toleration_cap(settings: VClusterSettings) -> int:
    """The tolerations a host pod may carry: its own, the ones vCluster enforces and the API server's defaults."""
    return SYNCED_POD_TOLERATIONS + len(settings.enforce_tolerations) + HOST_DEFAULT_TOLERATIONS


def pod_list_bytes(settings: VClusterSettings) -> int:
    """What a pod's spec holds at its caps past its text: its tolerations, its containers' ports and its ConfigMap
    and Secret references, bounded by count (config/synced_entry_bytes.py), the entries of its other lists, bounded
    by what they store (rule pod-entry-size, config/pod_entry_bytes.py), and what each of its containers (rule
    containers) and the spec store of their own (config/pod_own_bytes.py)."""
    return pod_toleration_cap(settings) * TOLERATION_BYTES + SYNCED_POD_PORTS * CONTAINER_PORT_BYTES + \
        POD_REFERENCE_CAP * REFERENCE_BYTES + SYNCED_POD_ENTRY_BYTES + \
        (SYNCED_POD_CONTAINERS + HOST_ADDED_CONTAINERS) * CONTAINER_OWN_BYTES + POD_OWN_BYTES


# What a Service's spec holds, its lists at their caps (its ports, selector and source ranges), and an Endpoints and
# an EndpointSlice at theirs (config/synced_endpoint_bytes.py).
SERVICE_BYTES = SYNCED_SERVICE_PORTS * SERVICE_PORT_BYTES + SYNCED_SERVICE_SELECTOR_LABELS * SELECTOR_ENTRY_BYTES + \
    SYNCED_SERVICE_SOURCE_RANGES * SOURCE_RANGE_BYTES + SERVICE_SPEC_REST_BYTES
ENDPOINTS_BYTES = endpoints_bytes(SYNCED_ENDPOINT_ENTRIES)
ENDPOINT_SLICE_BYTES = endpoint_slice_bytes(SYNCED_ENDPOINT_ENTRIES)


def metadata_objects(settings: VClusterSettings) -> int:
    """The objects of the other synced kinds the namespace's quota lets exist: pods, Services, an Endpoints for each
    Service, claims and EndpointSlices."""
    budget = namespace_budget(settings)
    return budget.pods + 2 * budget.services + budget.claims + budget.endpoint_slices


def worst_case(settings: VClusterSettings) -> int:
    """Every ConfigMap and Secret the namespace's quota lets exist, each at the cap, every object of the other
    synced kinds with its labels and annotations at theirs, every pod with its containers' text, its status
    conditions, its tolerations, ports and references, what its lists' entries store and its containers' and its
    own fields at their caps, every Service with its ports, selector and source ranges at theirs, and every Endpoints
    (one a Service) and EndpointSlice with its entries at theirs."""
    budget = namespace_budget(settings)
    return (budget.config_maps + budget.secrets) * object_bytes(settings) + \
        metadata_objects(settings) * SYNCED_METADATA_BYTES + \
        budget.pods * (pod_text_bytes(settings) + SYNCED_POD_CONDITION_BYTES + pod_list_bytes(settings)) + \
        budget.services * (SERVICE_BYTES + ENDPOINTS_BYTES) + budget.endpoint_slices * ENDPOINT_SLICE_BYTES


def cap_findings(settings: VClusterSettings, whose: str) -> list[tuple[str, object, str, str]]:
    """A cap that is not a whole number of bytes, above what the API server stores or below what honest objects need."""
    quota = settings.resource_quota
    return [
        *_cap_findings("resourceQuota.syncedObjectBytes", quota.synced_object_bytes, DEFAULT_OBJECT_BYTES,
                       "is above what the API server lets a ConfigMap or Secret hold (1Mi of values), so it would "
                       "bound nothing",
                       (MINIMUM_OBJECT_BYTES, f"TLS, pull and token Secrets and the root CA ConfigMaps vCluster "
                                              f"copies for {whose} pods could be refused, and the pods naming them "
                                              "not start")),
        *_cap_findings("resourceQuota.syncedPodTextBytes", quota.synced_pod_text_bytes, DEFAULT_POD_TEXT_BYTES,
                       "is above what etcd takes in one request (1.5Mi by default) less the rest of a pod, so it "
                       "would bound nothing",
                       (MINIMUM_POD_TEXT_BYTES, f"{whose} pods carrying a large JSON config in an env variable or a "
                                                "long command line could be refused")),
    ]


def _cap_findings(key: str, stated: object, default: str, above_problem: str,
                  floor: tuple[int, str]) -> list[tuple[str, object, str, str]]:
    """The findings of one cap: at most 1Mi, at least ``floor`` (its bytes and what goes wrong below it)."""
    if not isinstance(stated, str):
        return []  # a value refused by its type has its own error
    value = quantity_value(stated)
    minimum, below_problem = floor
    if value != int(value):
        return [(key, stated, "is not a whole number of bytes", "use a value such as 256Ki or 512Ki")]
    if value > API_DATA_LIMIT:
        return [(key, stated, above_problem, f"use at most 1Mi (the default is {default})")]
    if value < minimum:
        return [(key, stated, f"is below {minimum // 2 ** 10}Ki: {below_problem}",
                 f"use at least {minimum // 2 ** 10}Ki (the default is {default})")]
    return []


def _site_total(teams: Sequence[Team]) -> int:
    return sum(worst_case(team.vcluster) for team in teams)


def gibibytes(amount: int) -> str:
    return f"{amount / 2 ** 30:.4g} GiB"


def datastore_warnings(cluster: Optional[Cluster], teams: Sequence[Team]) -> list[str]:
    """The teams together may write more than the host's documented datastore size: they could make it read-only.
    A warning, not an error: it takes every team writing its whole allowance at the cap, and a site that ran before
    the cap existed keeps running."""
    limit = DATASTORE_LIMITS.get(cluster.kind) if cluster is not None else None
    if limit is None or not teams:
        return []
    total = _site_total(teams)
    if total <= limit:
        return []
    return [f"vcluster.resourceQuota.syncedObjectBytes: {_caps_summed(total)}, more than the {gibibytes(limit)} "
            f"the {cluster.kind} host's etcd holds: the teams together could fill it and make the host read-only for "
            "every team and the platform. Lower vcluster.resourceQuota.syncedObjectBytes, syncedPodTextBytes, "
            "configMaps, secrets, pods, services or endpointSlices (the stack's or a team's) until the plan's summary "
            "shows the total under the limit."]


def datastore_notes(cluster: Optional[Cluster], teams: Sequence[Team]) -> list[str]:
    """A host whose datastore size the program cannot know: the reviewer compares the total with it."""
    if cluster is None or cluster.kind in DATASTORE_LIMITS or not teams:
        return []
    total = _site_total(teams)
    if total <= ETCD_DEFAULT_QUOTA:
        return []
    return [f"{_caps_summed(total, sentence_start=True)}, more than the {gibibytes(ETCD_DEFAULT_QUOTA)} an etcd "
            f"holds at its default quota. The program cannot read the {cluster.kind} host's datastore limit: check it "
            "(a full datastore makes the host read-only for every team), or lower syncedObjectBytes, "
            "syncedPodTextBytes, configMaps, secrets, pods, services or endpointSlices."]


def _caps_summed(total: int, *, sentence_start: bool = False) -> str:
    """What the site's total is made of, and the total."""
    return (f"{'T' if sentence_start else 't'}he teams' ConfigMaps and Secrets at their caps "
            f"(vcluster.resourceQuota.syncedObjectBytes times their configMaps and secrets quotas and the platform's, "
            f"summed over the teams, with {SYNCED_METADATA_BYTES // 2 ** 10} KiB of labels and annotations on each of "
            f"their other synced objects, each pod's containers' text at vcluster.resourceQuota.syncedPodTextBytes and "
            f"its status conditions at {SYNCED_POD_CONDITION_BYTES // 2 ** 10} KiB, its tolerations, ports and "
            f"ConfigMap and Secret references at their counts' caps, its lists' other entries at "
            f"{SYNCED_POD_ENTRY_BYTES // 2 ** 10} KiB and its containers' and its own fields at their largest, each "
            f"Service's ports, selector and source ranges, each Endpoints' and EndpointSlice's entries at theirs) "
            f"come to {gibibytes(total)}")
