"""Path-aware reading of raw stack config through its key definitions (config/keys.py).

A ``Section`` reads one mapping of the stack config: the ``Block`` declared for it says which keys
it may hold, their types and defaults. Every wrong type, out-of-range value or unknown key becomes
a ``ConfigIssue`` that names the full key path (``teams[1].resources.gpu.quota``), and reading goes
on so the operator sees every problem at once.
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

from config.errors import MISSING, ConfigIssue
from config.key_types import Invalid, did_you_mean, type_name
from config.keys import REQUIRED, Block, Derived, ListOf
from config.vocabulary import PROJECT_PREFIX


class Reader:
    """Collects the issues found while reading one stack's config."""

    def __init__(self) -> None:
        self.issues: list[ConfigIssue] = []

    def fail(self, key: str, value: object, problem: str, fix: str) -> None:
        if value is MISSING and any(issue.value in (MISSING, None) and within(key, issue.key) for issue in self.issues):
            return  # a missing or null key (and what it would hold) is one problem, whichever rule notices it first
        self.issues.append(ConfigIssue(key, value, problem, fix))

    def section(self, path: str, value: object, block: Block) -> Section:
        return Section(self, path, value, block)


def within(key: str, outer: str) -> bool:
    """``key`` is ``outer`` or a key under it (``outer.name``, ``outer[i]``)."""
    return key == outer or key.startswith(outer + ".") or key.startswith(outer + "[")


# A null is refused, as the stack files' JSON Schema refuses it (schema/stack-config.schema.json), rather than read as
# "not set": a key written with nothing after it is more often a value forgotten than a default meant.
NULL_PROBLEM = "is empty (YAML null: {written} is written with nothing after it)"


def _null_fix(key: str, required: bool = False) -> str:
    removal = f"pulumi config rm --path '{PROJECT_PREFIX}{key}'"
    if key.endswith("]"):
        return f"write the item's keys under its dash, or remove the item ({removal})"
    if required:
        return "give it a value: the key is required"
    return f"give it a value, or remove the key to take its default ({removal})"


def _paths(block: Block, depth: int = 4) -> Iterator[tuple[tuple[str, ...], object]]:
    """Every key path under ``block`` (a list's entries as ``[<n>]``) with the key's type, nearest first."""
    nested = []
    for key in block.keys:
        yield (key.name,), key.type
        if isinstance(key.type, Block):
            nested.append(((key.name,), key.type))
        elif isinstance(key.type, ListOf):
            nested.append(((key.name, "[<n>]"), key.type.block))
    if depth > 1:
        for prefix, child in nested:
            for path, key_type in _paths(child, depth - 1):
                yield prefix + path, key_type


def _fits(key_type: object, value: object) -> bool:
    """Whether ``value`` has the shape of a key of ``key_type``: a map for a section, a list for a list of them."""
    if isinstance(key_type, Block):
        return isinstance(value, dict)
    if isinstance(key_type, ListOf):
        return isinstance(value, list)
    return True  # a value's own type check, once moved, says whether it fits


def _spelled(steps: tuple[str, ...]) -> str:
    return "".join(step if step.startswith("[") or not index else f".{step}" for index, step in enumerate(steps))


def join(path: str, name: str) -> str:
    """``path.name``, or ``path[i]`` for a list index."""
    return f"{path}{name}" if name.startswith("[") else f"{path}.{name}" if path else name


# ``Section.read``'s default: the one the key's definition declares.
DECLARED = object()


