"""Property: whatever a pod's lists hold, the bytes protobuf stores for them are at most what rules ``pod-size`` and
``pod-entry-size`` count (their text plus what their entries store beside it), the whole spec at most that plus what
the worst case counts of its containers and itself (config/pod_own_bytes.py), and the rule's CEL counts what its
Python walk does.

The pod is encoded as the API server stores it, with the messages of k8s.io/api ``core/v1/generated.proto`` at the
newest accepted minor (read from the mirror and handed to protobuf's own encoder), every list and map the rules walk
filled at random, strings up to the longest value their validation allows. The bytes of a list are what its field
takes in its holder's encoding: the entries with their tags and lengths. What a container, the pod and their
wrappers (a probe, a security context) store of their own is not a list's: tests/test_pod_entry_bytes_contract.py has
protobuf encode those at their largest.
"""

from __future__ import annotations

import re

import celpy
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from components.admission_volumes import HOST_VOLUME_SOURCES
from config.pod_entry_bytes import (
    API_VERSION_BYTES, FIELD_PATH_BYTES, MODE_VALUE, QUANTITY_BYTES, SUBDOMAIN_BYTES, SYSCTL_NAME_BYTES, WEIGHT_VALUE,
)
from config.pod_own_bytes import CONTAINER_OWN_BYTES, POD_OWN_BYTES
from config.synced_entry_bytes import (
    CONFIG_KEY_BYTES, DNS_LABEL_BYTES, ENUM_BYTES, IP_BYTES, LABEL_VALUE_BYTES, QUALIFIED_NAME_BYTES, varint_bytes,
)
from tests.conftest import MIRRORED_TAGS, dev_config
from tests.tenant_sim import tenant_of
from tests.test_pod_entry_sizes import stored
from tests.test_pod_sizes import text_bytes
from tests.test_pod_entry_bytes_contract import meta_proto
from tests.test_synced_entry_bytes_contract import API, APIMACHINERY, PROTO_TYPES, core_proto

# generated.proto's scalar types.
SCALARS = set(PROTO_TYPES) - {"text", "message"}
OPTIONAL = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
REPEATED = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
MESSAGE = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
# The other packages' messages core/v1 names, as apimachinery declares the two a pod's lists hold.
EXTERNAL = {"Quantity": [("string", "string", 1)],
            "IntOrString": [("int64", "type", 1), ("int32", "intVal", 2), ("string", "strVal", 3)]}


def _field(message: descriptor_pb2.DescriptorProto, kind: str, name: str, number: int, label: int) -> None:
    short = kind.rsplit(".", 1)[-1]
    if kind in SCALARS:
        message.field.add(name=name, number=number, type=PROTO_TYPES[kind], label=label)
    else:
        message.field.add(name=name, number=number, type=MESSAGE, label=label, type_name=f".pod.{short}")


def _core_classes(proto: str) -> dict:
    """Each message of generated.proto as a class protobuf encodes (the other packages' as EXTERNAL, or empty)."""
    file = descriptor_pb2.FileDescriptorProto(name="pod.proto", package="pod", syntax="proto2")
    declared, named = set(), set()
    for name, body in re.findall(r"\nmessage (\w+) \{\n(.*?)\n\}", proto, re.S):
        message = file.message_type.add(name=name)
        declared.add(name)
        for label, kind, field, number in re.findall(
                r"^\s*(optional|repeated) (\S+) (\w+) = (\d+);", body, re.M):
            _field(message, kind, field, int(number), REPEATED if label == "repeated" else OPTIONAL)
            named.add(kind.rsplit(".", 1)[-1])
        for key, value, field, number in re.findall(r"^\s*map<(\S+), (\S+)> (\w+) = (\d+);", body, re.M):
            entry = message.nested_type.add(name=f"{field[0].upper()}{field[1:]}Entry")
            entry.options.map_entry = True
            _field(entry, key, "key", 1, OPTIONAL)
            _field(entry, value, "value", 2, OPTIONAL)
            message.field.add(name=field, number=int(number), type=MESSAGE, label=REPEATED,
                              type_name=f".pod.{name}.{entry.name}")
            named.add(value.rsplit(".", 1)[-1])
    for name in sorted(named - declared - SCALARS):
        external = file.message_type.add(name=name)
        for kind, field, number in EXTERNAL.get(name, []):
            _field(external, kind, field, number, OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return {name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"pod.{name}"))
            for name in declared}


