"""What rule ``pod-entry-size`` counts each entry to store (config/pod_entry_bytes.py) against how the API server
stores it: each message's fields in k8s.io/api ``core/v1/generated.proto`` (and apimachinery's Quantity) at every
accepted Kubernetes minor, each string at the longest value validation lets it hold (tests/test_pod_text_fields_contract
.py's bounds) or counted as text, every list the rule walks charged, and the sums against protobuf's own encoder."""

from __future__ import annotations

import re

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from components.pod_text_paths import POD_SPEC, TextPaths
from config.pod_entry_bytes import (
    ENTRIES, ENTRY_BYTES, ENV_REFERENCE, ENV_REFERENCE_BYTES, LENGTH_BYTES, LENGTH_LIMIT, QUANTITY, QUANTITY_BYTES,
    SYNCED_POD_ENTRY_BYTES, stored_bytes,
)
from components.admission_pod_fields import POD_FIELDS, REFUSED
from config.pod_own_bytes import (
    CONTAINER, CONTAINER_OWN_BYTES, EPHEMERAL_CONTAINER, HOST_NAME_BYTES, POD_OWN_BYTES, REFUSED as REFUSED_BYTES,
)
from config.pod_own_bytes import POD_SPEC as OWN_POD_SPEC
from config.synced_data import API_DATA_LIMIT
from config.synced_entry_bytes import Field, Message
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.test_pod_text_fields_contract import API_BOUNDS, COUNTED, ON_THE_HOST, QUALIFIED, QUANTITIES
from tests.test_synced_entry_bytes_contract import (
    API, APIMACHINERY, SCALARS, TEXT, core_proto, describe, fill, proto_name,
)

CONTAINER_LISTS = {"command", "args", "ports", "envFrom", "env", "resizePolicy", "restartPolicyRules", "volumeMounts",
                   "volumeDevices"}
AFFINITY_LISTS = {"requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"}
# Fields of a declared message the entry does not hold itself: lists that are entries of their own (ENTRIES), and
# volume and projection kinds the host refuses or the syncer rewrites (components/admission_volumes.py).
ELSEWHERE = {"EnvVar": {"valueFrom"}, "ConfigMapProjection": {"items"}, "SecretProjection": {"items"},
             "DownwardAPIProjection": {"items"}, "NodeSelectorRequirement": {"values"},
             "NodeSelectorTerm": {"matchExpressions", "matchFields"}, "HostAlias": {"hostnames"},
             "ConfigMapVolumeSource": {"items"}, "SecretVolumeSource": {"items"}, "DownwardAPIVolumeSource": {"items"},
             "ProjectedVolumeSource": {"sources"}, "LabelSelector": {"matchLabels", "matchExpressions"},
             "LabelSelectorRequirement": {"values"},
             "PodAffinityTerm": {"namespaces", "matchLabelKeys", "mismatchLabelKeys"},
             "TopologySpreadConstraint": {"matchLabelKeys"}, "ContainerRestartRuleOnExitCodes": {"values"},
             "Container": CONTAINER_LISTS, "EphemeralContainerCommon": CONTAINER_LISTS,
             "PodSpec": {"volumes", "initContainers", "containers", "ephemeralContainers", "nodeSelector",
                         "imagePullSecrets", "tolerations", "hostAliases", "readinessGates", "overhead",
                         "topologySpreadConstraints", "schedulingGates",
                         *(name for name, verdict in POD_FIELDS["PodSpec"].items() if verdict.kind == REFUSED)},
             "ExecAction": {"command"}, "HTTPGetAction": {"httpHeaders"}, "Capabilities": {"add", "drop"},
             "ResourceRequirements": {"limits", "requests", "claims"},
             "PodSecurityContext": {"supplementalGroups", "sysctls"}, "NodeSelector": {"nodeSelectorTerms"},
             "NodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution"},
             "PodAffinity": AFFINITY_LISTS, "PodAntiAffinity": AFFINITY_LISTS,
             "PodDNSConfig": {"nameservers", "searches", "options"}}
REFUSED_KINDS = {"VolumeSource", "VolumeProjection"}


def proto_fields(proto: str, message: str) -> dict[str, tuple[int, str]]:
    """``message``'s fields: name -> (number, kind), maps as ``map``, messages as ``message``; none when the release
    has no such message."""
    body = re.search(rf"\nmessage {message} {{\n(.*?)\n}}", proto, re.S)
    fields = {}
    if body is None:
        return fields
    for kind, name, number in re.findall(r"^\s*(?:optional |repeated )?(map<[^>]+>|\S+) (\w+) = (\d+);",
                                         body.group(1), re.M):
        fields[name] = (int(number), "map" if kind.startswith("map<") else kind if kind in SCALARS else "message")
    return fields


def _messages(message: Message, found: dict[str, Message]) -> dict[str, Message]:
    found.setdefault(message.name, message)
    for field in message.fields.values():
        if field.kind == "message":
            _messages(field.largest, found)
    return found


