"""Every string a tenant's pod can carry to the host is bounded, field by field, from upstream.

The string-bearing fields of the pod spec and of every object below it are read from k8s.io/api ``core/v1/types.go``
at each accepted Kubernetes minor (MIRRORED_TAGS). Each field is in exactly one of three tables:

- ``COUNTED``: rule ``pod-size`` sums its bytes (components/pod_text_paths.py), at every path it has in the spec;
- ``API_BOUNDS``: the API server's validation bounds its length, at most ``MAX_API_BOUND`` bytes; the bound and where
  it comes from are recorded. Sources, read for this table: kubernetes/kubernetes
  ``pkg/apis/core/validation/validation.go`` (that repository is too large to mirror here: read from the stored
  snapshot of the code corpus, commit 000f26050b9b, a 1.36-era tree; ``VALIDATION`` below) and the
  kubernetes/apimachinery mirror (``APIMACHINERY``) for the helpers it calls;
- ``ON_THE_HOST``: vCluster rewrites it to a value of its own, or a host rule refuses it (whole volume kinds,
  resource claims, host controllers: components/admission_pod_fields.py, components/admission_volumes.py).

A release that adds a string field, or a counted field reachable at a path the rule does not walk, turns this red.
Not exact: the bounds were read at one kubernetes/kubernetes commit, not at every accepted minor. Most were read in
the functions named; a few are taken from the helper a field's validation is known to call but were not read at that
commit (ContainerPort.hostIP, SecurityContext.procMount, Lifecycle.stopSignal, ContainerRestartRule's action and
operator, FileKeySelector.volumeName, Volume.name, ImageVolumeSource.pullPolicy, WindowsSecurityContextOptions.
runAsUserName's 256-byte domain). A field whose bound could not be found there at all is counted instead
(PodSpec.hostnameOverride).
"""

from __future__ import annotations

from typing import NamedTuple

import pytest

from components.admission_pod_fields import POD_FIELDS, REFUSED
from components.pod_text_paths import counted_fields
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.go_struct_fields import bare as bare_type, local
from tests.test_volume_sources_contract import REFUSED_PROJECTED_SOURCES, REFUSED_VOLUME_SOURCES

API = "kubernetes/api"
TYPES = "core/v1/types.go"
VALIDATION = "kubernetes/kubernetes pkg/apis/core/validation/validation.go"
APIMACHINERY = "apimachinery pkg/util/validation/validation.go"
# A qualified name (a 253-byte DNS prefix, a slash and 63 bytes) plus a margin: short names and keys. Anything the API
# server lets grow longer (a 4 KiB AppArmor path, a 64 KiB gMSA spec) is counted instead.
MAX_API_BOUND = 400


class Bound(NamedTuple):
    bytes: int
    source: str


ENUM = Bound(40, f"{VALIDATION}: one of a fixed set of values (NotSupported)")
DNS_LABEL = Bound(63, f"{APIMACHINERY} IsDNS1123Label")
SUBDOMAIN = Bound(253, f"{APIMACHINERY} IsDNS1123Subdomain")
QUALIFIED = Bound(317, f"{APIMACHINERY} IsQualifiedName (a 253-byte prefix, '/', 63 bytes)")
LABEL_VALUE = Bound(63, f"{APIMACHINERY} IsValidLabelValue")
IP = Bound(45, f"{APIMACHINERY} IsValidIP (the longest IPv6 text)")
PORT_NAME = Bound(15, f"{APIMACHINERY} IsValidPortName")
# A quantity is parsed and stored in canonical form, capped at the largest value and rounded to nano units
# (apimachinery pkg/api/resource/quantity.go ParseQuantity): a few tens of bytes. Its key is a resource name.
QUANTITIES = Bound(QUALIFIED.bytes + 40, f"{QUALIFIED.source} names; apimachinery resource.ParseQuantity values")

