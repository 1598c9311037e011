"""The host objects vCluster 0.36.1's syncer writes for a tenant's Services, claims, endpoints, ConfigMaps and
Secrets, built the way upstream builds them, and the host policy that checks them.

- ``host_metadata`` (pkg/util/translate/translate.go ``HostMetadata``, labels.go ``HostLabels``): the
  object renamed ``N-x-NS-x-<release>`` into the tenant's namespace; the tenant's labels copied except
  four keys (``release`` and vCluster's managed-by, namespace and controlled-by labels) that are renamed
  ``vcluster.loft.sh/label-<release>-x-<sha256(key)[:10]>``, and keys already in that renamed form
  dropped; the managed-by and namespace labels always set; the tenant's annotations copied, listed one a
  line in ``vcluster.loft.sh/managed-annotations`` (``applyAnnotations``), and vCluster's
  ``vcluster.loft.sh/object-*`` ones set (``addHostAnnotations``).
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
- ``allocated``: the host API server allocates a Service's cluster IPs and node ports before validating
  admission runs (the Service storage's BeginCreate precedes the create validation), so the policy sees an
  address on every CREATE, whether the tenant chose it or the host allocated it.
- ``sync_claim`` (persistentvolumeclaims/translate.go, persistent volumes not synced, the program's
  values): the whole spec copied (``volumeName``, ``selector``, the storage class and
  ``volumeAttributesClassName`` untranslated); a data source naming a claim gets that claim's host name
  unless the claim is annotated ``vcluster.loft.sh/skip-translate``. Later updates copy only the requested
  size, labels and annotations (persistentvolumeclaims/syncer.go).
- ``sync_endpoints`` / ``sync_endpoint_slice`` (endpoints/translate.go, endpointslices/translate.go): the
  addresses copied, only pod target references renamed (an Endpoints' also without uid and resourceVersion);
  a slice's service-name label set to the host Service's name.
- ``SyncedObjectsAdmission``: tenant_sim's ``Admission`` matching the kinds of this policy.
"""

from __future__ import annotations

import copy
import hashlib

from config.model import Team
from tests.tenant_sim import Admission

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
MANAGED_BY = "vcluster.loft.sh/managed-by"
NAMESPACE_LABEL = "vcluster.loft.sh/namespace"
TRANSLATED_LABELS = ("release", MANAGED_BY, NAMESPACE_LABEL, "vcluster.loft.sh/controlled-by")
SKIP_TRANSLATE = "vcluster.loft.sh/skip-translate"
BLOCK_DELETION = "vcluster.loft.sh/block-deletion"
MANAGED_ANNOTATIONS = "vcluster.loft.sh/managed-annotations"
# The uid of a virtual object that names none.
VIRTUAL_UID = "0b5e4f1c-7a64-4d5e-9c1b-2f3a4b5c6d7e"
RESOURCES = {"Service": ("", "services"), "Endpoints": ("", "endpoints"),
             "PersistentVolumeClaim": ("", "persistentvolumeclaims"), "ConfigMap": ("", "configmaps"),
             "Secret": ("", "secrets"), "EndpointSlice": ("discovery.k8s.io", "endpointslices"), "Pod": ("", "pods"),
             # The objects of a pod's binding and eviction subresources, which are of other kinds.
             "Binding": ("", "pods"), "Eviction": ("", "pods")}


def host_name(name: str, namespace: str, team: Team) -> str:
    return f"{name}-x-{namespace}-x-{team.vcluster_name}"


def translated_label(key: str, team: Team) -> str:
    return f"vcluster.loft.sh/label-{team.vcluster_name}-x-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


def host_labels(labels: dict, namespace: str, team: Team) -> dict:
    renamed = {translated_label(key, team) for key in TRANSLATED_LABELS}
    result = {(translated_label(key, team) if key in TRANSLATED_LABELS else key): value
              for key, value in labels.items() if key not in renamed}
    return {**result, MANAGED_BY: team.vcluster_name, NAMESPACE_LABEL: namespace}


