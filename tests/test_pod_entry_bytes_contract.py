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
from config.synced_data import API_DATA_LIMIT
from config.synced_entry_bytes import Field, Message
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.test_pod_text_fields_contract import API_BOUNDS, COUNTED, ON_THE_HOST, QUALIFIED, QUANTITIES
from tests.test_synced_entry_bytes_contract import (
    API, APIMACHINERY, SCALARS, TEXT, core_proto, describe, fill, proto_name,
)

# Fields of a declared message the entry does not hold itself: lists that are entries of their own (ENTRIES), and
# volume and projection kinds the host refuses or the syncer rewrites (components/admission_volumes.py).
ELSEWHERE = {"EnvVar": {"valueFrom"}, "ConfigMapProjection": {"items"}, "SecretProjection": {"items"},
             "DownwardAPIProjection": {"items"}, "NodeSelectorRequirement": {"values"},
             "NodeSelectorTerm": {"matchExpressions", "matchFields"}, "HostAlias": {"hostnames"},
             "ConfigMapVolumeSource": {"items"}, "SecretVolumeSource": {"items"}, "DownwardAPIVolumeSource": {"items"},
             "ProjectedVolumeSource": {"sources"}}
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


DECLARED: dict[str, Message] = {}
for _entry in [*ENTRIES.values(), ENV_REFERENCE]:
    if _entry.kind == "message":
        _messages(_entry.largest, DECLARED)
MAP_ENTRIES = {name for name in DECLARED if name.startswith("map<")}
STRUCTS = {name: message for name, message in DECLARED.items() if name not in MAP_ENTRIES | {"Quantity"}}


def _kind(field: Field) -> str:
    return "string" if field.kind == "text" else field.kind


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_every_message_declares_the_fields_the_api_server_stores(tag):
    proto = core_proto(tag)
    for name, message in STRUCTS.items():
        stored = proto_fields(proto, name)
        assert stored or tag != MIRRORED_TAGS[API][-1] or not message.fields, (tag, name)
        declared = {field: (entry.number, _kind(entry)) for field, entry in message.fields.items()}
        assert {field: declared[field] for field in declared.keys() & stored.keys()} == \
               {field: stored[field] for field in declared.keys() & stored.keys()}, (tag, name)
        undeclared = set(stored) - set(declared) - ELSEWHERE.get(name, set())
        if name in REFUSED_KINDS:
            continue  # the volume and projection kinds the host refuses, classified in test_volume_sources_contract
        assert undeclared == set(), (tag, name)
    newest = proto_fields(core_proto(MIRRORED_TAGS[API][-1]), "EnvVarSource")
    assert set(ENV_REFERENCE.largest.fields) == set(newest)


def test_a_volume_or_projection_counts_exactly_the_kinds_the_host_admits():
    from components.admission_volumes import HOST_PROJECTED_SOURCES, HOST_VOLUME_SOURCES
    assert set(DECLARED["VolumeSource"].fields) == set(HOST_VOLUME_SOURCES) | {"projected"}
    assert set(DECLARED["VolumeProjection"].fields) == set(HOST_PROJECTED_SOURCES)
    assert DECLARED["VolumeSource"].one_of and DECLARED["VolumeProjection"].one_of and ENV_REFERENCE.largest.one_of


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_each_entry_is_held_by_the_field_declared(tag):
    proto = core_proto(tag)
    for holder, entry in ENTRIES.items():
        message, field = holder.rsplit(".", 1)
        stored = proto_fields(proto, message)
        if field not in stored:
            assert (message, field) in {("EnvVarSource", "fileKeyRef")}, (tag, holder)
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
    for name, message in STRUCTS.items():
        for field, entry in message.fields.items():
            if entry.kind == "text":
                assert field in COUNTED.get(name, ()), (name, field)
            elif entry.kind == "string":
                struct = "ConfigMapKeySelector" if name == "SecretKeySelector" else name
                if field in host_names.get(struct, ()):
                    assert entry.largest == 63, (name, field)
                else:
                    assert entry.largest == API_BOUNDS[struct][field].bytes, (name, field)
    assert QUANTITIES.bytes == QUALIFIED.bytes + QUANTITY_BYTES
    assert DECLARED["map<string, Quantity>"].fields["key"].largest == QUALIFIED.bytes
    assert DECLARED["map<string, string>"].fields["key"].largest + \
        DECLARED["map<string, string>"].fields["value"].largest == API_BOUNDS["PodSpec"]["nodeSelector"].bytes
    assert ENTRIES["HostAlias.hostnames"].largest == API_BOUNDS["HostAlias"]["hostnames"].bytes


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


@pytest.mark.parametrize("holder", [*ENTRIES, "EnvVar.valueFrom"])
def test_the_largest_entry_stores_at_most_its_bytes_and_its_text_and_one_choice_all_of_them(holder):
    """Counted lengths take LENGTH_BYTES where protobuf may take fewer (a message of no text): at most two bytes
    less per message, so the largest choice comes within that of the count."""
    entry = ENTRIES.get(holder, ENV_REFERENCE)
    counted = stored_bytes(entry)
    assert counted == ENTRY_BYTES.get(holder, ENV_REFERENCE_BYTES)
    sizes = [size - text for size, text in _encoded(holder.replace(".", "_"), entry)]
    assert max(sizes) <= counted
    messages = len(_messages(entry.largest, {})) if entry.kind == "message" else 0
    assert counted - max(sizes) <= 2 * messages
