"""The API server's CEL cost, measured with its own cel-go (tests/celgo.py) and its limits (tests/celgo_cost.py)."""

from __future__ import annotations

from tests.celgo import celgo  # noqa: F401 (the session's evaluator)
from tests.celgo_cost import COST_LIMIT_ERROR, PER_CALL_LIMIT


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
    import pytest
    with pytest.raises(AssertionError, match="undeclared reference to 'quantity'"):
        celgo.evaluate("quantity('1Gi') == quantity('1024Mi')")