# struct -> field -> bound
API_BOUNDS: dict[str, dict[str, Bound]] = {
    "AppArmorProfile": {"type": ENUM},
    "ConfigMapKeySelector": {"key": Bound(253, f"{VALIDATION} validateConfigMapKeySelector: IsConfigMapKey")},
    "SecretKeySelector": {"key": Bound(253, f"{VALIDATION} validateSecretKeySelector: IsConfigMapKey")},
    "Container": {"imagePullPolicy": ENUM, "name": DNS_LABEL, "restartPolicy": ENUM, "terminationMessagePolicy": ENUM},
    "ContainerPort": {"hostIP": IP, "name": PORT_NAME, "protocol": ENUM},
    "ContainerResizePolicy": {"resourceName": ENUM, "restartPolicy": ENUM},
    "ContainerRestartRule": {"action": ENUM},
    "ContainerRestartRuleOnExitCodes": {"operator": ENUM},
    "EmptyDirVolumeSource": {"sizeLimit": QUANTITIES},
    "EphemeralContainer": {"targetContainerName": Bound(63, f"{VALIDATION} validateEphemeralContainers: an existing "
                                                            "container's name")},
    "FileKeySelector": {"volumeName": DNS_LABEL},
    "HTTPGetAction": {"port": PORT_NAME, "scheme": ENUM},
    "TCPSocketAction": {"port": PORT_NAME},
    "HostAlias": {"ip": IP, "hostnames": Bound(253, f"{VALIDATION} ValidateHostAliases: ValidateDNS1123Subdomain")},
    "ImageVolumeSource": {"pullPolicy": ENUM},
    "Lifecycle": {"stopSignal": ENUM},
    "NodeSelectorRequirement": {"key": QUALIFIED, "operator": ENUM},
    "ObjectFieldSelector": {"apiVersion": Bound(2, f"{VALIDATION} validateObjectFieldSelector: "
                                                   "ConvertDownwardAPIFieldLabel takes v1 only"),
                            "fieldPath": Bound(QUALIFIED.bytes + 24, f"{VALIDATION} validateObjectFieldSelector: a "
                                                                     "listed path, or labels/annotations[qualified]")},
    "PodAffinityTerm": {"matchLabelKeys": QUALIFIED, "mismatchLabelKeys": QUALIFIED, "namespaces": DNS_LABEL,
                        "topologyKey": QUALIFIED},
    "LabelSelector": {"matchLabels": Bound(QUALIFIED.bytes + 63, f"{VALIDATION} validatePodAffinityTerm and "
                                                                 "validateTopologySpreadConstraints: "
                                                                 "ValidateLabelSelector, label keys and values"),
                      "matchExpressions": Bound(QUALIFIED.bytes, "as matchLabels")},
    "PodDNSConfig": {"nameservers": IP,
                     "searches": Bound(253, f"{VALIDATION} validatePodDNSConfig: subdomains, at most 32 and "
                                            "2,048 characters in all")},
    "PodOS": {"name": ENUM},
    "PodReadinessGate": {"conditionType": QUALIFIED},
    "PodSchedulingGate": {"name": QUALIFIED},
    "PodSecurityContext": {"fsGroupChangePolicy": ENUM, "seLinuxChangePolicy": ENUM,
                           "supplementalGroupsPolicy": ENUM},
    "PodSpec": {"dnsPolicy": ENUM, "hostname": DNS_LABEL,
                "nodeSelector": Bound(QUALIFIED.bytes + 63, f"{VALIDATION} ValidatePodSpec: ValidateLabels"),
                "overhead": QUANTITIES, "preemptionPolicy": ENUM, "restartPolicy": ENUM,
                "runtimeClassName": Bound(253, f"{VALIDATION} ValidateRuntimeClassName")},
    "ResourceFieldSelector": {"divisor": QUANTITIES},
    "ResourceRequirements": {"limits": QUANTITIES, "requests": QUANTITIES},
    "SeccompProfile": {"type": ENUM},
    "SecurityContext": {"procMount": ENUM},
    "Sysctl": {"name": Bound(253, f"{VALIDATION} validateSysctls: IsValidSysctlName (SysctlMaxLength)")},
    "Toleration": {"effect": ENUM, "key": QUALIFIED, "operator": ENUM,
                   "value": Bound(63, f"{VALIDATION} ValidateTolerations: IsValidLabelValue")},
    "TopologySpreadConstraint": {"matchLabelKeys": QUALIFIED, "nodeAffinityPolicy": ENUM, "nodeTaintsPolicy": ENUM,
                                 "topologyKey": QUALIFIED, "whenUnsatisfiable": ENUM},
    "Volume": {"name": DNS_LABEL},
    "VolumeDevice": {"name": DNS_LABEL},
    "VolumeMount": {"mountPropagation": ENUM, "name": DNS_LABEL, "recursiveReadOnly": ENUM},
    "WindowsSecurityContextOptions": {
        "gmsaCredentialSpecName": SUBDOMAIN,
        "runAsUserName": Bound(361, f"{VALIDATION} validateWindowsSecurityContextOptions: a 256-byte domain, "
                                    "'\\' and a 104-byte user")},
}
API_BOUNDS["EphemeralContainerCommon"] = API_BOUNDS["Container"]