def host_metadata(obj: dict, team: Team) -> dict:
    host = copy.deepcopy(obj)
    metadata = host["metadata"]
    name, namespace = metadata["name"], metadata["namespace"]
    metadata.update(name=host_name(name, namespace, team), namespace=team.namespace,
                    labels=host_labels(metadata.get("labels", {}), namespace, team))
    copied = metadata.get("annotations", {})
    managed = {MANAGED_ANNOTATIONS: "\n".join(sorted(copied))} if copied else {}
    metadata["annotations"] = {**copied, **managed, "vcluster.loft.sh/object-name": name,
                               "vcluster.loft.sh/object-namespace": namespace,
                               "vcluster.loft.sh/object-uid": metadata.get("uid", VIRTUAL_UID),
                               "vcluster.loft.sh/object-kind": f"/v1, Kind={obj['kind']}",
                               "vcluster.loft.sh/object-host-name": metadata["name"],
                               "vcluster.loft.sh/object-host-namespace": team.namespace}
    return host


def _service_to_host(service: dict, team: Team) -> dict:
    host = host_metadata(service, team)
    spec = host["spec"]
    if "selector" in spec:
        spec["selector"] = host_labels(spec["selector"], service["metadata"]["namespace"], team)
    return host


def create_service(service: dict, team: Team) -> dict:
    host = _service_to_host(service, team)
    host["metadata"]["annotations"][BLOCK_DELETION] = "true"
    return host


def sync_service(service: dict, team: Team) -> dict:
    host = _service_to_host(service, team)
    spec = host["spec"]
    if spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)
    for field in ("clusterIPs", "ipFamilies", "ipFamilyPolicy"):
        spec.pop(field, None)
    for port in spec.get("ports", []):
        port.pop("nodePort", None)
    return host


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
    host = host_metadata(claim, team)
    if claim["metadata"].get("annotations", {}).get(SKIP_TRANSLATE) != "true":
        for field in ("dataSource", "dataSourceRef"):
            source = host["spec"].get(field)
            if source and source.get("kind") == "PersistentVolumeClaim":
                source["name"] = host_name(source["name"], source.get("namespace", claim["metadata"]["namespace"]),
                                           team)
    return host


def as_served(host_claim: dict) -> dict:
    """A claim as the host API server hands it to admission: decoded into its Go type and encoded again, a data
    source without an ``apiGroup`` gets ``apiGroup: null`` (k8s.io/api core/v1: the field of TypedLocalObjectReference
    and TypedObjectReference is a pointer without omitempty)."""
    result = copy.deepcopy(host_claim)
    for field in ("dataSource", "dataSourceRef"):
        if isinstance(result["spec"].get(field), dict):
            result["spec"][field].setdefault("apiGroup", None)
    return result


def _retarget(address: dict, team: Team, cleared: tuple[str, ...] = ()) -> None:
    """A pod reference renamed to the host pod, ``cleared`` emptied; any other reference kept as written."""
    target = address.get("targetRef")
    if target and target.get("kind") == "Pod":
        target.update(name=host_name(target["name"], target["namespace"], team), namespace=team.namespace,
                      **{field: "" for field in cleared})


def sync_endpoints(endpoints: dict, team: Team) -> dict:
    host = host_metadata(endpoints, team)
    for subset in host.get("subsets", []):
        for address in subset.get("addresses", []) + subset.get("notReadyAddresses", []):
            _retarget(address, team, cleared=("uid", "resourceVersion"))
    return host


def sync_endpoint_slice(endpoint_slice: dict, team: Team) -> dict:
    host = host_metadata(endpoint_slice, team)
    service = endpoint_slice["metadata"]["labels"]["kubernetes.io/service-name"]
    host["metadata"]["labels"]["kubernetes.io/service-name"] = host_name(
        service, endpoint_slice["metadata"]["namespace"], team)
    for endpoint in host.get("endpoints", []):
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
