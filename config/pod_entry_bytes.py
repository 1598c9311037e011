"""What one entry of the lists rule ``pod-size`` walks stores in the host's etcd beside its free text, in bytes.

Rule ``pod-size`` sums the free text of a pod (components/pod_text_paths.py) and caps how many list entries hold it,
but an entry stores more than its text: its protobuf tag and length, and fields whose length the API server bounds
(a mount's volume name and propagation, an env variable's field or key reference, an item's mode, a quantity). 8,000
env variables each naming a 317-byte annotation key by field reference are 3 MB of pod with 0 bytes of text. So the
rule also sums each entry's own part, at its largest (config/synced_entry_bytes.py: tag, length, and each field at
the longest value validation lets it hold), and caps that sum at ``SYNCED_POD_ENTRY_BYTES``.

A ``text`` field's bytes are the text sum's; the entry holds its tag and a length of at most ``LENGTH_BYTES``. Every
length here is of a message or string inside the two sums (the text cap at most 1 MiB, config/synced_data.py
``API_DATA_LIMIT``, and the entries' cap), under 2 MiB, so three bytes of varint. Lists an entry holds are entries of
their own, counted where the rule walks them. A message whose validation admits one field of several
(``one_of``: a volume's source, an env variable's reference) counts its largest. tests/test_pod_entry_bytes_contract.py
holds every message below against k8s.io/api ``core/v1/generated.proto`` at every accepted minor, each bound against
tests/test_pod_text_fields_contract.py's, and the sums against protobuf's own encoder.
"""

from __future__ import annotations

from config.synced_entry_bytes import (
    DNS_LABEL_BYTES, ENUM_BYTES, IP_BYTES, LABEL_VALUE_BYTES, LOCAL_OBJECT_REFERENCE,
    NEGATIVE, QUALIFIED_NAME_BYTES, SECRET_KEY_SELECTOR, Field, Message, string_field, tag_bytes,
    varint_bytes,
)

# A quantity's canonical text (apimachinery resource.ParseQuantity: an int64 of nano units and a suffix).
QUANTITY_BYTES = 40
# A file mode (validation validateKeyToPath and the volume sources' defaultMode: 0 to 0777).
MODE_VALUE = 0o777
# A preferred scheduling term's weight (validation: 1 to 100).
WEIGHT_VALUE = 100
# An object field selector's apiVersion (v1 only) and path (a listed path, or metadata.labels or annotations with a
# qualified key: 24 bytes around it).
API_VERSION_BYTES = 2
FIELD_PATH_BYTES = QUALIFIED_NAME_BYTES + 24
SUBDOMAIN_BYTES = 253
# A sysctl's name (validation IsValidSysctlName: SysctlMaxLength).
SYSCTL_NAME_BYTES = 253
# The most bytes of the text sum's cap and the entries' together: under 2 MiB, so three bytes hold each length.
LENGTH_LIMIT = 2 ** 21
LENGTH_BYTES = varint_bytes(LENGTH_LIMIT - 1)


def _text(number: int) -> Field:
    return Field(number, "text")


def _message(number: int, message: Message) -> Field:
    return Field(number, "message", message)


def _bool(number: int) -> Field:
    return Field(number, "bool")


def _int32(number: int, largest: int) -> Field:
    return Field(number, "int32", largest)


def stored_bytes(field: Field) -> int:
    """The most ``field`` stores beside the text its ``text`` fields hold."""
    if field.kind == "text":
        return tag_bytes(field.number) + LENGTH_BYTES
    if field.kind == "bool":
        return tag_bytes(field.number) + 1
    if field.kind in ("int32", "int64"):
        return tag_bytes(field.number) + varint_bytes(field.largest)
    if field.kind == "string":
        return tag_bytes(field.number) + varint_bytes(field.largest) + field.largest
    return tag_bytes(field.number) + LENGTH_BYTES + own_bytes(field.largest)


def own_bytes(message: Message) -> int:
    sizes = [stored_bytes(field) for field in message.fields.values()] or [0]
    return max(sizes) if message.one_of else sum(sizes)


QUANTITY = Message("Quantity", {"string": string_field(1, QUANTITY_BYTES)})
OBJECT_FIELD_SELECTOR = Message("ObjectFieldSelector", {
    "apiVersion": string_field(1, API_VERSION_BYTES), "fieldPath": string_field(2, FIELD_PATH_BYTES)})
RESOURCE_FIELD_SELECTOR = Message("ResourceFieldSelector", {
    "containerName": _text(1), "resource": _text(2), "divisor": _message(3, QUANTITY)})