# struct -> field -> what keeps it off the host as the tenant wrote it
ON_THE_HOST: dict[str, dict[str, str]] = {
    "LocalObjectReference": {"name": "pods/translate translator.go renames every object a pod names to a host name of "
                                     "at most 63 bytes (pkg/util/translate SafeConcatName)"},
    "SecretVolumeSource": {"secretName": "renamed as LocalObjectReference.name"},
    "PersistentVolumeClaimVolumeSource": {"claimName": "renamed as LocalObjectReference.name"},
    "PodSpec": {"nodeName": "rule node-name", "priorityClassName": "translator.go clears it",
                "schedulerName": "rule own-queue: kai-scheduler only", "serviceAccount": "translator.go clears it",
                "serviceAccountName": "translator.go: vCluster's workload account",
                "subdomain": "translator.go clears it"},
    "HTTPGetAction": {"host": "rule probe-host"},
    "TCPSocketAction": {"host": "rule probe-host"},
}

# struct -> fields rule pod-size counts
COUNTED: dict[str, set[str]] = {
    "AppArmorProfile": {"localhostProfile"},
    "Capabilities": {"add", "drop"},
    "Container": {"args", "command", "image", "terminationMessagePath", "workingDir"},
    "DownwardAPIVolumeFile": {"path"},
    "EmptyDirVolumeSource": {"medium"},
    "EnvFromSource": {"prefix"},
    "EnvVar": {"name", "value"},
    "ExecAction": {"command"},
    "FileKeySelector": {"key", "path"},
    "GRPCAction": {"service"},
    "HTTPGetAction": {"path"},
    "HTTPHeader": {"name", "value"},
    "ImageVolumeSource": {"reference"},
    "KeyToPath": {"key", "path"},
    "NodeSelectorRequirement": {"values"},
    # ValidatePodSpec at the commit read checks no length for it (1.34's HostnameOverride gate).
    "PodSpec": {"hostnameOverride"},
    "PodDNSConfigOption": {"name", "value"},
    "ResourceFieldSelector": {"containerName", "resource"},
    "SELinuxOptions": {"level", "role", "type", "user"},
    "SeccompProfile": {"localhostProfile"},
    "Sysctl": {"value"},
    "VolumeDevice": {"devicePath"},
    "VolumeMount": {"mountPath", "subPath", "subPathExpr"},
    "WindowsSecurityContextOptions": {"gmsaCredentialSpec"},
}
COUNTED["EphemeralContainerCommon"] = COUNTED["Container"]

# Types from other packages, as they appear in core/v1, and what they hold.
EXTERNAL = {"meta/v1.LabelSelector": "LabelSelector", "resource.Quantity": None, "intstr.IntOrString": None,
            "meta/v1.ObjectMeta": None}
PRIMITIVES = {"bool", "int", "int32", "int64", "byte", "float64", "types.UID", "meta/v1.Time"}
# Volume kinds and projections the host refuses whole (tests/test_volume_sources_contract.py), and the ones the
# syncer replaces (an ephemeral volume by a claim, a token by a downward-API projection), which the host refuses.
WHOLE = {"VolumeSource": {*REFUSED_VOLUME_SOURCES, "ephemeral"},
         "VolumeProjection": {*REFUSED_PROJECTED_SOURCES, "serviceAccountToken"}}


