"""The per-entry bytes of the datastore's worst case (config/synced_entry_bytes.py) against how the API server stores
each entry: its message's fields in k8s.io/api ``core/v1/generated.proto`` (and apimachinery's ``intstr``) at every
accepted Kubernetes minor, the longest values the validation lets its strings hold (as
tests/test_pod_text_fields_contract.py read them), and the size protobuf itself encodes the largest entry to."""

from __future__ import annotations

import re
from typing import Optional

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from config.synced_entry_bytes import (
    CONTAINER_PORT, CONTAINER_PORT_BYTES, CONTAINER_PORT_ENTRY, ENUM_BYTES, ENV_REFERENCE, INT_OR_STRING,
    LOCAL_OBJECT_REFERENCE, REFERENCE_BYTES, REFERENCE_ENTRY, SECRET_KEY_SELECTOR, SERVICE_PORT, SERVICE_PORT_BYTES,
    SERVICE_PORT_ENTRY, TOLERATION, TOLERATION_BYTES, TOLERATION_ENTRY, Message,
)
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.test_pod_text_fields_contract import API_BOUNDS, ENUM, ON_THE_HOST

API = "kubernetes/api"
APIMACHINERY = "kubernetes/apimachinery"
SCALARS = {"string", "int32", "int64", "bool"}
# Each entry, the message and field holding it, and the bytes counted for it.
HOLDERS = (("PodSpec", "tolerations", TOLERATION_ENTRY, TOLERATION_BYTES),
           ("Container", "ports", CONTAINER_PORT_ENTRY, CONTAINER_PORT_BYTES),
           ("EnvVar", "valueFrom", REFERENCE_ENTRY, REFERENCE_BYTES),
           ("ServiceSpec", "ports", SERVICE_PORT_ENTRY, SERVICE_PORT_BYTES))


def proto_fields(proto: str, message: str) -> dict[str, tuple[int, str]]:
    """``message``'s fields in a generated.proto: name -> (number, kind), kind a scalar's type or ``message``."""
    body = re.search(rf"\nmessage {message} {{\n(.*?)\n}}", proto, re.S)
    assert body, f"{message} is not in generated.proto"
    fields = {}
    for kind, name, number in re.findall(r"^\s*(?:optional|repeated) (\S+) (\w+) = (\d+);", body.group(1), re.M):
        fields[name] = (int(number), kind if kind in SCALARS else "message")
    return fields


def declared(message: Message) -> dict[str, tuple[int, str]]:
    return {name: (field.number, field.kind) for name, field in message.fields.items()}


def core_proto(tag: str) -> str:
    return git(API, "show", f"{mirrored_tag(API, tag)}:core/v1/generated.proto")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_each_entry_declares_every_field_the_api_server_stores(tag):
    proto = core_proto(tag)
    for message in (TOLERATION, CONTAINER_PORT, LOCAL_OBJECT_REFERENCE, SECRET_KEY_SELECTOR, SERVICE_PORT):
        assert declared(message) == proto_fields(proto, message.name), (tag, message.name)
    # A reference is counted as an env variable's secret key selector: the ConfigMap one is stored alike, and every
    # other way a pod names an object (envFrom, a volume, a projected source, a pull secret) holds a name and less.
    source = proto_fields(proto, ENV_REFERENCE.name)
    assert declared(ENV_REFERENCE).items() <= source.items()
    assert source["configMapKeyRef"][1] == "message" and source["configMapKeyRef"][0] < 16
    assert proto_fields(proto, "ConfigMapKeySelector") == proto_fields(proto, SECRET_KEY_SELECTOR.name)
    for message in ("ConfigMapEnvSource", "SecretEnvSource"):
        assert set(proto_fields(proto, message)) == {"localObjectReference", "optional"}
    for holder, field, entry, _ in HOLDERS:
        assert proto_fields(proto, holder)[field] == (entry.number, "message"), (tag, holder, field)
        assert re.search(rf"\n  (?:optional|repeated) {entry.largest.name} {field} = {entry.number};",
                         proto[proto.index(f"\nmessage {holder} {{"):]), (tag, holder, field)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[APIMACHINERY])
