"""Stack config: the ``vcluster`` block (the stack's tenant defaults, and each team's overrides), declared and read."""

from __future__ import annotations

from config import versions
from config.key_types import AnyMap, Boolean, Integer, Quantity, StringList, StringMap, Text, Version
from config.keys import Block, Derived, Key
from config.merge import deep_merge
from config.model import ControlPlaneResources, TenantLimitRange, TenantResourceQuota, VClusterSettings
from config.reader import Section

# What a tenant gets where neither the stack nor its team says otherwise.
DEFAULT_VCLUSTER = VClusterSettings(
    version=versions.VCLUSTER_VERSION,
    node_labels={},
    sync_runtime_classes=True,
    enforce_tolerations=("nvidia.com/gpu:NoSchedule",),
    control_plane_resources=ControlPlaneResources(
        requests={"cpu": "200m", "memory": "256Mi"},
        limits={"memory": "2Gi"},
    ),
    resource_quota=TenantResourceQuota(cpu="16", memory="64Gi", pods=100, services=20,
                                       persistent_volume_claims=20),
    limit_range=TenantLimitRange(default_cpu="1", default_memory="1Gi",
                                 default_request_cpu="100m", default_request_memory="128Mi"),
    network_policy=True,
    pod_security="baseline",
    extra_values={},
)
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")

_QUOTA, _LIMITS = DEFAULT_VCLUSTER.resource_quota, DEFAULT_VCLUSTER.limit_range

CONTROL_PLANE_RESOURCES = Block(keys=(
    Key("requests", StringMap(), DEFAULT_VCLUSTER.control_plane_resources.requests,
        "Requests of the vCluster control-plane StatefulSet.", example="{cpu: 500m}",
        details="The keys you give override the inherited ones."),
    Key("limits", StringMap(), DEFAULT_VCLUSTER.control_plane_resources.limits,
        "Limits of the control plane, merged the same way.", example="{memory: 4Gi}"),
))

RESOURCE_QUOTA = Block(keys=(
    Key("cpu", Quantity(), _QUOTA.cpu, "Sets both `requests.cpu` and `limits.cpu` of the tenant namespace's "
        "ResourceQuota.", example="32"),
    Key("memory", Quantity(), _QUOTA.memory, "Sets both `requests.memory` and `limits.memory`.", example="128Gi"),
    Key("pods", Integer(minimum=1), _QUOTA.pods, "`count/pods`.", example="50"),
    Key("services", Integer(minimum=0), _QUOTA.services, "`count/services`.", example="10"),
    Key("persistentVolumeClaims", Integer(minimum=0), _QUOTA.persistent_volume_claims,
        "`count/persistentvolumeclaims`.", example="5"),
))

LIMIT_RANGE = Block(keys=(
    Key("defaultCpu", Quantity(), _LIMITS.default_cpu, "Default CPU limit for containers that set none.", example="2"),
    Key("defaultMemory", Quantity(), _LIMITS.default_memory, "Default memory limit.", example="4Gi"),
    Key("defaultRequestCpu", Quantity(), _LIMITS.default_request_cpu, "Default CPU request.", example="250m"),
    Key("defaultRequestMemory", Quantity(), _LIMITS.default_request_memory, "Default memory request.",
        example="512Mi"),
))

