"""An object as the host API server hands it to a ValidatingAdmissionPolicy: ``as_served(kind, obj)``.

The API server decodes a request's body into the Go type of its kind and gives admission that typed object, which
the policy plugin turns back into JSON-like data with apimachinery's ``runtime.DefaultUnstructuredConverter``
(pkg/runtime/converter.go ``structToUnstructured``). So a policy sees, whatever the sender wrote:

- no field its Go type lacks (the decode drops it); without a ``release``, a field that another Kubernetes a site may
  run has (``accepted_kubernetes``: 1.35's ``workloadRef``, 1.37's ``evictionResponders``) is kept as written, since a
  host of that release serves it and the policies must judge it there;
- every field without ``omitempty`` (k8s.io/api types.go struct tags): a nil pointer, slice or map as ``null``,
  a string, number or bool as its zero value; a struct field (omitempty or not: the converter never counts a
  struct as empty) as an object of its own such fields, a ``metav1.Time`` as ``null`` when unset, a quantity as
  ``"0"`` and an int-or-string as ``0``;
- with ``omitempty``: nothing for a nil pointer, an empty string, a zero, false, or an empty list or map; with
  ``omitzero`` (meta/v1 ObjectMeta's creationTimestamp at the pin): nothing for a zero value, an unset time too;
- a quantity in canonical form (apimachinery pkg/api/resource/quantity.go ``CanonicalizeBytes``).

``SERVED_FIELDS`` (tests/served_fields.json) is the model at the pin: every struct reachable from the ``KINDS`` the
host policies judge, each field's type and whether it is ``omitempty``. ``RELEASES`` (tests/served_releases.json)
holds every Kubernetes minor a site may run, from the floor to the newest checked one, as the tags read and that
release's differences to the pinned table (a field or struct it lacks as null; the pin's are none) and its
converter (v0.30-v0.33's ignores ``omitzero``, so an unset creationTimestamp is served ``null`` there).
``as_served(kind, obj, release="1.31")`` is the object a host of that release hands its policies, fields of other
releases dropped; without ``release`` it is the pinned release's object with the fields of the others kept as
written; ``struct_holding(kind, path)`` is the struct whose field a path's last key is, read off the same tables.
tests/test_served_objects_contract.py checks both tables against the mirrors' types.go and converter.go at each
release's tags, tests/test_served_objects_real.py the round trip against the real plugin harness's. Kinds outside
``KINDS`` (custom resources, which the API server keeps unstructured) pass unchanged. Not modelled: the API
server's defaulting (the harness has none either) and the formatting of times.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple, Optional

import kubernetes_validate

from config.versions import KUBERNETES_MINIMUM_VERSION, VCLUSTER_VIRTUAL_KUBERNETES, release_numbers

SERVED_FIELDS: dict[str, dict[str, str]] = json.loads(Path(__file__).with_name("served_fields.json").read_text())
# Kubernetes minor -> {"tags": the k8s.io/api and apimachinery tags read, "omitzero": whether its converter honours
# omitzero, "fields": struct -> field -> its declaration there (None: absent), or None for a struct it lacks}.
RELEASES: dict[str, dict] = json.loads(Path(__file__).with_name("served_releases.json").read_text())
# The Go type of each kind tests/tenant_sim.py and tests/synced_objects_sim.py send to a host policy.
KINDS = {"Pod": "core/v1.Pod", "Service": "core/v1.Service", "Endpoints": "core/v1.Endpoints",
         "PersistentVolumeClaim": "core/v1.PersistentVolumeClaim", "ConfigMap": "core/v1.ConfigMap",
         "Secret": "core/v1.Secret", "Binding": "core/v1.Binding", "EndpointSlice": "discovery/v1.EndpointSlice",
         "Eviction": "policy/v1.Eviction"}
# package key -> (repository, types.go), read at the pinned Kubernetes (vCluster v0.36.1 vendors v0.36.0).
SOURCES = {"core/v1": ("kubernetes/api", "core/v1/types.go"),
           "discovery/v1": ("kubernetes/api", "discovery/v1/types.go"),
           "policy/v1": ("kubernetes/api", "policy/v1/types.go"),
           "meta/v1": ("kubernetes/apimachinery", "pkg/apis/meta/v1/types.go")}
SOURCE_TAG = "v0.36.3"
PINNED_RELEASE = "1.36"  # the minor of SOURCE_TAG, whose differences in RELEASES are none
ZERO = {"string": "", "int": 0, "bool": False, "float": 0.0, "quantity": "0", "intorstring": 0, "time": None}
QUANTITY = re.compile(r"([+-]?)(\d*)\.?(\d*)(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)")
DECIMAL_SUFFIXES = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
BINARY_SUFFIXES = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]


def accepted_kubernetes() -> list[str]:
    """The schema folders of every Kubernetes a site or a virtual cluster may run that kubernetes-validate ships."""
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    floor = release_numbers(KUBERNETES_MINIMUM_VERSION)
    folders = sorted(str(path) for path in root.glob("v*-local")
                     if release_numbers(path.name.removesuffix("-local"))[:2] >= floor)
    virtual = {f"v{version.lstrip('v')}-local" for version in VCLUSTER_VIRTUAL_KUBERNETES.values()}
    assert virtual <= {Path(folder).name for folder in folders}
    return folders


@functools.cache
def other_release_fields(struct: str) -> frozenset[str]:
    """The fields of ``struct`` (``core/v1.PodSpec``) in the schema of any accepted Kubernetes."""
    package, _, name = struct.partition(".")
    group = "io.k8s.apimachinery.pkg.apis.meta.v1" if package == "meta/v1" else f"io.k8s.api.{package.replace('/', '.')}"
    return frozenset(field for definitions in _accepted_definitions()
                     for field in definitions.get(f"{group}.{name}", {}).get("properties", {}))


@functools.cache
def _accepted_definitions() -> tuple[dict, ...]:
    return tuple(json.loads((Path(folder) / "_definitions.json").read_text())["$defs"]
                 for folder in accepted_kubernetes())


def canonical_quantity(text) -> str:
    """``text`` as ``resource.Quantity`` writes it back: rounded up to nano units, the format of its suffix kept
    (a binary one only for a whole amount of at least 1024), the largest suffix that keeps the number whole."""
    sign, whole, fraction, exponent, suffix = QUANTITY.fullmatch(str(text).strip()).groups()  # JSON numbers too
    value = Fraction(int(whole or 0) * 10 ** len(fraction) + int(fraction or 0), 10 ** len(fraction))
    if exponent:
        value *= Fraction(10) ** int(exponent[1:])
    elif suffix in BINARY_SUFFIXES[1:]:
        value *= 1024 ** BINARY_SUFFIXES.index(suffix)
    elif suffix:
        value *= Fraction(10) ** next(power for power, name in DECIMAL_SUFFIXES.items() if name == suffix)
    value = Fraction(math.ceil(value * 10 ** 9), 10 ** 9) * (-1 if sign == "-" else 1)
    if value == 0:
        return "0"
    if suffix in BINARY_SUFFIXES[1:] and abs(value) >= 1024 and value.denominator == 1:
        number, power = int(value), 0
        while number % 1024 == 0 and power < len(BINARY_SUFFIXES) - 1:
            number, power = number // 1024, power + 1
        return f"{number}{BINARY_SUFFIXES[power]}"
    power = -9
    while power < 18 and (value / Fraction(10) ** (power + 3)).denominator == 1:
        power += 3
    number = int(value / Fraction(10) ** power)
    return f"{number}{f'e{power}' if power and exponent else '' if exponent else DECIMAL_SUFFIXES[power]}"


def _omitted(kind: str, value) -> bool:
    """What ``omitempty`` leaves out (converter.go ``isEmpty``): a nil pointer, an empty list, map or string, a zero
    or false; never a struct (a time, quantity or int-or-string included: each is a struct in Go)."""
    if kind.startswith("*"):
        return value is None
    if kind.startswith(("[]", "map[")) or kind == "bytes":
        return not value
    return kind in ("string", "int", "bool", "float") and value in ("", 0, False)


def _element(table: "Table", kind: str, value):
    """A list item or map value of Go type ``kind`` (never omitted)."""
    if kind.startswith("*"):
        return None if value is None else _element(table, kind[1:], value)
    if kind.startswith("[]") or kind.startswith("map[") or kind == "bytes":
        return None if value is None else _collection(table, kind, value)
    if kind in table.fields:
        return _struct(table, kind, value or {})
    if kind == "quantity":
        return "0" if value is None else canonical_quantity(value)
    return ZERO[kind] if value is None else value


def _collection(table: "Table", kind: str, value):
    if kind == "bytes":
        return value
    if kind.startswith("[]"):
        return [_element(table, kind[2:], item) for item in value]
    item_kind = re.fullmatch(r"map\[[^\]]+\](.+)", kind).group(1)
    return {key: _element(table, item_kind, item) for key, item in value.items()}


def _struct(table: "Table", struct: str, obj: dict) -> dict:
    served = {}
    for name, declared in table.fields[struct].items():
        kind, *options = declared.split(",")
        value = _element(table, kind, obj.get(name))
        if ("omitempty" in options and _omitted(kind, value)) or \
                (table.omitzero and "omitzero" in options and value == ZERO[kind]):
            continue
        served[name] = value
    for name, value in obj.items():
        if table.others_kept and name not in table.fields[struct] and name in other_release_fields(struct):
            served[name] = copy.deepcopy(value)
    return served


class Table(NamedTuple):
    fields: dict[str, dict[str, str]]  # struct -> field -> declaration, as SERVED_FIELDS
    omitzero: bool  # the converter leaves out an omitzero field's zero value
    others_kept: bool  # a field only another accepted release has is kept as written


@functools.cache
def served_table(release: Optional[str] = None) -> Table:
    """What a host of Kubernetes ``release`` (a minor of RELEASES) serves; None: the pin, other releases' fields
    kept."""
    if release is None:
        return Table(SERVED_FIELDS, RELEASES[PINNED_RELEASE]["omitzero"], True)
    assert release in RELEASES, f"Kubernetes {release} is not modelled: the releases are {sorted(RELEASES)}"
    fields = copy.deepcopy(SERVED_FIELDS)
    for struct, changes in RELEASES[release]["fields"].items():
        if changes is None:
            del fields[struct]
            continue
        fields.setdefault(struct, {}).update(changes)
        fields[struct] = {name: declared for name, declared in fields[struct].items() if declared is not None}
    return Table(fields, RELEASES[release]["omitzero"], False)


def as_served(kind: str, obj, release: Optional[str] = None):
    """``obj`` (a ``kind``) as a host policy sees it: decoded into its Go type and converted back, by a host of
    Kubernetes ``release`` (None: the pin, fields of other accepted releases kept as written)."""
    if obj is None or kind not in KINDS:
        return copy.deepcopy(obj)
    return _struct(served_table(release), KINDS[kind], obj)


def struct_holding(kind: str, path: str, release: Optional[str] = None) -> str:
    """The Go struct the last key of ``path`` names a field of, walking ``kind``'s types as a host of ``release``
    (None: the pin) has them: the key of ``.spec.containers[].startupProbe.httpGet.protocol`` is one of
    ``core/v1.HTTPGetAction``'s. ``path`` is written as ``unserved`` paths are, ``.key`` a field and ``[]`` a list's
    item; every key before the last must be a field that release's types have (a map holds no struct to walk)."""
    table = served_table(release)
    steps = re.findall(r"\[\]|\.[^.\[]+", path)
    assert steps and "".join(steps) == path and steps[-1] != "[]", f"not a path to a key: {path!r}"
    declared = KINDS[kind]
    for step in steps[:-1]:
        declared = declared.lstrip("*")
        if declared.startswith("[]") and step == "[]":
            declared = declared[2:]
        else:
            assert step[1:] in table.fields.get(declared, {}), f"{path}: {declared} has no {step}"
            declared = table.fields[declared][step[1:]].partition(",")[0]
    declared = declared.lstrip("*")
    assert declared in table.fields, f"{path}: its last key is not a struct's field but in a {declared}"
    return declared


