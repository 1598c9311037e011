"""Stack config: the ``vcluster`` block (the stack's tenant defaults, and each team's overrides), declared and read."""

from __future__ import annotations

import dataclasses
import re
from typing import TypeVar

from config import versions
from config.access import ACCESS, read_access
from config.image_registries import EXAMPLES, RegistryList
from config.key_collections import AnyMap, QuantityMap, StringList, StringMap
from config.key_types import Boolean, Integer, Text
from config.keys import Block, Derived, Key
from config.load_tenant_limits import (
    DEFAULT_LIMITS, DEFAULT_QUOTA, LIMIT_RANGE, QUOTA_DETAILS, RESOURCE_QUOTA, SERVICES,
)
from config.merge import deep_merge
from config.model import ControlPlaneResources, TenantLimitRange, TenantResourceQuota, TenantServices, VClusterSettings
from config.reader import Section
from config.version_types import Version

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
    resource_quota=DEFAULT_QUOTA,
    limit_range=DEFAULT_LIMITS,
    network_policy=True,
    pod_security="baseline",
    extra_values={},
)
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
# A pod that sets no grace period gets Kubernetes' 30 s from the API server before the policy sees it, so a lower cap
# would refuse every such pod; past an hour a GPU KAI reclaims for another team is not reclaimed in any useful sense.
GRACE_PERIOD_SECONDS = Integer(minimum=30, maximum=3600)

# What a container can request that the control plane would (extended resources and huge pages it has no use for).
CONTROL_PLANE_RESOURCE_NAMES = ("cpu", "memory", "ephemeral-storage")


def _shown(resources: dict[str, str]) -> str:
    return ", ".join(f"{name} {quantity}" for name, quantity in resources.items())


