"""The tenant admission rule (policy/rules_admission.py): a Deny-bound policy covering each tenant's pods."""

from __future__ import annotations

from typing import Any, Optional

import pytest

from policy import rules_admission
from policy.label_selectors import InvalidSelector
from policy.rule_model import UNKNOWN, Resource
from policy.rules_admission import admission_selector_matches
from tests.policy_spec import BINDING, NAMESPACE, POLICY, release, resource, tenant_values


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
            "objectSelector": {"matchLabels": {"vcluster.loft.sh/managed-by": object_release or release_name}}},
        "variables": [{"name": "queue", "expression": "object.metadata.labels['kai.scheduler/queue']"}],
        "validations": [{"expression": "variables.queue == 'team-a'"}]}})
    binding = resource(BINDING, f"{policy_name}-binding", {"metadata": {"name": policy_name}, "spec": {
        "policyName": policy_name, "validationActions": list(actions),
        "matchResources": {"namespaceSelector": {
            "matchLabels": {"kubernetes.io/metadata.name": binding_namespace or namespace}}}}})
    return [policy, binding]


def tenant(name: str = "team-a", namespace: str = "vcluster-team-a") -> Resource:
    return release(name=name, namespace=namespace, values=tenant_values())


def test_tenant_with_its_admission_policy_passes():
    assert rules_admission.tenant_admission_policy_present([tenant(), *admission()]) == []
    two = [tenant(), tenant("team-b", "vcluster-team-b"), *admission(),
           *admission("team-b", "vcluster-team-b", "gpu-tenancy-b")]
    assert rules_admission.tenant_admission_policy_present(two) == []


def test_policy_selecting_the_namespace_by_a_label_the_stack_gives_it_passes():
    policy, binding = admission()
    policy.inputs["spec"]["matchConstraints"]["namespaceSelector"] = {
        "matchExpressions": [{"key": "gpu-tenancy/team", "operator": "In", "values": ["team-a"]}]}
    del binding.inputs["spec"]["matchResources"]
    namespace = resource(NAMESPACE, "ns", {"metadata": {"name": "vcluster-team-a",
                                                        "labels": {"gpu-tenancy/team": "team-a"}}})
    assert rules_admission.tenant_admission_policy_present([tenant(), policy, binding, namespace]) == []
    [finding] = rules_admission.tenant_admission_policy_present([tenant(), policy, binding])
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
    [finding] = rules_admission.tenant_admission_policy_present([release_, *stack])
    assert finding.urn == release_.urn and says in finding.message and "team-a" in finding.message


def test_a_policy_that_does_not_read_the_queue_does_not_count():
    """The site's pod-size policy judges every team's pods, but not their queue: it stands for no tenant's own."""
    policy, binding = admission()
    policy.inputs["spec"]["variables"] = [{"name": "podTextBytes", "expression": "size(object.spec.containers)"}]
    policy.inputs["spec"]["validations"] = [{"expression": "variables.podTextBytes <= 10"}]
    [finding] = rules_admission.tenant_admission_policy_present([tenant(), policy, binding])
    assert "no ValidatingAdmissionPolicy" in finding.message
    policy.inputs["spec"]["validations"].append({"expression": "object.metadata.labels['kai.scheduler/queue'] != ''"})
    assert rules_admission.tenant_admission_policy_present([tenant(), policy, binding]) == []


def test_admission_policy_for_other_operations_does_not_count():
    policy, binding = admission()
    policy.inputs["spec"]["matchConstraints"]["resourceRules"][0]["operations"] = ["DELETE"]
    [finding] = rules_admission.tenant_admission_policy_present([tenant(), policy, binding])
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
    found = rules_admission.tenant_admission_policy_present(two_tenants)
    refused = [finding for finding in found if finding.urn == owner.urn]
    assert len(refused) == 1, "once, however many tenants the rule looks at"
    assert says in refused[0].message and "the API server refuses it" in refused[0].message
    [uncovered] = [finding for finding in found if finding.urn != owner.urn]
    assert uncovered.urn == two_tenants[0].urn, "team-a loses its enforcement, team-b keeps its own"


def test_admission_rule_waits_for_unknown_selectors():
    policy, binding = admission()
    policy.inputs["spec"]["matchConstraints"]["namespaceSelector"] = UNKNOWN
    assert rules_admission.tenant_admission_policy_present([tenant(), policy, binding]) == []
