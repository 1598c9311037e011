"""The host objects vCluster 0.36.1's syncer writes for a tenant's Services, claims, endpoints, ConfigMaps and
Secrets, built the way upstream builds them, and the host policy that checks them.

- ``host_metadata`` (pkg/util/translate/translate.go ``HostMetadata``, labels.go ``HostLabels``): the
  object renamed ``N-x-NS-x-<release>`` (hashed above 63 characters, tests/vcluster_names.py) into the tenant's
  namespace, its owner references, finalizers and generateName dropped (``ResetObjectMetadata``); the tenant's
  labels copied except four keys (``release`` and vCluster's managed-by, namespace and controlled-by labels) that
  are renamed ``vcluster.loft.sh/label-<release>-x-<sha256(key)[:10]>``, and keys already in that renamed form
  dropped; the managed-by and namespace labels always set; the tenant's annotations copied but the syncer's
  excluded ones (``EXCLUDED_ANNOTATIONS``), listed one a line in ``vcluster.loft.sh/managed-annotations``
  (``applyAnnotations``; vCluster's own bookkeeping keys are copied but not listed, the list dropped when empty),
  and vCluster's ``vcluster.loft.sh/object-*`` ones set (``addHostAnnotations``, the kind with its API group).
- ``sync_secret`` (secrets/to_host_syncer.go): a service account token Secret's copy is ``Opaque`` (the host's
  token controller never fills it); later updates never copy that type either.
- ``create_service`` (pkg/server/filters/service.go ``createService``, installed by pkg/server/server.go
  ``WithServiceCreateRedirect``): a tenant's Service CREATE never reaches the syncer's translate. vCluster's
  API proxy creates the host Service itself, with the syncer's client: the metadata translated, the selector
  translated like labels and scoped to the virtual namespace, the ``vcluster.loft.sh/block-deletion``
  annotation added, and the rest of the spec as the tenant wrote it (``clusterIP``, ``clusterIPs``,
  ``ipFamilies``, node ports...).
- ``sync_service`` (services/translate.go): how the syncer re-creates a host Service that is missing (the
  virtual one exists, e.g. the host one was deleted): the same, but ``clusterIP`` cleared unless ``None``,
  ``clusterIPs``, ``ipFamilies`` and ``ipFamilyPolicy`` cleared and node ports zeroed. Later updates copy
  ``type``, ``externalIPs``, ports (node ports included) and the load-balancer fields as the tenant wrote
  them (services/syncer.go).
- ``updated`` / ``update_service`` / ``update_claim`` (each syncer's ``Sync``): a tenant's edit carried to the
  existing host copy: labels and annotations as on a new copy, but ``managed-annotations`` as the host copy had it
  (``AnnotationsBidirectionalUpdate``); a Service's ``SERVICE_UPDATED`` fields and selector, a claim's requested
  size; every other field of the host copy kept. An Endpoints', a slice's, a ConfigMap's and a Secret's content
  is copied whole.
- ``allocated``: the host API server allocates a Service's cluster IPs and node ports before validating
  admission runs (the Service storage's BeginCreate precedes the create validation), so the policy sees an
  address on every CREATE, whether the tenant chose it or the host allocated it.
- ``sync_claim`` (persistentvolumeclaims/translate.go, persistent volumes not synced, the program's
  values): the whole spec copied (``volumeName``, ``selector``, the storage class and
  ``volumeAttributesClassName`` untranslated); a data source naming a claim gets that claim's host name
  unless the claim is annotated ``vcluster.loft.sh/skip-translate`` (``dataSourceRef`` in the namespace it
  names; ``dataSource``'s type has no namespace). Later updates copy only the requested size, labels and
  annotations (persistentvolumeclaims/syncer.go).
- ``sync_endpoints`` / ``sync_endpoint_slice`` (endpoints/translate.go, endpointslices/translate.go): the
  addresses copied, only pod target references renamed (an Endpoints' also without uid and resourceVersion);
  a slice's service-name label set to the host Service's name. vCluster syncs only a selector-less Service's
  (the syncers' ``ReconcileStart``): a selector Service's are the host's controllers'.
- ``SyncedObjectsAdmission``: tenant_sim's ``Admission`` matching the kinds of this policy; like every
  ``Admission`` it judges each object as the API server serves it (tests/served_objects.py ``as_served``).
"""

from __future__ import annotations

import copy