CONFIG_MAP_KEY_SELECTOR = Message("ConfigMapKeySelector", SECRET_KEY_SELECTOR.fields)
FILE_KEY_SELECTOR = Message("FileKeySelector", {
    "volumeName": string_field(1, DNS_LABEL_BYTES), "path": _text(2), "key": _text(3), "optional": _bool(4)})
ENV_VAR_SOURCE = Message("EnvVarSource", {
    "fieldRef": _message(1, OBJECT_FIELD_SELECTOR), "resourceFieldRef": _message(2, RESOURCE_FIELD_SELECTOR),
    "configMapKeyRef": _message(3, CONFIG_MAP_KEY_SELECTOR), "secretKeyRef": _message(4, SECRET_KEY_SELECTOR),
    "fileKeyRef": _message(5, FILE_KEY_SELECTOR)}, one_of=True)
# An env variable without its reference: the reference is counted where present (most variables have a value).
ENV_VAR = Message("EnvVar", {"name": _text(1), "value": _text(2)})
ENV_REFERENCE = _message(3, ENV_VAR_SOURCE)
CONFIG_MAP_ENV_SOURCE = Message("ConfigMapEnvSource", {
    "localObjectReference": _message(1, LOCAL_OBJECT_REFERENCE), "optional": _bool(2)})
SECRET_ENV_SOURCE = Message("SecretEnvSource", CONFIG_MAP_ENV_SOURCE.fields)
ENV_FROM_SOURCE = Message("EnvFromSource", {
    "prefix": _text(1), "configMapRef": _message(2, CONFIG_MAP_ENV_SOURCE),
    "secretRef": _message(3, SECRET_ENV_SOURCE)})
VOLUME_MOUNT = Message("VolumeMount", {
    "name": string_field(1, DNS_LABEL_BYTES), "readOnly": _bool(2), "recursiveReadOnly": string_field(7, ENUM_BYTES),
    "mountPath": _text(3), "subPath": _text(4), "mountPropagation": string_field(5, ENUM_BYTES),
    "subPathExpr": _text(6)})
VOLUME_DEVICE = Message("VolumeDevice", {"name": string_field(1, DNS_LABEL_BYTES), "devicePath": _text(2)})
HTTP_HEADER = Message("HTTPHeader", {"name": _text(1), "value": _text(2)})
DNS_OPTION = Message("PodDNSConfigOption", {"name": _text(1), "value": _text(2)})
SYSCTL = Message("Sysctl", {"name": string_field(1, SYSCTL_NAME_BYTES), "value": _text(2)})
KEY_TO_PATH = Message("KeyToPath", {"key": _text(1), "path": _text(2), "mode": _int32(3, MODE_VALUE)})
DOWNWARD_API_FILE = Message("DownwardAPIVolumeFile", {
    "path": _text(1), "fieldRef": _message(2, OBJECT_FIELD_SELECTOR),
    "resourceFieldRef": _message(3, RESOURCE_FIELD_SELECTOR), "mode": _int32(4, MODE_VALUE)})
# Projections and volume sources of the kinds the host admits (components/admission_volumes.py); their items are
# entries of their own.
SECRET_PROJECTION = Message("SecretProjection", {
    "localObjectReference": _message(1, LOCAL_OBJECT_REFERENCE), "optional": _bool(4)})
CONFIG_MAP_PROJECTION = Message("ConfigMapProjection", SECRET_PROJECTION.fields)
DOWNWARD_API_PROJECTION = Message("DownwardAPIProjection", {})
VOLUME_PROJECTION = Message("VolumeProjection", {
    "secret": _message(1, SECRET_PROJECTION), "downwardAPI": _message(2, DOWNWARD_API_PROJECTION),
    "configMap": _message(3, CONFIG_MAP_PROJECTION)}, one_of=True)
EMPTY_DIR = Message("EmptyDirVolumeSource", {"medium": _text(1), "sizeLimit": _message(2, QUANTITY)})
SECRET_VOLUME = Message("SecretVolumeSource", {
    "secretName": string_field(1, DNS_LABEL_BYTES), "defaultMode": _int32(3, MODE_VALUE), "optional": _bool(4)})
CLAIM_VOLUME = Message("PersistentVolumeClaimVolumeSource", {
    "claimName": string_field(1, DNS_LABEL_BYTES), "readOnly": _bool(2)})
DOWNWARD_API_VOLUME = Message("DownwardAPIVolumeSource", {"defaultMode": _int32(2, MODE_VALUE)})
CONFIG_MAP_VOLUME = Message("ConfigMapVolumeSource", {
    "localObjectReference": _message(1, LOCAL_OBJECT_REFERENCE), "defaultMode": _int32(3, MODE_VALUE),
    "optional": _bool(4)})
