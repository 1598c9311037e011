"""The key types holding several values: maps of labels or quantities, lists of strings, and raw maps passed on
unread. Each checks every value as config.key_types' single-value types do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Optional

from config.key_types import Check, Invalid, Quantity, failed_check, string_schema, type_name


@dataclass(frozen=True)
class StringMap:
    """Labels and the like: string keys to string values (numbers are written as strings), each key and value passing
    its checks (a service's own limits on them), at most ``max_entries`` of them."""

    key_checks: tuple[Check, ...] = ()
    value_checks: tuple[Check, ...] = ()
    max_entries: Optional[int] = None
    fix: ClassVar[str] = "write it as a map of string keys to string values"

    def parse(self, value: object, fix: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise Invalid(f"expected a map, got {type_name(value)}", fix)
        if self.max_entries is not None and len(value) > self.max_entries:
            raise Invalid(f"has {len(value)} entries, more than {self.max_entries}", "keep the ones that matter")
        result: dict[str, str] = {}
        for key, item in value.items():
            if not isinstance(key, str) or not isinstance(item, (str, int, float)) or isinstance(item, bool):
                raise Invalid(f"expected a string value, got {type_name(item)}", "quote the value as a string",
                              entry=str(key), value=item)
            result[key] = str(item)
            for text, checks, what in ((key, self.key_checks, "key"), (result[key], self.value_checks, "value")):
                failed = failed_check(checks, text)
                if failed is not None:
                    raise Invalid(f"the {what} {text!r} {failed.problem}", failed.fix, entry=key, value=item)
        return result

    def schema(self) -> dict[str, Any]:
        values: dict[str, Any] = {"type": ["string", "number"]}
        if self.value_checks:
            values["allOf"] = [check.schema() for check in self.value_checks]
        schema: dict[str, Any] = {"type": "object", "additionalProperties": values}
        if self.key_checks:
            schema["propertyNames"] = {"allOf": [check.schema() for check in self.key_checks]}
        if self.max_entries is not None:
            schema["maxProperties"] = self.max_entries
        return schema

    def shown(self) -> str:
        return "map string → string"


@dataclass(frozen=True)
class QuantityMap:
    """A container's ``requests`` or ``limits``: each of the resource ``names`` it may set to a quantity."""

    names: tuple[str, ...]
    fix: ClassVar[str] = "write it as a map such as {cpu: 500m, memory: 1Gi}"

    def parse(self, value: object, fix: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise Invalid(f"expected a map, got {type_name(value)}", fix)
        result: dict[str, str] = {}
        for key, item in value.items():
            if key not in self.names:
                raise Invalid(f"is not a resource it can set ({', '.join(self.names)})",
                              f"use {', '.join(self.names)}", entry=str(key), value=item)
            try:
                result[key] = Quantity().parse(item, Quantity.fix)
            except Invalid as invalid:
                raise Invalid(invalid.problem, invalid.fix, entry=key, value=item) from None
        return result

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "propertyNames": {"enum": list(self.names)},
                "additionalProperties": Quantity().schema()}

    def shown(self) -> str:
        return f"map of {', '.join(f'`{name}`' for name in self.names)} → quantity"


@dataclass(frozen=True)
class StringList:
    """A list of non-empty strings, each passing ``checks``."""

    non_empty: bool = False
    form: str = "strings"
    checks: tuple[Check, ...] = ()
    # Each value at most once, where a repeat is an error upstream rather than a no-op.
    unique: bool = False
    fix: ClassVar[str] = "write it as a list of strings, e.g. [a, b]"

    def parse(self, value: object, fix: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
            raise Invalid(f"expected a list of strings, got {type_name(value)}", fix)
        if self.non_empty and not value:
            raise Invalid("must not be empty", "list at least one value")
        for item in value:
            failed = failed_check(self.checks, item)
            if failed is not None:
                raise Invalid(f"{item!r} {failed.problem}", failed.fix)
        repeated = sorted({item for item in value if value.count(item) > 1})
        if self.unique and repeated:
            raise Invalid(f"lists {', '.join(map(repr, repeated))} more than once", "list each value once")
        return tuple(value)

    def schema(self) -> dict[str, Any]:
        items = string_schema(*(c.schema() for c in self.checks)) if self.checks else {"type": "string", "minLength": 1}
        return {"type": "array", "items": items, **({"minItems": 1} if self.non_empty else {}),
                **({"uniqueItems": True} if self.unique else {})}

    def shown(self) -> str:
        each_once = ", each once" if self.unique else ""
        return ("non-empty " if self.non_empty else "") + f"list of {self.form}{each_once}"


@dataclass(frozen=True)
class AnyMap:
    """A map the program passes on unread (raw Helm values): only its keys must be strings."""

    fix: ClassVar[str] = "write it as a YAML map"

    def parse(self, value: object, fix: str) -> dict:
        if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
            raise Invalid(f"expected a map with string keys, got {type_name(value)}", fix)
        return value

    def schema(self) -> dict[str, Any]:
        return {"type": "object"}

    def shown(self) -> str:
        return "map"