from config.model import Team
from tests.tenant_sim import Admission
from tests.vcluster_names import TRANSLATED_LABELS, host_label_key, host_object_name
from tests.vcluster_names import translated_label as _translated
from tests.vcluster_pods import UNMANAGED_ANNOTATIONS

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
MANAGED_BY = "vcluster.loft.sh/managed-by"
NAMESPACE_LABEL = "vcluster.loft.sh/namespace"
SKIP_TRANSLATE = "vcluster.loft.sh/skip-translate"
BLOCK_DELETION = "vcluster.loft.sh/block-deletion"
MANAGED_ANNOTATIONS = "vcluster.loft.sh/managed-annotations"
# The uid of a virtual object that names none.
VIRTUAL_UID = "0b5e4f1c-7a64-4d5e-9c1b-2f3a4b5c6d7e"
# Annotations a syncer leaves out of the host copy (each syncer's excludedAnnotations; the API proxy's Service
# CREATE excludes none).
EXCLUDED_ANNOTATIONS = {
    "Service": ("field.cattle.io/publicEndpoints",),
    "Endpoints": ("control-plane.alpha.kubernetes.io/leader",),
    "EndpointSlice": ("control-plane.alpha.kubernetes.io/leader",),
    "PersistentVolumeClaim": ("pv.kubernetes.io/bind-completed", "pv.kubernetes.io/bound-by-controller",
                              "volume.beta.kubernetes.io/storage-provisioner"),
}
RESOURCES = {"Service": ("", "services"), "Endpoints": ("", "endpoints"),
             "PersistentVolumeClaim": ("", "persistentvolumeclaims"), "ConfigMap": ("", "configmaps"),
             "Secret": ("", "secrets"), "EndpointSlice": ("discovery.k8s.io", "endpointslices"), "Pod": ("", "pods"),
             # The objects of a pod's binding and eviction subresources, which are of other kinds.
             "Binding": ("", "pods"), "Eviction": ("", "pods")}


def host_name(name: str, namespace: str, team: Team) -> str:
    return host_object_name(name, namespace, team.vcluster_name)


def translated_label(key: str, team: Team) -> str:
    return _translated("vcluster.loft.sh/label", team.vcluster_name, key)


def host_labels(labels: dict, namespace: str, team: Team) -> dict:
    renamed = {translated_label(key, team) for key in TRANSLATED_LABELS}
    result = {host_label_key(key, team.vcluster_name): value for key, value in labels.items() if key not in renamed}
    return {**result, MANAGED_BY: team.vcluster_name, NAMESPACE_LABEL: namespace}


