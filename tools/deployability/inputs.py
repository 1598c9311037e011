"""What the deployability check (``tools.deployability``) runs over: the site and the objects.

* the site (:class:`Site`, from a plan): host kind, Kubernetes version, node pools, and what
  the host kind provides (``config.hosts.HOST_KIND_FACTS``: API server ports and addresses, storage classes);
* the objects: the program's own (:func:`program_objects`), the rendered charts'
  (:func:`rendered_objects`, with the namespace Helm installs each in), and each tenant's
  CoreDNS pods (:func:`vcluster_dns_pods`), which no chart renders.
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from config import versions
from config.hosts import EKS_TAINT_EFFECTS, HOST_KIND_FACTS, HostKindFacts, kubernetes_service_addresses, service_facts
from config.model_host import NodePool, Taint
from config.system_pool_capacity import SystemNodes, system_nodes_from_output
from config.vocabulary import EKS_NODE_GROUP, HOST_COMPONENT, VCLUSTER_MANAGED_BY_LABEL
from tools.charts.manifest_yaml import load_manifests
from tools.offline.recording import REDACTED, UNKNOWN
from tools.plan.lookup import dig

ANY = "*"  # a node label whose value the site sets but the plan cannot know (hostname...)
WORKLOAD_KINDS = ("Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "CronJob")
# Objects of these kinds have no namespace (custom kinds: the scope their CRD declares).
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "StorageClass", "CSIDriver", "RuntimeClass", "PriorityClass",
    "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService", "IngressClass",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding"})


# --- the site -------------------------------------------------------------------------------------


_NODE_BASE_LABELS = {"kubernetes.io/os": "linux", "kubernetes.io/hostname": ANY, "kubernetes.io/arch": ANY}
_GPU_NODE_LABELS = {"nvidia.com/gpu.present": "true"}
_OPERATOR_PREFIXES = ("feature.node.kubernetes.io/", "nvidia.com/")


@dataclasses.dataclass(frozen=True)
class Site:
    stack: str
    kind: str
    facts: HostKindFacts
    kubernetes_version: str  # the minor version the site states (cluster.<kind>.kubernetesVersion)
    node_pools: Optional[tuple[NodePool, ...]]  # None: the plan cannot know them
    enables_hostpath_storage: bool = True
    # The nodes the platform's own pods land on (config/system_pool_capacity.py); None: the site does not state them.
    system_nodes: Optional[SystemNodes] = None


_KUBERNETES_TAINT_EFFECTS = {eks: kubernetes for kubernetes, eks in EKS_TAINT_EFFECTS.items()}


def _taint(raw: Mapping[str, Any]) -> Taint:
    """A taint of an EKS node group, in Kubernetes spelling."""
    effect = _KUBERNETES_TAINT_EFFECTS.get(raw.get("effect", ""), raw.get("effect", ""))
    return Taint(str(raw.get("key", "")), str(raw.get("value", "") or ""), effect)


def _host_output(plan: Mapping[str, Any], name: str) -> Any:
    hosts = sorted((r for r in plan["resources"] if r["type"] == HOST_COMPONENT), key=lambda r: r["urn"])
    return next((r.get("outputs", {}).get(name) for r in hosts), None)


def plan_kubernetes_version(plan: Mapping[str, Any]) -> str:
    """The Kubernetes minor version of the plan's site, as the host component registered it."""
    return str(_host_output(plan, "kubernetesVersion") or versions.KUBERNETES_MINIMUM_VERSION)


def helm_kube_version(plan: Mapping[str, Any]) -> str:
    """The site's Kubernetes version as Helm's capabilities take it (``v1.NN.0``), to render charts for it."""
    return f"v{plan_kubernetes_version(plan)}.0"