def _set(message, data: dict) -> None:
    """``data`` (a pod's JSON) into ``message``; quantities and int-or-strings as apimachinery stores them."""
    for name, value in data.items():
        field = message.DESCRIPTOR.fields_by_name[name]
        target = getattr(message, name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                if field.message_type.fields_by_name["value"].message_type is None:
                    target[key] = item
                else:
                    _value(target[key], item)
        elif field.label == REPEATED:
            for item in value:
                if field.message_type is None:
                    target.append(item)
                else:
                    _value(target.add(), item)
        elif field.message_type is not None:
            _value(target, value)
        else:
            setattr(message, name, value)


def _value(message, value) -> None:
    message.SetInParent()
    kind = message.DESCRIPTOR.name
    if kind == "Quantity":
        message.string = value
    elif kind == "IntOrString":
        message.type, field = (0, "intVal") if isinstance(value, int) else (1, "strVal")
        setattr(message, field, value)
    else:
        _set(message, value)


CONTAINER_LISTS = ("containers", "initContainers")


def list_bytes(message) -> int:
    """What the lists and maps under ``message`` take in its encoding: each field alone in a copy of its holder.
    A container is a holder of its own lists."""
    total = 0
    for field, value in message.ListFields():
        if field.name in CONTAINER_LISTS:
            total += sum(list_bytes(container) for container in value)
        elif field.label == REPEATED:
            alone = type(message)()
            alone.CopyFrom(message)
            for other, _ in message.ListFields():
                if other.name != field.name:
                    alone.ClearField(other.name)
            total += alone.ByteSize()
        elif field.message_type is not None:
            total += list_bytes(value)
    return total


# --- pods of every list the rules walk, at random --------------------------------------------------------------

def _text(most: int = 40):
    return st.integers(0, most).map(lambda size: "t" * size)


def _bounded(largest: int):
    """A string up to ``largest`` bytes, often at it."""
    return st.one_of(st.just("b" * largest), st.integers(1, largest).map(lambda size: "b" * size))


def _mode():
    return st.integers(0, MODE_VALUE)


def _field_ref():
    return st.fixed_dictionaries({"apiVersion": _bounded(API_VERSION_BYTES), "fieldPath": _bounded(FIELD_PATH_BYTES)})


def _resource_ref():
    return st.fixed_dictionaries({"containerName": _text(), "resource": _text()},
                                 optional={"divisor": _bounded(QUANTITY_BYTES)})


def _key_ref():
    return st.fixed_dictionaries({"name": _bounded(DNS_LABEL_BYTES), "key": _bounded(CONFIG_KEY_BYTES)},
                                 optional={"optional": st.booleans()})


ENV_SOURCES = {"fieldRef": _field_ref(), "resourceFieldRef": _resource_ref(), "configMapKeyRef": _key_ref(),
               "secretKeyRef": _key_ref(),
               "fileKeyRef": st.fixed_dictionaries({"volumeName": _bounded(DNS_LABEL_BYTES), "path": _text(),
                                                    "key": _text()}, optional={"optional": st.booleans()})}


def _one_of(kinds: dict):
    return st.sampled_from(sorted(kinds)).flatmap(lambda kind: kinds[kind].map(lambda value: {kind: value}))


def _env():
    reference = _one_of(ENV_SOURCES).map(lambda source: {"valueFrom": source})
    return st.builds(lambda name, rest: {"name": name, **rest}, _text(),
                     st.one_of(_text().map(lambda value: {"value": value}), reference))


def _items(item):
    return st.lists(item, max_size=4)


KEY_TO_PATH = st.fixed_dictionaries({"key": _text(), "path": _text()}, optional={"mode": _mode()})
DOWNWARD_FILE = st.builds(lambda path, source, mode: {"path": path, **source, **mode}, _text(),
                          _one_of({"fieldRef": _field_ref(), "resourceFieldRef": _resource_ref()}),
                          st.one_of(st.just({}), _mode().map(lambda mode: {"mode": mode})))
OBJECT = {"name": _bounded(DNS_LABEL_BYTES), "items": _items(KEY_TO_PATH)}
PROJECTIONS = {"configMap": st.fixed_dictionaries(OBJECT, optional={"optional": st.booleans()}),
               "secret": st.fixed_dictionaries(OBJECT, optional={"optional": st.booleans()}),
               "downwardAPI": st.fixed_dictionaries({"items": _items(DOWNWARD_FILE)})}
SOURCES = {
    "configMap": st.fixed_dictionaries(OBJECT, optional={"defaultMode": _mode(), "optional": st.booleans()}),
    "secret": st.fixed_dictionaries({"secretName": _bounded(DNS_LABEL_BYTES), "items": _items(KEY_TO_PATH)},
                                    optional={"defaultMode": _mode(), "optional": st.booleans()}),
    "downwardAPI": st.fixed_dictionaries({"items": _items(DOWNWARD_FILE)}, optional={"defaultMode": _mode()}),
    "emptyDir": st.fixed_dictionaries({}, optional={"medium": _text(), "sizeLimit": _bounded(QUANTITY_BYTES)}),
    "persistentVolumeClaim": st.fixed_dictionaries({"claimName": _bounded(DNS_LABEL_BYTES)},
                                                   optional={"readOnly": st.booleans()}),
    "image": st.fixed_dictionaries({"reference": _text()}, optional={"pullPolicy": _bounded(ENUM_BYTES)}),
    "projected": st.fixed_dictionaries({"sources": _items(_one_of(PROJECTIONS))},
                                       optional={"defaultMode": _mode()}),
}
VOLUME = st.builds(lambda name, source: {"name": name, **source}, _bounded(DNS_LABEL_BYTES), _one_of(SOURCES))
RESOURCES = st.dictionaries(_bounded(QUALIFIED_NAME_BYTES), _bounded(QUANTITY_BYTES), max_size=3)
ENV_SOURCE = st.fixed_dictionaries({"name": _bounded(DNS_LABEL_BYTES)}, optional={"optional": st.booleans()})
NAMED = st.fixed_dictionaries({"name": _text(), "value": _text()})
HANDLER = st.fixed_dictionaries({}, optional={"exec": st.fixed_dictionaries({"command": _items(_text())}),
                                              "httpGet": st.fixed_dictionaries({"httpHeaders": _items(NAMED)})})
CONTAINER = st.fixed_dictionaries({}, optional={
    "command": _items(_text()), "args": _items(_text()), "env": _items(_env()),
    "envFrom": _items(st.fixed_dictionaries({}, optional={
        "prefix": _text(), "configMapRef": ENV_SOURCE, "secretRef": ENV_SOURCE})),
    "volumeMounts": _items(st.fixed_dictionaries({"name": _bounded(DNS_LABEL_BYTES), "mountPath": _text()}, optional={
        "readOnly": st.booleans(), "subPath": _text(), "subPathExpr": _text(),
        "mountPropagation": _bounded(ENUM_BYTES), "recursiveReadOnly": _bounded(ENUM_BYTES)})),
    "volumeDevices": _items(st.fixed_dictionaries({"name": _bounded(DNS_LABEL_BYTES), "devicePath": _text()})),
    "resources": st.fixed_dictionaries({}, optional={"limits": RESOURCES, "requests": RESOURCES}),
    "resizePolicy": _items(st.fixed_dictionaries({"resourceName": _bounded(ENUM_BYTES),
                                                  "restartPolicy": _bounded(ENUM_BYTES)})),
    "restartPolicyRules": _items(st.fixed_dictionaries({"action": _bounded(ENUM_BYTES)}, optional={
        "exitCodes": st.fixed_dictionaries({"operator": _bounded(ENUM_BYTES)}, optional={
            "values": _items(st.integers(-2 ** 31, 2 ** 31 - 1))})})),
    "livenessProbe": HANDLER, "readinessProbe": HANDLER, "startupProbe": HANDLER,
    "lifecycle": st.fixed_dictionaries({}, optional={"postStart": HANDLER, "preStop": HANDLER}),
    "securityContext": st.fixed_dictionaries({}, optional={"capabilities": st.fixed_dictionaries(
        {}, optional={"add": _items(_text()), "drop": _items(_text())})})})
REQUIREMENT = st.fixed_dictionaries({"key": _bounded(QUALIFIED_NAME_BYTES), "operator": _bounded(ENUM_BYTES),
                                     "values": _items(_text())})
SELECTOR = st.fixed_dictionaries({}, optional={
    "matchLabels": st.dictionaries(_bounded(QUALIFIED_NAME_BYTES), _bounded(LABEL_VALUE_BYTES), max_size=3),
    "matchExpressions": _items(st.fixed_dictionaries({"key": _bounded(QUALIFIED_NAME_BYTES),
                                                      "operator": _bounded(ENUM_BYTES),
                                                      "values": _items(_bounded(LABEL_VALUE_BYTES))}))})
KEYS = _items(_bounded(QUALIFIED_NAME_BYTES))
AFFINITY_TERM = st.fixed_dictionaries({"topologyKey": _bounded(QUALIFIED_NAME_BYTES)}, optional={
    "labelSelector": SELECTOR, "namespaceSelector": SELECTOR, "namespaces": _items(_bounded(DNS_LABEL_BYTES)),
    "matchLabelKeys": KEYS, "mismatchLabelKeys": KEYS})
POD_AFFINITY = st.fixed_dictionaries({}, optional={
    "requiredDuringSchedulingIgnoredDuringExecution": _items(AFFINITY_TERM),
    "preferredDuringSchedulingIgnoredDuringExecution": _items(st.fixed_dictionaries({
        "weight": st.integers(1, WEIGHT_VALUE), "podAffinityTerm": AFFINITY_TERM}))})
SPREAD = st.fixed_dictionaries({"maxSkew": st.integers(-2 ** 31, 2 ** 31 - 1), "topologyKey": _bounded(
    QUALIFIED_NAME_BYTES), "whenUnsatisfiable": _bounded(ENUM_BYTES)}, optional={
    "labelSelector": SELECTOR, "minDomains": st.integers(-2 ** 31, 2 ** 31 - 1),
    "nodeAffinityPolicy": _bounded(ENUM_BYTES), "nodeTaintsPolicy": _bounded(ENUM_BYTES), "matchLabelKeys": KEYS})
TERM = st.fixed_dictionaries({}, optional={"matchExpressions": _items(REQUIREMENT), "matchFields": _items(REQUIREMENT)})
POD_SPEC = st.fixed_dictionaries({"containers": st.lists(CONTAINER, min_size=1, max_size=3)}, optional={
    "initContainers": st.lists(CONTAINER, max_size=2),
    "volumes": _items(VOLUME),
    "nodeSelector": st.dictionaries(_bounded(QUALIFIED_NAME_BYTES), _bounded(LABEL_VALUE_BYTES), max_size=3),
    "hostAliases": _items(st.fixed_dictionaries({"ip": _bounded(IP_BYTES), "hostnames": _items(
        _bounded(SUBDOMAIN_BYTES))})),
    "readinessGates": _items(st.fixed_dictionaries({"conditionType": _bounded(QUALIFIED_NAME_BYTES)})),
    "schedulingGates": _items(st.fixed_dictionaries({"name": _bounded(QUALIFIED_NAME_BYTES)})),
    "overhead": RESOURCES,
    "dnsConfig": st.fixed_dictionaries({"options": _items(NAMED), "nameservers": _items(_bounded(IP_BYTES)),
                                        "searches": _items(_bounded(SUBDOMAIN_BYTES))}),
    "securityContext": st.fixed_dictionaries({"sysctls": _items(st.fixed_dictionaries({
        "name": _bounded(SYSCTL_NAME_BYTES), "value": _text()})),
        "supplementalGroups": _items(st.integers(-2 ** 63, 2 ** 63 - 1))}),
    "topologySpreadConstraints": _items(SPREAD),
    "affinity": st.fixed_dictionaries({"podAffinity": POD_AFFINITY, "podAntiAffinity": POD_AFFINITY,
                                       "nodeAffinity": st.fixed_dictionaries({}, optional={
        "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries({"nodeSelectorTerms": _items(TERM)}),
        "preferredDuringSchedulingIgnoredDuringExecution": _items(st.fixed_dictionaries({
            "weight": st.integers(1, WEIGHT_VALUE), "preference": TERM}))})})})


_classes: dict = {}


def pod_spec_class():
    if not _classes:
        meta = meta_proto(MIRRORED_TAGS[APIMACHINERY][-1])
        selectors = "".join(re.search(rf"\nmessage {name} {{\n.*?\n}}", meta, re.S).group(0)
                            for name in ("LabelSelector", "LabelSelectorRequirement"))
        _classes.update(_core_classes(core_proto(MIRRORED_TAGS[API][-1]) + selectors))
    return _classes["PodSpec"]


def _proto_form(data):
    """The pod's JSON as generated.proto nests it: the API server's JSON inlines an object reference's
    LocalObjectReference, a volume's VolumeSource and a probe's ProbeHandler."""
    if isinstance(data, list):
        return [_proto_form(item) for item in data]
    if not isinstance(data, dict):
        return data
    return {key: _inlined(key, _proto_form(value)) for key, value in data.items()}


REFERENCES = {"configMapKeyRef", "secretKeyRef", "configMapRef", "secretRef", "configMap", "secret"}
PROBES = {"livenessProbe", "readinessProbe", "startupProbe"}


def _inlined(key: str, value):
    if key in REFERENCES and isinstance(value, dict) and "name" in value:
        return {**{k: v for k, v in value.items() if k != "name"}, "localObjectReference": {"name": value["name"]}}
    if key in PROBES:
        return {"handler": value}
    if key == "volumes":
        return [{"name": volume["name"], "volumeSource": {k: v for k, v in volume.items() if k != "name"}}
                for volume in value]
    return value


@pytest.fixture(scope="module")
def rule(dev_run):
    """The rule's sum as the policy evaluates it, compiled before Hypothesis runs (compiling raises the recursion
    limit, which Hypothesis refuses inside an example)."""
    admission = tenant_of(dev_run, dev_config(), "team-nlp").size_admission
    [entry_bytes] = [variable["expression"] for variable in admission.spec["variables"]
                     if variable["name"] == "podEntryBytes"]

    def counted(spec: dict) -> int:
        return int(admission.evaluate(entry_bytes, {"object": celpy.json_to_cel({"spec": spec})}))
    counted({"containers": [{}]})
    pod_spec_class()
    return counted


def test_the_sources_generated_are_the_kinds_the_host_admits():
    assert set(SOURCES) == set(HOST_VOLUME_SOURCES) | {"projected"}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow, HealthCheck.data_too_large])