def host_metadata(obj: dict, team: Team, excluded: tuple[str, ...] = ()) -> dict:
    """``obj``'s host copy; ``excluded``: the annotations its syncer leaves out."""
    host = copy.deepcopy(obj)
    metadata = host["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    for reset in ("ownerReferences", "finalizers", "generateName"):
        metadata.pop(reset, None)
    metadata.update(name=host_name(name, namespace, team), namespace=team.namespace,
                    labels=host_labels(metadata.get("labels", {}), namespace, team))
    copied = {key: value for key, value in metadata.get("annotations", {}).items() if key not in excluded}
    copied.pop(MANAGED_ANNOTATIONS, None)
    managed = sorted(key for key in copied if key not in UNMANAGED_ANNOTATIONS)
    if managed:
        copied[MANAGED_ANNOTATIONS] = "\n".join(managed)
    group, _ = RESOURCES[obj["kind"]]
    metadata["annotations"] = {**copied, "vcluster.loft.sh/object-name": name,
                               "vcluster.loft.sh/object-namespace": namespace,
                               "vcluster.loft.sh/object-uid": metadata.get("uid", VIRTUAL_UID),
                               "vcluster.loft.sh/object-kind": f"{group}/v1, Kind={obj['kind']}",
                               "vcluster.loft.sh/object-host-name": metadata["name"],
                               "vcluster.loft.sh/object-host-namespace": team.namespace}
    return host


def sync_secret(secret: dict, team: Team) -> dict:
    host = host_metadata(secret, team)
    if host.get("type") == "kubernetes.io/service-account-token":
        host["type"] = "Opaque"
    return host


def _service_to_host(service: dict, team: Team, excluded: tuple[str, ...]) -> dict:
    host = host_metadata(service, team, excluded)
    spec = host["spec"]
    if "selector" in spec:
        spec["selector"] = host_labels(spec["selector"], service["metadata"]["namespace"], team)
    return host


def create_service(service: dict, team: Team) -> dict:
    host = _service_to_host(service, team, ())
    host["metadata"]["annotations"][BLOCK_DELETION] = "true"
    return host


def sync_service(service: dict, team: Team) -> dict:
    host = _service_to_host(service, team, EXCLUDED_ANNOTATIONS["Service"])
    spec = host["spec"]
    if spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)
    for field in ("clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        spec.pop(field, None)
    for port in spec.get("ports", []):
        port.pop("nodePort", None)
    return host


# The Service fields Sync copies from the tenant's edit (services/syncer.go); allocateLoadBalancerNodePorts, the
# addresses and families, internalTrafficPolicy and loadBalancerClass keep the host copy's.
SERVICE_UPDATED = ("type", "externalIPs", "externalName", "loadBalancerIP", "ports", "publishNotReadyAddresses",
                   "externalTrafficPolicy", "sessionAffinity", "sessionAffinityConfig", "loadBalancerSourceRanges",
                   "healthCheckNodePort")


def updated(host: dict, copied: dict) -> dict:
    """``copied`` (the host copy of the edited object) as Sync writes it over ``host``: the managed-annotations list
    stays the host copy's."""
    result = copy.deepcopy(copied)
    annotations = result["metadata"]["annotations"]
    annotations.pop(MANAGED_ANNOTATIONS, None)
    if MANAGED_ANNOTATIONS in host["metadata"].get("annotations", {}):
        annotations[MANAGED_ANNOTATIONS] = host["metadata"]["annotations"][MANAGED_ANNOTATIONS]
    return result


def update_service(host: dict, service: dict, team: Team) -> dict:
    """The host Service after Sync carries the tenant's edit ``service`` to ``host``."""
    copied = sync_service(service, team)
    copied["metadata"]["annotations"].pop(BLOCK_DELETION, None)
    result = updated(host, copied)
    result["spec"] = copy.deepcopy(host["spec"])
    for field in SERVICE_UPDATED:
        if field in service["spec"]:
            result["spec"][field] = copy.deepcopy(service["spec"][field])
        else:
            result["spec"].pop(field, None)
    result["spec"]["selector"] = copied["spec"].get("selector", {})
    return result


def update_claim(host: dict, claim: dict, team: Team) -> dict:
    """The host claim after Sync carries the tenant's edit ``claim`` to ``host``: only the requested size."""
    result = updated(host, sync_claim(claim, team))
    result["spec"] = copy.deepcopy(host["spec"])
    result["spec"].setdefault("resources", {})["requests"] = copy.deepcopy(claim["spec"]["resources"]["requests"])
    return result


def allocated(host_service: dict, cluster_ip: str, node_port: int = 30080) -> dict:
    """``host_service`` as the host API server completes it before validation: an address unless one was given
    or the Service is headless, and a node port for each port of a NodePort or LoadBalancer Service (unless
    allocateLoadBalancerNodePorts is false)."""
    result = copy.deepcopy(host_service)
    spec = result["spec"]
    if spec.get("type") != "ExternalName":
        spec["clusterIP"] = spec.get("clusterIP") or cluster_ip
        spec["clusterIPs"] = spec.get("clusterIPs") or [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    if spec.get("type") == "NodePort" or (spec.get("type") == "LoadBalancer" and
                                          spec.get("allocateLoadBalancerNodePorts", True)):
        for offset, port in enumerate(spec.get("ports", [])):
            port["nodePort"] = port.get("nodePort") or node_port + offset
    return result


def sync_claim(claim: dict, team: Team) -> dict:
    host = host_metadata(claim, team, EXCLUDED_ANNOTATIONS["PersistentVolumeClaim"])
    namespace = claim["metadata"]["namespace"]
    if claim["metadata"].get("annotations", {}).get(SKIP_TRANSLATE) != "true":
        source, reference = host["spec"].get("dataSource"), host["spec"].get("dataSourceRef")
        if source and source.get("kind") == "PersistentVolumeClaim":
            source["name"] = host_name(source["name"], namespace, team)
        if reference and reference.get("kind") == "PersistentVolumeClaim":
            reference["name"] = host_name(reference["name"], namespace if reference.get("namespace") is None else reference["namespace"], team)
    return host


def _retarget(address: dict, team: Team, cleared: tuple[str, ...] = ()) -> None:
    """A pod reference renamed to the host pod, ``cleared`` emptied (Go then leaves them out); any other reference
    kept as written."""
    target = address.get("targetRef")
    if target and target.get("kind") == "Pod":
        target.update(name=host_name(target["name"], target["namespace"], team), namespace=team.namespace)
        for field in cleared:
            target.pop(field, None)


def sync_endpoints(endpoints: dict, team: Team) -> dict:
    host = host_metadata(endpoints, team, EXCLUDED_ANNOTATIONS["Endpoints"])
    for subset in host.get("subsets", []):
        for address in subset.get("addresses", []) + subset.get("notReadyAddresses", []):
            _retarget(address, team, cleared=("uid", "resourceVersion"))
    return host


def sync_endpoint_slice(endpoint_slice: dict, team: Team) -> dict:
    host = host_metadata(endpoint_slice, team, EXCLUDED_ANNOTATIONS["EndpointSlice"])
    service = endpoint_slice["metadata"]["labels"]["kubernetes.io/service-name"]
    host["metadata"]["labels"]["kubernetes.io/service-name"] = host_name(
        service, endpoint_slice["metadata"]["namespace"], team)
    for endpoint in host.get("endpoints") or []:
        _retarget(endpoint, team)
    return host


class SyncedObjectsAdmission(Admission):
    """The synced-objects policy, evaluated by tenant_sim's ``Admission``; only the match by kind differs."""

    def requested(self, namespace: str, obj: dict, *, operation: str = "CREATE", subresource: str = "") -> bool:
        rules = [rule for rule in self.spec["matchConstraints"]["resourceRules"] if operation in rule["operations"]]
        if not rules:  # a DELETE, which carries no object
            return False
        group, resource = RESOURCES[obj["kind"]]
        resource += f"/{subresource}" if subresource else ""
        if not any(group in rule["apiGroups"] and resource in rule["resources"] for rule in rules):
            return False
        return self.selects_namespace(namespace)


def synced_objects_admission_for(program, team: str) -> SyncedObjectsAdmission:
    name = f"gpu-tenancy-{team}-synced-objects"
    policy = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == name)
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == name)
    return SyncedObjectsAdmission(policy.inputs["spec"], binding.inputs["spec"])