def site_from_plan(plan: Mapping[str, Any]) -> Site:
    """The site a plan (``tools.plan.build_plan``) deploys to: host kind and Kubernetes version (as the
    host component registered them), node pools."""
    resources = plan["resources"]
    by_type = lambda typ: [r for r in resources if r["type"] == typ]  # noqa: E731
    kind = _host_output(plan, "kind")
    version = plan_kubernetes_version(plan)
    if kind == "eks":
        groups = by_type(EKS_NODE_GROUP)
        pools = []
        for group in groups:
            inputs = group["inputs"]
            gpu = "NVIDIA" in str(inputs.get("amiType", ""))
            labels = {**_NODE_BASE_LABELS, "eks.amazonaws.com/nodegroup": ANY, **(_GPU_NODE_LABELS if gpu else {}),
                      **{k: str(v) for k, v in (inputs.get("labels") or {}).items()}}
            pools.append(NodePool(group["name"], labels, tuple(_taint(t) for t in inputs.get("taints") or []),
                                  gpu=gpu,
                                  managed_prefixes=_OPERATOR_PREFIXES if gpu else ("feature.node.kubernetes.io/",)))
        return Site(plan["stack"], "eks", HOST_KIND_FACTS["eks"], version, tuple(pools),
                    system_nodes=system_nodes_from_output(_host_output(plan, "systemNodes")))
    if kind == "microk8s":
        commands = [str(r["inputs"].get("create", "")) for r in resources if r["type"].startswith("command:")]
        # One node: the GPU box; the nvidia addon's operator labels it.
        node = NodePool("microk8s-node", {**_NODE_BASE_LABELS, **_GPU_NODE_LABELS}, gpu=True,
                        managed_prefixes=_OPERATOR_PREFIXES)
        return Site(plan["stack"], "microk8s", HOST_KIND_FACTS["microk8s"], version, (node,),
                    enables_hostpath_storage=any("enable hostpath-storage" in c for c in commands),
                    system_nodes=system_nodes_from_output(_host_output(plan, "systemNodes")))
    facts = HOST_KIND_FACTS["kubeconfig"]
    port = _host_output(plan, "apiServerPort")
    if port:
        # The site stated its port (cluster.kubeconfig.apiServerPort): the control planes must reach that one, and
        # the common ports the program then leaves closed are none of the check's business.
        facts = dataclasses.replace(facts, api_server_ports=(int(port),), api_server_ports_known=True)
    addresses = _host_output(plan, "apiServerAddresses")
    if addresses:
        # The site stated where its API server listens: the control planes must reach it at each of those addresses,
        # and no longer anywhere in the private ranges.
        facts = dataclasses.replace(facts, api_server_addresses=tuple(map(str, addresses)))
    ranges = _host_output(plan, "untranslatedServiceRanges")
    if ranges:
        # The site's network plugin judges the control planes' egress at the kubernetes Service (config/hosts.py).
        facts = service_facts(facts, kubernetes_service_addresses(tuple(map(str, ranges[:1]))))
    storage_class = _host_output(plan, "storageClass")
    if storage_class:
        # The site named its class (cluster.kubeconfig.storageClass), whose key requires that the cluster has it: a
        # claim naming it is on a class the host provides, one naming another class is still not known here.
        facts = dataclasses.replace(facts, storage_classes=(str(storage_class),))
    return Site(plan["stack"], "kubeconfig", facts, version, None)


def addon_operator_version(plan: Mapping[str, Any]) -> str:
    """The GPU Operator version of the MicroK8s nvidia addon (its ClusterPolicy CRD is the
    contract of the program's patch)."""
    for resource in plan["resources"]:
        words = str(resource["inputs"].get("create", "")).split()
        if "--gpu-operator-version" in words[:-1]:
            return words[words.index("--gpu-operator-version") + 1]
    return versions.MICROK8S_ADDON_GPU_OPERATOR_VERSION


# --- the objects ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Release:
    name: str
    namespace: str
    chart: str
    version: str
    values: Mapping[str, Any]


# Every list of containers a pod spec holds.
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


