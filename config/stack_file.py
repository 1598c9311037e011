"""Reading ``Pulumi.<stack>.yaml`` the way the Pulumi CLI does: YAML 1.2, core schema.

Every tool that opens a stack file (offline plan, new site, CI matrix, tests) goes through
``read_stack_file`` / ``parse_value``, so a value means the same thing to all of them and to
``pulumi up``. ruamel.yaml parses the YAML 1.2 syntax; plain scalars are resolved here with the
1.2 core schema (ruamel would still turn ``2026-01-01`` into a date).

A plain value that a YAML 1.1 reader (PyYAML, many editors and linters) would read differently,
such as ``yes``/``on`` (booleans in 1.1, text in 1.2), ``2026-01-01`` (a date in 1.1) or ``010``
(octal 8 in 1.1), is refused as a config error naming its key: the author meant one of the two
and only quoting (or ``true``/``false``) says which.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from config.errors import ConfigError, ConfigIssue
from config.vocabulary import PROJECT_PREFIX

_CORE = "tag:yaml.org,2002:"
# Tags a resolver gives untagged nodes; any other tag was written explicitly (``!!binary``, ``!Ref``).
_IMPLICIT_TAGS = {_CORE + name for name in ("str", "int", "float", "bool", "null", "timestamp", "map", "seq")}
# The tag of an unquoted ``<<`` key: a merge of other maps' entries into this one (YAML 1.1's merge key type, which
# Pulumi's reader keeps).
_MERGE = _CORE + "merge"

# The YAML 1.2 core schema (spec 10.3.2), which is what Pulumi's Go YAML reader implements.
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_TRUE = re.compile(r"^(?:true|True|TRUE)$")
_FALSE = re.compile(r"^(?:false|False|FALSE)$")
_INT = re.compile(r"^[-+]?[0-9]+$")
_OCTAL = re.compile(r"^0o[0-7]+$")
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_INF = re.compile(r"^[-+]?(?:\.inf|\.Inf|\.INF)$")
_NAN = re.compile(r"^(?:\.nan|\.NaN|\.NAN)$")


class StackFileError(ValueError):
    """A stack file that cannot be read at all (missing, or not YAML); the message says where."""


def core_value(text: str) -> Any:
    """The value of a plain (unquoted) scalar under the YAML 1.2 core schema."""
    if _NULL.match(text):
        return None
    if _TRUE.match(text):
        return True
    if _FALSE.match(text):
        return False
    if _INT.match(text):
        return int(text)
    if _OCTAL.match(text):
        return int(text[2:], 8)
    if _HEX.match(text):
        return int(text[2:], 16)
    if _FLOAT.match(text):
        return float(text)
    if _INF.match(text):
        return -math.inf if text.startswith("-") else math.inf
    if _NAN.match(text):
        return math.nan
    return text


_YAML11 = yaml.SafeLoader("")


def yaml11_value(text: str) -> Any:
    """What a YAML 1.1 reader (PyYAML's safe loader) makes of the same plain scalar."""
    tag = _YAML11.resolve(yaml.ScalarNode, text, (True, False))
    try:
        return _YAML11.construct_object(yaml.ScalarNode(tag, text), deep=True)
    except yaml.YAMLError:  # e.g. a bare '=', which PyYAML resolves to a tag it cannot build
        return _Unreadable()


class _Unreadable:
    def __repr__(self) -> str:
        return "an error"


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _ambiguity(key: str, text: str, value: Any) -> ConfigIssue | None:
    other = yaml11_value(text)
    if _same(value, other):
        return None
    if isinstance(other, bool):
        return ConfigIssue(key, text, f"Pulumi (YAML 1.2) reads the unquoted word {text!r} as text, YAML 1.1 "
                                      f"tools as the boolean {str(other).lower()}",
                           f'write {str(other).lower()} for a boolean, or quote it ("{text}") for text')
    if other.__class__.__name__ in ("date", "datetime"):
        return ConfigIssue(key, text, "Pulumi (YAML 1.2) reads this as text, YAML 1.1 tools as a date",
                           f'quote it ("{text}")')
    return ConfigIssue(key, text, f"Pulumi (YAML 1.2) reads this as {value!r}, YAML 1.1 tools as {other!r}",
                       f'quote it ("{text}") to keep it text, or write the number plainly (e.g. {value!r})'
                       if not isinstance(value, str) else f'quote it ("{text}")')


def _child(key: str, name: Any) -> str:
    if not key:
        return str(name)
    if isinstance(name, int):
        return f"{key}[{name}]"
    return f"{key}.{name}" if re.fullmatch(r"[A-Za-z0-9_-]+", str(name)) else f'{key}["{name}"]'


def _build(node: Node, key: str, issues: list[ConfigIssue], config_level: bool) -> Any:
    if node.tag not in _IMPLICIT_TAGS:
        issues.append(ConfigIssue(key or "(document)", node.tag, "explicit YAML tags are not supported",
                                  "remove the tag and write the value plainly"))
        return None
    if isinstance(node, MappingNode):
        result: dict[Any, Any] = {}
        merged: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merged = _merge_sources(value_node, key, issues)
                continue
            name = _build(key_node, key, issues, False)
            if isinstance(name, (dict, list)) or name is None:
                issues.append(ConfigIssue(key or "(document)", name, "has a key that is not a plain word",
                                          "use text keys"))
                continue
            # Under `config:` keys are full config keys (gpu-tenancy:teams); paths below them go on from there.
            path = str(name).removeprefix(PROJECT_PREFIX) if config_level else _child(key, name)
            if name in result:
                issues.append(ConfigIssue(path, _plain(value_node), "is set twice in the same map",
                                          "keep one of the two entries"))
                continue
            result[name] = _build(value_node, path, issues, key == "" and name == "config")
        for source in merged:
            for name, value in _build(source, key, issues, config_level).items():
                result.setdefault(name, value)
        return result
    if isinstance(node, SequenceNode):
        return [_build(item, _child(key, index), issues, False) for index, item in enumerate(node.value)]
    assert isinstance(node, ScalarNode)
    if node.style is not None:  # quoted or block text: always a string
        return node.value
    value = core_value(node.value)
    problem = _ambiguity(key or "(document)", node.value, value)
    if problem is not None:
        issues.append(problem)
    return value


def _merge_sources(node: Node, key: str, issues: list[ConfigIssue]) -> list[Node]:
    """The maps a merge key (``<<: *defaults``) takes entries from, first one first: Pulumi's YAML reader
    (gopkg.in/yaml.v3) takes a map or a list of maps there, and a map's own keys win over merged ones."""
    sources = node.value if isinstance(node, SequenceNode) else [node]
    if all(isinstance(source, MappingNode) for source in sources):
        return sources
    issues.append(ConfigIssue(key or "(document)", "<<", "a merge key (<<) must name a map or a list of maps",
                              "point it at an anchored map (<<: *defaults) or a list of them ([*a, *b])"))
    return []


def _plain(node: Node) -> Any:
    return node.value if isinstance(node, ScalarNode) else "..."


def parse_document(text: str, *, where: str, key: str = "") -> Any:
    """Parse YAML text with the stack-file rules. ``where`` names the source in messages;
    ``key`` is the config key the text is the value of (for ``--set``)."""
    reader = YAML(typ="safe", pure=True)
    try:
        node = reader.compose(text)
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        at = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise StackFileError(f"{where}{at}: not valid YAML: {error.problem or error.context}") from None
    except YAMLError as error:
        raise StackFileError(f"{where}: not valid YAML: {error}") from None
    if node is None:
        return None
    issues: list[ConfigIssue] = []
    value = _build(node, key, issues, False)
    if issues:
        raise ConfigError(issues)
    return value


def parse_value(text: str, key: str) -> Any:
    """One value written on a command line (``--set KEY=TEXT``), read as a stack file would read it."""
    return parse_document(text, where=f"the value of {key}", key=key)


def read_stack_file(path: Path) -> dict[str, Any]:
    """The whole document of a stack file (``config:``, ``secretsprovider:``, ...)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise StackFileError(f"cannot read {path}: {error.strerror or error}") from None
    document = parse_document(text, where=path.name)
    if document is None:
        return {}
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise StackFileError(f"{path.name} is not a Pulumi stack file (expected a map with a 'config:' map)")
    return document


# The project root: Pulumi.yaml and the stack files beside it.
PROJECT_DIR = Path(__file__).resolve().parent.parent


def stack_names(project_dir: Path = PROJECT_DIR) -> list[str]:
    """The stacks with a ``Pulumi.<stack>.yaml`` in the project root."""
    return sorted(path.name[len("Pulumi."):-len(".yaml")] for path in project_dir.glob("Pulumi.*.yaml"))


def stack_file(project_dir: Path, stack: str) -> Path:
    """``Pulumi.<stack>.yaml``, or an error listing the stacks that exist."""
    path = project_dir / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackFileError(f"no stack file {path.name}; committed stacks: "
                             f"{', '.join(stack_names(project_dir)) or 'none'}")
    return path


def stack_config(project_dir: Path, stack: str) -> dict[str, Any]:
    """The ``config:`` block of a committed stack (full keys, e.g. ``gpu-tenancy:teams``)."""
    return read_stack_file(stack_file(project_dir, stack)).get("config") or {}