class Leaf(NamedTuple):
    struct: str
    field: str
    path: str  # from the pod spec, lists marked []


def _structs(types: str) -> tuple[dict, dict]:
    """(struct -> [(JSON name or '' when inline, Go type)], named non-struct type -> underlying type)."""
    structs, named = local(types)
    return {name: [(field.name, field.kind) for field in fields] for name, fields in structs.items()}, named


def leaves(tag: str) -> list[Leaf]:
    """Every string-bearing field reachable from PodSpec at k8s.io/api ``tag``, with each path it has."""
    structs, named = _structs(git(API, "show", f"{mirrored_tag(API, tag)}:{TYPES}"))
    refused = {(definition, name) for definition, fields in POD_FIELDS.items()
               for name, verdict in fields.items() if verdict.kind == REFUSED}
    found: list[Leaf] = []

    def walk(struct: str, prefix: str, seen: tuple[str, ...]) -> None:
        for name, kind in structs[struct]:
            if not name:
                walk(kind, prefix, seen)
                continue
            if name in WHOLE.get(struct, ()) or (struct, name) in refused:
                continue
            bare = bare_type(kind)
            bare = EXTERNAL.get(bare) or bare
            path = f"{prefix}{name}{'[]' if kind.lstrip('*').startswith('[]') else ''}"
            if bare in structs:
                if bare not in seen:
                    walk(bare, f"{path}.", (*seen, bare))
            elif bare == "string" or named.get(bare) == "string" or bare.startswith("map[") or \
                    named.get(bare, "").startswith("map[") or bare in EXTERNAL:
                found.append(Leaf(struct, name, path))
            else:
                assert bare in PRIMITIVES or named.get(bare) in PRIMITIVES, \
                    f"{struct}.{name} is of type {kind}: add it to EXTERNAL or PRIMITIVES with what it holds"
    structs["LabelSelector"] = [("matchLabels", "map[string]string"), ("matchExpressions", "[]string")]
    walk("PodSpec", "", ("PodSpec",))
    return found


def _verdicts(leaf: Leaf) -> list[str]:
    return [table for table, fields in (("counted", COUNTED), ("api", API_BOUNDS), ("host", ON_THE_HOST))
            if leaf.field in fields.get(leaf.struct, ())]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_every_string_field_of_the_pod_spec_is_counted_bounded_or_kept_off_the_host(tag):
    unclassified = {f"{leaf.struct}.{leaf.field}": verdicts for leaf in leaves(tag)
                    for verdicts in [_verdicts(leaf)] if len(verdicts) != 1}
    assert unclassified == {}, "classify each in exactly one table of this file (none, or more than one, now)"


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_the_rule_counts_every_path_of_a_counted_field(tag):
    paths = {leaf.path for leaf in leaves(tag) if _verdicts(leaf) == ["counted"]}
    assert paths, "no counted field found: read types.go again"
    assert paths - counted_fields() == set(), "add these paths to components/pod_text_paths.py"


def test_the_rule_walks_no_path_of_no_accepted_kubernetes():
    known = set().union(*({leaf.path for leaf in leaves(tag)} for tag in MIRRORED_TAGS[API]))
    assert counted_fields() - known == set()


def test_every_bound_is_short_and_every_table_entry_is_a_field_of_some_accepted_kubernetes():
    assert {f"{s}.{f}": b.bytes for s, fields in API_BOUNDS.items() for f, b in fields.items()
            if b.bytes > MAX_API_BOUND} == {}
    known = set().union(*({(leaf.struct, leaf.field) for leaf in leaves(tag)} for tag in MIRRORED_TAGS[API]))
    listed = {(struct, name) for table in (COUNTED, API_BOUNDS, ON_THE_HOST) for struct, fields in table.items()
              for name in fields}
    assert listed - known == set()
