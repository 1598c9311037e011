"""Which label and annotation keys a tenant's synced pod may carry on the host: an allowlist over reserved key spaces.

vCluster copies a tenant's pod labels and annotations to the host pod on create and on every later
update, and KAI's components read many of them (tests/kai_keys.py extracts them from KAI's source).
So the host refuses, from the tenant's syncer, every key in a space KAI, run.ai, NVIDIA, vCluster,
Kubernetes or the host's network plugins give meaning to, except:

- the keys the platform grants a tenant (``GRANTED``), each with the value KAI gives meaning to;
- the keys vCluster's syncer writes itself (``SYNCER_KEYS``) and Kubernetes' own controllers and
  tools put on pods (``KUBERNETES_KEYS``);
- keys listed with the upstream reason they decide nothing (``UNREAD_RESERVED``).

Keys outside the reserved spaces are the tenant's (app labels, chart labels). A few *values* of
unreserved keys are reserved too (``RESERVED_APP_VALUES``: KAI's reservation pods, vCluster's pods).
Every KAI key is classified in ``REFUSED``, ``GRANTED``, ``HARMLESS`` or ``NOT_ON_PODS`` with its
reason; tests/test_admission_contract.py keeps that list equal to KAI's source at every pinned tag.
After creation the reserved keys of a pod are fixed, but KAI's own service accounts add the keys they
own (``KAI_WRITERS``); the syncer must carry them back unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.vocabulary import KAI_NAMESPACE, QUEUE_LABEL

LABEL, ANNOTATION = "label", "annotation"


@dataclass(frozen=True)
class KeyClass:
    """A pod key (``prefix*`` for a family), its kind, and the upstream reason for its verdict."""

    key: str
    kind: str
    reason: str


# --- reserved spaces ----------------------------------------------------------------------------------
# Domains (and their subdomains) whose keys a tenant may not set, with who gives them meaning.
RESERVED_DOMAINS = {
    "kai.scheduler": "KAI Scheduler (pkg/common/constants, podgrouper plugins/constants)",
    "kai": "KAI Scheduler's operator (kai/deprecation-timestamp)",
    "run.ai": "KAI's run.ai heritage: reservation pods, scheduling.run.ai CRDs",
    "nvidia.com": "NVIDIA: legacy MIG annotations KAI counts (nvidia.com/mig-*), device-plugin node labels",
    "kubernetes.io": "Kubernetes reserves it for its core components",
    "k8s.io": "Kubernetes reserves it (cdi.k8s.io annotations name devices to the container runtime)",
    "loft.sh": "vCluster's syncer bookkeeping (vcluster.loft.sh)",
    "projectcalico.org": "Calico (MicroK8s' network plugin) lets a pod pick its IP address and pool",
    "cncf.io": "Multus (k8s.v1.cni.cncf.io) attaches the networks a pod names",
    "multus-cni.io": "Multus (v1.multus-cni.io/default-network) replaces a pod's cluster network by the one it names, "
                     "outside every NetworkPolicy",
    "amazonaws.com": "the EKS VPC CNI and EKS controllers (vpc.amazonaws.com, eks.amazonaws.com)",
    "cilium.io": "Cilium (a kubeconfig site's network plugin) lets a pod pick its address pool (ipam.cilium.io), "
                 "skip connection tracking on a port (policy.cilium.io) or, where a namespace delegates it, the "
                 "source-address check (config.cilium.io)",
    "antrea.io": "Antrea (a kubeconfig site's network plugin) gives a pod the addresses or address pool it names "
                 "(ipam.antrea.io)",
    "spidernet.io": "Spiderpool (RDMA and underlay networks on GPU clusters) gives a pod the address pool or subnet it "
                    "names (ipam.spidernet.io) and the network devices (spidernet.io/network-resource)",
    "ovn.org": "OVN-Kubernetes (OpenShift's network plugin) routes the egress of every namespace a pod's "
               "k8s.ovn.org/routing-namespaces lists through that pod, opens a pod's ports to the default network "
               "(k8s.ovn.org/open-default-ports) and gives it the addresses of the claim it names "
               "(k8s.ovn.org/primary-udn-ipamclaim)",
}
# Bare keys that start a reserved family: runai-gpu-group, runai-gpu-group/<group>, runai/...; io.cilium/... and
# io.cilium.<name>, the older spellings Cilium still reads beside its cilium.io keys (pkg/annotation).
RESERVED_KEY_STARTS = ("runai", "io.cilium")
# A key under a reserved domain, or a bare key that is one (Antrea's agent restores the node ports a pod's
# nodeportlocal.antrea.io annotation lists when it starts).
RESERVED_KEY_PATTERN = "^((([a-z0-9-]+[.])*(" + "|".join(domain.replace(".", "[.]") for domain in RESERVED_DOMAINS) + \
                       "))(/|$)|" + "|".join(start.replace(".", "[.]") for start in RESERVED_KEY_STARTS) + ")"
# Subdomains of k8s.io that Kubernetes SIG projects (JobSet, LeaderWorkerSet, Kueue) use: the tenant runs
# them inside its own cluster, the platform runs none on the host, and KAI reads their keys only for
# owner kinds a synced pod lacks (see HARMLESS).
FREE_DOMAINS = ("sigs.k8s.io", "x-k8s.io")
FREE_KEY_PATTERN = "^([a-z0-9-]+[.])*(" + "|".join(domain.replace(".", "[.]") for domain in FREE_DOMAINS) + ")/"

# --- KAI's keys, each classified -----------------------------------------------------------------------
_GROUPER = "pkg/podgrouper/podgrouper/plugins/defaultgrouper/default_grouper.go"
GRANTED = (
    KeyClass(QUEUE_LABEL, LABEL, "the team's own leaf queue (rule own-queue checks the value)"),
    KeyClass("priorityClassName", LABEL, f"PodGroup priority ({_GROUPER}); only KAI's own classes, which "
             "docs/priority tells users to set: non-preemptible ones stay inside the queue's quota"),
    KeyClass("kai.scheduler/preemptibility", LABEL, f"PodGroup preemptibility ({_GROUPER}); non-preemptible work "
             "only runs inside its own queue's quota"),
    KeyClass("gpu-fraction", ANNOTATION, "fraction of one GPU: a plain decimal every KAI component parses alike"),
    KeyClass("gpu-memory", ANNOTATION, "GPU memory in MiB: an integer in the range signed and unsigned parses share"),
    KeyClass("gpu-fraction-num-devices", ANNOTATION, "number of fractional devices, bounded"),
    KeyClass("gpu-fraction-container-name", ANNOTATION, "the container KAI gives the fraction to; it must exist"),
    KeyClass("runai/shared-gpu-configmap", ANNOTATION, "KAI's device-list ConfigMap prefix; only the one KAI "
             "derives from this pod's name (pkg/binder/common/gpusharingconfigmap/config_map.go)"),
    KeyClass("kai.scheduler/topology", ANNOTATION, f"Topology to place the pod in ({_GROUPER}, docs/topology): "
             "constrains only the pod's own placement"),
    KeyClass("kai.scheduler/topology-required-placement", ANNOTATION, "its own placement only (docs/topology)"),
    KeyClass("kai.scheduler/topology-preferred-placement", ANNOTATION, "its own placement only (docs/topology)"),
    KeyClass("kai.scheduler/preemption-delay", ANNOTATION, "v0.17.0: how long this pod waits before it may evict "
             "others (docs/preemption-delay); a delay only holds the tenant itself back"),
)
REFUSED = (
    KeyClass("project", LABEL, f"legacy queue fallback ({_GROUPER}): names another queue"),
    KeyClass("kai.scheduler/node-pool", LABEL, "scheduler shard selection (pkg/scheduler/conf/scheduler_conf.go): "
             "another shard, or none"),
    KeyClass("kai.scheduler/subgroup-name", LABEL, "written by KAI's pod-grouper (pkg/podgrouper/pod_controller.go)"),
    KeyClass("kai.scheduler/task-priority", LABEL, "task order (plugins/taskorder); KAI's docs do not grant it"),
    KeyClass("runai-gpu-group", LABEL, "written by KAI's binder: which reservation pod (GPU) the pod shares; "
             "spoofed or removed it keeps or frees another GPU (binding/resourcereservation)"),
    KeyClass("runai-gpu-group/*", LABEL, "multi-GPU form of runai-gpu-group (pkg/common/resources/gpu_sharing.go)"),
    KeyClass("spark-app-selector", LABEL, "names the PodGroup (podgrouper plugins/spark)"),
    KeyClass("spark-app-name", LABEL, "with spark-app-selector, the PodGroup choice (podgrouper plugins/spark)"),
    KeyClass("shared-gpu-pod-name", LABEL, "node-scale-adjuster's scaling pods (pkg/nodescaleadjuster/consts)"),
    KeyClass("shared-gpu-pod-namespace", LABEL, "node-scale-adjuster's scaling pods (pkg/nodescaleadjuster/consts)"),
    KeyClass("pod-group-name", ANNOTATION, "PodGroup membership; an owner-less pod carrying it skips the "
             "pod-grouper (pkg/podgrouper/pod_controller.go)"),
    KeyClass("kai.scheduler/skip-podgrouper", ANNOTATION, "skips the pod-grouper (pkg/podgrouper/pod_controller.go)"),
    KeyClass("received-resource-type", ANNOTATION, "written by KAI's binder: what the pod got; drives GPU "
             "accounting and fairness (podgroupcontroller resources/received.go)"),
    KeyClass("mps", ANNOTATION, "MPS request (gpu_request_validator.go); the platform runs no MPS"),
    KeyClass("kai.scheduler/numa-placement-predicted", ANNOTATION, "written by KAI's binder (binding/binder.go)"),
    KeyClass("kai.scheduler/numa-placement-observed", ANNOTATION, "NUMA ground truth the scheduler trusts "
             "(plugins/numa/seed_placements.go)"),
    KeyClass("kai.scheduler/top-owner-metadata", ANNOTATION, "pod-grouper bookkeeping on PodGroups"),
    KeyClass("kai.scheduler/stale-podgroup-timestamp", ANNOTATION, "copied to the PodGroup, whose staleness it "
             "decides (api/podgroup_info/job_info.go)"),
    KeyClass("kai.scheduler/last-start-timestamp", ANNOTATION, "copied to the PodGroup: a future value pins "
             "min-runtime protection (plugins/minruntime)"),
    KeyClass("kai.scheduler/last-eviction-timestamp", ANNOTATION, "v0.17.0: copied to the PodGroup, eviction anchor"),
    KeyClass("kai.scheduler/staleness-grace-period", ANNOTATION, "v0.17.0: a negative value keeps a stale gang's "
             "resources forever"),
    KeyClass("kai.scheduler/segment-size", ANNOTATION, "gang sizing for job owners; not granted"),
    KeyClass("kai.scheduler/batch-min-member", ANNOTATION, "gang sizing for job owners; not granted"),
    KeyClass("nvidia.com/mig-*", ANNOTATION, "legacy MIG request: replaces the pod's GPU share in the scheduler's "
             "accounting (pkg/scheduler/api/pod_info/pod_info.go)"),
    KeyClass("run.ai/reserve_for_gpu_index", ANNOTATION, "reservation pods' GPU index (pkg/resourcereservation)"),
    KeyClass("kai/deprecation-timestamp", ANNOTATION, "KAI operator's bookkeeping on its own objects"),
)
_OWNER_ONLY = "read only when the pod's top owner is that kind; a synced pod has no owner (its own top owner)"
HARMLESS = (
    KeyClass("app", LABEL, "KAI reads it for its own pods; the values it gives meaning to are refused "
             "(RESERVED_APP_VALUES)"),
    KeyClass("user", LABEL, f"copied onto the PodGroup for attribution ({_GROUPER}); decides nothing"),
    KeyClass("user", ANNOTATION, f"copied onto the PodGroup for attribution ({_GROUPER}); decides nothing"),
    KeyClass("training.kubeflow.org/job-role", LABEL, "orders tasks inside the tenant's own job (plugins/kubeflow)"),
    KeyClass("ray.io/node-type", LABEL, "orders tasks inside the tenant's own job (plugins/ray)"),
    KeyClass("ray.io/priority-class-name", LABEL, _OWNER_ONLY),
    KeyClass("serving.knative.dev/revision", LABEL, _OWNER_ONLY),
    KeyClass("autoscaling.knative.dev/min-scale", ANNOTATION, _OWNER_ONLY),
    KeyClass("grove.io/podgang", LABEL, _OWNER_ONLY),
    KeyClass("jobset.sigs.k8s.io/job-index", LABEL, _OWNER_ONLY),
    KeyClass("jobset.sigs.k8s.io/replicatedjob-name", LABEL, _OWNER_ONLY),
    KeyClass("leaderworkerset.sigs.k8s.io/group-index", LABEL, _OWNER_ONLY),
    KeyClass("leaderworkerset.sigs.k8s.io/worker-index", LABEL, _OWNER_ONLY),
    KeyClass("leaderworkerset.sigs.k8s.io/size", ANNOTATION, _OWNER_ONLY),
)
_NODE = "a node label, never read from pods"
NOT_ON_PODS = (
    KeyClass("app.kubernetes.io/managed-by", LABEL, "KAI's operator, on its own Deployments"),
    KeyClass("app.kubernetes.io/version", LABEL, "KAI's operator, on NVIDIA's ClusterPolicy"),
    KeyClass("configMapVersion", ANNOTATION, "KAI's operator, on its scheduler Deployments"),
    KeyClass("prometheus.io/scrape", ANNOTATION, "KAI's operator, on its own Services"),
    KeyClass("selected-node", LABEL, "KAI's scheduler, on BindRequests"),
    KeyClass("grove.io/topology-name", ANNOTATION, "read from Grove PodGangs"),
    KeyClass("beta.amd.com/gpu.vram*", LABEL, _NODE),
    KeyClass("nvidia.com/gpu.count", LABEL, _NODE),
    KeyClass("nvidia.com/gpu.memory", LABEL, _NODE),
    KeyClass("nvidia.com/mig.strategy", LABEL, _NODE),
    KeyClass("node-role.kubernetes.io/cpu-worker", LABEL, _NODE),
    KeyClass("node-role.kubernetes.io/gpu-worker", LABEL, _NODE),
    KeyClass("node-role.kubernetes.io/mig-enabled", LABEL, _NODE),
)
# Keys in a reserved space that no component reads at the pinned tags (the contract test proves KAI
# does not): a tenant may carry them.
UNREAD_RESERVED = (
    KeyClass("nvidia.com/gpu-fraction", ANNOTATION, "a common misspelling of gpu-fraction in published guides "
             "(seed 003); KAI reads the bare key only"),
)

# --- keys the syncer and Kubernetes write ------------------------------------------------------------
# vCluster 0.36.1 (pkg/util/translate, pkg/controllers/resources/pods/translate): read back only by this
# tenant's own syncer (tests/test_admission_contract.py keeps the list equal to the syncer's pod keys).
SYNCER_KEYS = {
    LABEL: ("vcluster.loft.sh/managed-by", "vcluster.loft.sh/namespace", "vcluster.loft.sh/ns-label-*",
            "vcluster.loft.sh/label-*"),
    ANNOTATION: ("vcluster.loft.sh/object-*", "vcluster.loft.sh/managed-annotations", "vcluster.loft.sh/managed-labels",
                 "vcluster.loft.sh/name", "vcluster.loft.sh/namespace", "vcluster.loft.sh/uid",
                 "vcluster.loft.sh/service-account-name", "vcluster.loft.sh/labels", "vcluster.loft.sh/owner-references",
                 "vcluster.loft.sh/owner-set-kind", "vcluster.loft.sh/hosts-rewritten", "vcluster.loft.sh/token-*",
                 # A tenant's own switch for the syncer's hostname rewrite of its pod (pods/translate/hosts.go).
                 "vcluster.loft.sh/disable-subdomain-rewrite",
                 "cluster-autoscaler.kubernetes.io/safe-to-evict", "cluster-autoscaler.kubernetes.io/daemonset-pod"),
}
# Kubernetes' controllers and tools inside the virtual cluster; the host's LimitRanger admission plugin,
# which notes the defaults it set (the tenant namespace has a LimitRange); the recommended
# app.kubernetes.io labels; security profiles Pod Security judges at the team's level.
KUBERNETES_KEYS = {
    LABEL: ("app.kubernetes.io/*", "batch.kubernetes.io/job-name", "batch.kubernetes.io/controller-uid",
            "batch.kubernetes.io/job-completion-index", "statefulset.kubernetes.io/pod-name",
            "apps.kubernetes.io/pod-index"),
    ANNOTATION: ("app.kubernetes.io/*", "kubernetes.io/limit-ranger", "kubectl.kubernetes.io/last-applied-configuration",
                 "kubectl.kubernetes.io/restartedAt",
                 "kubectl.kubernetes.io/default-container", "kubectl.kubernetes.io/default-logs-container",
                 "batch.kubernetes.io/job-completion-index", "batch.kubernetes.io/job-index-failure-count",
                 "batch.kubernetes.io/job-index-ignored-failure-count", "controller.kubernetes.io/pod-deletion-cost",
                 "container.apparmor.security.beta.kubernetes.io/*", "seccomp.security.alpha.kubernetes.io/pod",
                 "container.seccomp.security.alpha.kubernetes.io/*"),
}

# --- values of unreserved keys -------------------------------------------------------------------------
# KAI's resource-reservation pods (the chart's global.resourceReservation.appLabel, which the program
# leaves at its default): the scheduler counts no GPU of a pod with this value. scaling-pod: KAI's
# node-scale-adjuster. vcluster, loft, vcluster-snapshot: vCluster's pods, which its network policies
# give wider egress.
RESERVATION_APP = "kai-resource-reservation"
RESERVED_APP_VALUES = (RESERVATION_APP, "scaling-pod", "vcluster", "loft", "vcluster-snapshot")
# vCluster's DNS policy gives pods with this label the host's kube-system DNS: only the DNS the program ships.
TENANT_DNS_LABEL = ("k8s-app", "vcluster-kube-dns")
HOST_DNS_LABEL = ("k8s-app", "kube-dns")

# Pod labels vCluster's NetworkPolicies select on (chart/templates/networkpolicy.yaml) that a synced pod
# carries by design ("RELEASE": the vCluster's release name); a tenant's pod wearing any other is refused.
NETWORK_SELECTOR_LABELS = {
    ("vcluster.loft.sh/managed-by", "RELEASE"): "the syncer sets it on every pod it syncs: it selects the tenant's "
                                                "own workloads for their own policy (vc-work)",
}

# --- KAI's own writers --------------------------------------------------------------------------------
# Service accounts in KAI's namespace (deployments/kai-scheduler/templates/rbac) and the keys each
# writes on a tenant's pod after creation.
KAI_WRITERS = {
    "pod-grouper": {LABEL: ("kai.scheduler/subgroup-name",), ANNOTATION: ("pod-group-name",)},
    "binder": {LABEL: ("runai-gpu-group", "runai-gpu-group/*"),
               ANNOTATION: ("received-resource-type", "kai.scheduler/numa-placement-predicted")},
    "scheduler": {LABEL: ("kai.scheduler/node-pool",), ANNOTATION: ()},
    "numa-placement-exporter": {LABEL: (), ANNOTATION: ("kai.scheduler/numa-placement-observed",)},
}


def kai_writer(account: str, kai_namespace: str = KAI_NAMESPACE) -> str:
    return f"system:serviceaccount:{kai_namespace}:{account}"


def granted(kind: str) -> tuple[str, ...]:
    return tuple(entry.key for entry in GRANTED if entry.kind == kind)


def free(kind: str) -> tuple[str, ...]:
    """Keys in a reserved space a pod may carry and change freely: the syncer's, Kubernetes', harmless ones."""
    return SYNCER_KEYS[kind] + KUBERNETES_KEYS[kind] + tuple(entry.key for entry in (*HARMLESS, *UNREAD_RESERVED)
                                                             if entry.kind == kind)


def reserved_names() -> tuple[str, ...]:
    """Bare (domain-less) KAI keys a tenant may not set unless granted, as labels or annotations."""
    return tuple(sorted({entry.key for entry in (*REFUSED, *GRANTED)
                         if "/" not in entry.key and not entry.key.startswith(RESERVED_KEY_STARTS)}))


# --- the same in CEL ------------------------------------------------------------------------------------


def matches_any(var: str, keys: tuple[str, ...]) -> str:
    """CEL: ``var`` is one of ``keys`` (a trailing ``*`` matches a family)."""
    exact = [key for key in keys if not key.endswith("*")]
    parts = [f"{var} in {exact}"] if exact else []
    parts += [f"{var}.startsWith('{key[:-1]}')" for key in keys if key.endswith("*")]
    return f"({' || '.join(parts)})" if parts else "false"


def reserved(var: str) -> str:
    return f"({var}.matches('{RESERVED_KEY_PATTERN}') || {var} in {list(reserved_names())})"


def _free(var: str, kind: str) -> str:
    return f"({var}.matches('{FREE_KEY_PATTERN}') || {matches_any(var, free(kind))})"


def fixed(var: str, kind: str) -> str:
    """A reserved key, granted or not, that the syncer may not add, change or remove after creation."""
    return f"({reserved(var)} && !{_free(var, kind)})"


def tenant_may_set(var: str, kind: str) -> str:
    return f"(!{reserved(var)} || {_free(var, kind)} || {matches_any(var, granted(kind))})"
