"""Typed, path-aware access to raw stack config.

Stack config is untrusted YAML: any key may hold any type. A ``Section`` reads one mapping
field by field; every wrong type, out-of-range value or unknown key becomes a ``ConfigIssue``
that names the full key path (``teams[1].resources.gpu.quota``), and reading goes on so the
operator sees every problem at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import difflib
import math
import re
from typing import Any, Iterable, Iterator, Optional

from config.errors import MISSING, ConfigIssue
from config.vocabulary import EXACT_VERSION

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_LABEL_FIX = "use at most {limit} lowercase letters, digits and '-', starting and ending with a letter or digit"


# While set (``tracing``), every Reader also records what it was asked to read: each map's allowed
# keys and each key's type and bounds. ``config.schema`` turns that into the stack config's JSON
# Schema, so the schema comes from the very calls that validate the config.
_TRACE: contextvars.ContextVar[Optional[Trace]] = contextvars.ContextVar("config_trace", default=None)


class Trace:
    """Key path -> JSON Schema fragment; paths are dotted, list items written ``teams[]``."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[str, ...]] = {}
        self.keys: dict[str, dict[str, Any]] = {}
        self.lists: set[str] = set()

    def object(self, path: str, fields: tuple[str, ...]) -> None:
        path = _generic(path)
        self.objects[path] = tuple(dict.fromkeys(self.objects.get(path, ()) + fields))

    def key(self, path: str, schema: dict[str, Any]) -> None:
        self.keys[_generic(path)] = schema


def _generic(path: str) -> str:
    return re.sub(r"\[\d+\]", "[]", path)


@contextlib.contextmanager
def tracing() -> Iterator[Trace]:
    trace = Trace()
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


class Reader:
    """Collects the issues found while reading one stack's config."""

    def __init__(self) -> None:
        self.issues: list[ConfigIssue] = []
        self.trace = _TRACE.get()

    def fail(self, key: str, value: object, problem: str, fix: str) -> None:
        self.issues.append(ConfigIssue(key, value, problem, fix))

    def section(self, path: str, value: object, fields: Iterable[str]) -> Section:
        return Section(self, path, value, tuple(fields))


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# Far beyond any real quota (memory is counted in MB); keeps float conversions exact and finite.
LARGEST_NUMBER = 10**12


