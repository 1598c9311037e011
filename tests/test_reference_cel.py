"""The admission policies' CEL judged by a second implementation, Google's CEL C++ (tests/reference_cel.py).

Every review the admission tests make is judged by cel-python and by CEL C++ (tests/tenant_sim.py
``Admission.review``), which must agree, but for the size rules' floods, which CEL C++ judges alone. This file checks
the second judge itself, that every expression of every site's validating policies compiles in it, and where the
floods begin.
"""

from __future__ import annotations

import pytest
import yaml

from tests.conftest import COMMITTED_STACKS, run, stack_config
from tests.reference_cel import REFERENCE, unordered_lists
from tests import cel_judges
from tests.cel_judges import CROSS_CHECKED_BYTES
from tests.tenant_sim import POLICY, Admission, virtual_pod

RELEASE = "kubernetes:helm.sh/v3:Release"
EVERYWHERE = {"matchConstraints": {"resourceRules": [{"operations": ["CREATE"], "resources": ["pods"]}]}}
ANY_NAMESPACE = {"matchResources": {"namespaceSelector": {}}, "validationActions": ["Deny"]}


def expressions(spec: dict) -> list[str]:
    found = [item["expression"] for key in ("matchConditions", "variables", "validations")
             for item in spec.get(key, [])]
    return found + [item["messageExpression"] for item in spec.get("validations", []) if "messageExpression" in item]


def validating_policies(program) -> dict[str, dict]:
    """Every ValidatingAdmissionPolicy a run renders: on the host, and inside each vCluster (its manifests)."""
    policies = {policy.inputs["metadata"]["name"]: policy.inputs["spec"] for policy in program.of_type(POLICY)}
    for release in program.of_type(RELEASE):
        manifests = (release.inputs.get("values") or {}).get("experimental", {}).get("deploy", {}).get("vcluster", {})
        for document in yaml.safe_load_all(manifests.get("manifests", "")):
            if document and document["kind"] == "ValidatingAdmissionPolicy":
                policies[f"{release.inputs['name']}: {document['metadata']['name']}"] = document["spec"]
    return policies


@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_every_validating_policy_expression_compiles_in_cel_cpp(stack):
    """An expression that does not compile fails every request it judges: with failurePolicy Fail, every pod."""
    policies = validating_policies(run(stack_config(stack), stack))
    assert any(":" in name for name in policies) and len(policies) > 2
    for name, spec in policies.items():
        failed = {expression: value for expression in expressions(spec)
                  for kind, value in [REFERENCE.evaluate(expression, {})] if "compilation failed" in str(value)}
        assert failed == {}, name


def test_a_review_where_the_two_implementations_differ_fails():
    """cel-python writes string(1.0) as "1.0", CEL C++ (like cel-go, the API server's) as "1"."""
    spec = {**EVERYWHERE, "validations": [{"expression": "false", "message": "static",
                                           "messageExpression": "'share ' + string(1.0)"}]}
    with pytest.raises(AssertionError, match=r"refusals: CEL C\+\+ \['share 1'\], cel-python \['share 1.0'\]"):
        Admission(spec, ANY_NAMESPACE).review("team", virtual_pod())


def test_an_expression_that_fails_at_run_time_refuses_and_so_does_one_using_a_failed_variable():
    spec = {"variables": [{"name": "broken", "expression": "object.spec.missing"}],
            "validations": [{"expression": "object.spec.containers.all(c, c.missing == 'x')", "message": "m"},
                            {"expression": "variables.broken == 1", "message": "v"},
                            {"expression": "true", "message": "never"}]}
    verdict = REFERENCE.review(spec, {"object": virtual_pod(), "oldObject": None, "request": {}})
    assert [kind for kind, _ in verdict.refusals] == ["error", "error"]
    assert verdict.variables["broken"][0] == "error"


def test_an_evaluation_past_the_iteration_budget_is_a_refusal_not_an_exception():
    """CEL C++ stops a comprehension past its iteration budget; the API server treats any expression it stops as
    failed, and failurePolicy Fail refuses the request."""
    spec = {"validations": [{"expression": "object.spec.args.map(a, size(a)).sum() < 10", "message": "m"}]}
    pod = virtual_pod(containers=[])
    pod["spec"]["args"] = ["a"] * 20000
    kind, why = REFERENCE.evaluate(spec["validations"][0]["expression"], {"object": pod})
    assert (kind, "budget" in why) == ("error", True)
    assert REFERENCE.review(spec, {"object": pod, "oldObject": None, "request": {}}).refusals == [("error", why)]


def test_a_message_listing_map_keys_is_compared_without_their_order():
    assert unordered_lists("[reserved-keys] labels [b, a] and annotations []") == \
        "[reserved-keys] labels [a, b] and annotations []"


def test_substring_and_join_read_as_the_strings_extension_defines_them():
    """An end equal to the string's size is allowed (cel-expr-python 0.1.3's own extension refuses it); beyond the
    string or before the start is an error."""
    assert REFERENCE.evaluate("'abc'.substring(0, 3) + 'héllo'.substring(1) + ['a', 'b'].join(', ')", {}) == \
        ("value", "abcéllo" + "a, b")
    beyond, backwards = "'abc'.substring(2, 4)", "'abc'.substring(2, 1)"
    assert [REFERENCE.evaluate(expression, {})[0] for expression in (beyond, backwards)] == ["error", "error"]


# A whole policy, as the API server takes it: the suite's reviews are judged again by its own plugin
# (tests/test_admission_suite_real_plugin.py).
COUNTED = {"matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                                   "resources": ["pods"]}]},
           "variables": [{"name": "keys", "expression": "size(object.metadata.annotations)"}],
           "validations": [{"expression": "variables.keys <= 100", "message": "static",
                            "messageExpression": "'[metadata-size] ' + string(variables.keys) + ' annotations'"}]}


def _flood(keys: int) -> dict:
    """A pod of ``keys`` annotations, past CROSS_CHECKED_BYTES from about 500."""
    return virtual_pod(annotations={f"example.com/key-{index}": "x" * 24 for index in range(keys)})


def _review(spec: dict, pod: dict, *, python: bool) -> list[str]:
    """The review's refusals, failing if cel-python is asked when ``python`` is false."""
    admission = Admission(spec, ANY_NAMESPACE)
    if not python:
        admission._inputs = _cel_python_asked
    return admission.review("team", pod)


def _cel_python_asked(*_, **__):
    raise AssertionError("cel-python judged the review")


def test_a_flood_is_judged_by_cel_cpp_alone_as_both_judge_it():
    """Past the bound cel-python is not asked; with the bound raised, both judge the same flood the same way."""
    flood = _flood(600)
    assert len(str(flood)) > CROSS_CHECKED_BYTES
    refusals = _review(COUNTED, flood, python=False)
    assert refusals == ["[metadata-size] 600 annotations"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cel_judges, "CROSS_CHECKED_BYTES", 10 * CROSS_CHECKED_BYTES)
        assert _review(COUNTED, flood, python=True) == refusals


def test_a_smaller_review_and_a_flood_cel_cpp_fails_on_are_judged_by_both():
    """Below the bound, and wherever CEL C++ meets an error (its iteration budget, a missing field), cel-python judges
    too, and the two must agree."""
    with pytest.raises(AssertionError, match="cel-python judged"):
        _review(COUNTED, _flood(50), python=False)
    failing = {**COUNTED, "validations": [*COUNTED["validations"],
                                          {"expression": "object.spec.missing == 1", "message": "m"}]}
    with pytest.raises(AssertionError, match="cel-python judged"):
        _review(failing, _flood(600), python=False)
