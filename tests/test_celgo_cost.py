"""The API server's CEL cost, measured with its own cel-go (tests/celgo.py) and its limits (tests/celgo_cost.py)."""

from __future__ import annotations

import pytest

from tests.celgo import celgo  # noqa: F401 (the session's evaluator)
from tests.celgo_cost import COST_LIMIT_ERROR, PER_CALL_LIMIT, charges, stopped
from tests.conftest import COMMITTED_STACKS, run, stack_config
from tests.test_reference_cel import validating_policies


def test_cel_go_built_from_the_mirrors_adds_and_prices_the_call(celgo):
    assert celgo.evaluate("1 + 1") == {"value": 2, "cost": 1, "variablesCost": 0}


def test_the_kubernetes_functions_the_policies_call_are_priced_as_the_api_server_prices_them(celgo):
    # k8s.io/apiserver pkg/cel/library/cost.go: substring a tenth of its string, join a fifth of its result, sum one
    # traversal of its list, each rounded up; literals cost nothing (cel-go's optimizer builds them once).
    text = "x" * 95
    assert celgo.evaluate(f"'{text}'.substring(1)")["cost"] == 10
    assert celgo.evaluate(f"['{text}', '{text}'].join('-')")["cost"] == 39
    assert celgo.evaluate("[1, 2, 3, 4].sum()") == {"value": 10, "cost": 4, "variablesCost": 0}


def test_an_expression_past_the_per_call_limit_is_stopped(celgo):
    expression = "object.items.all(i, object.items.all(j, i + j >= 0))"
    items = list(range(600))
    stopped = celgo.judge({"validations": [{"expression": expression}]}, [{"object": {"items": items}}])[0]
    assert COST_LIMIT_ERROR in stopped["validations"][0]["error"]
    assert stopped["validations"][0]["cost"] > PER_CALL_LIMIT
    small = celgo.judge({"validations": [{"expression": expression}]}, [{"object": {"items": items[:10]}}])[0]
    assert small["validations"][0]["value"] is True and small["validations"][0]["cost"] < 1000


def test_an_unknown_function_fails_the_build_of_the_policy_not_its_evaluation(celgo):
    with pytest.raises(AssertionError, match="undeclared reference to 'quantity'"):
        celgo.evaluate("quantity('1Gi') == quantity('1024Mi')")


def test_a_variable_is_charged_once_to_the_validations_and_again_to_the_messages(celgo):
    spec = {"variables": [{"name": "names", "expression": "object.items.map(i, string(i))"}],
            "validations": [{"expression": "size(variables.names) < 100",
                             "messageExpression": "'too many: ' + variables.names.join(',')"},
                            {"expression": "variables.names.all(n, n != '')"}]}
    [result] = celgo.judge(spec, [{"object": {"items": list(range(20))}}])
    names = result["variables"]["names"]["cost"]
    first, second = result["validations"]
    assert (first["variablesCost"], second["variablesCost"]) == (names, 0)
    assert result["messages"][0]["variablesCost"] == names and result["messages"][1] is None
    charged = charges(result, spec)
    assert charged.validations == first["cost"] + second["cost"] + names
    assert charged.messages == result["messages"][0]["cost"] + names
    assert stopped(result, spec) == []


def test_the_budget_rule_stops_each_pass_past_its_share():
    def result(match=(), variables=None, validations=(), messages=()):
        outcome = lambda cost: {"value": True, "cost": cost, "variablesCost": 0}  # noqa: E731
        return {"match": [outcome(c) for c in match], "variables": {k: outcome(c) for k, c in (variables or {}).items()},
                "validations": [outcome(c) for c in validations], "messages": [outcome(c) for c in messages]}
    spec = {"matchConditions": [{"name": "pods"}]}
    assert stopped(result(match=[10], validations=[PER_CALL_LIMIT] * 10, messages=[0]), spec) == []
    [per_call] = stopped(result(variables={"big": PER_CALL_LIMIT + 1}), spec)
    assert per_call.startswith("variable big costs 1,000,001")
    [budget] = stopped(result(validations=[PER_CALL_LIMIT] * 10 + [1]), spec)
    assert budget.startswith("the validations cost 10,000,001")
    [messages] = stopped(result(validations=[PER_CALL_LIMIT] * 9, messages=[PER_CALL_LIMIT // 2] * 3), spec)
    assert messages.startswith("the message expressions cost 1,500,000, past the 1,000,000")
    [match] = stopped(result(match=[PER_CALL_LIMIT, PER_CALL_LIMIT, PER_CALL_LIMIT // 2 + 1]), spec)
    assert match.startswith("the match conditions cost 2,500,001")


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_every_validating_policy_of_every_site_compiles_in_cel_go(celgo, stack):
    """On the host and inside each vCluster: a function cel-go lacks fails the build of the policy (judge)."""
    policies = validating_policies(run(stack_config(stack), stack))
    assert any(":" in name for name in policies) and len(policies) > 2
    for spec in policies.values():
        assert celgo.judge(spec, []) == []