def is_number(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return abs(value) <= LARGEST_NUMBER if isinstance(value, int) else math.isfinite(value) and abs(value) <= LARGEST_NUMBER


def did_you_mean(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else "remove it"


class Section:
    """One mapping of the stack config, at ``path``, allowed to hold ``fields``."""

    def __init__(self, reader: Reader, path: str, value: object, fields: tuple[str, ...]):
        self.reader = reader
        self.path = path
        self.present = value is not MISSING and value is not None
        self.values: dict[str, Any] = {}
        # Keys reported as unknown: a typo of a known key, whose default must not raise follow-on issues.
        self.unknown: list[str] = []
        if reader.trace is not None:
            reader.trace.object(path, fields)
        if not self.present:
            return
        if not isinstance(value, dict):
            reader.fail(path, value, f"expected a map with keys {', '.join(fields)}, got {_type_name(value)}",
                        "write it as a YAML map (key: value lines)")
            return
        for name, item in value.items():
            if not isinstance(name, str) or name not in fields:
                reader.fail(join(path, str(name)), item, "unknown key", did_you_mean(str(name), fields))
                self.unknown.append(str(name))
            else:
                self.values[name] = item

    def key(self, name: str) -> str:
        return join(self.path, name)

    def _declare(self, name: str, schema: dict[str, Any]) -> None:
        if self.reader.trace is not None:
            self.reader.trace.key(self.key(name), schema)

    def raw(self, name: str) -> object:
        value = self.values.get(name, MISSING)
        return MISSING if value is None else value

    def has(self, name: str) -> bool:
        return self.raw(name) is not MISSING

    def _fail(self, name: str, value: object, problem: str, fix: str) -> None:
        self.reader.fail(self.key(name), value, problem, fix)

    def _missing(self, name: str, default: object, fix: str) -> object:
        if default is MISSING:
            self._fail(name, MISSING, "required key is missing", fix)
            return None
        return default

    def string(self, name: str, default: object = MISSING, *, choices: Optional[Iterable[str]] = None,
               dns_label: bool = False, max_length: int = 63, fix: str = "set it to a string") -> Any:
        self._declare(name, {"type": "string", **({"enum": list(choices)} if choices is not None else {}),
                             **({"pattern": DNS_LABEL.pattern, "maxLength": max_length} if dns_label else {})})
        value = self.raw(name)
        if value is MISSING:
            return self._missing(name, default, fix)
        if is_number(value):
            self._fail(name, value, f"expected a string, got {_type_name(value)}",
                       f'quote it so YAML keeps it as written, e.g. "{value}"')
            return None
        if not isinstance(value, str) or not value.strip():
            self._fail(name, value, f"expected a non-empty string, got {_type_name(value)}", fix)
            return None
        if choices is not None:
            options = list(choices)
            if value not in options:
                self._fail(name, value, f"must be one of {', '.join(options)}",
                           f"{did_you_mean(value, options)} (allowed: {', '.join(options)})"
                           .replace("remove it (", "use one of the allowed values ("))
                return None
        if dns_label and (len(value) > max_length or not DNS_LABEL.fullmatch(value)):
            self._fail(name, value, "is not a DNS-1123 label" + (f" of at most {max_length} characters"
                                                                 if len(value) > max_length else ""),
                       DNS_LABEL_FIX.format(limit=max_length))
            return None
        return value

    def boolean(self, name: str, default: object = MISSING) -> Any:
        self._declare(name, {"type": "boolean"})
        value = self.raw(name)
        if value is MISSING:
            return self._missing(name, default, "set it to true or false")
        if not isinstance(value, bool):
            self._fail(name, value, f"expected true or false, got {_type_name(value)}", "set it to true or false")
            return None
        return value

    def number(self, name: str, default: object = MISSING, *, minimum: Optional[float] = None,
               allow_unlimited: bool = False, fix: Optional[str] = None) -> Any:
        bounded = {"type": "number", **({"minimum": minimum} if minimum is not None else {})}
        self._declare(name, {"anyOf": [{"const": -1}, bounded]} if allow_unlimited else bounded)
        value = self.raw(name)
        bounds = _bounds_text(minimum, allow_unlimited)
        fix = fix or f"set it to a number {bounds}"
        if value is MISSING:
            return self._missing(name, default, fix)
        if not is_number(value):
            self._fail(name, value, f"expected a number of at most {LARGEST_NUMBER:g}, got {_type_name(value)}", fix)
            return None
        if allow_unlimited and value == -1:
            return value
        if minimum is not None and value < minimum:
            self._fail(name, value, f"must be {bounds}", fix)
            return None
        return value

    def integer(self, name: str, default: object = MISSING, *, minimum: Optional[int] = None,
                maximum: Optional[int] = None, fix: Optional[str] = None) -> Any:
        self._declare(name, {"type": "integer", **({"minimum": minimum} if minimum is not None else {}),
                             **({"maximum": maximum} if maximum is not None else {})})
        value = self.raw(name)
        bounds = _int_bounds_text(minimum, maximum)
        fix = fix or f"set it to a whole number {bounds}"
        if value is MISSING:
            return self._missing(name, default, fix)
        if isinstance(value, float) and value.is_integer() and math.isfinite(value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or abs(value) > LARGEST_NUMBER:
            self._fail(name, value, f"expected a whole number of at most {LARGEST_NUMBER:g}, got {_type_name(value)}",
                       fix)
            return None
        if (minimum is not None and value < minimum) or (maximum is not None and value > maximum):
            self._fail(name, value, f"must be {bounds}", fix)
            return None
        return value

    def string_map(self, name: str, default: object = MISSING) -> Any:
        self._declare(name, {"type": "object", "additionalProperties": {"type": ["string", "number"]}})
        value = self.raw(name)
        fix = "write it as a map of string keys to string values"
        if value is MISSING:
            return self._missing(name, default, fix)
        if not isinstance(value, dict):
            self._fail(name, value, f"expected a map, got {_type_name(value)}", fix)
            return None
        result: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, (str, int, float)) or isinstance(item, bool):
                self.reader.fail(join(self.key(name), str(key)), item,
                                 f"expected a string value, got {_type_name(item)}", "quote the value as a string")
                return None
            result[key] = str(item)
        return result

    def string_list(self, name: str, default: object = MISSING, *, non_empty: bool = False) -> Any:
        self._declare(name, {"type": "array", "items": {"type": "string", "minLength": 1},
                             **({"minItems": 1} if non_empty else {})})
        value = self.raw(name)
        fix = "write it as a list of strings, e.g. [a, b]"
        if value is MISSING:
            return self._missing(name, default, fix)
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            self._fail(name, value, f"expected a list of strings, got {_type_name(value)}", fix)
            return None
        if non_empty and not value:
            self._fail(name, value, "must not be empty", "list at least one value")
            return None
        return tuple(value)

    def mapping(self, name: str, default: object = MISSING) -> Any:
        self._declare(name, {"type": "object"})
        value = self.raw(name)
        if value is MISSING:
            return self._missing(name, default, "write it as a YAML map")
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            self._fail(name, value, f"expected a map with string keys, got {_type_name(value)}", "write it as a YAML map")
            return None
        return value

    def items(self, name: str, *, required: bool = False) -> list[tuple[str, object]]:
        """The entries of a list key, each with its indexed path (``teams[0]``)."""
        if self.reader.trace is not None:
            self.reader.trace.lists.add(self.key(name))
        value = self.raw(name)
        if value is MISSING:
            if required:
                self._fail(name, MISSING, "required key is missing", "list at least one entry")
            return []
        if not isinstance(value, list):
            self._fail(name, value, f"expected a list, got {_type_name(value)}", "write it as a YAML list (- entries)")
            return []
        return [(f"{self.key(name)}[{index}]", item) for index, item in enumerate(value)]

    def child(self, name: str, fields: Iterable[str]) -> Section:
        return Section(self.reader, self.key(name), self.raw(name), tuple(fields))


def _type_name(value: object) -> str:
    if value is MISSING:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({value!r})"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value!r})" if len(value) <= 40 else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a map"
    return type(value).__name__


def _bounds_text(minimum: Optional[float], allow_unlimited: bool) -> str:
    parts = []
    if allow_unlimited:
        parts.append("-1 (unlimited)")
    if minimum is not None:
        parts.append(f">= {minimum:g}")
    return " or ".join(parts) if parts else "(any finite number)"


def _int_bounds_text(minimum: Optional[int], maximum: Optional[int]) -> str:
    if minimum is not None and maximum is not None:
        return f"between {minimum} and {maximum}"
    if minimum is not None:
        return f">= {minimum}"
    if maximum is not None:
        return f"<= {maximum}"
    return ""


def pinned_version(section: Section, name: str, value: Optional[str], *, prefix: str) -> Optional[str]:
    """An exact chart version (``config.vocabulary.EXACT_VERSION``) with the chart's own prefix (``v`` or none)."""
    if value is None:
        return None
    example = f"{prefix}1.2.3"
    if value.strip().lower() in ("latest", "stable", "*"):
        section._fail(name, value, "chart versions must be pinned", f"set an exact version such as {example}")
        return None
    bare = value[1:] if value.startswith("v") else value
    if not EXACT_VERSION.fullmatch(value):
        section._fail(name, value, "is not an exact version (no ranges or wildcards)",
                      f"set an exact version such as {example}")
        return None
    if prefix and not value.startswith(prefix):
        section._fail(name, value, f"this chart's versions start with '{prefix}'", f"write it as {prefix}{value}")
        return None
    if not prefix and value.startswith("v"):
        section._fail(name, value, "this chart's versions have no leading 'v'", f"write it as {bare}")
        return None
    return value
