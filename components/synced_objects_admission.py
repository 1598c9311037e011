"""Host-side admission for everything but pods that a tenant's vCluster syncer writes into its namespace.

vCluster 0.36.1's syncer Role (chart/templates/role.yaml) may create and update, in the tenant's host
namespace, pods (components/admission.py), Services, Endpoints, EndpointSlices, PersistentVolumeClaims,
ConfigMaps and Secrets, and patch pods through ``pods/status`` and ``pods/resize``. The syncer copies a
tenant's objects nearly as written (vCluster's API proxy creates a tenant's Service on the host with its
spec as written, cluster IPs and node ports included, pkg/server/filters/service.go; services/syncer.go
later copies ``type``, ``externalIPs``, ports and the load balancer fields; persistentvolumeclaims/translate.go
passes ``volumeName``, ``selector`` and ``volumeAttributesClassName`` through unchanged while persistent
volumes are not synced, and skips every translation for a claim annotated ``vcluster.loft.sh/skip-translate``;
endpoints keep their addresses; a ConfigMap or Secret a pod names is copied whole, its data and later changes
to it included, configmaps/ and secrets/to_host_syncer.go). This ValidatingAdmissionPolicy
admits from the syncer only what the platform means a tenant to have. Each rule is named in its
rejection message; docs/security-synced-objects.md explains each one.

Only objects vCluster synced are matched (its managed-by label, always set by the syncer): the control
plane's own Secrets, its Service and its service-CIDR probe carry none.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass
from typing import Optional, Sequence

import pulumi
import pulumi_kubernetes as k8s

from components.admission import policy_with_deny_binding, syncer_username, team_namespace_selector
from components.admission_metadata import METADATA_SIZE_FIX, metadata_size, metadata_size_problem
from components.admission_resize import FIX as RESIZE_FIX, PROBLEM as RESIZE_PROBLEM, requests_kept
from components.kubernetes_resources import KubernetesObject
from components.synced_endpoints import endpoint_rules, listed, text_rules
from components.synced_object_sizes import SIZED_KINDS, object_size_check, text_bytes
# Private names: each rule below is laid out as one call of _rule.
from components.synced_rule_parts import CANONICAL_IPV4, kind_rule as _rule, meta_of as _meta
from components.synced_service_rules import service_rules
from config.model import Team
from config.synced_data import (
    ENDPOINT_SLICE_BYTES, ENDPOINTS_BYTES, SERVICE_BYTES, SYNCED_METADATA_BYTES, SYNCED_POD_CONDITION_BYTES,
    SYNCED_POD_CONDITIONS, object_bytes,
)
from config.virtual_cluster import control_plane_claim_prefixes
from config.vocabulary import ADMISSION_COMPONENT, DASHBOARD_LABEL, VCLUSTER_MANAGED_BY_LABEL

# The kinds whose labels and annotations alone are bounded (``metadata-size``); a ConfigMap's and a Secret's count
# within their cap (``object-size``), a pod's in the pod policy.
METADATA_KINDS = ("Service", "Endpoints", "EndpointSlice", "PersistentVolumeClaim")
# The kinds (API resources) the syncer writes besides pods, as the policy's match rules name them.
CORE_RESOURCES = ("services", "endpoints", "persistentvolumeclaims", "configmaps", "secrets", "pods/status",
                  "pods/resize")
DISCOVERY_RESOURCES = ("endpointslices",)
# Annotation that makes vCluster copy a claim's volumeName, selector and data source untranslated.
SKIP_TRANSLATE_ANNOTATION = "vcluster.loft.sh/skip-translate"
# Older form of storageClassName; the PV controller reads it before the field.
STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
# The scheduler's word to the PV controller and the volume provisioners that a claim's volume goes to that node
# (Kubernetes' IsDelayBindingProvisioning; sig-storage-lib-external-provisioner reads both keys).
SELECTED_NODE_ANNOTATIONS = ("volume.kubernetes.io/selected-node", "volume.alpha.kubernetes.io/selected-node")
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"
# Labels that make a ConfigMap (and its options Secret) in the vCluster's host namespace a snapshot or restore request
# for the control plane's own controllers (vCluster 0.35.0 to 0.36.1, pkg/snapshot controller.go and
# restorecontroller.go), which the host admin's `vcluster snapshot` and `vcluster restore` write there.
REQUEST_LABELS = ("vcluster.loft.sh/snapshot-request", "vcluster.loft.sh/restore-request")
# IPv4 ranges that are not the public internet: the cluster's pods, nodes and services live in them, and
# the tenant's own NetworkPolicy (config/hosts.py TENANT_EGRESS_EXCEPTIONS) keeps its pods out of most of them.
NON_PUBLIC_IPV4 = ("0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
                   "192.0.0.0/24", "192.168.0.0/16", "198.18.0.0/15", "224.0.0.0/3")


@dataclass
class SyncedObjectsAdmissionArgs:
    team: Team
    provider: k8s.Provider
    # The host cluster DNS Service's IP, which no tenant Service may hold.
    cluster_dns: pulumi.Input[str]
    # The node ports of the site's vCluster endpoints (config/access_rules.py endpoint_node_ports).
    endpoint_node_ports: Sequence[int]
    # The node ports the host's nodes pull images from (config/model_host.py HostProfile.trusted_node_ports).
    trusted_node_ports: Sequence[int] = ()


def synced_objects_policy_name(team: Team) -> str:
    return f"gpu-tenancy-{team.name}-synced-objects"


def ipv4_pattern(cidr: str) -> str:
    """A regular expression (RE2, as CEL's ``matches``) for the dotted IPv4 addresses inside ``cidr``."""
    network = ipaddress.ip_network(cidr)
    octets = str(network.network_address).split(".")
    whole, rest = divmod(network.prefixlen, 8)
    parts = [octets[i] for i in range(whole)]
    if rest:
        first = int(octets[whole])
        parts.append("(" + "|".join(str(value) for value in range(first, first + 2 ** (8 - rest))) + ")")
    return "^" + "\\\\.".join(parts) + "\\\\."


@functools.cache  # the same text for every team: built once per run
def _public_ipv4(address: str) -> str:
    non_public = " || ".join(f"{address}.matches('{ipv4_pattern(cidr)}')" for cidr in NON_PUBLIC_IPV4)
    return f"({address}.matches('{CANONICAL_IPV4}') && !({non_public}))"


def match_conditions(team: Team) -> list[dict]:
    def synced(obj: str) -> str:
        labels = f"{obj}.metadata.labels"
        return (f"(has({labels}) && '{VCLUSTER_MANAGED_BY_LABEL}' in {labels} && "
                f"{labels}['{VCLUSTER_MANAGED_BY_LABEL}'] == '{team.vcluster_name}')")
    return [
        {"name": "written-by-this-syncer", "expression": f"request.userInfo.username == '{syncer_username(team)}'"},
        # oldObject exists on UPDATE only; a label dropped by the update still counts.
        {"name": "synced-by-this-vcluster",
         "expression": f"{synced('object')} || (request.operation == 'UPDATE' && {synced('oldObject')})"},
    ]


def policy_variables() -> list[dict]:
    return [
        {"name": "serviceType",
         "expression": "object.kind != 'Service' ? '' : (has(object.spec.type) ? object.spec.type : 'ClusterIP')"},
        {"name": "storageClass",
         "expression": "object.kind != 'PersistentVolumeClaim' ? '' : "
                       "(has(object.spec.storageClassName) ? object.spec.storageClassName : '')"},
    ]


def _claim_rules(team: Team) -> list[dict]:
    classes = team.vcluster.claim_storage_classes
    prefixes = control_plane_claim_prefixes(team.vcluster_name, team.vcluster)
    # A prefix another one starts (data-<name>- starts etcd's data-<name>-etcd-) needs no test of its own.
    own_claims = " && ".join(f"!{{ref}}.name.startsWith('{prefix}')" for prefix in prefixes
                             if not any(prefix != other and prefix.startswith(other) for other in prefixes))
    # An unset apiGroup reaches the policy as null: a pointer without omitempty, which the API server's conversion
    # for admission writes (tests/test_synced_claims_admission.py).
    data_source_ok = ("(!has({ref}) || ({ref}.kind == 'PersistentVolumeClaim' && "
                      "(!has({ref}.apiGroup) || {ref}.apiGroup == null || {ref}.apiGroup == '') && "
                      "(!has({ref}.namespace) || {ref}.namespace == '') && "
                      f"{own_claims}))")
    class_ok = "variables.storageClass != ''" + (f" && variables.storageClass in {list(classes)}" if classes else "")
    volume_name = "(has({obj}.spec.volumeName) ? {obj}.spec.volumeName : '')"
    attributes_class = "(has({obj}.spec.volumeAttributesClassName) ? {obj}.spec.volumeAttributesClassName : '')"
    return [
        _rule("claim-skip-translate", ("PersistentVolumeClaim",),
              f"!('{SKIP_TRANSLATE_ANNOTATION}' in {_meta('object', 'annotations')})",
              f"the annotation {SKIP_TRANSLATE_ANNOTATION} makes vCluster pass host volume names through untranslated",
              f"remove the annotation {SKIP_TRANSLATE_ANNOTATION}"),
        _rule("claim-volume", ("PersistentVolumeClaim",),
              f"request.operation == 'CREATE' ? ({volume_name.format(obj='object')} == '' && "
              f"!has(object.spec.selector)) : {volume_name.format(obj='object')} == {volume_name.format(obj='oldObject')}",
              "a claim may not pick a host PersistentVolume (spec.volumeName, spec.selector): vCluster copies them "
              "untranslated, so they name any volume of the cluster",
              "remove spec.volumeName and spec.selector and let the storage class provision a volume"),
        _rule("claim-data-source", ("PersistentVolumeClaim",),
              " && ".join(data_source_ok.format(ref=f"object.spec.{field}") for field in ("dataSource", "dataSourceRef")),
              "a claim may only be cloned from another claim of this vCluster (not a snapshot, another namespace or "
              "the vCluster's own data volume)",
              "remove spec.dataSource and spec.dataSourceRef, or name a claim of your vCluster"),
        _rule("claim-storage-class", ("PersistentVolumeClaim",),
              f"{class_ok} && !('{STORAGE_CLASS_ANNOTATION}' in {_meta('object', 'annotations')})",
              f"team {team.name}'s claims use " + (f"the storage classes {', '.join(classes)}" if classes else
                                                   "a named storage class") +
              " (config vcluster.storageClasses); a claim without a class binds to any unclaimed volume without one",
              "set spec.storageClassName" + (f" to one of {', '.join(classes)}" if classes else "") +
              f" (or leave it out to get the cluster's default class), and drop the {STORAGE_CLASS_ANNOTATION} "
              "annotation"),
        # The host scheduler writes the annotation on the host claim later (not through the syncer), and the syncer's
        # updates carry its value back unchanged.
        _rule("claim-selected-node", ("PersistentVolumeClaim",),
              " && ".join(f"(!('{key}' in {_meta('object', 'annotations')}) || (request.operation == 'UPDATE' && "
                          f"'{key}' in {_meta('oldObject', 'annotations')} && "
                          f"{_meta('oldObject', 'annotations')}['{key}'] == "
                          f"{_meta('object', 'annotations')}['{key}']))"
                          for key in SELECTED_NODE_ANNOTATIONS),
              f"the annotations {', '.join(SELECTED_NODE_ANNOTATIONS)} are the host scheduler's: they have the "
              "provisioner create the claim's volume on the node they name at once, any node of the cluster (its "
              "local disks included), not one the team's pods are scheduled to",
              f"remove the annotations {', '.join(SELECTED_NODE_ANNOTATIONS)}; the scheduler sets them for the node "
              "of the first pod that uses the claim"),
        # vCluster's claim updates copy only the requested size, but a class added later would modify the bound
        # volume as much as one named at creation; a class kept unchanged (a claim older than this rule) passes.
        _rule("claim-volume-attributes-class", ("PersistentVolumeClaim",),
              f"{attributes_class.format(obj='object')} == '' || (request.operation == 'UPDATE' && "
              f"{attributes_class.format(obj='object')} == {attributes_class.format(obj='oldObject')})",
              "a claim may not name a VolumeAttributesClass (spec.volumeAttributesClassName): it sets the volume's "
              f"performance (provisioned IOPS, throughput) and its cost, which team {team.name}'s storage classes "
              "and quota do not cover",
              "remove spec.volumeAttributesClassName; the storage class's own parameters apply"),
    ]


def _pod_conditions() -> str:
    """A pod's status conditions, when the syncer changes them, number at most SYNCED_POD_CONDITIONS and hold at most
    SYNCED_POD_CONDITION_BYTES of text. The syncer writes a pod's status only to copy the tenant's changed virtual
    conditions onto it, so conditions it leaves as they were (the kubelet's and KAI's, which they write themselves)
    are not judged, nor is a resize. The count comes first (``&&`` stops there): the API server bounds neither."""
    conditions = "object.status.conditions"
    text = " + ".join(f"(has(c.{field}) ? {text_bytes(f'c.{field}')} : 0)"
                      for field in ("type", "status", "reason", "message"))
    unchanged = (f"(has(oldObject.status) && has(oldObject.status.conditions) && "
                 f"{conditions} == oldObject.status.conditions)")
    return (f"!has(object.status) || !has({conditions}) || {unchanged} || "
            f"(size({conditions}) <= {SYNCED_POD_CONDITIONS} && "
            f"{conditions}.map(c, {text}).sum() <= {SYNCED_POD_CONDITION_BYTES})")


def policy_validations(team: Team, cluster_dns: str, endpoint_node_ports: Sequence[int],
                       trusted_node_ports: Sequence[int] = ()) -> list[dict]:
    endpoints = ("!has(object.subsets) || object.subsets.all(s, "
                 f"(!has(s.addresses) || s.addresses.all(a, {_public_ipv4('a.ip')})) && "
                 f"(!has(s.notReadyAddresses) || s.notReadyAddresses.all(a, {_public_ipv4('a.ip')})))")
    slices = (f"object.addressType == 'IPv4' && ({listed('object.endpoints')} ? "
              f"object.endpoints.all(e, e.addresses.all(ip, {_public_ipv4('ip')})) : true)")
    return [
        *service_rules(team, cluster_dns, endpoint_node_ports, trusted_node_ports),
        *_claim_rules(team),
        _rule("endpoint-addresses", ("Endpoints",), endpoints,
              "a Service without a selector may only point at public IPv4 addresses written canonically (no leading "
              f"zeros), never into the cluster's private ranges ({', '.join(NON_PUBLIC_IPV4)})",
              "use a Service with a selector for your own pods"),
        _rule("endpoint-addresses", ("EndpointSlice",), slices,
              "an EndpointSlice may only list public IPv4 addresses written canonically (addressType IPv4, no "
              f"leading zeros), never the cluster's private ranges ({', '.join(NON_PUBLIC_IPV4)})",
              "use a Service with a selector for your own pods"),
        *(_rule(*rule) for rule in endpoint_rules() + text_rules()),
        _rule("service-account-token", ("Secret",),
              f"!has(object.type) || object.type != '{SERVICE_ACCOUNT_TOKEN}'",
              "a Secret of type service-account-token would get a host token for a host service account",
              "use type Opaque"),
        _rule("snapshot-requests", ("ConfigMap", "Secret"),
              " && ".join(f"!('{label}' in {_meta('object', 'labels')})" for label in REQUEST_LABELS),
              f"the labels {', '.join(REQUEST_LABELS)} make the vCluster's control plane take the object for the "
              "platform's snapshot or restore request (back up or replace its data at a URL the request names, cancel "
              "the platform's own requests)", "remove the label; ask the platform team for a snapshot"),
        _rule("dashboard-label", ("ConfigMap", "Secret"),
              f"!('{DASHBOARD_LABEL[0]}' in {_meta('object', 'labels')})",
              f"a Grafana searching every namespace (kube-prometheus-stack's default, a site's own Grafana) loads "
              f"every ConfigMap labelled {DASHBOARD_LABEL[0]} in the cluster",
              f"remove the label {DASHBOARD_LABEL[0]}; team dashboards come with the platform"),
        *(_rule("object-size", (kind,), *object_size_check(team, kind)) for kind in SIZED_KINDS),
        _rule("metadata-size", METADATA_KINDS, metadata_size(), metadata_size_problem(
            ", ".join(METADATA_KINDS[:-1]) + " or " + METADATA_KINDS[-1]), METADATA_SIZE_FIX),
        _rule("pod-status-metadata", ("Pod",),
              f"{_meta('object', 'labels')} == {_meta('oldObject', 'labels')} && "
              f"{_meta('object', 'annotations')} == {_meta('oldObject', 'annotations')}",
              "labels and annotations may not change through pods/status or pods/resize",
              "change them on the pod itself"),
        _rule("fixed-requests", ("Pod",), requests_kept(), RESIZE_PROBLEM, RESIZE_FIX),
        _rule("pod-conditions", ("Pod",), _pod_conditions(),
              f"vCluster copies a pod's status conditions, written in the vCluster, onto the host pod: they may "
              f"number at most {SYNCED_POD_CONDITIONS} and hold at most {SYNCED_POD_CONDITION_BYTES} bytes "
              f"({SYNCED_POD_CONDITION_BYTES // 2 ** 10}Ki) of type, status, reason and message, since every copy "
              "lands in the host's etcd, which turns the whole cluster read-only when full",
              "keep long text out of pod conditions (a readiness gate's condition needs its type and status; put "
              "details in an event or a ConfigMap)"),
    ]


def policy_spec(team: Team, cluster_dns: str, endpoint_node_ports: Sequence[int],
                trusted_node_ports: Sequence[int] = ()) -> dict:
    return {
        "failurePolicy": "Fail",
        "matchConstraints": {
            "resourceRules": [
                {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": list(CORE_RESOURCES)},
                {"apiGroups": ["discovery.k8s.io"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                 "resources": list(DISCOVERY_RESOURCES)},
            ],
            "namespaceSelector": team_namespace_selector(team),
        },
        "matchConditions": match_conditions(team),
        "variables": policy_variables(),
        "validations": policy_validations(team, cluster_dns, endpoint_node_ports, trusted_node_ports),
    }


def load_balancer_grants(team: Team) -> dict[str, list[str]]:
    """What the team's Services may hand the load-balancer implementation, for the review summary: the annotations
    on every team (their rule judges every Service), the classes where the team holds load balancers (the only
    ones whose rule is rendered), and the tags its load balancers must carry where the platform sets them."""
    services = team.vcluster.services
    grants = {"loadBalancerAnnotations": list(services.load_balancer_annotations)}
    if services.load_balancers:
        grants["loadBalancerClasses"] = list(services.load_balancer_classes)
    if services.load_balancer_tags:
        grants["loadBalancerTags"] = [f"{key}={value}" for key, value in services.load_balancer_tags]
    return grants


class SyncedObjectsAdmission(pulumi.ComponentResource):
    policy: KubernetesObject
    binding: KubernetesObject

    def __init__(self, name: str, args: SyncedObjectsAdmissionArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(ADMISSION_COMPONENT, name, None, opts)
        team = args.team
        policy_name = synced_objects_policy_name(team)
        spec = pulumi.Output.from_input(args.cluster_dns).apply(
            lambda cluster_dns: policy_spec(team, cluster_dns, args.endpoint_node_ports, args.trusted_node_ports))
        self.policy, self.binding = policy_with_deny_binding(self, name, team, args.provider, policy_name, spec)
        self.register_outputs({"policy": policy_name, "syncer": syncer_username(team),
                               "objectBytes": object_bytes(team.vcluster), "metadataBytes": SYNCED_METADATA_BYTES,
                               "podConditionBytes": SYNCED_POD_CONDITION_BYTES,
                               "serviceBytes": SERVICE_BYTES, "endpointsBytes": ENDPOINTS_BYTES,
                               "endpointSliceBytes": ENDPOINT_SLICE_BYTES, **load_balancer_grants(team)})
