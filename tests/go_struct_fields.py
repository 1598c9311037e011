"""The JSON fields of Go API types, read from their struct tags in the mirrors' ``types.go`` files.

``schema(sources)`` parses the structs of each source (a package key, its repository and file, at a tag) and keeps
the ones reachable from ``roots``: ``{"<package>.<Struct>": {json name: "<type>[,omitempty][,omitzero]"}}``, embedded
``json:",inline"`` structs flattened into their holder, ``json:"-"`` fields left out, ``omitempty`` and ``omitzero`` kept, and each type written with
its package resolved (``*core/v1.PodSpec``, ``[]string``, ``map[string]quantity``). Types with a converter of their
own (apimachinery ``runtime.DefaultUnstructuredConverter`` calls their ``ToUnstructured`` or ``MarshalJSON``) end
the walk as one of the ``LEAVES`` kinds; named types of a basic type become that basic type.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple, Optional

# Types the walk does not enter: what each is served as (tests/served_objects.py).
LEAVES = {"resource.Quantity": "quantity", "intstr.IntOrString": "intorstring", "meta/v1.Time": "time",
          "meta/v1.MicroTime": "time", "meta/v1.Duration": "string", "meta/v1.FieldsV1": "raw",
          "runtime.RawExtension": "raw", "types.UID": "string", "types.NodeName": "string"}
BASIC = {"string": "string", "bool": "bool", "byte": "int", "float64": "float",
         **{f"{sign}int{bits}": "int" for sign in ("", "u") for bits in ("", "8", "16", "32", "64")}}
IMPORTS = {"k8s.io/api/core/v1": "core/v1", "k8s.io/api/discovery/v1": "discovery/v1",
           "k8s.io/api/policy/v1": "policy/v1", "k8s.io/apimachinery/pkg/apis/meta/v1": "meta/v1",
           "k8s.io/apimachinery/pkg/api/resource": "resource", "k8s.io/apimachinery/pkg/util/intstr": "intstr",
           "k8s.io/apimachinery/pkg/types": "types", "k8s.io/apimachinery/pkg/runtime": "runtime"}
STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.MULTILINE | re.DOTALL)
FIELD = re.compile(r"^\t(?:(\w+)[ \t]+)?([\w.*\[\]]+)[ \t]+`[^`]*?json:\"([^\"]*)\"", re.MULTILINE)
NAMED = re.compile(r"^type (\w+) =? ?([\w.*\[\]]+)$", re.MULTILINE)
# The package key ``local`` parses a file's own types under, then drops.
LOCAL = "this"
IMPORT = re.compile(r"^\t(?:(\w+) )?\"([^\"]+)\"$", re.MULTILINE)


class Source(NamedTuple):
    package: str  # the key its types are named by: core/v1
    text: str  # its types.go


class Field(NamedTuple):
    name: str  # the JSON name, '' when inline
    kind: str  # the Go type, package resolved
    options: str  # ",omitempty", ",omitzero", both or ''
    go_name: str  # the Go name; an embedded struct's is its type's
    embedded: bool


def _resolve(kind: str, package: str, aliases: dict[str, str]) -> str:
    prefix = re.match(r"^([\[\]*]*)", kind).group(1)
    rest = kind[len(prefix):]
    if rest.startswith("map["):
        key, value = re.fullmatch(r"map\[([\w.]+)\](.+)", rest).groups()
        return f"{prefix}map[{_resolve(key, package, aliases)}]{_resolve(value, package, aliases)}"
    if rest in BASIC:
        return prefix + rest
    alias, _, name = rest.rpartition(".")
    return f"{prefix}{aliases[alias] if alias else package}.{name}"


def parse(source: Source) -> tuple[dict[str, list[Field]], dict[str, str]]:
    """(struct -> fields, named non-struct type -> its type), every name package-qualified."""
    imports = source.text.split("import (", 1)[1].split(")", 1)[0] if "import (" in source.text else ""
    aliases = {alias or path.rsplit("/", 1)[1]: IMPORTS[path] for alias, path in IMPORT.findall(imports)
               if path in IMPORTS}
    structs = {}
    for name, body in STRUCT.findall(source.text):
        fields = []
        for go_name, kind, tag in FIELD.findall(body):
            json_name, *options = tag.split(",")
            if json_name == "-":
                continue
            if not go_name:  # embedded: named by its JSON tag, inline when the tag has no name
                assert json_name or "inline" in options, f"{name}: embedded {kind} without a JSON name"
            kept = "".join(f",{option}" for option in options if option in ("omitempty", "omitzero"))
            fields.append(Field(json_name, _resolve(kind, source.package, aliases), kept,
                                go_name or kind.lstrip("*").rsplit(".", 1)[-1], not go_name))
        structs[f"{source.package}.{name}"] = fields
    named = {f"{source.package}.{name}": _resolve(kind, source.package, aliases)
             for name, kind in NAMED.findall(source.text) if name not in {n for n, _ in STRUCT.findall(source.text)}}
    return structs, named


def bare(kind: str) -> str:
    """``kind`` without its list and pointer marks: ``[]*core/v1.Volume`` -> ``core/v1.Volume``."""
    return re.sub(r"^[\[\]*]+", "", kind)


def schema(sources: list[Source], roots: list[str]) -> dict[str, dict[str, str]]:
    """The structs reachable from ``roots``: struct -> JSON name -> its type, ``,omitempty``/``,omitzero`` appended."""
    structs: dict[str, list[Field]] = {}
    named: dict[str, str] = {}
    for source in sources:
        parsed, types = parse(source)
        structs.update(parsed)
        named.update(types)

    def simple(kind: str) -> str:
        prefix = re.match(r"^([\[\]*]*)", kind).group(1)
        rest = kind[len(prefix):]
        if rest == "byte" and prefix.endswith("[]"):  # base64 text
            return prefix[:-2] + "bytes"
        if rest.startswith("map["):
            key, value = re.fullmatch(r"map\[([\w./]+)\](.+)", rest).groups()
            return f"{prefix}map[{simple(key)}]{simple(value)}"
        while rest in named and rest not in LEAVES:
            resolved = named[rest]
            if resolved.startswith(("[", "*", "map[")):
                return prefix + simple(resolved)
            rest = resolved
        if rest in LEAVES:
            return prefix + LEAVES[rest]
        if rest in BASIC:
            return prefix + BASIC[rest]
        assert rest in structs, f"{kind}: a type the mirror's files do not define: add it to LEAVES"
        return prefix + rest

    result: dict[str, dict[str, str]] = {}

    def fields_of(struct: str) -> dict[str, str]:
        found: dict[str, str] = {}
        for field in structs[struct]:
            if not field.name:
                found.update(fields_of(field.kind))
                continue
            kind = simple(field.kind)
            assert "omitzero" not in field.options or kind in ("time", "string", "int", "bool"), \
                f"{struct}.{field.name}: omitzero on {kind}, which tests/served_objects.py does not model"
            found[field.name] = kind + field.options
        return found

    def walk(struct: str) -> None:
        if struct in result:
            return
        result[struct] = fields_of(struct)
        for kind in result[struct].values():
            for part in re.findall(r"[\w]+/v1\.\w+", kind):
                walk(part)

    for root in roots:
        walk(root)
    return result


def written(tables: dict[str, dict[str, str]]) -> str:
    """``tables`` as tests/served_fields.json holds them: one struct a line, sorted."""
    lines = [f"{json.dumps(name)}: {json.dumps(fields)}" for name, fields in sorted(tables.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def differences(pinned: dict[str, dict[str, str]], other: dict[str, dict[str, str]]) -> dict[str, Optional[dict]]:
    """What ``other`` changes in ``pinned`` (two ``schema`` results): struct -> field -> its declaration in ``other``
    (None: absent there), or None for a struct ``other`` lacks; a struct only ``other`` has, whole."""
    changed: dict[str, Optional[dict]] = {}
    for struct in sorted(set(pinned) | set(other)):
        before, after = pinned.get(struct), other.get(struct)
        if struct not in other:
            changed[struct] = None
        elif before is None:
            changed[struct] = after
        elif before != after:
            changed[struct] = {name: after.get(name) for name in [*before, *after]
                               if before.get(name) != after.get(name)}
    return changed


def written_releases(releases: dict[str, dict]) -> str:
    """``releases`` as tests/served_releases.json holds them: a release's facts on one line, each changed struct on
    its own."""
    blocks = []
    for release, facts in sorted(releases.items()):
        head = {key: value for key, value in facts.items() if key != "fields"}
        lines = [f"  {json.dumps(name)}: {json.dumps(fields)}" for name, fields in sorted(facts["fields"].items())]
        body = "{\n" + ",\n".join(lines) + "\n }" if lines else "{}"
        blocks.append(f"{json.dumps(release)}: {json.dumps(head)[:-1]}, \"fields\": {body}}}")
    return "{\n" + ",\n".join(blocks) + "\n}\n"


def local(text: str) -> tuple[dict[str, list[Field]], dict[str, str]]:
    """``parse`` of one ``types.go`` with its own types named without a package (``PodSpec``, ``[]Volume``,
    ``map[ResourceName]resource.Quantity``) and imported ones with theirs (``meta/v1.LabelSelector``, a discovery
    file's ``core/v1.ObjectReference``)."""
    structs, named = parse(Source(LOCAL, text))

    def strip(name: str) -> str:
        return re.sub(rf"(?<![\w/]){LOCAL}\.", "", name)
    return ({strip(name): [field._replace(kind=strip(field.kind)) for field in fields]
             for name, fields in structs.items()}, {strip(name): strip(kind) for name, kind in named.items()})