@dataclasses.dataclass
class K8sObject:
    manifest: dict[str, Any]
    origin: str
    release: Optional[Release] = None
    patch: bool = False

    @property
    def kind(self) -> str:
        return str(self.manifest.get("kind", ""))

    @property
    def name(self) -> str:
        return str((self.manifest.get("metadata") or {}).get("name", ""))

    @property
    def namespace(self) -> Optional[str]:
        return (self.manifest.get("metadata") or {}).get("namespace")

    @property
    def synced_model(self) -> bool:
        """A model of a pod vCluster syncs to the host (``vcluster_dns_pods``), not an object anyone applies."""
        return self.kind == "Pod" and self.origin.startswith("vCluster")

    def describe(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name} ({self.origin})"


def known_fields(value: Any) -> Any:
    """``value`` without the fields the plan cannot know (a secret's value, an output not yet computed): the
    schema is checked for the rest (a Secret's ``stringData`` is one secret as a whole)."""
    if isinstance(value, dict):
        return {key: known_fields(item) for key, item in value.items() if item not in (REDACTED, UNKNOWN)}
    if isinstance(value, list):
        return [known_fields(item) for item in value if item not in (REDACTED, UNKNOWN)]
    return value


def program_objects(resources: Iterable[Mapping[str, Any]]) -> list[K8sObject]:
    """The Kubernetes objects a plan registers itself (Helm releases and providers excluded)."""
    objects = []
    for resource in resources:
        typ = resource["type"]
        if not typ.startswith("kubernetes:") or typ.startswith("kubernetes:helm.sh/") or resource.get("read"):
            continue
        manifest = resource.get("inputs") or {}
        if "kind" not in manifest or "apiVersion" not in manifest:
            continue
        objects.append(K8sObject(copy.deepcopy(dict(manifest)), f"program: {resource['name']}",
                                 patch=typ.endswith("Patch")))
    return objects


