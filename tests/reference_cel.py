"""A second CEL implementation for the admission tests: Google's CEL C++ (``cel-expr-python`` on PyPI).

tests/tenant_sim.py evaluates the policies with cel-python, a third-party implementation with its own gaps (the
Kubernetes string functions are added by hand, tests/cel_judges.py). The API server runs cel-go; CEL C++ is held to
the same conformance tests as cel-go, so every review a test makes is also judged here (tenant_sim
``Admission.review``), the way the API server judges a ValidatingAdmissionPolicy: match conditions, then the
variables in order (an expression using a variable that failed fails too), then each validation, an error counting
as a refusal (``failurePolicy: Fail``), its message from the messageExpression when that yields a non-blank string.
A match, variable or refusal that differs from cel-python's fails the test.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple, Optional

from cel_expr_python import cel

# What the policies see: the admission request's objects, the policy's variables, and an OIDC rule's user.
VARIABLES = {"object": cel.Type.DYN, "oldObject": cel.Type.DYN, "request": cel.Type.DYN, "params": cel.Type.DYN,
             "namespaceObject": cel.Type.DYN, "variables": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
             "user": cel.Type.DYN}


STRING, INT, STRINGS = cel.Type.STRING, cel.Type.INT, cel.Type.List(cel.Type.STRING)


def _substring(text: str, start: int, end: Optional[int] = None) -> str:
    end = len(text) if end is None else end
    if not 0 <= start <= end <= len(text):
        raise ValueError(f"substring({start}, {end}) is out of range for a string of {len(text)} characters")
    return text[start:end]


# The two functions of the CEL strings extension the policies use. cel-expr-python 0.1.3's own extension refuses
# an end equal to the string's size ('abc'.substring(0, 3)), which the extension's definition and cel-go allow: it
# would fail the device-list-name rule on an honest pod. Both are declared here instead, as the definition reads.
STRING_FUNCTIONS = [
    cel.FunctionDecl("substring", [
        cel.Overload("string_substring_int", return_type=STRING, parameters=[STRING, INT], is_member=True,
                     impl=_substring),
        cel.Overload("string_substring_int_int", return_type=STRING, parameters=[STRING, INT, INT], is_member=True,
                     impl=_substring)]),
    cel.FunctionDecl("join", [
        cel.Overload("list_join", return_type=STRING, parameters=[STRINGS], is_member=True,
                     impl=lambda items: "".join(items)),
        cel.Overload("list_join_string", return_type=STRING, parameters=[STRINGS, STRING], is_member=True,
                     impl=lambda items, separator: separator.join(items))]),
]


# Kubernetes' lists library (k8s.io/apiserver pkg/cel/library/lists.go): sum() over the integers the policies add.
LIST_FUNCTIONS = [
    cel.FunctionDecl("sum", [cel.Overload("list_sum_int", return_type=INT, parameters=[cel.Type.List(INT)],
                                          is_member=True, impl=sum)]),
]


class Verdict(NamedTuple):
    matched: bool
    match_error: Optional[str]
    # name -> ("value", plain value) or ("error", message)
    variables: dict
    # one per validation that did not pass: ("message", text) or ("error", message)
    refusals: list


class ReferenceCel:
    def __init__(self):
        self._env = cel.NewEnv(variables=VARIABLES, functions=STRING_FUNCTIONS + LIST_FUNCTIONS)
        self._compiled: dict = {}

    def evaluate(self, expression: str, data: dict[str, Any]) -> tuple[str, Any]:
        """("value", its plain value) or ("error", why): a compile error, or an evaluation stopped by CEL C++'s
        iteration budget (10,000 iterations of its comprehensions; the API server stops by cost instead, at
        1,000,000), fails the expression as the API server fails one past its limit: a refusal under
        failurePolicy Fail."""
        if expression not in self._compiled:
            try:
                self._compiled[expression] = self._env.compile(expression)
            except Exception as error:  # noqa: BLE001 (CEL C++ raises its own status errors)
                self._compiled[expression] = error
        compiled = self._compiled[expression]
        if isinstance(compiled, Exception):
            return "error", f"compilation failed: {compiled}"
        try:
            result = compiled.eval(data=data)
        except RuntimeError as error:  # CEL C++ raises a status it cannot turn into a value: its iteration budget
            return "error", str(error)
        if result.type() == cel.Type.ERROR:
            return "error", str(result.value())
        return "value", result.plain_value()

    def review(self, spec: dict, activation: dict) -> Verdict:
        """Judge ``activation`` (object, oldObject, request, or an OIDC rule's user) by the policy ``spec``'s CEL."""
        data = dict(activation)
        for condition in spec.get("matchConditions", []):
            kind, value = self.evaluate(condition["expression"], data)
            if kind == "error":
                return Verdict(False, f"{condition['name']}: {value}", {}, [])
            if value is not True:
                return Verdict(False, None, {}, [])
        variables: dict = {}
        failed: set[str] = set()
        data["variables"] = {}
        for variable in spec.get("variables", []):
            outcome = self._evaluate_with(variable["expression"], data, failed)
            variables[variable["name"]] = outcome
            if outcome[0] == "error":
                failed.add(variable["name"])
            else:
                data["variables"] = {**data["variables"], variable["name"]: outcome[1]}
        refusals = []
        for validation in spec.get("validations", []):
            kind, value = self._evaluate_with(validation["expression"], data, failed)
            if kind == "error":
                refusals.append(("error", value))
            elif value is not True:
                refusals.append(("message", self._message(validation, data, failed)))
        return Verdict(True, None, variables, refusals)

    def _evaluate_with(self, expression: str, data: dict, failed: set[str]) -> tuple[str, Any]:
        used = [name for name in failed if re.search(rf"\bvariables\.{re.escape(name)}\b", expression)]
        return ("error", f"variable {used[0]} failed") if used else self.evaluate(expression, data)

    def _message(self, validation: dict, data: dict, failed: set[str]) -> str:
        if "messageExpression" in validation:
            kind, value = self._evaluate_with(validation["messageExpression"], data, failed)
            if kind == "value" and isinstance(value, str) and value.strip():
                return value
        return validation.get("message", "")


def unordered_lists(message: str) -> str:
    """``message`` with the items of each ``[a, b]`` sorted: a message built from a map's keys lists them in the
    map's order, which neither CEL C++ nor the API server's cel-go keep."""
    return re.sub(r"\[([^\[\]]*)\]", lambda found: "[" + ", ".join(sorted(found.group(1).split(", "))) + "]", message)


REFERENCE = ReferenceCel()