CONTROL_PLANE_RESOURCES = Block(keys=(
    Key("requests", QuantityMap(CONTROL_PLANE_RESOURCE_NAMES), DEFAULT_VCLUSTER.control_plane_resources.requests,
        "Requests of the vCluster control-plane StatefulSet.", example="{cpu: 500m}",
        details="The keys you give override the inherited ones; a resource set nowhere is the vCluster chart's "
                f"own ({_shown(versions.VCLUSTER_CONTROL_PLANE_REQUESTS)}; limits "
                f"{_shown(versions.VCLUSTER_CONTROL_PLANE_LIMITS)}). Each request must be at most the limit of the "
                "same resource (the API server refuses the StatefulSet otherwise)."),
    Key("limits", QuantityMap(CONTROL_PLANE_RESOURCE_NAMES), DEFAULT_VCLUSTER.control_plane_resources.limits,
        "Limits of the control plane, merged the same way.", example="{memory: 4Gi}"),
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
- `extraValues` is deep-merged: maps merge, and other values replace.
- `alwaysPullImages` and `allowedRegistries` are the stack's alone: a team's block may not set them.""", notes="""\
A quantity is a Kubernetes quantity string such as `500m`, `4`, `512Mi` or `16Gi`, or a
non-negative number.

The program always renders these vCluster values: `experimental.syncSettings.setOwner: false` (KAI
reads the queue from a pod's top owner) and node sync on, which `extraValues` may not change, and
the embedded SQLite backing store and `resourceQuota` and `limitRange` enabled, which it may. A site that
keeps a tenant's state in a deployed or external etcd (`controlPlane.backingStore.etcd.deploy` or `.external`) also
sets `controlPlane.backingStore.database.embedded.enabled: false` (the chart renders one store only, and is refused
otherwise). More than one control-plane replica (`controlPlane.statefulSet.highAvailability.replicas`) is refused: the
chart then grants the syncer Lease writes in the host namespace, which no host policy checks. The namespace's quota
pays for what the chart runs on top of the team's own allowance: the control plane's volume at its
`persistence.volumeClaim.size` (or each claim of a site's `persistence.volumeClaimTemplates`, which replace the chart's
own and so must include one named `data`, the volume the pod mounts), and a deployed etcd's replicas, volumes and
Services (`config/backing_store.py`). From the host kind it also renders the control plane's volume claim class
(`controlPlane.statefulSet.persistence.volumeClaim.storageClass`: `gp3` on EKS,
`microk8s-hostpath` on MicroK8s, `cluster.kubeconfig.storageClass` if set). With `networkPolicy` on, the
program renders the namespace's NetworkPolicies itself (vCluster's `policies.networkPolicy` stays off): vCluster's
own, but with the control plane's egress to the API server opened on the host's API server port only (443 on EKS,
16443 on MicroK8s, `cluster.kubeconfig.apiServerPort`) instead of 443, 8443 and 6443 to every address.

### Where tenant pods run

`nodeLabels` decides both which nodes a tenant sees and where all of its pods may run:

- **EKS:** the GPU node groups (`gpu-tenancy/role=gpu`), never the system node group, which keeps
  KAI, the GPU Operator and the vCluster control planes. A tenant's CPU pods and DNS therefore
  share the GPU nodes; `enforceTolerations` lets them past the GPU taint, and KAI sets
  `NVIDIA_VISIBLE_DEVICES=void` in every container it did not give a GPU, which matters here
  because the AL2023 NVIDIA AMI makes `nvidia` the default container runtime. If every GPU group
  can scale to 0, a tenant's DNS has nowhere to run (the loader warns): keep `minSize` ≥ 1 on one
  GPU group, or set `nodeLabels` to `{}` to let tenant CPU pods use the system nodes too. To pin a
  team to one GPU group, set `teams[].vcluster.nodeLabels: {gpu-tenancy/pool: <group>}`. A selector
  that matches no node group (a group renamed, a label no group sets), or tolerations that leave
  only tainted groups, is refused, naming the key that decides it.
- **MicroK8s:** one node, so all nodes (`{}`). The node carries none of the program's
  `gpu-tenancy/...` labels, so selecting by one is refused.
- **Existing cluster:** all nodes (`{}`); the program does not know the cluster's pools. Set
  labels your GPU nodes carry (e.g. `{nvidia.com/gpu.present: "true"}`) to keep tenants off
  other nodes.""", keys=(
    Key("version", Version("", versions.VCLUSTER_RELEASES,
                           "older charts run a virtual Kubernetes without GA MutatingAdmissionPolicy, which the "
                           "in-vCluster defaults need (1.36), and before 0.31 their values schema refuses the "
                           "program's values"),
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
    Key("resourceQuota", RESOURCE_QUOTA, {}, "What the team's workloads get in the ResourceQuota of its host "
        "namespace.", details=" ".join(QUOTA_DETAILS.split())),
    Key("limitRange", LIMIT_RANGE, {}, "Container defaults for tenant pods that set no requests or limits."),
    Key("services", SERVICES, {}, "What the tenant's Services may open on the host beyond a cluster IP."),
    Key("maxTerminationGracePeriodSeconds", GRACE_PERIOD_SECONDS, DEFAULT_VCLUSTER.max_termination_grace_seconds,
        "The longest `terminationGracePeriodSeconds` a tenant pod may set.", example="1800",
        details="KAI takes a GPU back for another team (reclaim, preemption) by deleting the pod with no grace "
                "period of its own, so a pod keeps its GPUs for its whole grace period if it does not exit on "
                "SIGTERM, while the team the GPU is owed to waits. The host refuses a pod created with a longer one "
                "(rule `grace-period`). Raise it for a team whose training jobs need longer to write a checkpoint "
                "on SIGTERM; every team sharing its GPU nodes then waits up to that long for a reclaimed GPU. Between "
                "30 (Kubernetes' default grace period, which a pod that sets none gets) and 3600. See [Tenant security "
                "model](security-admission.md)."),
    Key("storageClasses", StringList(), DEFAULT_VCLUSTER.storage_classes,
        "StorageClasses the tenant's volume claims may use.", example="[gp3, io2]",
        details="Empty (the default) means the host's volume-claim class: `gp3` on EKS, `microk8s-hostpath` on "
                "MicroK8s, `cluster.kubeconfig.storageClass` if set; on an existing cluster without that key, any "
                "class the cluster has. A claim must name a class (or get the cluster's default one). See "
                "[Volume claims](security-synced-objects.md#volume-claims)."),
    Key("networkPolicy", Boolean(), DEFAULT_VCLUSTER.network_policy,
        "NetworkPolicies isolating the team's host namespace: vCluster's own (`policies.networkPolicy`), rendered "
        "by the program with the control plane's egress narrowed to the host API server's port.",
        example="false", details="`extraValues.policies.networkPolicy` settings apply to them as vCluster's chart "
                                 "would apply them. See [Tenant security model](security-isolation.md)."),
    Key("podSecurity", Text(choices=POD_SECURITY_LEVELS), DEFAULT_VCLUSTER.pod_security,
        "Pod Security Admission level enforced on the tenant's host namespace.", example="restricted",
        details="The level is the namespace label `pod-security.kubernetes.io/enforce`. Synced pods run on the shared "
                "nodes, so `baseline` keeps a tenant's cluster-admin from buying privileged, host-network or hostPath "
                "pods there. `restricted` also runs the tenant's vCluster control plane unprivileged (user and group "
                "12345, data volume group-owned, no capabilities, RuntimeDefault seccomp), because vCluster runs it "
                "as root by default; `privileged` draws a warning (a privileged pod sees every GPU of its node)."),
    Key("alwaysPullImages", Boolean(), DEFAULT_VCLUSTER.always_pull_images,
        "Every container of every tenant pod asks the registry for its image on start (`imagePullPolicy: "
        "Always`), so no team starts another team's private image from a node's cache.", example="true",
        details="Stack-wide only: a team's `teams[].vcluster` may not set it, since it protects a team only if "
                "every other team on its nodes complies. Each vCluster then sets `imagePullPolicy: Always` on "
                "every pod created in it, and the host refuses a synced pod without it (rule "
                "`image-pull-policy`; `kubectl debug` needs `--image-pull-policy=Always`); pods already running keep "
                "their policy until they are re-created, and the image of a container of theirs that does not pull "
                "cannot be changed. Images the nodes' own "
                "credentials can pull stay open to every team (on EKS the node role reads every ECR repository of "
                "the account). The cost: every container start asks the registry, so a registry outage blocks "
                "restarts, and a site whose images are imported into containerd with no registry cannot use "
                "it. See [Tenant security model](security-isolation.md)."),
    Key("allowedRegistries", RegistryList(), DEFAULT_VCLUSTER.allowed_registries,
        "The registries tenant images may come from: a registry host (with its port, if any), optionally with a "
        "repository path prefix. Unset: any registry.", example=f"[{EXAMPLES}]",
        default_note="any registry",
        details="Stack-wide only: the list guards the nodes' network, which every team shares, and a team's own "
                "registry goes in it like any other. Every image of every container, init container, ephemeral "
                "container and image volume of a tenant pod must be under an entry, read as the node reads it: a "
                "name without a host is Docker Hub's (`nginx` is `docker.io/library/nginx`, `nvidia/cuda` is "
                "`docker.io/nvidia/cuda`), and a prefix ends at a `/` (`ghcr.io/acme` admits `ghcr.io/acme/x:1` but "
                "not `ghcr.io/acme-evil/x`; `registry.local` does not admit `registry.local:5000`). Each vCluster "
                "refuses the pod when it is applied, and the host refuses it when synced, on create and on every "
                "image change (rule `image-registry`). The images the platform itself puts into tenant pods (the "
                "tenant DNS, vCluster's hosts-rewriting init container, HAMi-core, the smoke test's) pass by their "
                "exact reference. See [Tenant security model](security-admission.md#image-registries)."),
    Key("extraValues", AnyMap(), DEFAULT_VCLUSTER.extra_values,
        "Raw vCluster Helm values, deep-merged last over what the program renders.",
        example="{controlPlane: {proxy: {extraSANs: [vc.example]}}}",
        details="Only the values `config/vcluster_values.py` classifies as a site's may be set, checked against the "
                "chart's values at the tenant's vCluster version: sizing, image, probes, scheduling and metadata of the "
                "control plane and the tenant DNS, its exposure (`controlPlane.service`, `ingress`, `tlsRoute`, "
                "`proxy`), `defaultImageRegistry`, the virtual Kubernetes version, syncs that only copy host objects "
                "in, and overrides of what the program renders from the keys above (quota, limit range, network "
                "policy, control-plane resources). The loader refuses, naming the key: a value the chart does not "
                "have, a `null`, the program's own values (`experimental.syncSettings.setOwner` other than `false`, "
                "`sync.fromHost.nodes.enabled` other than `true`, `experimental.deploy.vcluster.manifests`, "
                "`exportKubeConfig.secret` and `additionalSecrets`), and whatever would let the syncer write on the "
                "host what no host policy checks or let a tenant read other teams: every `integrations.*` "
                "(External Secrets, cert-manager, Istio, KubeVirt, metrics-server, ...), `plugin`/`plugins`, "
                "`networking.replicateServices`, `controlPlane.hostPathMapper`, a virtual scheduler, a `sync.toHost` "
                "kind the policies do not cover, any change to the syncer's host permissions (`rbac.*`), "
                "`sync.fromHost.nodes.clearImageStatus: false`, `networking.advanced.proxyKubelets` on, a "
                "`sync.fromHost.configMaps` or `secrets` mapping from another host namespace, and every vCluster Pro "
                "feature. A refused switch may still be written off (`false`). See [Tenant security model]"
                "(security-synced-objects.md#the-vcluster-values-a-site-may-set). Helm validates the values against the chart "
                "schema when it installs. On a running site, a value the control plane's StatefulSet keeps fixed (its "
                "volume claim's size or class, `controlPlane.statefulSet.persistence.volumeClaim`) makes the release "
                "upgrade fail: the plan diff with `--render-charts` reports it."),
    Key("access", ACCESS, {}, "How the team reaches its vCluster (endpoint) and who it is there (OIDC).",
        details="See [Team access](team-guide.md)."),
))


Settings = TypeVar("Settings", TenantResourceQuota, TenantLimitRange, TenantServices)


def _read_over(section: Section, block: Block, base: Settings) -> Settings:
    """The settings of a sub-block whose keys each name one field (``persistentVolumeClaims`` is
    ``persistent_volume_claims``): every key the block leaves out keeps its value from ``base``."""
    fields = {key.name: re.sub(r"(?<=[a-z])(?=[A-Z])", "_", key.name).lower() for key in block.keys}
    return dataclasses.replace(base, **{field: section.read(name, getattr(base, field))
                                        for name, field in fields.items()})


# The keys only the stack's vcluster block may set, with why a team may not.
STACK_ONLY = {
    "alwaysPullImages": "it protects a team's cached private images only if every other team on the same nodes "
                        "pulls its images too, so no team can be let off or opt in alone",
    "allowedRegistries": "it guards the network of the nodes every team shares; list a team's own registry there",
}


def _stack_only(section: Section, base: VClusterSettings, team: bool, name: str, field: str):
    """A stack-only key: read in the stack's block, refused in a team's (which keeps the stack's value)."""
    if not team:
        return section.read(name, getattr(base, field))
    if section.has(name):
        section.fail(name, section.raw(name), f"is a setting of the whole stack: {STACK_ONLY[name]}",
                     f"remove it from the team and set it once under the stack's vcluster (vcluster.{name})")
    return getattr(base, field)


def read_vcluster(section: Section, base: VClusterSettings, *, team: bool = False) -> VClusterSettings:
    """Read a ``vcluster`` block; every key left out keeps its value from ``base``. A ``team``'s block may not set
    the STACK_ONLY keys."""
    version = section.read("version", base.version)
    always_pull_images = _stack_only(section, base, team, "alwaysPullImages", "always_pull_images")
    allowed_registries = _stack_only(section, base, team, "allowedRegistries", "allowed_registries")
    resources = section.child("controlPlaneResources")
    quota = section.child("resourceQuota")
    limits = section.child("limitRange")
    services = section.child("services")
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
        resource_quota=_read_over(quota, RESOURCE_QUOTA, base.resource_quota),
        limit_range=_read_over(limits, LIMIT_RANGE, base.limit_range),
        network_policy=section.read("networkPolicy", base.network_policy),
        pod_security=section.read("podSecurity", base.pod_security),
        extra_values=deep_merge(base.extra_values, extra or {}),
        services=_read_over(services, SERVICES, base.services),
        storage_classes=section.read("storageClasses", base.storage_classes),
        max_termination_grace_seconds=section.read("maxTerminationGracePeriodSeconds",
                                                   base.max_termination_grace_seconds),
        access=read_access(section.child("access"), base.access),
        always_pull_images=always_pull_images,
        allowed_registries=allowed_registries,
    )
