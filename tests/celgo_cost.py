"""How the API server limits the CEL cost of one ValidatingAdmissionPolicy evaluation (k8s.io/apiserver, read at
every tag from the host floor to the pin: tests/test_celgo_cost_contract.py).

- One expression (a match condition, a variable, a validation, a message expression) is stopped past
  ``PER_CALL_LIMIT`` (``pkg/apis/cel/config.go`` PerCallLimit, a cel-go program option of the base environment):
  it fails, and under ``failurePolicy: Fail`` its validation refuses the request.
- The match conditions share ``MATCH_CONDITIONS_BUDGET`` (RuntimeCELCostBudgetMatchConditions,
  ``pkg/admission/plugin/webhook/matchconditions/matcher.go``); past it the policy fails.
- The validations share ``RUNTIME_BUDGET`` (RuntimeCELCostBudget, ``policy/validating/dispatcher.go``) in order
  (``pkg/admission/plugin/cel/condition.go``), each charged its own cost plus the cost of the variables it
  evaluated first: a variable is evaluated lazily, once per pass, its cost reported to the pass
  (``cel/composition.go``, ``cel/activation.go``). Past the budget every validation fails.
- Then every message expression (of every validation, passed or not) runs in a pass of its own with what the
  validations left (``policy/validating/validator.go``), evaluating the variables it uses again; past it every
  validation fails too ("failed messageExpression").
"""

from __future__ import annotations

from typing import NamedTuple

PER_CALL_LIMIT = 1_000_000
RUNTIME_BUDGET = 10_000_000
MATCH_CONDITIONS_BUDGET = 2_500_000
COST_LIMIT_ERROR = "actual cost limit exceeded"


class Charges(NamedTuple):
    match: int
    validations: int
    messages: int
    # the dearest single expression or variable: (cost, which)
    dearest: tuple[int, str]


def charges(result: dict, spec: dict) -> Charges:
    """What one request's evaluation (a tests/celgo.py result for the policy ``spec``) is charged, pass by pass."""
    def total(outcomes) -> int:
        return sum(each["cost"] + each["variablesCost"] for each in outcomes if each)

    named = [(each["cost"], f"match condition {condition['name']}")
             for each, condition in zip(result["match"], spec.get("matchConditions", []))]
    named += [(each["cost"], f"variable {name}") for name, each in result["variables"].items()]
    named += [(each["cost"], f"validation {index}") for index, each in enumerate(result["validations"])]
    named += [(each["cost"], f"messageExpression {index}") for index, each in enumerate(result["messages"]) if each]
    return Charges(total(result["match"]), total(result["validations"]), total(result["messages"]),
                   max(named, default=(0, "nothing")))


def stopped(result: dict, spec: dict) -> list[str]:
    """Why the API server would stop this evaluation for cost (empty: it runs to its verdict)."""
    charged = charges(result, spec)
    reasons = []
    if charged.dearest[0] > PER_CALL_LIMIT:
        reasons.append(f"{charged.dearest[1]} costs {charged.dearest[0]:,}, past the per-call limit {PER_CALL_LIMIT:,}")
    if charged.match > MATCH_CONDITIONS_BUDGET:
        reasons.append(f"the match conditions cost {charged.match:,}, past {MATCH_CONDITIONS_BUDGET:,}")
    if charged.validations > RUNTIME_BUDGET:
        reasons.append(f"the validations cost {charged.validations:,}, past the budget {RUNTIME_BUDGET:,}")
    elif charged.messages > RUNTIME_BUDGET - charged.validations:
        reasons.append(f"the message expressions cost {charged.messages:,}, past the "
                       f"{RUNTIME_BUDGET - charged.validations:,} the validations left")
    return reasons
