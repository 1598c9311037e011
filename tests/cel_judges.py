"""How the two CEL implementations judging the admission tests' reviews are held together (tests/tenant_sim.py
``Admission.review``): the Kubernetes CEL functions cel-python lacks, added by hand; which reviews CEL C++ judges
alone (the size rules' floods); and the check that CEL C++ (tests/reference_cel.py) reached cel-python's verdict."""

from __future__ import annotations

import json
from typing import Optional

from celpy import celtypes

from config.key_types import quantity_value
from tests.reference_cel import Verdict, unordered_lists


# The Kubernetes CEL string library (k8s.io/apiserver/pkg/cel/library, cel-go ext.Strings) as far as the
# policies use it; cel-python has none of it.
def _substring(text, start, end=None):
    text, start = str(text), int(start)
    end = len(text) if end is None else int(end)
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"substring({start}, {end}) out of range for a string of length {len(text)}")
    return celtypes.StringType(text[start:end])


def _join(items, separator=""):
    return celtypes.StringType(str(separator).join(str(item) for item in items))


def _sum(items):
    return celtypes.IntType(sum(int(item) for item in items))


class _Quantity(float):
    """A value of Kubernetes' quantity library (k8s.io/apiserver pkg/cel/library/quantity.go), as its base units."""


def _quantity(text):
    return _Quantity(quantity_value(str(text)))


def _is_greater_than(quantity, other):
    return celtypes.BoolType(float(quantity) > float(other))


# Kubernetes' lists library's sum() (k8s.io/apiserver pkg/cel/library/lists.go), over the integers the policies add,
# and its quantity library's quantity() and isGreaterThan(), with which the in-vCluster limit defaults compare a
# request with the host's default limit (components/virtual_defaults.py).
CEL_FUNCTIONS = {"substring": _substring, "join": _join, "sum": _sum, "quantity": _quantity,
                 "isGreaterThan": _is_greater_than}


# A review whose objects (the new and the old, as JSON) are larger than this is judged by CEL C++ alone when CEL C++
# evaluates every expression of it without an error. Such objects are the floods of the size rules' tests, whose
# reviews took most of the suite's time in cel-python's interpreter (a flood pod's review takes it seconds; CEL C++,
# held to cel-go's conformance tests, milliseconds); the same expressions are judged by both on every honest pod,
# which is smaller. A review with an error anywhere is judged by both, as every smaller one is.
CROSS_CHECKED_BYTES = 16 * 1024


def judged_by_reference_alone(verdict: Verdict, pod: Optional[dict], old: Optional[dict]) -> bool:
    return (verdict.match_error is None and all(kind == "value" for kind, _ in verdict.variables.values())
            and all(kind == "message" for kind, _ in verdict.refusals)
            and len(json.dumps([pod, old], separators=(",", ":"))) > CROSS_CHECKED_BYTES)


def agree(verdict: Verdict, activation: Optional[dict], messages: list[str]) -> None:
    """CEL C++ (tests/reference_cel.py) reached what cel-python did: the match, each variable, each refusal."""
    assert verdict.match_error is None, f"CEL C++: a match condition failed: {verdict.match_error}"
    assert verdict.matched == (activation is not None), f"CEL C++ matched: {verdict.matched}"
    if activation is None:
        return
    python_variables = plain_value(activation["variables"])
    for name, (kind, value) in verdict.variables.items():
        assert kind == "value", f"CEL C++: variable {name} failed: {value}"
        python = python_variables[name]
        assert value == python, f"variable {name}: CEL C++ {value!r}, cel-python {python!r}"
    refusals = [unordered_lists(value) if kind == "message" else f"error: {value}" for kind, value in verdict.refusals]
    python_refusals = [unordered_lists(message) for message in messages]
    assert refusals == python_refusals, f"refusals: CEL C++ {refusals}, cel-python {python_refusals}"


def plain_value(value):
    """A cel-python value as plain Python data (JSON's kinds; what CEL C++ answers with)."""
    if isinstance(value, (celtypes.BoolType, bool)):
        return bool(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, (celtypes.ListType, list, tuple)):
        return [plain_value(item) for item in value]
    if isinstance(value, (celtypes.MapType, dict)):
        return {str(key): plain_value(item) for key, item in value.items()}
    return value