PROJECTED_VOLUME = Message("ProjectedVolumeSource", {"defaultMode": _int32(2, MODE_VALUE)})
IMAGE_VOLUME = Message("ImageVolumeSource", {"reference": _text(1), "pullPolicy": string_field(2, ENUM_BYTES)})
VOLUME_SOURCE = Message("VolumeSource", {
    "emptyDir": _message(2, EMPTY_DIR), "secret": _message(6, SECRET_VOLUME),
    "persistentVolumeClaim": _message(10, CLAIM_VOLUME), "downwardAPI": _message(16, DOWNWARD_API_VOLUME),
    "configMap": _message(19, CONFIG_MAP_VOLUME), "projected": _message(26, PROJECTED_VOLUME),
    "image": _message(30, IMAGE_VOLUME)}, one_of=True)
VOLUME = Message("Volume", {"name": string_field(1, DNS_LABEL_BYTES), "volumeSource": _message(2, VOLUME_SOURCE)})
NODE_SELECTOR_REQUIREMENT = Message("NodeSelectorRequirement", {
    "key": string_field(1, QUALIFIED_NAME_BYTES), "operator": string_field(2, ENUM_BYTES)})
NODE_SELECTOR_TERM = Message("NodeSelectorTerm", {})
PREFERRED_SCHEDULING_TERM = Message("PreferredSchedulingTerm", {
    "weight": _int32(1, WEIGHT_VALUE), "preference": _message(2, NODE_SELECTOR_TERM)})
HOST_ALIAS = Message("HostAlias", {"ip": string_field(1, IP_BYTES)})
READINESS_GATE = Message("PodReadinessGate", {"conditionType": string_field(1, QUALIFIED_NAME_BYTES)})
SCHEDULING_GATE = Message("PodSchedulingGate", {"name": string_field(1, QUALIFIED_NAME_BYTES)})
# Label selectors (apimachinery meta/v1) of pod affinity terms and topology spread constraints: their labels, keys
# and values are entries of their own.
LABEL_SELECTOR = Message("LabelSelector", {})
LABEL_SELECTOR_REQUIREMENT = Message("LabelSelectorRequirement", {
    "key": string_field(1, QUALIFIED_NAME_BYTES), "operator": string_field(2, ENUM_BYTES)})
POD_AFFINITY_TERM = Message("PodAffinityTerm", {
    "labelSelector": _message(1, LABEL_SELECTOR), "topologyKey": string_field(3, QUALIFIED_NAME_BYTES),
    "namespaceSelector": _message(4, LABEL_SELECTOR)})
WEIGHTED_POD_AFFINITY_TERM = Message("WeightedPodAffinityTerm", {
    "weight": _int32(1, WEIGHT_VALUE), "podAffinityTerm": _message(2, POD_AFFINITY_TERM)})
# Its skew and domains at a negative number's ten bytes: no bound of theirs needs reading.
TOPOLOGY_SPREAD_CONSTRAINT = Message("TopologySpreadConstraint", {
    "maxSkew": Field(1, "int32", NEGATIVE), "topologyKey": string_field(2, QUALIFIED_NAME_BYTES),
    "whenUnsatisfiable": string_field(3, ENUM_BYTES), "labelSelector": _message(4, LABEL_SELECTOR),
    "minDomains": Field(5, "int32", NEGATIVE), "nodeAffinityPolicy": string_field(6, ENUM_BYTES),
    "nodeTaintsPolicy": string_field(7, ENUM_BYTES)})
CONTAINER_RESIZE_POLICY = Message("ContainerResizePolicy", {
    "resourceName": string_field(1, ENUM_BYTES), "restartPolicy": string_field(2, ENUM_BYTES)})
EXIT_CODES = Message("ContainerRestartRuleOnExitCodes", {"operator": string_field(1, ENUM_BYTES)})
CONTAINER_RESTART_RULE = Message("ContainerRestartRule", {
    "action": string_field(1, ENUM_BYTES), "exitCodes": _message(2, EXIT_CODES)})
# A map's entry is a message of its key (1) and value (2).
RESOURCE_ENTRY = Message("map<string, Quantity>", {
    "key": string_field(1, QUALIFIED_NAME_BYTES), "value": _message(2, QUANTITY)})
LABEL_ENTRY = Message("map<string, string>", {
    "key": string_field(1, QUALIFIED_NAME_BYTES), "value": string_field(2, LABEL_VALUE_BYTES)})

