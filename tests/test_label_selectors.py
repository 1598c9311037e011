"""policy/label_selectors.py: Kubernetes label selectors, each rule of the API server's on its own.

The rules are those of ``metav1.LabelSelector`` validation and ``labels.Selector`` matching:
requirements ANDed, the empty selector selecting everything, four case-sensitive operators with
their value counts, string label values only.
"""

from __future__ import annotations

import pytest

from policy.label_selectors import InvalidSelector, Requirement, requirements, selector_matches


def expression(key: str = "tier", operator: str = "In", values: object = ("gpu",)) -> dict:
    found = {"key": key, "operator": operator}
    if values is not None:
        found["values"] = list(values) if isinstance(values, tuple) else values
    return found


def matches(*expressions: dict, labels: dict) -> bool:
    return selector_matches({"matchExpressions": list(expressions)}, labels)


# --- the empty selector and matchLabels -----------------------------------------------------------


@pytest.mark.parametrize("selector", [{}, {"matchLabels": {}}, {"matchExpressions": []},
                                      {"matchLabels": None, "matchExpressions": None}])
@pytest.mark.parametrize("labels", [{}, {"tier": "gpu", "team": "a"}])
def test_the_empty_selector_selects_everything(selector, labels):
    assert selector_matches(selector, labels) is True


@pytest.mark.parametrize("labels, expected", [
    ({"tier": "gpu"}, True),
    ({"tier": "gpu", "team": "a"}, True),  # labels the selector does not name do not matter
    ({"tier": "cpu"}, False),
    ({}, False),
    ({"tier": ""}, False),
])
def test_match_labels_need_the_key_with_that_value(labels, expected):
    assert selector_matches({"matchLabels": {"tier": "gpu"}}, labels) is expected


def test_match_labels_are_in_requirements_of_one_value():
    assert requirements({"matchLabels": {"tier": "gpu"}}) == (Requirement("tier", "In", ("gpu",)),)


@pytest.mark.parametrize("value", [1, 0, True, False, 1.5, None, ["gpu"], {"a": "b"}])
def test_a_match_labels_value_that_is_not_a_string_is_invalid(value):
    # The API refuses a YAML 1 or true (it does not convert), and reads a null as "": never a silent match.
    with pytest.raises(InvalidSelector, match=r"matchLabels\.tier is .*not a string"):
        selector_matches({"matchLabels": {"tier": value}}, {"tier": str(value)})


@pytest.mark.parametrize("key", ["", 1, None])
def test_a_match_labels_key_must_be_a_non_empty_string(key):
    with pytest.raises(InvalidSelector, match="label key"):
        selector_matches({"matchLabels": {key: "gpu"}}, {})


# --- operators ------------------------------------------------------------------------------------


@pytest.mark.parametrize("labels, expected", [({"tier": "gpu"}, True), ({"tier": "cpu"}, True),
                                             ({"tier": "tpu"}, False), ({}, False)])
def test_in_needs_the_key_with_one_of_the_values(labels, expected):
    assert matches(expression("tier", "In", ("cpu", "gpu")), labels=labels) is expected


@pytest.mark.parametrize("labels, expected", [({"tier": "gpu"}, False), ({"tier": "cpu"}, True), ({}, True)])
def test_not_in_holds_when_the_key_is_absent_or_has_another_value(labels, expected):
    assert matches(expression("tier", "NotIn", ("gpu",)), labels=labels) is expected


@pytest.mark.parametrize("labels, expected", [({"tier": "gpu"}, True), ({"tier": ""}, True), ({}, False)])
def test_exists_needs_the_key_whatever_its_value(labels, expected):
    assert matches(expression("tier", "Exists", None), labels=labels) is expected


@pytest.mark.parametrize("labels, expected", [({"tier": "gpu"}, False), ({"tier": ""}, False), ({}, True)])
def test_does_not_exist_holds_only_when_the_key_is_absent(labels, expected):
    assert matches(expression("tier", "DoesNotExist", None), labels=labels) is expected