def test_a_target_port_is_stored_as_apimachinery_declares_it(tag):
    proto = git(APIMACHINERY, "show", f"{mirrored_tag(APIMACHINERY, tag)}:pkg/util/intstr/generated.proto")
    assert declared(INT_OR_STRING) == proto_fields(proto, INT_OR_STRING.name)


def test_each_string_is_counted_at_the_longest_value_validation_lets_it_hold():
    for message in (TOLERATION, CONTAINER_PORT, SECRET_KEY_SELECTOR):
        for name, bound in API_BOUNDS[message.name].items():
            assert message.fields[name].largest == bound.bytes, (message.name, name, bound.source)
    assert ENUM_BYTES == ENUM.bytes
    # The name a pod gives an object reaches the host renamed, at most a DNS label.
    assert "63 bytes" in ON_THE_HOST["LocalObjectReference"]["name"]
    assert LOCAL_OBJECT_REFERENCE.fields["name"].largest == 63


# --- the arithmetic against protobuf's own encoder ---------------------------------------------------------------

# A Field's kind (a text field is a string) or a generated.proto scalar, as protobuf's descriptor types it.
PROTO_TYPES = {"string": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
               "text": descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
               "bytes": descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
               "int32": descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
               "int64": descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
               "bool": descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
               "double": descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
               "message": descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE}


def proto_name(message: Message) -> str:
    """A message's name as protobuf takes it (a map entry's ``map<string, string>`` is not one)."""
    return re.sub(r"\W", "_", message.name)


def describe(file: descriptor_pb2.FileDescriptorProto, message: Message, seen: set[str]) -> None:
    """``message`` and every message below it, declared in ``file`` (package ``entries``)."""
    if message.name in seen:
        return
    seen.add(message.name)
    described = file.message_type.add(name=proto_name(message))
    for name, field in message.fields.items():
        added = described.field.add(name=name, number=field.number, type=PROTO_TYPES[field.kind],
                                    label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        if field.kind == "message":
            added.type_name = f".entries.{proto_name(field.largest)}"
            describe(file, field.largest, seen)


# A text field's value when filling (config/pod_entry_bytes.py): long enough that each length holding it takes three
# bytes, as counted.
TEXT = 2 ** 17


def fill(instance, message: Message, choice: Optional[dict[str, str]] = None) -> int:
    """Every field at its largest (a string of that many bytes, the number, true, the nested message filled; of a
    one_of, the field ``choice`` names): the bytes of text written."""
    text = 0
    names = [choice[message.name]] if message.one_of else list(message.fields)
    for name in names:
        field = message.fields[name]
        if field.kind == "message":
            getattr(instance, name).SetInParent()  # an entry of a list is stored even when it holds nothing
            text += fill(getattr(instance, name), field.largest, choice)
        elif field.kind == "text":
            setattr(instance, name, "x" * TEXT)
            text += TEXT
        elif field.kind == "string":
            setattr(instance, name, "x" * field.largest)
        elif field.kind == "bool":
            setattr(instance, name, True)
        else:
            setattr(instance, name, field.largest)
    return text


@pytest.mark.parametrize("holder,field,entry,entry_bytes", HOLDERS, ids=[h[0] + "." + h[1] for h in HOLDERS])
def test_the_largest_entry_encodes_to_the_bytes_counted(holder, field, entry, entry_bytes):
    """The holder with one entry, every field of it at its largest, as protobuf serializes it."""
    wrapper = Message(holder, {field: entry})
    file = descriptor_pb2.FileDescriptorProto(name=f"{holder}.proto", package="entries", syntax="proto2")
    describe(file, wrapper, set())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    instance = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"entries.{holder}"))()
    fill(instance, wrapper)
    assert len(instance.SerializeToString()) == entry_bytes