# Each entry as its list (or map) holds it: holder message, field, and the entry field. An entry of a list of strings
# the rule counts is a text field of its own.
ENTRIES = {
    "Container.env": _message(7, ENV_VAR), "Container.envFrom": _message(19, ENV_FROM_SOURCE),
    "Container.volumeMounts": _message(9, VOLUME_MOUNT), "Container.volumeDevices": _message(21, VOLUME_DEVICE),
    "ResourceRequirements.limits": _message(1, RESOURCE_ENTRY),
    "ResourceRequirements.requests": _message(2, RESOURCE_ENTRY),
    "Container.command": _text(3), "Container.args": _text(4), "ExecAction.command": _text(1),
    "Capabilities.add": _text(1), "Capabilities.drop": _text(2),
    "HTTPGetAction.httpHeaders": _message(5, HTTP_HEADER),
    "PodSpec.volumes": _message(1, VOLUME), "PodSpec.nodeSelector": _message(7, LABEL_ENTRY),
    "PodSpec.hostAliases": _message(23, HOST_ALIAS), "HostAlias.hostnames": string_field(2, SUBDOMAIN_BYTES),
    "PodSpec.readinessGates": _message(28, READINESS_GATE), "PodSpec.schedulingGates": _message(38, SCHEDULING_GATE),
    "PodDNSConfig.options": _message(3, DNS_OPTION), "PodSecurityContext.sysctls": _message(7, SYSCTL),
    "ConfigMapVolumeSource.items": _message(2, KEY_TO_PATH), "SecretVolumeSource.items": _message(2, KEY_TO_PATH),
    "ConfigMapProjection.items": _message(2, KEY_TO_PATH), "SecretProjection.items": _message(2, KEY_TO_PATH),
    "DownwardAPIVolumeSource.items": _message(1, DOWNWARD_API_FILE),
    "DownwardAPIProjection.items": _message(1, DOWNWARD_API_FILE),
    "ProjectedVolumeSource.sources": _message(1, VOLUME_PROJECTION),
    "NodeSelector.nodeSelectorTerms": _message(1, NODE_SELECTOR_TERM),
    "NodeSelectorTerm.matchExpressions": _message(1, NODE_SELECTOR_REQUIREMENT),
    "NodeSelectorTerm.matchFields": _message(2, NODE_SELECTOR_REQUIREMENT),
    "NodeSelectorRequirement.values": _text(3),
    "NodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": _message(2, PREFERRED_SCHEDULING_TERM),
    "PodSpec.topologySpreadConstraints": _message(33, TOPOLOGY_SPREAD_CONSTRAINT),
    "TopologySpreadConstraint.matchLabelKeys": string_field(8, QUALIFIED_NAME_BYTES),
    "PodAffinity.requiredDuringSchedulingIgnoredDuringExecution": _message(1, POD_AFFINITY_TERM),
    "PodAffinity.preferredDuringSchedulingIgnoredDuringExecution": _message(2, WEIGHTED_POD_AFFINITY_TERM),
    "PodAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution": _message(1, POD_AFFINITY_TERM),
    "PodAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution": _message(2, WEIGHTED_POD_AFFINITY_TERM),
    "PodAffinityTerm.namespaces": string_field(2, DNS_LABEL_BYTES),
    "PodAffinityTerm.matchLabelKeys": string_field(5, QUALIFIED_NAME_BYTES),
    "PodAffinityTerm.mismatchLabelKeys": string_field(6, QUALIFIED_NAME_BYTES),
    "LabelSelector.matchLabels": _message(1, LABEL_ENTRY),
    "LabelSelector.matchExpressions": _message(2, LABEL_SELECTOR_REQUIREMENT),
    "LabelSelectorRequirement.values": string_field(3, LABEL_VALUE_BYTES),
    "Container.resizePolicy": _message(23, CONTAINER_RESIZE_POLICY),
    "Container.restartPolicyRules": _message(25, CONTAINER_RESTART_RULE),
    # A list of numbers, each its tag and a negative number's ten bytes (proto2 does not pack them).
    "ContainerRestartRuleOnExitCodes.values": Field(2, "int32", NEGATIVE),
    "PodSecurityContext.supplementalGroups": Field(4, "int64", NEGATIVE),
    "PodDNSConfig.nameservers": string_field(1, IP_BYTES), "PodDNSConfig.searches": string_field(2, SUBDOMAIN_BYTES),
    "PodSpec.overhead": _message(32, RESOURCE_ENTRY),
}
ENTRY_BYTES = {holder: stored_bytes(entry) for holder, entry in ENTRIES.items()}
ENV_REFERENCE_BYTES = stored_bytes(ENV_REFERENCE)
# What the entries of one pod may store beside their text: far above an honest pod's (the large ones of
# tests/test_pod_entry_sizes.py store under half of it; 8,192 env variables of a name and a value store 98,304 bytes,
# 131 volumes 19,912), where a pod of fixed-length fields alone reached the request's size.
SYNCED_POD_ENTRY_BYTES = 128 * 2 ** 10
