"""The KAI queue rules (policy/rules_queues.py): complete resources, parents in the stack, quotas that fit."""

from __future__ import annotations

import pytest

from policy import rules_queues
from policy.rule_model import UNKNOWN, Finding
from tests.policy_spec import QUEUE, full_resources, queue, resource


def test_complete_queue_passes():
    assert rules_queues.queue_resources_complete(queue("team-a", "org")) == []
    assert rules_queues.queue_resources_complete(queue("org", resources={**full_resources(), "cpu": UNKNOWN})) == []


@pytest.mark.parametrize("mutate, says", [
    (lambda r: r.pop("cpu"), "spec.resources.cpu is missing"),
    (lambda r: r["memory"].pop("limit"), "spec.resources.memory.limit is missing"),
    (lambda r: r["gpu"].pop("overQuotaWeight"), "spec.resources.gpu.overQuotaWeight is missing"),
    (lambda r: r["gpu"].update(quota="0.33"), "spec.resources.gpu.quota is '0.33', not a number"),
    (lambda r: r["cpu"].update(limit=True), "spec.resources.cpu.limit is True, not a number"),
])
def test_incomplete_queue_fails(mutate, says):
    resources = full_resources()
    mutate(resources)
    [message] = rules_queues.queue_resources_complete(queue("team-a", "org", resources=resources))
    assert says in message and "team-a" in message


def test_queue_without_resources_fails():
    bare = resource(QUEUE, "q", {"metadata": {"name": "q"}, "spec": {"priority": 100}})
    [message] = rules_queues.queue_resources_complete(bare)
    assert "spec.resources is missing" in message


def test_queue_parents_in_the_stack_pass():
    assert rules_queues.queue_parents_exist([queue("org"), queue("a", "org"), queue("b", "org")]) == []


def test_missing_parent_queue_fails():
    child = queue("a", "orgg")
    [finding] = rules_queues.queue_parents_exist([queue("org"), child])
    assert isinstance(finding, Finding) and finding.urn == child.urn
    assert "'orgg'" in finding.message and "queues here: a, org" in finding.message


def test_parent_rule_waits_for_unknown_queue_names():
    unnamed = resource(QUEUE, "q", {"metadata": {"name": UNKNOWN}, "spec": {"resources": full_resources()}})
    assert rules_queues.queue_parents_exist([unnamed, queue("a", "org")]) == []


@pytest.mark.parametrize("parent_quota, child_quotas", [
    (1, [0.33, 0.33, 0.33]), (1, [0.5, 0.5]), (1, [0.1] * 10), (2, [1, 1]), (-1, [5, 5]), (1, []),
])
def test_children_within_the_parent_quota_pass(parent_quota, child_quotas):
    stack = [queue("org", gpu_quota=parent_quota)] + [queue(f"t{i}", "org", q) for i, q in enumerate(child_quotas)]
    assert rules_queues.queue_gpu_quota_fits_parent(stack) == []


def test_children_over_the_parent_quota_fail_on_the_parent():
    org = queue("org", gpu_quota=1)
    [finding] = rules_queues.queue_gpu_quota_fits_parent([org, queue("a", "org", 0.5), queue("b", "org", 0.6)])
    assert finding.urn == org.urn
    assert "add up to 1.1" in finding.message and "a=0.5, b=0.6" in finding.message


def test_unlimited_child_under_a_finite_parent_fails_on_the_child():
    child = queue("a", "org", -1)
    [finding] = rules_queues.queue_gpu_quota_fits_parent([queue("org", gpu_quota=1), child])
    assert finding.urn == child.urn and "unlimited" in finding.message


def test_quota_rule_checks_every_level_and_skips_unknowns():
    stack = [queue("org", gpu_quota=2), queue("dept", "org", 1), queue("x", "dept", 0.75), queue("y", "dept", 0.5)]
    [finding] = rules_queues.queue_gpu_quota_fits_parent(stack)
    assert finding.urn == stack[1].urn
    stack[3] = queue("y", "dept", UNKNOWN)
    assert rules_queues.queue_gpu_quota_fits_parent(stack) == []
