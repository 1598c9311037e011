"""cel-python program runs, each made once per worker for the values it can read (tests/tenant_sim.py ``Admission``).

cel-python's tree-walking interpreter takes most of the admission tests' time, and they ask it the same question
many times: the CREATE and the UPDATE of one object, a pod judged again with one label changed, Hypothesis'
examples differing in fields most rules never read, the same size rule in every team's policy. A CEL expression
reaches its activation only through the activation's names followed by field selections, so its result is a
function of the values at those paths. A run is therefore keyed by the expression and, for each path its text
names, the plain value found there; where the value stops early (a field absent, a value that is no map) the key
holds the value it stopped at and where, and a path the pattern cannot follow past an index, an optional selection
or a method call ends before it, so a key holds more of the activation than the run reads, never less. Names in
string literals only add paths. Runs that raise are not kept: each is made again and raises again.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Callable

import celpy


@lru_cache(maxsize=None)
def _pattern(names: tuple[str, ...]) -> re.Pattern:
    # A selection must take its whole identifier (no backtracking to a prefix) and is not a method call.
    roots = "|".join(re.escape(name) for name in names)
    return re.compile(rf"\b({roots})\b((?:\s*\.\s*[A-Za-z_][A-Za-z0-9_]*(?![A-Za-z0-9_]|\s*\())*)")


@lru_cache(maxsize=None)
def paths(expression: str, names: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The activation paths ``expression`` names, each as (name, field, field, ...)."""
    found = {(match.group(1), *(part.strip() for part in match.group(2).split(".")[1:]))
             for match in _pattern(names).finditer(expression)}
    return tuple(sorted(found))


def _digest(value) -> bytes:
    return hashlib.blake2b(repr(value).encode(), digest_size=16).digest()


class Inputs:
    """One review's activation: its plain values, which runs are keyed by, converted to CEL once (a flood pod's
    conversion takes seconds, and a policy has dozens of expressions)."""

    def __init__(self, **plain):
        self.plain = plain
        self.activation = {name: celpy.json_to_cel(value) for name, value in plain.items()}
        self._names = tuple(sorted(plain))
        self._digests: dict = {}

    def with_variable(self, name: str, value) -> None:
        """Add a policy variable's plain value, as the API server makes it visible to the expressions after it."""
        variables = {**self.plain["variables"], name: value}
        self.plain = {**self.plain, "variables": variables}
        self.activation = {**self.activation, "variables": celpy.json_to_cel(variables)}
        self._digests = {path: digest for path, digest in self._digests.items() if path[0] != "variables"}

    def _at(self, path: tuple[str, ...]) -> bytes:
        if path not in self._digests:
            value = self.plain[path[0]]
            for depth, field in enumerate(path[1:], start=1):
                if not isinstance(value, dict) or field not in value:
                    self._digests[path] = _digest(("stopped", depth, value))
                    break
                value = value[field]
            else:
                self._digests[path] = _digest(("found", value))
        return self._digests[path]

    def key(self, expression: str) -> tuple[str, bytes]:
        # The paths are the expression's own, in a fixed order: their digests alone tell the values apart.
        return expression, b"".join(self._at(path) for path in paths(expression, self._names))


_RUNS: dict = {}


def run(evaluate: Callable, expression: str, inputs: Inputs):
    """``evaluate(expression, inputs.activation)``, or the result of the same run made before."""
    key = inputs.key(expression)
    if key not in _RUNS:
        _RUNS[key] = evaluate(expression, inputs.activation)
    return _RUNS[key]
