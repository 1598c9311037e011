"""Editing a stack file's ``config:`` the way ``pulumi config set --path`` does, for tools.new_site.

Pulumi config paths (``teams[0].resources.gpu.quota``, ``vcluster.nodeLabels["gpu-tenancy/pool"]``,
``aws:region``), ``--set PATH=VALUE`` assignments whose VALUE is read with the stack-file rules
(``config.stack_file``), and YAML written so that YAML 1.1 and 1.2 readers read it back the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence, Union

import yaml

from config import ConfigError
from config.errors import ConfigIssue
from config.secrets import SECRET_KEYS
from config.vocabulary import PROJECT
from config.stack_file import StackFileError, core_value, parse_value

Segment = Union[str, int]
ABSENT = object()


class UsageError(Exception):
    """A problem with the command line or the files it names; nothing is written."""


# --- YAML -------------------------------------------------------------------------------------


class _Dumper(yaml.SafeDumper):
    """PyYAML already quotes text a YAML 1.1 reader would take for something else; this also
    quotes text that Pulumi (YAML 1.2) would read as a number (``1e3``), so the file written is
    read back the same by both."""

    def represent_str(self, data: str) -> yaml.ScalarNode:
        node = super().represent_str(data)
        # NEL and the Unicode line/paragraph separators are line breaks to YAML 1.1 only: escape them.
        if (node.style is None and core_value(data) != data) or any(ch in data for ch in "\x85\u2028\u2029"):
            node.style = '"'
        return node


_Dumper.add_representer(str, _Dumper.represent_str)


def dump_yaml(value: Any, **options: Any) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, **options)


def is_secure(value: object) -> bool:
    """A value Pulumi encrypted in the stack file: ``{secure: v1:...}``."""
    return isinstance(value, dict) and set(value) == {"secure"}


def contains_secure(value: object) -> bool:
    if is_secure(value):
        return True
    if isinstance(value, dict):
        return any(contains_secure(item) for item in value.values())
    if isinstance(value, list):
        return any(contains_secure(item) for item in value)
    return False


# --- config paths -------------------------------------------------------------------------------


def format_path(path: Sequence[Segment]) -> str:
    """A path in Pulumi's ``--path`` syntax: ``gpu-tenancy:teams[0].resources``, ``a["x.y/z"]``."""
    text = ""
    for position, segment in enumerate(path):
        if isinstance(segment, int):
            text += f"[{segment}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+" if position else r"(?:[A-Za-z0-9_-]+:)?[A-Za-z0-9_-]+", segment):
            text += segment if position == 0 else f".{segment}"
        else:
            text += '["' + segment.replace("\\", "\\\\").replace('"', '\\"') + '"]'
    return text


def _path_error(text: str, at: int, problem: str) -> UsageError:
    return UsageError(f"--set {text!r}: {problem} (at character {at + 1}); write PATH=VALUE, e.g. "
                      "teams[0].resources.gpu.quota=0.5 or vcluster.nodeLabels[\"gpu-tenancy/pool\"]=gpu")