def rendered_objects(rendered: Mapping[str, Any], out_dir: Path, resources: Iterable[Mapping[str, Any]]) -> list[K8sObject]:
    """The objects of ``render_plan_releases``' output (its summary and ``out_dir``), each with
    the namespace Helm installs it in and its release's values."""
    values = {r["name"]: (r.get("inputs") or {}).get("values") or {} for r in resources}
    objects = []
    for entry in rendered["releases"]:
        release = Release(entry["release"], entry["namespace"], entry["chart"], entry["version"],
                          values.get(entry["resource"], {}))
        for file in entry["files"]:
            text = (Path(out_dir) / entry["dir"] / file).read_text(encoding="utf-8")
            for document in load_manifests(text):
                if isinstance(document, dict) and document.get("kind"):
                    origin = f"chart {entry['chart']} {entry['version']}, release {entry['release']}: {file}"
                    objects.append(K8sObject(document, origin, release))
    scopes = {(crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd["spec"].get("scope")
              for crd in crds_of(objects)}
    for obj in objects:
        group = str(obj.manifest.get("apiVersion", "")).rpartition("/")[0]
        cluster_scoped = obj.kind in CLUSTER_SCOPED or scopes.get((group, obj.kind)) == "Cluster"
        metadata = obj.manifest.setdefault("metadata", {})
        if not cluster_scoped and not metadata.get("namespace"):
            metadata["namespace"] = obj.release.namespace
    return objects


def crds_of(objects: Iterable[K8sObject]) -> list[dict[str, Any]]:
    return [obj.manifest for obj in objects if obj.kind == "CustomResourceDefinition"]


def _toleration(text: str) -> dict[str, str]:
    """vCluster's ``key[=value]:Effect`` toleration syntax."""
    head, _, effect = text.rpartition(":")
    key, has_value, value = head.partition("=")
    toleration = {"key": key, "operator": "Equal" if has_value else "Exists", "effect": effect}
    if has_value:
        toleration["value"] = value
    return toleration


def _default_coredns_template(coredns: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """vCluster 0.36's own CoreDNS pod template, reduced to what the checks read: the values'
    ``controlPlane.coredns.security`` contexts, else a non-root container with NET_BIND_SERVICE
    and no pod-level seccomp profile; its node selector and tolerations."""
    security = coredns.get("security") or {}
    deployment = coredns.get("deployment") or {}
    spec: dict[str, Any] = {
        "containers": [{"name": "coredns", "image": "coredns", "securityContext": security.get(
            "containerSecurityContext") or {
            "runAsNonRoot": True, "runAsUser": 1001, "runAsGroup": 1001, "allowPrivilegeEscalation": False,
            "capabilities": {"add": ["NET_BIND_SERVICE"], "drop": ["ALL"]}, "readOnlyRootFilesystem": True}}],
        "nodeSelector": {"kubernetes.io/os": "linux", **(deployment.get("nodeSelector") or {})},
        "tolerations": list(deployment.get("tolerations") or []),
        "volumes": [{"name": "config-volume", "configMap": {"name": "coredns"}},
                    {"name": "custom-config-volume", "configMap": {"name": "coredns-custom", "optional": True}}],
    }
    if security.get("podSecurityContext"):
        spec["securityContext"] = security["podSecurityContext"]
    return {"labels": {"k8s-app": "vcluster-kube-dns"}}, spec


def _overwritten_coredns_templates(manifests: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The pod templates of ``controlPlane.coredns.overwriteManifests`` (the program's own DNS)."""
    objects = [K8sObject(document, "") for document in load_manifests(manifests)
               if isinstance(document, dict) and document.get("kind")]
    return [(copy.deepcopy(metadata), copy.deepcopy(spec)) for _, metadata, spec in pod_templates(objects)]


def vcluster_dns_pods(release: Release) -> list[K8sObject]:
    """The host pods of a tenant's CoreDNS: vCluster deploys it inside the virtual cluster (its
    own manifests, or ``controlPlane.coredns.overwriteManifests``) and the syncer copies the pods
    to the host namespace, adding its labels, the node-sync labels as a nodeSelector and
    ``enforceTolerations``. None when CoreDNS is off or embedded in the control plane."""
    values = release.values
    coredns = dig(values, "controlPlane", "coredns", default={}) or {}
    if coredns.get("enabled") is False or coredns.get("embedded"):
        return []
    overwritten = coredns.get("overwriteManifests")
    templates = _overwritten_coredns_templates(overwritten) if overwritten else [_default_coredns_template(coredns)]
    nodes = dig(values, "sync", "fromHost", "nodes", default={}) or {}
    synced_selector = (dig(nodes, "selector", "labels", default={}) or {}) \
        if nodes.get("enabled") and not dig(nodes, "selector", "all") else {}
    enforced = [_toleration(text) for text in
                dig(values, "sync", "toHost", "pods", "enforceTolerations", default=[]) or []]
    pods = []
    for index, (metadata, spec) in enumerate(templates):
        spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **synced_selector}
        spec["tolerations"] = list(spec.get("tolerations") or []) + enforced
        labels = {**(metadata.get("labels") or {}), VCLUSTER_MANAGED_BY_LABEL: release.name,
                  "vcluster.loft.sh/namespace": "kube-system"}
        manifest = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": f"coredns-{index}-x-kube-system-x-{release.name}",
                                 "namespace": release.namespace, "labels": labels,
                                 "annotations": dict(metadata.get("annotations") or {})},
                    "spec": spec}
        source = "its overwriteManifests" if overwritten else "vCluster's default"
        pods.append(K8sObject(manifest, f"vCluster {release.name}'s CoreDNS ({source}), synced to the host",
                              release))
    return pods


def pod_templates(objects: Iterable[K8sObject]) -> list[tuple[K8sObject, dict[str, Any], dict[str, Any]]]:
    """(object, pod metadata, pod spec) of every workload."""
    found = []
    for obj in objects:
        if obj.kind not in WORKLOAD_KINDS or obj.patch:
            continue
        manifest = obj.manifest
        if obj.kind == "Pod":
            template = manifest
        elif obj.kind == "CronJob":
            template = dig(manifest, "spec", "jobTemplate", "spec", "template", default={})
        else:
            template = dig(manifest, "spec", "template", default={})
        found.append((obj, template.get("metadata") or {}, template.get("spec") or {}))
    return found
