"""How a stack-config key is declared: once, with everything the program and its users need to know.

A ``Key`` is one key of a map: its name, its type (config/key_types.py: what a value must be), its
default, a one-line description and, for the reference only, an example and details. A ``Block`` is
the keys one map may hold. From these definitions alone config.reader reads and checks each value and
refuses unknown keys, config.schema writes the JSON Schema and tools.docs.config_reference the config
reference. Adding a key is one ``Key`` in its block plus the line of the reader that uses its value;
rules that tie several keys together stay hand-written in the readers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Union

from config.errors import MISSING
from config.image_registries import RegistryList
from config.key_collections import AnyMap, StringList, StringMap
from config.key_types import Boolean, Integer, Number, Quantity, Text
from config.version_types import KubernetesVersion, Version

# The default of a key the config must set.
REQUIRED = MISSING


@dataclass(frozen=True)
class Derived:
    """A default the reader works out from other settings; ``text`` says how, for the reference."""

    text: str


@dataclass(frozen=True)
class Block:
    """The keys one map of the stack config may hold.

    A block with a ``title`` gets a section of its own in the reference, with ``intro`` before its
    table and ``notes`` after it; the keys of an untitled block are listed in their parent's table.
    ``retired`` keys are refused with what replaced them rather than as unknown; ``conditions`` tie
    which keys may or must be present to the value of another key of the block.
    """

    keys: tuple[Key, ...]
    title: str = ""
    intro: str = ""
    notes: str = ""
    retired: tuple[Retired, ...] = ()
    conditions: tuple[Condition, ...] = ()
    # An empty block reads as one left out (an opt-in block whose Pulumi.yaml default is {}): its required keys are
    # required only once it holds any.
    optional_when_empty: bool = False

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(key.name for key in self.keys)

    def __getitem__(self, name: str) -> Key:
        for key in self.keys:
            if key.name == name:
                return key
        raise KeyError(f"no key {name!r} is declared in this block (declared: {', '.join(self.names)})")

    def schema(self) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "object", "properties": {key.name: key.schema() for key in self.keys},
                                  "additionalProperties": False}
        required = [key.name for key in self.keys if key.default is REQUIRED]
        rules = [condition.schema(self[condition.when].default) for condition in self.conditions]
        if required and self.optional_when_empty:
            rules.append({"if": {"minProperties": 1}, "then": {"required": required}})
        elif required:
            schema["required"] = required
        if rules:
            schema["allOf"] = rules
        return schema

    def shown(self) -> str:
        return "map"


@dataclass(frozen=True)
class Condition:
    """While key ``when`` holds one of ``values`` (a key left out counts as its default), the keys in
    ``forbidden`` must be left out and the paths in ``required`` (``external.releaseLabel``) set.

    Keys in ``pinned`` may only hold the value given. ``problem`` and ``fix`` may name the key at fault
    as ``{name}`` and the deciding value as ``{value}``.
    """

    when: str
    values: tuple[Any, ...]
    problem: str
    fix: str
    forbidden: tuple[str, ...] = ()
    required: tuple[str, ...] = ()
    # (key, value): the key may be left out, or set to this value only.
    pinned: tuple[tuple[str, Any], ...] = ()

    def holds(self, value: object) -> bool:
        return any(value == choice and type(value) is type(choice) for choice in self.values)

    def schema(self, default: Any) -> dict[str, Any]:
        when: dict[str, Any] = {"properties": {self.when: {"enum": list(self.values)}}}
        if not self.holds(default):
            when["required"] = [self.when]
        then: dict[str, Any] = {"properties": {**{name: False for name in self.forbidden},
                                               **{name: {"const": value} for name, value in self.pinned}}}
        for path in self.required:
            node = then
            for step in path.split("."):
                node.setdefault("required", []).append(step)
                node = node.setdefault("properties", {}).setdefault(step, {})
        return {"if": when, "then": then}


@dataclass(frozen=True)
class ListOf:
    """A list of maps, each holding the keys of ``block``; ``empty`` is the problem and fix of an
    empty list, when one is refused."""

    block: Block
    empty: Optional[tuple[str, str]] = None

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.block.schema(), **({"minItems": 1} if self.empty else {})}

    def shown(self) -> str:
        return "list of maps"


KeyType = Union[Text, Version, KubernetesVersion, Boolean, Number, Integer, Quantity, StringMap, StringList, AnyMap,
                RegistryList, Block, ListOf]


@dataclass(frozen=True)
class Key:
    """One key: ``default`` is a value, ``REQUIRED``, or ``Derived`` (worked out by the reader, which passes it).

    ``fix`` replaces the type's own advice when the key is missing or of the wrong type.
    """

    name: str
    type: KeyType
    default: Any
    description: str
    example: Optional[str] = None
    details: str = ""
    default_note: str = ""
    fix: Optional[str] = None

    def schema(self) -> dict[str, Any]:
        return {"description": self.description, **self.type.schema()}


@dataclass(frozen=True)
class Retired:
    """A key an older release read: refused with what replaced it."""

    name: str
    problem: str
    fix: str

