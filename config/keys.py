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
from config.key_types import (
    AnyMap, Boolean, Integer, KubernetesVersion, Number, Quantity, StringList, StringMap, Text, Version,
)

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
    ``retired`` keys are refused with what replaced them rather than as unknown.
    """

    keys: tuple[Key, ...]
    title: str = ""
    intro: str = ""
    notes: str = ""
    retired: tuple[Retired, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(key.name for key in self.keys)

    def __getitem__(self, name: str) -> Key:
        for key in self.keys:
            if key.name == name:
                return key
        raise KeyError(f"no key {name!r} is declared in this block (declared: {', '.join(self.names)})")

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": {key.name: key.schema() for key in self.keys},
                "additionalProperties": False}

    def shown(self) -> str:
        return "map"


@dataclass(frozen=True)
class ListOf:
    """A list of maps, each holding the keys of ``block``."""

    block: Block

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.block.schema()}

    def shown(self) -> str:
        return "list of maps"


KeyType = Union[Text, Version, KubernetesVersion, Boolean, Number, Integer, Quantity, StringMap, StringList, AnyMap,
                Block, ListOf]


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