# What a container and the spec hold of their own (config/pod_own_bytes.py), as their holders hold them.
OWN = {"PodSpec.containers": Field(2, "message", CONTAINER), "PodSpec.initContainers": Field(20, "message", CONTAINER),
       "PodSpec.ephemeralContainers": Field(34, "message", EPHEMERAL_CONTAINER),
       "Pod.spec": Field(2, "message", OWN_POD_SPEC)}
DECLARED: dict[str, Message] = {}
for _entry in [*ENTRIES.values(), ENV_REFERENCE, *OWN.values()]:
    if _entry.kind == "message":
        _messages(_entry.largest, DECLARED)
MAP_ENTRIES = {name for name in DECLARED if name.startswith("map<")}
# apimachinery's messages: a quantity, and the label selectors of affinity terms and spread constraints (meta/v1).
META = {"LabelSelector", "LabelSelectorRequirement"}
STRUCTS = {name: message for name, message in DECLARED.items()
           if name not in MAP_ENTRIES | META | {"Quantity", "IntOrString"}}  # the last held by its own contract


def meta_proto(tag: str) -> str:
    return git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/apis/meta/v1/generated.proto")


def _proto_of(holder: str, core: str, meta: str) -> str:
    return meta if holder in META else core


def _kind(field: Field) -> str:
    return "string" if field.kind == "text" else field.kind


def _declares_what_is_stored(proto: str, structs: dict[str, Message], tag: str, newest: str) -> None:
    for name, message in structs.items():
        stored = proto_fields(proto, name)
        assert stored or tag != newest or not message.fields, (tag, name)
        declared = {field: (entry.number, _kind(entry)) for field, entry in message.fields.items()}
        assert {field: declared[field] for field in declared.keys() & stored.keys()} == \
               {field: stored[field] for field in declared.keys() & stored.keys()}, (tag, name)
        undeclared = set(stored) - set(declared) - ELSEWHERE.get(name, set())
        if name in REFUSED_KINDS:
            continue  # the volume and projection kinds the host refuses, classified in test_volume_sources_contract
        assert undeclared == set(), (tag, name)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_every_message_declares_the_fields_the_api_server_stores(tag):
    _declares_what_is_stored(core_proto(tag), STRUCTS, tag, MIRRORED_TAGS[API][-1])
    newest = proto_fields(core_proto(MIRRORED_TAGS[API][-1]), "EnvVarSource")
    assert set(ENV_REFERENCE.largest.fields) == set(newest)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APIMACHINERY])
def test_every_label_selector_message_declares_the_fields_apimachinery_stores(tag):
    _declares_what_is_stored(meta_proto(tag), {name: DECLARED[name] for name in META}, tag,
                             MIRRORED_TAGS[APIMACHINERY][-1])


def test_a_volume_or_projection_counts_exactly_the_kinds_the_host_admits():
    from components.admission_volumes import HOST_PROJECTED_SOURCES, HOST_VOLUME_SOURCES
    assert set(DECLARED["VolumeSource"].fields) == set(HOST_VOLUME_SOURCES) | {"projected"}
    assert set(DECLARED["VolumeProjection"].fields) == set(HOST_PROJECTED_SOURCES)
    assert DECLARED["VolumeSource"].one_of and DECLARED["VolumeProjection"].one_of and ENV_REFERENCE.largest.one_of


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_each_entry_is_held_by_the_field_declared(tag):
    proto, meta = core_proto(tag), meta_proto(MIRRORED_TAGS[APIMACHINERY][-1])
    for holder, entry in ENTRIES.items():
        message, field = holder.rsplit(".", 1)
        stored = proto_fields(_proto_of(message, proto, meta), message)
        if field not in stored:
            assert tag != MIRRORED_TAGS[API][-1], (tag, holder)  # a field newer releases added
            continue
        kind = "map" if entry.kind == "message" and entry.largest.name in MAP_ENTRIES else _kind(entry)
        assert stored[field] == (entry.number, kind), (tag, holder)
    assert proto_fields(proto, "EnvVar")["valueFrom"] == (ENV_REFERENCE.number, "message")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APIMACHINERY])
def test_a_quantity_is_stored_as_apimachinery_declares_it(tag):
    proto = git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/api/resource/generated.proto")
    assert proto_fields(proto, "Quantity") == {"string": (1, "string")}
    assert QUANTITY.fields["string"].number == 1