@pytest.mark.parametrize("operator", ["in", "IN", "notin", "Notin", "exists", "doesnotexist", "Equals", "=",
                                      "!=", "Gt", "Lt", "", None, 1])
def test_any_other_operator_is_invalid_even_in_another_case(operator):
    with pytest.raises(InvalidSelector, match=r"matchExpressions\[0\]\.operator .* not one of In, NotIn"):
        matches(expression("tier", operator, ("gpu",)), labels={"tier": "gpu"})


@pytest.mark.parametrize("operator", ["In", "NotIn"])
@pytest.mark.parametrize("values", [None, ()])
def test_in_and_not_in_need_values(operator, values):
    with pytest.raises(InvalidSelector, match=f"operator {operator} needs at least one value"):
        matches(expression("tier", operator, values), labels={})


@pytest.mark.parametrize("operator", ["Exists", "DoesNotExist"])
def test_exists_and_does_not_exist_take_no_values(operator):
    assert matches(expression("tier", operator, ()), labels={}) is (operator == "DoesNotExist")
    with pytest.raises(InvalidSelector, match=f"operator {operator} takes no values"):
        matches(expression("tier", operator, ("gpu",)), labels={})


@pytest.mark.parametrize("values", ["gpu", [1], ["gpu", None], {"gpu": "x"}])
def test_values_are_a_list_of_strings(values):
    with pytest.raises(InvalidSelector, match=r"values is .*not a list of strings"):
        matches(expression("tier", "In", values), labels={"tier": "gpu"})


@pytest.mark.parametrize("key", ["", None, 1])
def test_an_expression_key_must_be_a_non_empty_string(key):
    with pytest.raises(InvalidSelector, match=r"matchExpressions\[0\]\.key"):
        matches(expression(key, "Exists", None), labels={})


# --- the whole selector ---------------------------------------------------------------------------


def test_every_requirement_must_hold():
    selector = {"matchLabels": {"app": "vcluster"},
                "matchExpressions": [expression("tier", "In", ("gpu", "cpu")),
                                     expression("debug", "DoesNotExist", None)]}
    assert selector_matches(selector, {"app": "vcluster", "tier": "gpu"}) is True
    assert selector_matches(selector, {"app": "other", "tier": "gpu"}) is False
    assert selector_matches(selector, {"app": "vcluster", "tier": "tpu"}) is False
    assert selector_matches(selector, {"app": "vcluster", "tier": "gpu", "debug": "1"}) is False
    contradiction = {"matchExpressions": [expression("tier", "In", ("gpu",)), expression("tier", "NotIn", ("gpu",))]}
    assert selector_matches(contradiction, {"tier": "gpu"}) is False and selector_matches(contradiction, {}) is False


def test_a_selector_is_refused_whole_whatever_the_labels():
    # An object with an invalid selector does not exist on a cluster: failing an earlier
    # requirement must not hide a later invalid one.
    selector = {"matchLabels": {"app": "vcluster"}, "matchExpressions": [expression("tier", "in", ("gpu",))]}
    with pytest.raises(InvalidSelector):
        selector_matches(selector, {"app": "other"})


@pytest.mark.parametrize("selector, says", [
    ("app=vcluster", "the selector is 'app=vcluster', not a mapping"),
    (["app"], "not a mapping"),
    ({"matchLabels": ["app"]}, r"matchLabels is \['app'\], not a mapping"),
    ({"matchExpressions": expression()}, "matchExpressions is .* not a list"),
    ({"matchExpressions": "tier in (gpu)"}, "not a list"),
    ({"matchExpressions": [expression(), "tier"]}, r"matchExpressions\[1\] is 'tier', not a mapping"),
])
def test_a_selector_of_the_wrong_shape_is_invalid(selector, says):
    with pytest.raises(InvalidSelector, match=says):
        selector_matches(selector, {})