@given(spec=POD_SPEC)
def test_what_a_pods_lists_store_is_at_most_what_the_rules_count(rule, spec):
    message = pod_spec_class()()
    _set(message, _proto_form(spec))
    assert list_bytes(message) <= text_bytes(spec) + stored(spec)
    assert rule(spec) == stored(spec)
    # The whole spec, as the pod holds it: within what the worst case counts of a pod of as many containers.
    containers = sum(len(spec.get(field, [])) for field in CONTAINER_LISTS)
    whole = message.ByteSize()
    assert 1 + varint_bytes(whole) + whole <= \
        text_bytes(spec) + stored(spec) + containers * CONTAINER_OWN_BYTES + POD_OWN_BYTES


def test_the_lists_of_a_pod_at_every_largest_value_store_near_what_the_rules_count():
    """Not a loose bound: an env reference and a mount, every bounded field at its largest, store what is counted
    but for their eight lengths (four of text, four of messages), counted at three bytes and stored in one."""
    env = [{"name": "N", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "f" * FIELD_PATH_BYTES}}}]
    mounts = [{"name": "v" * DNS_LABEL_BYTES, "mountPath": "/m", "readOnly": True, "mountPropagation": "e" * ENUM_BYTES,
               "recursiveReadOnly": "e" * ENUM_BYTES, "subPath": "s", "subPathExpr": "x"}]
    spec = {"containers": [{"env": env, "volumeMounts": mounts}]}
    message = pod_spec_class()()
    _set(message, _proto_form(spec))
    assert text_bytes(spec) + stored(spec) - list_bytes(message) == 2 * 8