VCLUSTER = Block(title="tenant defaults", intro="""\
The stack-level `vcluster` block applies to every tenant. A team's `teams[].vcluster` block uses
the same keys and is merged over the stack block key by key:

- A key the team leaves out keeps the stack value, and the stack value falls back to the built-in
  default.
- Inside `resourceQuota` and `limitRange`, each field merges on its own. Inside
  `controlPlaneResources`, `requests` and `limits` merge key by key: setting `requests.cpu` keeps
  the inherited `requests.memory`.
- `nodeLabels` and `enforceTolerations` replace the stack value as a whole.
- `extraValues` is deep-merged: maps merge, and other values replace.""", notes="""\
A quantity is a Kubernetes quantity string such as `500m`, `4`, `512Mi` or `16Gi`, or a
non-negative number.

The program always renders these vCluster values, and only `extraValues` can change them:
`experimental.syncSettings.setOwner: false` (KAI reads the queue from a pod's top owner), node
sync on, the embedded SQLite backing store, and `resourceQuota` and `limitRange` enabled. From the
host kind it also renders the control plane's volume claim class
(`controlPlane.statefulSet.persistence.volumeClaim.storageClass`: `gp3` on EKS,
`microk8s-hostpath` on MicroK8s, `cluster.kubeconfig.storageClass` if set) and, with
`networkPolicy` on, an egress rule to the API server port when vCluster's own policy lacks it
(`policies.networkPolicy.controlPlane.egress`: port 16443 on MicroK8s).

### Where tenant pods run

`nodeLabels` decides both which nodes a tenant sees and where all of its pods may run:

- **EKS:** the GPU node groups (`gpu-tenancy/role=gpu`), never the system node group, which keeps
  KAI, the GPU Operator and the vCluster control planes. A tenant's CPU pods and DNS therefore
  share the GPU nodes; `enforceTolerations` lets them past the GPU taint, and KAI sets
  `NVIDIA_VISIBLE_DEVICES=void` in every container it did not give a GPU, which matters here
  because the AL2023 NVIDIA AMI makes `nvidia` the default container runtime. If every GPU group
  can scale to 0, a tenant's DNS has nowhere to run: keep `minSize` ≥ 1 on one GPU group, or set
  `nodeLabels` to `{}` to let tenant CPU pods use the system nodes too. To pin a team to one GPU
  group, set `teams[].vcluster.nodeLabels: {gpu-tenancy/pool: <group>}`.
- **MicroK8s:** one node, so all nodes (`{}`).
- **Existing cluster:** all nodes (`{}`); the program does not know the cluster's pools. Set
  labels your GPU nodes carry (e.g. `{nvidia.com/gpu.present: "true"}`) to keep tenants off
  other nodes.""", keys=(
    Key("version", Version("", versions.VCLUSTER_MINIMUM_VERSION,
                           "older charts name the network policy values differently, so Helm refuses the program's"),
        DEFAULT_VCLUSTER.version, "Pinned vCluster chart version "
        "(`https://charts.loft.sh`).", example="0.36.1"),
    Key("nodeLabels", StringMap(), Derived("EKS: `{gpu-tenancy/role: gpu}`; MicroK8s and existing clusters: `{}` "
                                           "(all nodes)"),
        "Only host nodes with these labels are synced into the tenant, and every tenant pod is pinned to them.",
        example="{gpu-tenancy/pool: gpu}",
        details="The labels become `sync.fromHost.nodes.selector.labels` and a nodeSelector on **every** tenant pod, "
                "CPU pods and the tenant's DNS included. Empty means all nodes and no nodeSelector. See [Where tenant "
                "pods run](#where-tenant-pods-run)."),
    Key("syncRuntimeClasses", Boolean(), DEFAULT_VCLUSTER.sync_runtime_classes,
        "Sync the host's RuntimeClasses into the tenant.", example="false"),
    Key("enforceTolerations", StringList(form="`key[=value]:Effect`"), DEFAULT_VCLUSTER.enforce_tolerations,
        "Tolerations added to every synced pod, so that tenant pods can run on tainted GPU nodes.", example="[]"),
    Key("controlPlaneResources", CONTROL_PLANE_RESOURCES, {}, "Resources of the vCluster control plane."),
    Key("resourceQuota", RESOURCE_QUOTA, {}, "The ResourceQuota of the tenant's host namespace."),
    Key("limitRange", LIMIT_RANGE, {}, "Container defaults for tenant pods that set no requests or limits."),
    Key("networkPolicy", Boolean(), DEFAULT_VCLUSTER.network_policy, "vCluster's `policies.networkPolicy`.",
        example="false", details="See [Tenant security model](security-model.md)."),
    Key("podSecurity", Text(choices=POD_SECURITY_LEVELS), DEFAULT_VCLUSTER.pod_security,
        "Pod Security Admission level enforced on the tenant's host namespace.", example="restricted",
        details="The level is the namespace label `pod-security.kubernetes.io/enforce`. Synced pods run on the shared "
                "nodes, so `baseline` keeps a tenant's cluster-admin from buying privileged, host-network or hostPath "
                "pods there. `restricted` also runs the tenant's vCluster control plane unprivileged (user and group "
                "12345, data volume group-owned, no capabilities, RuntimeDefault seccomp), because vCluster runs it "
                "as root by default; `privileged` draws a warning (a privileged pod sees every GPU of its node)."),
    Key("extraValues", AnyMap(), DEFAULT_VCLUSTER.extra_values,
        "Raw vCluster Helm values, deep-merged last over what the program renders.",
        example="{controlPlane: {proxy: {extraSANs: [vc.example]}}}",
        details="They can override anything, including settings KAI relies on such as "
                "`experimental.syncSettings.setOwner: false`. The loader only checks that this is a map. Helm "
                "validates the values against the chart schema when it installs."),
))


def read_vcluster(section: Section, base: VClusterSettings) -> VClusterSettings:
    """Read a ``vcluster`` block; every key left out keeps its value from ``base``."""
    version = section.read("version", base.version)
    resources = section.child("controlPlaneResources")
    quota = section.child("resourceQuota")
    limits = section.child("limitRange")
    base_quota, base_limits = base.resource_quota, base.limit_range
    extra = section.read("extraValues", {})
    return VClusterSettings(
        version=version,
        node_labels=section.read("nodeLabels", base.node_labels),
        sync_runtime_classes=section.read("syncRuntimeClasses", base.sync_runtime_classes),
        enforce_tolerations=section.read("enforceTolerations", base.enforce_tolerations),
        control_plane_resources=ControlPlaneResources(
            requests={**base.control_plane_resources.requests, **(resources.read("requests", {}) or {})},
            limits={**base.control_plane_resources.limits, **(resources.read("limits", {}) or {})},
        ),
        resource_quota=TenantResourceQuota(
            cpu=quota.read("cpu", base_quota.cpu),
            memory=quota.read("memory", base_quota.memory),
            pods=quota.read("pods", base_quota.pods),
            services=quota.read("services", base_quota.services),
            persistent_volume_claims=quota.read("persistentVolumeClaims", base_quota.persistent_volume_claims),
        ),
        limit_range=TenantLimitRange(
            default_cpu=limits.read("defaultCpu", base_limits.default_cpu),
            default_memory=limits.read("defaultMemory", base_limits.default_memory),
            default_request_cpu=limits.read("defaultRequestCpu", base_limits.default_request_cpu),
            default_request_memory=limits.read("defaultRequestMemory", base_limits.default_request_memory),
        ),
        network_policy=section.read("networkPolicy", base.network_policy),
        pod_security=section.read("podSecurity", base.pod_security),
        extra_values=deep_merge(base.extra_values, extra or {}),
    )