class Section:
    """One mapping of the stack config, at ``path``, holding the keys of ``block``."""

    def __init__(self, reader: Reader, path: str, value: object, block: Block, parent: Optional[Section] = None):
        self.reader = reader
        self.path = path
        self.block = block
        self.parent = parent
        self.present = value is not MISSING and value is not None
        self.values: dict[str, Any] = {}
        # Keys reported as unknown: a typo of a known key, whose default must not raise follow-on issues.
        self.unknown: list[str] = []
        if not self.present:
            return
        if not isinstance(value, dict):
            reader.fail(path, value, f"expected a map with keys {', '.join(block.names)}, got {type_name(value)}",
                        "write it as a YAML map (key: value lines)")
            return
        for retired in block.retired:
            if retired.name in value:
                reader.fail(join(path, retired.name), value[retired.name], retired.problem, retired.fix)
        retired_names = {retired.name for retired in block.retired}
        for name, item in value.items():
            if name in retired_names:
                continue
            if not isinstance(name, str) or name not in block.names:
                reader.fail(join(path, str(name)), item, "unknown key", self._advice(str(name), item))
                self.unknown.append(str(name))
            elif item is None:
                reader.fail(join(path, name), None, NULL_PROBLEM.format(written="the key"),
                            _null_fix(join(path, name), required=block[name].default is REQUIRED))
            else:
                self.values[name] = item
        self._check_conditions()

    def _check_conditions(self) -> None:
        """The block's conditions (config.keys.Condition) on the keys as written."""
        for condition in self.block.conditions:
            decided = self.raw(condition.when)
            if decided is MISSING:
                decided = self.block[condition.when].default
            if not condition.holds(decided):
                continue
            for name, pinned in condition.pinned:
                if self.has(name) and self.raw(name) != pinned:
                    self.fail(name, self.raw(name), condition.problem.format(name=name, value=decided),
                              condition.fix.format(name=name, value=decided))
            for name in condition.forbidden:
                if self.has(name):
                    self.fail(name, self.raw(name), condition.problem.format(name=name, value=decided),
                              condition.fix.format(name=name, value=decided))
            for path in condition.required:
                node: object = self.values
                for step in path.split("."):
                    if not isinstance(node, dict):
                        break  # a map written as something else: its own type error says so
                    node = node.get(step)
                    if node is None:
                        self.reader.fail(join(self.path, path), MISSING,
                                         condition.problem.format(name=path, value=decided),
                                         condition.fix.format(name=path, value=decided))
                        break

    def _advice(self, name: str, value: object) -> str:
        """A close spelling of a key of this map, else the place the key belongs, if it exists elsewhere and takes a
        value of this shape (``teams: true`` under another section is not the list of teams misplaced)."""
        advice = did_you_mean(name, self.block.names)
        if advice != "remove it":
            return advice
        scope: Optional[Section] = self
        while scope is not None:
            found = sorted((path for path, key_type in _paths(scope.block)
                            if path[-1] == name and _fits(key_type, value)), key=len)
            nearest = [path for path in found if len(path) == len(found[0])] if found else []
            if len(nearest) == 1:
                where = join(scope.path, _spelled(nearest[0]))
                return f"did you mean {where}? Move it there"
            if nearest:
                return "it belongs in one of " + ", ".join(join(scope.path, _spelled(path)) for path in nearest)
            scope = scope.parent
        return advice

    def key(self, name: str) -> str:
        return join(self.path, name)

    def raw(self, name: str) -> object:
        value = self.values.get(name, MISSING)
        return MISSING if value is None else value

    def has(self, name: str) -> bool:
        return self.raw(name) is not MISSING

    def fail(self, name: str, value: object, problem: str, fix: str) -> None:
        self.reader.fail(self.key(name), value, problem, fix)

    def read(self, name: str, default: object = DECLARED) -> Any:
        """The value of key ``name``, checked against its definition; None once a problem is reported.

        ``default`` replaces the declared default: a ``Derived`` one, or a value inherited from
        another block (a team's vcluster block from the stack's).
        """
        key = self.block[name]
        assert not isinstance(key.type, (Block, ListOf)), f"{self.key(name)} is a map or list: use child or entries"
        if default is DECLARED:
            if isinstance(key.default, Derived):
                raise TypeError(f"{self.key(name)}: its default is derived ({key.default.text}); the reader passes it")
            default = key.default
        fix = key.fix or key.type.fix
        value = self.raw(name)
        if value is MISSING:
            if default is REQUIRED:
                self.fail(name, MISSING, "required key is missing", fix)
                return None
            return default
        try:
            return key.type.parse(value, fix)
        except Invalid as invalid:
            if invalid.entry is None:
                self.fail(name, value, invalid.problem, invalid.fix)
            else:
                self.reader.fail(join(self.key(name), invalid.entry), invalid.value, invalid.problem, invalid.fix)
            return None

    def child(self, name: str) -> Section:
        """The map under key ``name`` (absent: a section with nothing set)."""
        block = self.block[name].type
        assert isinstance(block, Block), f"{self.key(name)} is not declared as a map"
        return Section(self.reader, self.key(name), self.raw(name), block, self)

    def entries(self, name: str) -> Iterator[Section]:
        """Each map of the list under key ``name``, at its indexed path (``teams[0]``)."""
        key = self.block[name]
        assert isinstance(key.type, ListOf), f"{self.key(name)} is not declared as a list of maps"
        value = self.raw(name)
        if value is MISSING:
            if key.default is REQUIRED:
                self.fail(name, MISSING, "required key is missing", "list at least one entry")
            return
        if not isinstance(value, list):
            self.fail(name, value, f"expected a list, got {type_name(value)}", "write it as a YAML list (- entries)")
            return
        if not value and key.type.empty is not None:
            self.fail(name, value, *key.type.empty)
        for index, item in enumerate(value):
            entry = f"{self.key(name)}[{index}]"
            if item is None:  # read as nothing rather than as an entry of defaults, whose rules would only add noise
                self.reader.fail(entry, None, NULL_PROBLEM.format(written="the item's dash"), _null_fix(entry))
            else:
                yield Section(self.reader, entry, item, key.type.block, self)