def test_each_string_is_counted_as_text_or_at_the_longest_value_validation_lets_it_hold():
    host_names = {struct: set(fields) for struct, fields in ON_THE_HOST.items()}
    for name, message in {**STRUCTS, "LabelSelectorRequirement": DECLARED["LabelSelectorRequirement"]}.items():
        for field, entry in message.fields.items():
            if entry.kind == "text":
                assert field in COUNTED.get(name, ()), (name, field)
            elif entry.kind == "string":
                struct = {"SecretKeySelector": "ConfigMapKeySelector",
                          "LabelSelectorRequirement": "NodeSelectorRequirement"}.get(name, name)
                if field in host_names.get(struct, ()):
                    # Renamed by the syncer (an object's name), written by a host controller (a DNS subdomain at
                    # most), or refused (empty).
                    assert entry.largest in (63, HOST_NAME_BYTES, REFUSED_BYTES), (name, field)
                else:
                    assert entry.largest == API_BOUNDS[struct][field].bytes, (name, field)
    assert QUANTITIES.bytes == QUALIFIED.bytes + QUANTITY_BYTES
    assert DECLARED["map<string, Quantity>"].fields["key"].largest == QUALIFIED.bytes
    assert DECLARED["map<string, string>"].fields["key"].largest + \
        DECLARED["map<string, string>"].fields["value"].largest == API_BOUNDS["PodSpec"]["nodeSelector"].bytes
    # A list of strings the API server bounds: each at its bound (a selector's values are label values).
    for holder, entry in ENTRIES.items():
        struct, field = holder.rsplit(".", 1)
        if entry.kind == "string" and struct != "LabelSelectorRequirement":
            assert entry.largest == API_BOUNDS[struct][field].bytes, holder
    assert ENTRIES["LabelSelectorRequirement.values"].largest == \
        API_BOUNDS["LabelSelector"]["matchLabels"].bytes - QUALIFIED.bytes


def test_each_length_fits_the_varint_counted():
    assert API_DATA_LIMIT + SYNCED_POD_ENTRY_BYTES < LENGTH_LIMIT <= 2 ** (7 * LENGTH_BYTES)
    assert 2 ** (7 * (LENGTH_BYTES - 1)) <= TEXT < LENGTH_LIMIT  # the encoder test's text takes as many


def _lists(paths: TextPaths) -> set[str]:
    return {*paths.string_lists, *paths.objects}


def _uncharged(paths: TextPaths = POD_SPEC, prefix: str = "") -> set[str]:
    missing = {f"{prefix}{path}" for path in _lists(paths) - set(paths.entry_bytes)}
    for path, element in paths.objects.items():
        missing |= _uncharged(element, f"{prefix}{path}[].")
    return missing


def test_every_list_the_rule_walks_charges_its_entries():
    assert _uncharged() == set()
    assert set(ENTRY_BYTES.values()) >= {value for value in POD_SPEC.entry_bytes.values() if value}


# --- the arithmetic against protobuf's own encoder ---------------------------------------------------------------

def _choices(message: Message) -> list[dict[str, str]]:
    """Every way of setting one field of each one_of below ``message``."""
    options = [{}]
    for name, field in message.fields.items():
        below = _choices(field.largest) if field.kind == "message" else [{}]
        options = [{**option, **extra} for option in options for extra in below]
    if message.one_of:
        options = [{**option, message.name: name} for option in options for name in message.fields]
    return options


def _encoded(holder: str, entry: Field) -> list[tuple[int, int]]:
    """(bytes, text bytes) of ``holder`` holding one entry, each field at its largest, for each one_of choice."""
    wrapper = Message(holder, {"entry": entry})
    file = descriptor_pb2.FileDescriptorProto(name=f"{proto_name(wrapper)}.proto", package="entries",
                                              syntax="proto2")
    describe(file, wrapper, set())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    kind = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"entries.{proto_name(wrapper)}"))
    results = []
    for choice in _choices(wrapper):
        instance = kind()
        text = fill(instance, wrapper, choice)
        results.append((len(instance.SerializeToString()), text))
    return results


def test_a_container_is_counted_at_its_largest_kind():
    assert CONTAINER_OWN_BYTES == max(stored_bytes(OWN[name]) for name in OWN if name != "Pod.spec")


def _lengths(field: Field) -> int:
    """How many messages ``field`` holds, itself included: each a length."""
    if field.kind != "message":
        return 0
    return 1 + sum(_lengths(inner) for inner in field.largest.fields.values())


@pytest.mark.parametrize("holder", [*ENTRIES, "EnvVar.valueFrom", *OWN])
def test_the_largest_entry_stores_at_most_its_bytes_and_its_text_and_one_choice_all_of_them(holder):
    """Counted lengths take LENGTH_BYTES where protobuf may take fewer (a message of no text): at most two bytes
    less per message, so the largest choice comes within that of the count. The spec's own length is counted at
    four bytes (the request's 3 MiB)."""
    entry = {**ENTRIES, **OWN}.get(holder, ENV_REFERENCE)
    counted = stored_bytes(entry) + (holder == "Pod.spec")
    expected = {**ENTRY_BYTES, "EnvVar.valueFrom": ENV_REFERENCE_BYTES, "Pod.spec": POD_OWN_BYTES}
    assert counted == expected[holder] if holder in expected else counted <= CONTAINER_OWN_BYTES
    sizes = [size - text for size, text in _encoded(holder.replace(".", "_"), entry)]
    assert max(sizes) <= counted
    assert counted - max(sizes) <= 2 * _lengths(entry)