def parse_path(text: str, *, stop_at_equals: bool = True) -> tuple[list[Segment], int]:
    """Parse a config path at the start of ``text``; returns its segments and where it ended
    (at the first '=' outside quotes, or the end of the text)."""
    segments: list[Segment] = []
    length, index = len(text), 0

    def ends(at: int) -> bool:
        return at >= length or (stop_at_equals and text[at] == "=")

    while True:
        if index < length and text[index] == "[":
            start = index
            index += 1
            if index < length and text[index] in "\"'":
                quote, key = text[index], []
                index += 1
                while index < length and text[index] != quote:
                    if text[index] == "\\" and index + 1 < length:
                        index += 1
                    key.append(text[index])
                    index += 1
                if index >= length:
                    raise _path_error(text, start, "unterminated quoted key")
                index += 1
                if index >= length or text[index] != "]":
                    raise _path_error(text, index, "expected ']' after a quoted key")
                if not key:
                    raise _path_error(text, start, "empty key")
                segments.append("".join(key))
            else:
                close = text.find("]", index)
                inner = text[index:close] if close >= 0 else text[index:]
                if close < 0 or not re.fullmatch(r"[0-9]+", inner):
                    raise _path_error(text, start, f"[{inner}] is not a list index: "
                                      "use [0], [1], ... for list items or [\"key\"] for a key with dots or slashes")
                segments.append(int(inner))
                index = close
            index += 1
        else:
            start = index
            while not ends(index) and text[index] not in ".[]":
                index += 1
            if index == start:
                what = "missing path" if start == 0 and ends(start) else "empty key in path"
                raise _path_error(text, start, what)
            segments.append(text[start:index])
        if ends(index):
            break
        if text[index] == ".":
            index += 1
            if ends(index) or text[index] in ".[":
                raise _path_error(text, index, "'.' must be followed by a key name")
        elif text[index] != "[":
            raise _path_error(text, index, f"unexpected {text[index]!r}")
    if isinstance(segments[0], int):
        raise _path_error(text, 0, "a path starts with a key name, not a list index")
    return segments, index


def qualify(first: str) -> str:
    """The full config key of a path's first segment: ``teams`` -> ``gpu-tenancy:teams``."""
    if ":" in first:
        namespace, _, name = first.partition(":")
        if not namespace or not name:
            raise UsageError(f"{first!r} is not a config key: write namespace:name, e.g. aws:region")
        return first
    return f"{PROJECT}:{first}"


def project_name(key: str) -> Optional[str]:
    """``gpu-tenancy:teams`` (or a bare ``teams``) -> ``teams``; keys of other namespaces -> None."""
    if ":" not in key:
        return key
    namespace, _, name = key.partition(":")
    return name if namespace == PROJECT else None


@dataclass
class Assignment:
    text: str
    path: list[Segment]  # first segment is the full key, e.g. gpu-tenancy:teams
    value: Any


# How YAML writes "no value" on purpose: a --set that writes one of these means it.
YAML_NULLS = ("null", "Null", "NULL", "~")


def parse_assignment(text: str) -> Assignment:
    segments, end = parse_path(text)
    if project_name(str(segments[0])) in SECRET_KEYS:
        # Refused before the value is read, so that no message repeats it.
        key = qualify(str(segments[0]))
        raise UsageError(f"--set {key}=...: {key} is a secret and must not be written in plain text; set it after "
                         f"pulumi stack init with: pulumi config set --secret {key} < ...")
    if end >= len(text):
        raise UsageError(f"--set {text!r} has no '=': write PATH=VALUE, e.g. teams[0].resources.gpu.quota=0.5")
    raw_value = text[end + 1:]
    if not raw_value.strip():
        raise UsageError(f"--set {text!r} has no value after '=': write '' for an empty string")
    try:
        value = parse_value(raw_value, format_path(segments))
    except StackFileError as error:
        raise UsageError(f"--set {text!r}: {error}; quote text that contains YAML syntax, e.g. "
                         "--set 'organization.displayName=\"ML: research\"'") from None
    except ConfigError as error:
        raise UsageError(f"--set {text!r}: " + "; ".join(f"{issue.problem}. Fix: {issue.fix}"
                                                        for issue in error.issues)
                         + "".join(f"; {SHELL_QUOTES} {quoted_set(text)}"
                                   for issue in error.issues[:1] if "quote it" in issue.fix)) from None
    if value is None and raw_value.strip() not in YAML_NULLS:
        # A Slack channel (#gpu-platform) would silently become nothing: YAML starts a comment at '#'.
        raise UsageError(f"--set {text!r}: YAML reads {raw_value!r} as nothing ('#' starts a comment); quote "
                         f"the text: --set '{text[:end]}=\"{raw_value}\"'")
    if contains_secure(value):
        raise UsageError(f"--set {text!r}: encrypted values cannot be copied between stacks; set secrets with "
                         "pulumi config set --secret after pulumi stack init")
    try:
        segments[0] = qualify(str(segments[0]))
    except UsageError as error:
        raise UsageError(f"--set {text!r}: {error}") from None
    return Assignment(text, segments, value)


