"""The policy pack's rules (policy/rules.py) on passing and failing data, one rule at a time."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from policy import rules
from policy.label_selectors import InvalidSelector
from policy.rules import UNKNOWN, Finding, Resource, admission_selector_matches
from tests.policy_spec import (
    BINDING, CHART_V4, CLUSTER_POLICY_PATCH, CONFIG_MAP, DEFAULT_PROVIDER, NAMESPACE, POLICY, QUEUE,
    RELEASE, full_resources, queue, release, resource, tenant_values,
)


# --- resource rules --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["0.36.1", "v0.16.4", "v26.3.3", "1.2.3-rc.1", "1.2.3+build.5"])
def test_exact_chart_versions_pass(version):
    assert rules.helm_version_pinned(release(version=version)) == []
    assert rules.helm_version_pinned(release(version=version, type_=CHART_V4)) == []


@pytest.mark.parametrize("version, says", [
    (None, "pins no chart version"), ("", "pins no chart version"), ("  ", "pins no chart version"),
    ("latest", "floats"), ("LATEST", "floats"),
    ("^0.36.0", "a range"), ("~0.36", "a range"), (">=1.0.0", "a range"), ("1.2.x", "a range"), ("*", "a range"),
    ("0.36", "not an exact"), ("v1", "not an exact"), (1.2, "not a version string"),
])
def test_floating_chart_versions_fail(version, says):
    for type_ in (RELEASE, CHART_V4):
        [message] = rules.helm_version_pinned(release(version=version, type_=type_))
        assert says in message and "team-a" in message


def test_version_rule_ignores_unknown_versions_and_other_resources():
    assert rules.helm_version_pinned(release(version=UNKNOWN)) == []
    assert rules.helm_version_pinned(resource(NAMESPACE, inputs={"version": "latest"})) == []


@pytest.mark.parametrize("chart", ["vcluster", "loft/vcluster", "oci://ghcr.io/loft-sh/charts/vcluster"])
def test_vcluster_with_set_owner_false_passes(chart):
    assert rules.vcluster_set_owner_disabled(release(chart=chart, values=tenant_values(set_owner=False))) == []


@pytest.mark.parametrize("values, says", [
    ({}, "unset"), ({"experimental": {"syncSettings": {}}}, "unset"),
    (tenant_values(set_owner=True), "to True"), (tenant_values(set_owner="false"), "to 'false'"),
])
def test_vcluster_that_sets_owners_fails(values, says):
    [message] = rules.vcluster_set_owner_disabled(release(values=values))
    assert says in message and "Set it to false" in message


KAI_CHART_REF = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"


def test_a_kai_release_that_blanks_visible_devices_passes():
    values = {"global": {"gpuSharing": True, "blockNvidiaVisibleDevices": True}}
    assert rules.kai_blocks_visible_devices(release(chart=KAI_CHART_REF, version="v0.16.4", values=values)) == []
    assert rules.kai_blocks_visible_devices(release(chart=KAI_CHART_REF, version="v0.16.4",
                                                    values={"global": UNKNOWN})) == []
    assert rules.kai_blocks_visible_devices(release(values={"global": {}})) == [], "not KAI: not judged"


@pytest.mark.parametrize("values", [{"global": {"gpuSharing": True}},
                                    {"global": {"blockNvidiaVisibleDevices": False}}, {}])
def test_a_kai_release_that_lets_images_pick_their_gpus_is_refused(values):
    [message] = rules.kai_blocks_visible_devices(release(chart=KAI_CHART_REF, version="v0.16.4", values=values))
    assert "blockNvidiaVisibleDevices" in message and "Set it to true" in message


def test_set_owner_rule_skips_unknowns_and_other_charts():
    assert rules.vcluster_set_owner_disabled(release(values=tenant_values(set_owner=UNKNOWN))) == []
    assert rules.vcluster_set_owner_disabled(release(values={"experimental": UNKNOWN})) == []
    assert rules.vcluster_set_owner_disabled(release(chart="oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler",
                                                     values={})) == []


def test_complete_queue_passes():
    assert rules.queue_resources_complete(queue("team-a", "org")) == []
    assert rules.queue_resources_complete(queue("org", resources={**full_resources(), "cpu": UNKNOWN})) == []


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
    [message] = rules.queue_resources_complete(queue("team-a", "org", resources=resources))
    assert says in message and "team-a" in message


def test_queue_without_resources_fails():
    bare = resource(QUEUE, "q", {"metadata": {"name": "q"}, "spec": {"priority": 100}})
    [message] = rules.queue_resources_complete(bare)
    assert "spec.resources is missing" in message


def test_explicit_provider_passes_and_non_kubernetes_resources_are_ignored():
    assert rules.explicit_kubernetes_provider(resource(NAMESPACE)) == []
    assert rules.explicit_kubernetes_provider(resource("aws:ec2/vpc:Vpc", provider=None)) == []
    assert rules.explicit_kubernetes_provider(resource("pulumi:providers:kubernetes", provider=None)) == []


@pytest.mark.parametrize("provider, says", [(None, "names no provider"), (DEFAULT_PROVIDER, "uses the default"),
                                            ("urn:pulumi:s::p::pulumi:providers:kubernetes::default", "default")])
def test_default_provider_fails(provider, says):
    [message] = rules.explicit_kubernetes_provider(resource(NAMESPACE, "ns", provider=provider))
    assert says in message and "ns" in message


def test_tenant_with_resource_quota_passes():
    assert rules.vcluster_resource_quota_enabled(release(values=tenant_values(quota=True))) == []
    assert rules.vcluster_resource_quota_enabled(release(values=tenant_values(quota=UNKNOWN))) == []


@pytest.mark.parametrize("quota", [False, "auto", None])
def test_tenant_without_resource_quota_is_flagged(quota):
    values = tenant_values(quota=quota) if quota is not None else {}
    [message] = rules.vcluster_resource_quota_enabled(release(values=values))
    assert "resourceQuota.enabled" in message


# --- stack rules ---------------------------------------------------------------------------------


def test_queue_parents_in_the_stack_pass():
    assert rules.queue_parents_exist([queue("org"), queue("a", "org"), queue("b", "org")]) == []


def test_missing_parent_queue_fails():
    child = queue("a", "orgg")
    [finding] = rules.queue_parents_exist([queue("org"), child])
    assert isinstance(finding, Finding) and finding.urn == child.urn
    assert "'orgg'" in finding.message and "queues here: a, org" in finding.message


def test_parent_rule_waits_for_unknown_queue_names():
    unnamed = resource(QUEUE, "q", {"metadata": {"name": UNKNOWN}, "spec": {"resources": full_resources()}})
    assert rules.queue_parents_exist([unnamed, queue("a", "org")]) == []


@pytest.mark.parametrize("parent_quota, child_quotas", [
    (1, [0.33, 0.33, 0.33]), (1, [0.5, 0.5]), (1, [0.1] * 10), (2, [1, 1]), (-1, [5, 5]), (1, []),
])
def test_children_within_the_parent_quota_pass(parent_quota, child_quotas):
    stack = [queue("org", gpu_quota=parent_quota)] + [queue(f"t{i}", "org", q) for i, q in enumerate(child_quotas)]
    assert rules.queue_gpu_quota_fits_parent(stack) == []


def test_children_over_the_parent_quota_fail_on_the_parent():
    org = queue("org", gpu_quota=1)
    [finding] = rules.queue_gpu_quota_fits_parent([org, queue("a", "org", 0.5), queue("b", "org", 0.6)])
    assert finding.urn == org.urn
    assert "add up to 1.1" in finding.message and "a=0.5, b=0.6" in finding.message


def test_unlimited_child_under_a_finite_parent_fails_on_the_child():
    child = queue("a", "org", -1)
    [finding] = rules.queue_gpu_quota_fits_parent([queue("org", gpu_quota=1), child])
    assert finding.urn == child.urn and "unlimited" in finding.message


def test_quota_rule_checks_every_level_and_skips_unknowns():
    stack = [queue("org", gpu_quota=2), queue("dept", "org", 1), queue("x", "dept", 0.75), queue("y", "dept", 0.5)]
    [finding] = rules.queue_gpu_quota_fits_parent(stack)
    assert finding.urn == stack[1].urn
    stack[3] = queue("y", "dept", UNKNOWN)
    assert rules.queue_gpu_quota_fits_parent(stack) == []


@pytest.mark.parametrize("selector, labels, expected", [
    (None, {}, True),  # an absent admission selector is the empty one
    ({"matchLabels": {"a": "b"}}, {"a": "b"}, True), ({"matchLabels": {"a": "b"}}, {"a": "c"}, False),
    (UNKNOWN, {}, None), ({"matchLabels": {"a": UNKNOWN}}, {"a": "b"}, None),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["b", UNKNOWN]}]}, {"a": "b"}, None),
    ({"matchExpressions": [UNKNOWN]}, {}, None),
])
def test_admission_selectors_wait_for_unknown_values(selector, labels, expected):
    # The semantics themselves are tests/test_label_selectors.py's; here: absent and unknown.
    assert admission_selector_matches(selector, labels) is expected


def test_an_invalid_admission_selector_is_refused_not_matched():
    with pytest.raises(InvalidSelector):
        admission_selector_matches({"matchExpressions": [{"key": "a", "operator": "in", "values": ["b"]}]}, {"a": "b"})


def admission(release_name: str = "team-a", namespace: str = "vcluster-team-a", policy_name: str = "gpu-tenancy-a",
              actions: Any = ("Deny",), binding_namespace: Optional[str] = None,
              object_release: Optional[str] = None) -> list[Resource]:
    """The policy + binding shapes of components/admission.py."""
    ns_selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    policy = resource(POLICY, f"{policy_name}-policy", {"metadata": {"name": policy_name}, "spec": {
        "matchConstraints": {
            "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                               "resources": ["pods"]}],
            "namespaceSelector": ns_selector,
            "objectSelector": {"matchLabels": {"vcluster.loft.sh/managed-by": object_release or release_name}}}}})
    binding = resource(BINDING, f"{policy_name}-binding", {"metadata": {"name": policy_name}, "spec": {
        "policyName": policy_name, "validationActions": list(actions),
        "matchResources": {"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": binding_namespace or namespace}}}}})
    return [policy, binding]


def tenant(name: str = "team-a", namespace: str = "vcluster-team-a") -> Resource:
    return release(name=name, namespace=namespace, values=tenant_values())


def test_tenant_with_its_admission_policy_passes():
    assert rules.tenant_admission_policy_present([tenant(), *admission()]) == []
    two = [tenant(), tenant("team-b", "vcluster-team-b"), *admission(),
           *admission("team-b", "vcluster-team-b", "gpu-tenancy-b")]
    assert rules.tenant_admission_policy_present(two) == []


def test_policy_selecting_the_namespace_by_a_label_the_stack_gives_it_passes():
    policy, binding = admission()
    policy.inputs["spec"]["matchConstraints"]["namespaceSelector"] = {
        "matchExpressions": [{"key": "gpu-tenancy/team", "operator": "In", "values": ["team-a"]}]}
    del binding.inputs["spec"]["matchResources"]
    namespace = resource(NAMESPACE, "ns", {"metadata": {"name": "vcluster-team-a",
                                                        "labels": {"gpu-tenancy/team": "team-a"}}})
    assert rules.tenant_admission_policy_present([tenant(), policy, binding, namespace]) == []
    [finding] = rules.tenant_admission_policy_present([tenant(), policy, binding])
    assert "no ValidatingAdmissionPolicy" in finding.message


@pytest.mark.parametrize("stack, says", [
    ([], "no ValidatingAdmissionPolicy"),
    (admission(namespace="vcluster-team-b"), "no ValidatingAdmissionPolicy"),
    (admission(object_release="team-b"), "no ValidatingAdmissionPolicy"),
    (admission()[:1], "has no ValidatingAdmissionPolicyBinding"),
    (admission(actions=("Audit", "Warn")), "has no ValidatingAdmissionPolicyBinding"),
    (admission(binding_namespace="vcluster-team-b"), "has no ValidatingAdmissionPolicyBinding"),
])
def test_tenant_without_an_enforced_admission_policy_fails(stack, says):
    release_ = tenant()
    [finding] = rules.tenant_admission_policy_present([release_, *stack])
    assert finding.urn == release_.urn and says in finding.message and "team-a" in finding.message


def test_admission_policy_for_other_operations_does_not_count():
    policy, binding = admission()
    policy.inputs["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["DELETE"]
    [finding] = rules.tenant_admission_policy_present([tenant(), policy, binding])
    assert "no ValidatingAdmissionPolicy" in finding.message


@pytest.mark.parametrize("where, selector, says", [
    ("policy", {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "in",
                                      "values": ["vcluster-team-a"]}]},
     "ValidatingAdmissionPolicy gpu-tenancy-a: spec.matchConstraints.namespaceSelector: "
     "matchExpressions[0].operator is 'in'"),
    ("binding", {"matchLabels": {"kubernetes.io/metadata.name": 7}},
     "ValidatingAdmissionPolicyBinding gpu-tenancy-a: spec.matchResources.namespaceSelector: "
     "matchLabels.kubernetes.io/metadata.name is 7, not a string"),
])
def test_an_admission_selector_the_api_server_refuses_is_a_finding(where, selector, says):
    policy, binding = admission()
    owner = policy if where == "policy" else binding
    field = "matchConstraints" if where == "policy" else "matchResources"
    owner.inputs["spec"][field]["namespaceSelector"] = selector
    two_tenants = [tenant(), tenant("team-b", "vcluster-team-b"), policy, binding,
                   *admission("team-b", "vcluster-team-b", "gpu-tenancy-b")]
    found = rules.tenant_admission_policy_present(two_tenants)
    refused = [finding for finding in found if finding.urn == owner.urn]
    assert len(refused) == 1, "once, however many tenants the rule looks at"
    assert says in refused[0].message and "the API server refuses it" in refused[0].message
    [uncovered] = [finding for finding in found if finding.urn != owner.urn]
    assert uncovered.urn == two_tenants[0].urn, "team-a loses its enforcement, team-b keeps its own"


def test_admission_rule_waits_for_unknown_selectors():
    policy, binding = admission()
    policy.inputs["spec"]["matchConstraints"]["namespaceSelector"] = UNKNOWN
    assert rules.tenant_admission_policy_present([tenant(), policy, binding]) == []


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
    assert rules.time_slicing_with_kai_sharing(stack) == []


def test_time_slicing_without_kai_sharing_passes():
    for sharing_off in ([kai(sharing=False)], []):
        assert rules.time_slicing_with_kai_sharing([*sharing_off, gpu_operator_patch("time-sliced-1234abcd")]) == []


def test_time_sliced_default_under_kai_sharing_is_flagged():
    patch = gpu_operator_patch("time-sliced-1234abcd")
    [finding] = rules.time_slicing_with_kai_sharing([kai(), patch])
    assert finding.urn == patch.urn and "time-sliced-1234abcd" in finding.message


def test_time_slicing_is_recognised_by_content_and_on_the_operator_release():
    patch = gpu_operator_patch("custom")
    assert len(rules.time_slicing_with_kai_sharing([kai(), patch, time_slicing_map({"custom": SLICED})])) == 1
    operator = release(chart="gpu-operator", version="v26.3.3", name="gpu-operator", namespace="gpu-operator",
                       values={"devicePlugin": {"config": {"name": "cfg", "default": "sliced",
                                                           "create": True, "data": {"sliced": SLICED}}}})
    [finding] = rules.time_slicing_with_kai_sharing([kai("true"), operator])
    assert finding.urn == operator.urn


def test_time_sliced_node_label_under_kai_sharing_is_flagged():
    group = resource("eks:index:ManagedNodeGroup", "gpu", {"labels": {
        "nvidia.com/device-plugin.config": "time-sliced-0e6179ab"}}, provider=None)
    [finding] = rules.time_slicing_with_kai_sharing([kai(), group])
    assert finding.urn == group.urn and "labels nodes" in finding.message


@pytest.mark.parametrize("key, content, expected", [
    ("time-sliced-0e6179ab", None, True), ("exclusive-aefdbe17", "version: v1\n", False), ("custom", SLICED, True),
    ("custom", {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}, False),
    ("custom", "{not: yaml: [", False), (None, None, False),
])
def test_profile_is_time_sliced(key, content, expected):
    assert rules.profile_is_time_sliced(key, content) is expected


def test_rule_set_levels():
    levels = {rule.name: rule.mandatory for rule in rules.RULES}
    assert len(levels) == len(rules.RULES)
    assert [name for name, mandatory in levels.items() if not mandatory] == [
        "no-time-slicing-with-kai-sharing", "vcluster-resource-quota-enabled"]
    assert all(rule.scope in ("resource", "stack") for rule in rules.RULES)
