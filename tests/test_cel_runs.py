"""A cel-python run is reused only for the same values at every path its expression can read (tests/cel_runs.py).
The expressions here are this file's own, so no other test's runs are reused."""

from __future__ import annotations

import pytest

from tests.cel_runs import Inputs, paths, run
from tests.cel_judges import plain_value
from tests.tenant_sim import Admission

NAMES = ("object", "oldObject", "request", "variables")


@pytest.mark.parametrize(("expression", "expected"), [
    # A method call's receiver is the path, not the method.
    ("object.metadata.name.startsWith('x')", {("object", "metadata", "name")}),
    ("object.spec.containers.exists(c, c.name == 'a')", {("object", "spec", "containers")}),
    ("object.spec.containers.all(c, c.image != '')", {("object", "spec", "containers")}),
    # An index or an optional selection ends the path before it.
    ("object.metadata.labels['app'] == 'x'", {("object", "metadata", "labels")}),
    ("object.?spec.orValue({}) == {}", {("object",)}),
    ("object['spec'] == null", {("object",)}),
    ("has(object.spec.nodeName) || request.userInfo.username == ''",
     {("object", "spec", "nodeName"), ("request", "userInfo", "username")}),
    ("variables.queue == oldObject .\n  spec . schedulerName", {("variables", "queue"),
                                                               ("oldObject", "spec", "schedulerName")}),
    # A bare name keys on all of its value.
    ("object == oldObject", {("object",), ("oldObject",)}),
])
def test_the_paths_an_expression_reads_are_found_whole(expression, expected):
    assert set(paths(expression, NAMES)) == expected


class Counting(Admission):
    def __init__(self):
        super().__init__({}, {})
        self.runs = 0

    def evaluate(self, expression, activation):
        self.runs += 1
        return super().evaluate(expression, activation)


def judged(admission: Counting, expression: str, review: Inputs):
    return plain_value(run(admission.evaluate, expression, review))


def pod(**spec) -> dict:
    return {"metadata": {"name": "p", "labels": {"app": "x"}}, "spec": {"containers": [{"name": "a"}], **spec}}


def inputs(obj: dict, operation: str = "CREATE") -> Inputs:
    return Inputs(object=obj, oldObject=None, request={"operation": operation}, variables={})


def test_a_run_is_reused_for_the_same_values_where_it_reads_and_made_again_for_others():
    admission = Counting()
    expression = "object.spec.containers.exists(c, c.name == 'a') && object.metadata.labels['app'] == 'x'"
    assert judged(admission, expression, inputs(pod())) is True
    # Another node, another operation, another name: nothing the expression reads.
    assert judged(admission, expression, inputs(pod(nodeName="n"), operation="UPDATE")) is True
    assert admission.runs == 1
    renamed = pod()
    renamed["spec"]["containers"][0]["name"] = "b"
    assert judged(admission, expression, inputs(renamed)) is False
    relabelled = pod()
    relabelled["metadata"]["labels"]["app"] = "y"
    assert judged(admission, expression, inputs(relabelled)) is False
    assert admission.runs == 3


def test_where_a_path_stops_is_part_of_the_key():
    """has() of a field is false both when the field is absent and when its parent is; the key tells apart a
    spec without the field, a spec that is no map and no spec at all."""
    admission = Counting()
    expression = "has(object.spec.nodeName) ? 'set' : 'unset'"
    assert judged(admission, expression, inputs(pod())) == "unset"
    assert judged(admission, expression, inputs(pod(nodeName="n"))) == "set"
    assert judged(admission, expression, inputs(pod(nodeName="m"))) == "set"
    assert admission.runs == 3
    assert judged(admission, expression, inputs({"metadata": {}, "spec": {"containers": []}})) == "unset"
    assert admission.runs == 4


def test_a_variable_is_read_as_the_expressions_after_it_see_it():
    admission = Counting()
    review = inputs(pod())
    assert judged(admission, "has(variables.queue)", review) is False
    review.with_variable("queue", "team-nlp")
    assert judged(admission, "has(variables.queue)", review) is True
    assert judged(admission, "variables.queue", review) == "team-nlp"
    review.with_variable("scheduler", "kai-scheduler")
    assert judged(admission, "variables.queue", review) == "team-nlp"
    assert admission.runs == 3


def test_a_run_that_raises_is_made_again():
    admission = Counting()
    for _ in range(2):
        with pytest.raises(Exception):
            run(admission.evaluate, "object.spec.missing == 1", inputs(pod()))
    assert admission.runs == 2
