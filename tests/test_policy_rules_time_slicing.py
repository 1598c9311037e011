"""The time-slicing advisory (policy/rules_time_slicing.py): no time-sliced profile while KAI shares GPUs."""

from __future__ import annotations

from typing import Any

import pytest

from policy import rules_time_slicing
from policy.rule_model import Resource
from tests.policy_spec import CLUSTER_POLICY_PATCH, CONFIG_MAP, release, resource


def kai(sharing: Any = True) -> Resource:
    return release(chart="oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", version="v0.16.4",
                   name="kai-scheduler", namespace="kai-scheduler", values={"global": {"gpuSharing": sharing}})


def gpu_operator_patch(default: str) -> Resource:
    return resource(CLUSTER_POLICY_PATCH, "cluster-policy", {
        "metadata": {"name": "cluster-policy"},
        "spec": {"devicePlugin": {"config": {"name": "time-slicing-config", "default": default}}}})


def time_slicing_map(data: dict) -> Resource:
    return resource(CONFIG_MAP, "time-slicing", {"metadata": {"name": "time-slicing-config",
                                                              "namespace": "gpu-operator"}, "data": data})


SLICED = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 4\n"


def test_exclusive_default_under_kai_sharing_passes():
    stack = [kai(), gpu_operator_patch("exclusive-aefdbe17"),
             time_slicing_map({"exclusive-aefdbe17": "version: v1\n", "time-sliced-1234abcd": SLICED})]
    assert rules_time_slicing.time_slicing_with_kai_sharing(stack) == []


def test_time_slicing_without_kai_sharing_passes():
    for sharing_off in ([kai(sharing=False)], []):
        assert rules_time_slicing.time_slicing_with_kai_sharing([*sharing_off, gpu_operator_patch("time-sliced-1234abcd")]) == []


def test_time_sliced_default_under_kai_sharing_is_flagged():
    patch = gpu_operator_patch("time-sliced-1234abcd")
    [finding] = rules_time_slicing.time_slicing_with_kai_sharing([kai(), patch])
    assert finding.urn == patch.urn and "time-sliced-1234abcd" in finding.message


def test_time_slicing_is_recognised_by_content_and_on_the_operator_release():
    patch = gpu_operator_patch("custom")
    assert len(rules_time_slicing.time_slicing_with_kai_sharing([kai(), patch, time_slicing_map({"custom": SLICED})])) == 1
    operator = release(chart="gpu-operator", version="v26.3.3", name="gpu-operator", namespace="gpu-operator",
                       values={"devicePlugin": {"config": {"name": "cfg", "default": "sliced",
                                                           "create": True, "data": {"sliced": SLICED}}}})
    [finding] = rules_time_slicing.time_slicing_with_kai_sharing([kai("true"), operator])
    assert finding.urn == operator.urn


def test_time_sliced_node_label_under_kai_sharing_is_flagged():
    group = resource("eks:index:ManagedNodeGroup", "gpu", {"labels": {
        "nvidia.com/device-plugin.config": "time-sliced-0e6179ab"}}, provider=None)
    [finding] = rules_time_slicing.time_slicing_with_kai_sharing([kai(), group])
    assert finding.urn == group.urn and "labels nodes" in finding.message


@pytest.mark.parametrize("key, content, expected", [
    ("time-sliced-0e6179ab", None, True), ("exclusive-aefdbe17", "version: v1\n", False), ("custom", SLICED, True),
    ("custom", {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}, False),
    ("custom", "{not: yaml: [", False), (None, None, False),
])
def test_profile_is_time_sliced(key, content, expected):
    assert rules_time_slicing.profile_is_time_sliced(key, content) is expected