# Why a value a message asks to quote needs two pairs of quotes on a command line.
SHELL_QUOTES = "the shell takes the quotes off before YAML reads the value, so write"


def quoted_set(text: str) -> str:
    """``--set PATH=VALUE`` with VALUE quoted for YAML inside quotes for the shell."""
    _, end = parse_path(text)
    return f"--set '{text[:end]}=\"{text[end + 1:]}\"'"


def quote_past_the_shell(issues: Sequence[ConfigIssue], assignments: Sequence[Assignment]) -> list[ConfigIssue]:
    """The issues, each one asking to quote a value a --set wrote told how to write that --set. Its own example
    shows the value as YAML read it, which may not be the text written (1.30 read as the number 1.3)."""
    written = {key: assignment.text for assignment in assignments
               if (key := project_name(format_path(assignment.path)))}
    return [replace(issue, fix=f"quote it so YAML keeps it as written; {SHELL_QUOTES} {quoted_set(written[issue.key])}")
            if issue.key in written and "quote it" in issue.fix else issue for issue in issues]


def _kind(value: object) -> str:
    if isinstance(value, dict):
        return "map"
    if isinstance(value, list):
        return "list"
    return f"{type(value).__name__} value ({value!r})"


def resolve_top(config: dict, key: str) -> str:
    """The key as the stack file spells it (a bare ``teams`` counts as ``gpu-tenancy:teams``)."""
    name = project_name(key)
    if key not in config and name is not None and name in config:
        return name
    return key




def _get(container: Union[dict, list], key: Segment) -> Any:
    if isinstance(container, list):
        return container[key] if key < len(container) else ABSENT
    return container.get(key, ABSENT)


def _put(container: Union[dict, list], key: Segment, value: Any) -> None:
    if isinstance(container, list) and key == len(container):
        container.append(value)
    else:
        container[key] = value


def apply(config: dict, assignment: Assignment) -> Any:
    """Set one value in ``config`` (creating missing maps and lists, appending at index == length), or remove it
    when the value is null. Returns the value it replaced (``ABSENT`` if none); rewrites ``assignment.path`` to the
    stored key."""
    path = assignment.path
    path[0] = resolve_top(config, path[0])
    container: Union[dict, list] = config
    key: Segment = path[0]
    for depth, segment in enumerate(path[1:], start=1):
        where = format_path(path[:depth])
        node = _get(container, key)
        if node is ABSENT or node is None:
            node = [] if isinstance(segment, int) else {}
            _put(container, key, node)
        elif isinstance(segment, int) and not isinstance(node, list):
            hint = f"use a key, e.g. {where}.name" if isinstance(node, dict) else "set the whole value instead"
            raise UsageError(f"--set {assignment.text!r}: {where} is a {_kind(node)}, not a list; {hint}")
        elif isinstance(segment, str) and not isinstance(node, dict):
            hint = f"use an index, e.g. {where}[0]" if isinstance(node, list) else \
                f"a path cannot go through it (set {where} itself to replace it)"
            raise UsageError(f"--set {assignment.text!r}: {where} is a {_kind(node)}, not a map; {hint}")
        if isinstance(segment, int) and segment > len(node):
            items = "[0]" if len(node) == 1 else f"[0]..[{len(node) - 1}]"
            advice = f"use {items} to change an item or [{len(node)}] to append" if node else \
                "use [0] to add the first item"
            raise UsageError(f"--set {assignment.text!r}: index out of range: {format_path(path[:depth + 1])} "
                             f"does not exist, {where} has {len(node)} item(s); {advice}")
        container, key = node, segment
    old = _get(container, key)
    if assignment.value is None:
        # No value is no key, as `pulumi config rm --path` leaves it: the program reads a null as not set, and the
        # stack-file schema (and the editors that use it) refuses a null.
        if old is not ABSENT:
            del container[key]
    else:
        _put(container, key, assignment.value)
    return old