def null_when_unset(kind: str, release: Optional[str] = None) -> set[str]:
    """The paths (list items marked ``[]``, map values ``{}``) a policy on a host of ``release`` sees as ``null`` when
    the sender left them out: a pointer, list or map without ``omitempty``, and a time (unless ``omitzero`` and the
    converter honours it). Recursion stops at a struct already on the path."""
    table = served_table(release)
    found: set[str] = set()

    def walk(struct: str, prefix: str, seen: tuple[str, ...]) -> None:
        for name, declared in table.fields[struct].items():
            kind, _, option = declared.partition(",")
            if (kind == "time" and not ("omitzero" in option and table.omitzero)) or \
                    (not option and (kind.startswith(("*", "[]", "map[")) or kind == "bytes")):
                found.add(f"{prefix}{name}")
            inner = re.sub(r"^(\[\]|map\[[^\]]+\]|\*)+", "", kind)
            marks = "".join("[]" if part == "[]" else "{}" for part in re.findall(r"\[\]|map\[[^\]]+\]", kind))
            if inner in table.fields and inner not in seen:
                walk(inner, f"{prefix}{name}{marks}.", (*seen, inner))

    walk(KINDS[kind], "", (KINDS[kind],))
    return found


def null_when_unset_anywhere(kind: str) -> set[str]:
    """``null_when_unset`` at any release a site may run (RELEASES)."""
    return set().union(*(null_when_unset(kind, release) for release in RELEASES))
