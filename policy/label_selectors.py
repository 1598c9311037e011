"""Kubernetes label selectors (``metav1.LabelSelector``), validated and evaluated as the API server does.

The project's one evaluator: the policy pack's admission rule (``rules_admission.py``), the deployability
check's NetworkPolicy model (``tools/deployability/network_policy.py``) and the tests' admission
simulator all call it. It lives in policy/ because the Pulumi CLI runs the pack from there with
nothing else importable, so it imports nothing itself (and is not named ``selectors``, which
would shadow the standard library's module when policy/ is on ``sys.path``).

A selector is a mapping with ``matchLabels`` (key -> value) and ``matchExpressions`` (key,
operator, values); an object is selected when every requirement holds, so the empty selector
selects everything. Whether an *absent* selector means empty depends on the field holding it,
so callers decide that.

A selector the API server refuses raises :class:`InvalidSelector` rather than answering: the
object carrying it never exists on a cluster, so neither "selects" nor "does not select" would
be true. Raised for:

- a ``matchLabels`` value that is not a string: the API refuses a YAML ``1`` or ``true`` (it does
  not convert them) and would read a null as ``""``, which is never what was meant either;
- an operator other than exactly ``In``, ``NotIn``, ``Exists`` or ``DoesNotExist`` (``in`` too);
- ``In`` / ``NotIn`` without values, ``Exists`` / ``DoesNotExist`` with values;
- a key that is not a non-empty string, values that are not a list of strings, ``matchLabels``
  that is not a mapping, ``matchExpressions`` that is not a list of mappings.

The syntax of label keys and values (length, characters) is not checked here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

SET_OPERATORS = ("In", "NotIn")  # these need values
EXISTENCE_OPERATORS = ("Exists", "DoesNotExist")  # these take none
OPERATORS = SET_OPERATORS + EXISTENCE_OPERATORS


class InvalidSelector(ValueError):
    """The API server would refuse this selector; the message names the field and why."""


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator == "In":
            return present and labels[self.key] in self.values
        if self.operator == "NotIn":
            return not present or labels[self.key] not in self.values
        if self.operator == "Exists":
            return present
        return not present  # DoesNotExist


def _is_string_list(values: Any) -> bool:
    return isinstance(values, Sequence) and not isinstance(values, str) and all(
        isinstance(value, str) for value in values)


def requirements(selector: Any) -> tuple[Requirement, ...]:
    """The selector's requirements, a ``matchLabels`` entry as ``In`` with its one value.

    Raises :class:`InvalidSelector` for a selector the API server refuses (see the module)."""
    if not isinstance(selector, Mapping):
        raise InvalidSelector(f"the selector is {selector!r}, not a mapping")
    found = []
    match_labels = selector.get("matchLabels")
    if match_labels is not None:
        if not isinstance(match_labels, Mapping):
            raise InvalidSelector(f"matchLabels is {match_labels!r}, not a mapping")
        for key, value in match_labels.items():
            if not isinstance(key, str) or not key:
                raise InvalidSelector(f"matchLabels has the key {key!r}: a label key is a non-empty string")
            if not isinstance(value, str):
                raise InvalidSelector(f"matchLabels.{key} is {value!r}, not a string: label values are strings "
                                      "(quote it in YAML)")
            found.append(Requirement(key, "In", (value,)))
    expressions = selector.get("matchExpressions")
    if expressions is not None:
        if isinstance(expressions, (str, Mapping)) or not isinstance(expressions, Sequence):
            raise InvalidSelector(f"matchExpressions is {expressions!r}, not a list")
        for index, expression in enumerate(expressions):
            found.append(_requirement(expression, f"matchExpressions[{index}]"))
    return tuple(found)


def _requirement(expression: Any, where: str) -> Requirement:
    if not isinstance(expression, Mapping):
        raise InvalidSelector(f"{where} is {expression!r}, not a mapping")
    key, operator, values = expression.get("key"), expression.get("operator"), expression.get("values")
    if not isinstance(key, str) or not key:
        raise InvalidSelector(f"{where}.key is {key!r}: a label key is a non-empty string")
    if operator not in OPERATORS:
        raise InvalidSelector(f"{where}.operator is {operator!r}, not one of {', '.join(OPERATORS)} "
                              "(operators are case-sensitive)")
    values = [] if values is None else values
    if not _is_string_list(values):
        raise InvalidSelector(f"{where}.values is {values!r}, not a list of strings")
    if operator in SET_OPERATORS and not values:
        raise InvalidSelector(f"{where}: operator {operator} needs at least one value")
    if operator in EXISTENCE_OPERATORS and values:
        raise InvalidSelector(f"{where}: operator {operator} takes no values, it has {list(values)!r}")
    return Requirement(key, operator, tuple(values))


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Whether the selector selects an object with exactly these labels.

    Raises :class:`InvalidSelector` when the API server would refuse the selector."""
    return all(requirement.matches(labels) for requirement in requirements(selector))
