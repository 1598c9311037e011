"""What one entry of a list the host policies bound by count costs in the host's etcd, in bytes.

The API server stores built-in kinds in etcd as protobuf (k8s.io/api ``core/v1/generated.proto``): a field is its
tag (its number and wire type, a varint), then for a string or a message its length (a varint) and its bytes, for a
number its varint (ten bytes for a negative one), for a bool one byte. An entry of a repeated field is a message
field of its own. So an entry's largest size follows from its message's fields and the longest value the API server's
validation lets each hold; tests/test_synced_entry_bytes_contract.py holds the field numbers and kinds below against
generated.proto at every accepted Kubernetes minor, and the string bounds against the ones
tests/test_pod_text_fields_contract.py read in the validation. Counted here only what rule ``pod-size`` does not
count already (an env variable's name and value are its text; the object it names is not).
"""

from __future__ import annotations

from typing import NamedTuple, Union

# A string of a fixed set of values (a protocol, an effect, an operator), as tests/test_pod_text_fields_contract.py
# bounds them: an upper bound of the longest value.
ENUM_BYTES = 40
QUALIFIED_NAME_BYTES = 253 + 1 + 63
DNS_LABEL_BYTES = 63
LABEL_VALUE_BYTES = 63
PORT_NAME_BYTES = 15
IP_BYTES = 45
# A ConfigMap or Secret key (validation IsConfigMapKey).
CONFIG_KEY_BYTES = 253
# A port (validation: 1 to 65535; a host port or a node port may be 0).
PORT_VALUE = 65535
# An int64 the API server takes negative (a toleration's seconds): ten bytes as a varint.
NEGATIVE = -1


class Field(NamedTuple):
    """One field of a message: its number, and its largest value: a string's bytes (``string``), a number (``int32``,
    ``int64``), a bool (``bool``) or a nested message (``message``). A ``text`` field is a string rule ``pod-size``
    sums the bytes of: only its tag and length are the entry's own (config/pod_entry_bytes.py)."""
    number: int
    kind: str
    largest: Union[int, "Message", None] = None


class Message(NamedTuple):
    """A message's fields; ``one_of``: the API server's validation admits exactly one of them set."""
    name: str
    fields: dict[str, Field]
    one_of: bool = False


def varint_bytes(value: int) -> int:
    value &= 2 ** 64 - 1
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def tag_bytes(number: int) -> int:
    return varint_bytes(number << 3)


def message_bytes(message: Message) -> int:
    """The largest encoding of ``message``'s fields, every one set at its largest."""
    return sum(field_bytes(field) for field in message.fields.values())


def field_bytes(field: Field) -> int:
    if field.kind == "bool":
        return tag_bytes(field.number) + 1
    if field.kind in ("int32", "int64"):
        return tag_bytes(field.number) + varint_bytes(field.largest)
    payload = message_bytes(field.largest) if field.kind == "message" else field.largest
    return tag_bytes(field.number) + varint_bytes(payload) + payload


def string_field(number: int, largest: int) -> Field:
    return Field(number, "string", largest)


TOLERATION = Message("Toleration", {
    "key": string_field(1, QUALIFIED_NAME_BYTES), "operator": string_field(2, ENUM_BYTES),
    "value": string_field(3, LABEL_VALUE_BYTES),
    "effect": string_field(4, ENUM_BYTES), "tolerationSeconds": Field(5, "int64", NEGATIVE)})
CONTAINER_PORT = Message("ContainerPort", {
    "name": string_field(1, PORT_NAME_BYTES), "hostPort": Field(2, "int32", PORT_VALUE),
    "containerPort": Field(3, "int32", PORT_VALUE), "protocol": string_field(4, ENUM_BYTES),
    "hostIP": string_field(5, IP_BYTES)})
# vCluster renames every object a pod names to a host name of at most 63 bytes (pkg/util/translate SafeConcatName).
LOCAL_OBJECT_REFERENCE = Message("LocalObjectReference", {"name": string_field(1, DNS_LABEL_BYTES)})
SECRET_KEY_SELECTOR = Message("SecretKeySelector", {
    "localObjectReference": Field(1, "message", LOCAL_OBJECT_REFERENCE), "key": string_field(2, CONFIG_KEY_BYTES),
    "optional": Field(3, "bool")})
# An env variable's reference, without the variable's name and value (rule pod-size counts them): of the ways a pod
# names a ConfigMap or Secret (a volume, a projected source, envFrom, a pull secret), the one holding the most
# besides the name, a key.
ENV_REFERENCE = Message("EnvVarSource", {"secretKeyRef": Field(4, "message", SECRET_KEY_SELECTOR)})
INT_OR_STRING = Message("IntOrString", {
    "type": Field(1, "int64", 1), "intVal": Field(2, "int32", PORT_VALUE), "strVal": string_field(3, PORT_NAME_BYTES)})
# A Service's port: its name a DNS label, its app protocol a qualified name (validation validateServicePort).
SERVICE_PORT = Message("ServicePort", {
    "name": string_field(1, DNS_LABEL_BYTES), "protocol": string_field(2, ENUM_BYTES),
    "appProtocol": string_field(6, QUALIFIED_NAME_BYTES),
    "port": Field(3, "int32", PORT_VALUE), "targetPort": Field(4, "message", INT_OR_STRING),
    "nodePort": Field(5, "int32", PORT_VALUE)})

# Each as an entry of the list (or the field) holding it: PodSpec.tolerations, Container.ports, EnvVar.valueFrom,
# ServiceSpec.ports.
TOLERATION_ENTRY = Field(22, "message", TOLERATION)
CONTAINER_PORT_ENTRY = Field(6, "message", CONTAINER_PORT)
REFERENCE_ENTRY = Field(3, "message", ENV_REFERENCE)
SERVICE_PORT_ENTRY = Field(1, "message", SERVICE_PORT)
TOLERATION_BYTES = field_bytes(TOLERATION_ENTRY)
CONTAINER_PORT_BYTES = field_bytes(CONTAINER_PORT_ENTRY)
REFERENCE_BYTES = field_bytes(REFERENCE_ENTRY)
SERVICE_PORT_BYTES = field_bytes(SERVICE_PORT_ENTRY)
