"""The CrossGuard policy pack (policy/): every rule on passing and failing data, the committed
stacks' offline plans (no mandatory violation), mutated plans (caught), the pulumi_policy
adapter, ``python -m policy.check`` and the pack as the Pulumi CLI starts it (a real analyzer
server from inside policy/, spoken to over gRPC). No PolicyPack is constructed in this process:
that would start a server and block."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any, Callable, Optional

import pytest

from policy import rules
from policy.adapters import PLAN_UNKNOWN, from_plan, from_policy_resource, from_stack_args
from policy.check import main as check_main
from policy.rules import UNKNOWN, Finding, Resource, evaluate, selector_matches
from tools.mockrun import PROJECT_DIR, ProgramRun

try:  # the rules and the offline checker need no pulumi_policy; the CrossGuard wrappers do
    from pulumi_policy import (EnforcementLevel, PolicyProviderResource, PolicyResource, PolicyResourceOptions,
                               ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs,
                               StackValidationPolicy)
    from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

    from policy.pack import build_policies
except ImportError:  # pragma: no cover
    build_policies = None
needs_sdk = pytest.mark.skipif(build_policies is None,
                               reason="pulumi-policy is not installed (see policy/requirements.txt)")

RELEASE = "kubernetes:helm.sh/v3:Release"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAMESPACE = "kubernetes:core/v1:Namespace"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CLUSTER_POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
K8S_PROVIDER = "urn:pulumi:dev::gpu-tenancy::pulumi:providers:kubernetes::host-k8s"
DEFAULT_PROVIDER = "urn:pulumi:dev::gpu-tenancy::pulumi:providers:kubernetes::default_4_34_2"


def resource(type_: str, name: str = "r", inputs: Optional[dict] = None, provider: Optional[str] = K8S_PROVIDER,
             ) -> Resource:
    return Resource(type=type_, name=name, urn=f"urn:pulumi:dev::gpu-tenancy::{type_}::{name}",
                    inputs=inputs or {}, provider=provider)


def release(chart: str = "vcluster", version: Any = "0.36.1", values: Optional[dict] = None, name: str = "team-a",
            namespace: str = "vcluster-team-a", type_: str = RELEASE) -> Resource:
    inputs = {"chart": chart, "version": version, "name": name, "namespace": namespace, "values": values or {}}
    if version is None:
        del inputs["version"]
    return resource(type_, f"{name}-release", inputs)


def tenant_values(set_owner: Any = False, quota: Any = True) -> dict:
    return {"experimental": {"syncSettings": {"setOwner": set_owner}},
            "policies": {"resourceQuota": {"enabled": quota}}}


def full_resources(gpu_quota: Any = 1, gpu_limit: Any = -1) -> dict:
    return {"gpu": {"quota": gpu_quota, "limit": gpu_limit, "overQuotaWeight": 1},
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}


def queue(name: str, parent: Optional[str] = None, gpu_quota: Any = 1, resources: Any = None) -> Resource:
    spec: dict = {"displayName": name, "priority": 100,
                  "resources": full_resources(gpu_quota) if resources is None else resources}
    if parent is not None:
        spec["parentQueue"] = parent
    return resource(QUEUE, f"queues-{name}", {"metadata": {"name": name}, "spec": spec})


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
    (None, {}, True), ({}, {"a": "b"}, True),
    ({"matchLabels": {"a": "b"}}, {"a": "b", "c": "d"}, True), ({"matchLabels": {"a": "b"}}, {"a": "c"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x", "b"]}]}, {"a": "b"}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}, {"a": "b"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchLabels": {"a": UNKNOWN}}, {"a": "b"}, None), (UNKNOWN, {}, None),
])
def test_label_selectors(selector, labels, expected):
    assert selector_matches(selector, labels) is expected


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


# --- offline plans of the committed stacks ----------------------------------------------------------


def plan_of(run: ProgramRun, stack: str) -> dict:
    return {"project": "gpu-tenancy", "stack": stack, "resources": [r.to_json() for r in run.resources],
            "outputs": run.outputs, "secretOutputs": sorted(run.secret_outputs), "warnings": run.warnings}


@pytest.fixture(scope="module")
def dev_plan(dev_run) -> dict:
    return plan_of(dev_run, "dev")


@pytest.fixture(scope="module")
def eks_plan(eks_run) -> dict:
    return plan_of(eks_run, "eks")


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_committed_stacks_have_no_mandatory_violation(stack, request):
    plan = request.getfixturevalue(f"{stack}_plan")
    violations = evaluate(from_plan(plan))
    assert [v for v in violations if v.mandatory] == []
    # The rules really looked at something: every kind they guard is in the plan.
    types = {entry["type"] for entry in plan["resources"]}
    assert {RELEASE, QUEUE, POLICY, BINDING} <= types


def test_committed_stacks_raise_no_advisory_either(dev_plan, eks_plan):
    """Both stacks use the exclusive profile with KAI sharing and enable tenant quotas."""
    for plan in (dev_plan, eks_plan):
        assert [v.message for v in evaluate(from_plan(plan))] == []


def test_tools_plan_document_passes(dev_run):
    try:
        from tools.plan import build_plan, render_plan_json
    except ImportError:
        pytest.skip("tools.plan is not there yet")
    document = json.loads(render_plan_json(build_plan(dev_run, "dev")))
    assert [v for v in evaluate(from_plan(document)) if v.mandatory] == []


def entry(plan: dict, name: str) -> dict:
    [found] = [item for item in plan["resources"] if item["name"] == name]
    return found


def remove(plan: dict, name: str) -> None:
    plan["resources"].remove(entry(plan, name))


def gpu(plan: dict, queue_resource: str) -> dict:
    return entry(plan, queue_resource)["inputs"]["spec"]["resources"]["gpu"]


MUTATIONS: dict[str, tuple[str, Callable[[dict], None], str, Any]] = {
    # id: (stack, mutation, rule expected, name(s) of the resource(s) the violations point at)
    "queue missing cpu": ("dev", lambda p: entry(p, "queues-team-nlp")["inputs"]["spec"]["resources"].pop("cpu"),
                          "kai-queue-resources-complete", "queues-team-nlp"),
    "queue missing gpu limit": ("eks", lambda p: gpu(p, "queues-team-legal").pop("limit"),
                                "kai-queue-resources-complete", "queues-team-legal"),
    "kai version latest": ("dev", lambda p: entry(p, "kai-release")["inputs"].update(version="latest"),
                           "helm-release-version-pinned", "kai-release"),
    "gpu operator version range": ("eks", lambda p: entry(p, "gpu-operator-release")["inputs"].update(version="^26"),
                                   "helm-release-version-pinned", "gpu-operator-release"),
    "vcluster without version": ("eks", lambda p: entry(p, "tenant-team-support-vcluster")["inputs"].pop("version"),
                                 "helm-release-version-pinned", "tenant-team-support-vcluster"),
    "admission policy removed": ("dev", lambda p: remove(p, "tenant-team-vision-admission-policy"),
                                 "tenant-admission-policy-present", "tenant-team-vision-vcluster"),
    "admission binding removed": ("eks", lambda p: remove(p, "tenant-team-legal-admission-binding"),
                                  "tenant-admission-policy-present", "tenant-team-legal-vcluster"),
    "children over the org quota": ("dev", lambda p: gpu(p, "queues-team-nlp").update(quota=0.5),
                                    "kai-queue-gpu-quota-fits-parent", "queues-ml-org"),
    "parent queue misspelt": ("dev", lambda p: entry(p, "queues-team-nlp")["inputs"]["spec"].update(
        parentQueue="ml-orgg"), "kai-queue-parent-exists", "queues-team-nlp"),
    "org queue removed": ("eks", lambda p: remove(p, "queues-rag-org"),
                          "kai-queue-parent-exists", ("queues-team-legal", "queues-team-support")),
    "namespace without provider": ("dev", lambda p: entry(p, "tenant-team-nlp-namespace").update(provider=None),
                                   "kubernetes-explicit-provider", "tenant-team-nlp-namespace"),
    "queue on the default provider": ("eks", lambda p: entry(p, "queues-team-support").update(
        provider="urn:pulumi:eks::gpu-tenancy::pulumi:providers:kubernetes::default_4_34_2"),
        "kubernetes-explicit-provider", "queues-team-support"),
    "vcluster sets owners": ("dev", lambda p: entry(p, "tenant-team-recommender-vcluster")["inputs"]["values"][
        "experimental"]["syncSettings"].update(setOwner=True),
        "vcluster-set-owner-disabled", "tenant-team-recommender-vcluster"),
}


@pytest.mark.parametrize("case", list(MUTATIONS))
def test_mutated_plan_is_caught(case, dev_plan, eks_plan):
    stack, mutate, rule, names = MUTATIONS[case]
    plan = copy.deepcopy(dev_plan if stack == "dev" else eks_plan)
    mutate(plan)
    mandatory = [v for v in evaluate(from_plan(plan)) if v.mandatory]
    assert mandatory, f"{case}: nothing caught"
    expected = {(rule, name) for name in ((names,) if isinstance(names, str) else names)}
    assert {(v.rule, v.urn.rsplit("::", 1)[-1]) for v in mandatory} == expected, mandatory


def test_time_sliced_default_in_a_plan_is_only_advisory(dev_plan):
    plan = copy.deepcopy(dev_plan)
    config_map = entry(plan, "gpu-operator-time-slicing")["inputs"]["data"]
    sliced = next(key for key in config_map if key.startswith("time-sliced-"))
    entry(plan, "gpu-operator-cluster-policy")["inputs"]["spec"]["devicePlugin"]["config"]["default"] = sliced
    entry(plan, "tenant-team-nlp-vcluster")["inputs"]["values"]["policies"]["resourceQuota"]["enabled"] = "auto"
    violations = evaluate(from_plan(plan))
    assert {(v.rule, v.mandatory) for v in violations} == {
        ("no-time-slicing-with-kai-sharing", False), ("vcluster-resource-quota-enabled", False)}


def test_unknown_plan_values_are_not_violations(dev_plan):
    plan = copy.deepcopy(dev_plan)
    entry(plan, "kai-release")["inputs"]["version"] = PLAN_UNKNOWN
    gpu(plan, "queues-team-nlp")["quota"] = PLAN_UNKNOWN
    [kai_release] = [r for r in from_plan(plan) if r.name == "kai-release"]
    assert kai_release.inputs["version"] is UNKNOWN
    assert [v for v in evaluate(from_plan(plan)) if v.mandatory] == []


# --- the pulumi_policy adapter and policies --------------------------------------------------------


def _options() -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], None, [], None)


def _provider(urn: Optional[str]) -> Optional[PolicyProviderResource]:
    if urn is None:
        return None
    return PolicyProviderResource("pulumi:providers:kubernetes", unknown_checking_proxy({}), urn, urn.rsplit("::")[-1])


def validation_args(type_: str, props: dict, provider: Optional[str] = K8S_PROVIDER) -> ResourceValidationArgs:
    return ResourceValidationArgs(type_, unknown_checking_proxy(props), f"urn:pulumi:dev::gpu-tenancy::{type_}::r",
                                  "r", _options(), _provider(provider))


def stack_args(plan: dict) -> StackValidationArgs:
    return StackValidationArgs([PolicyResource(item["type"], unknown_checking_proxy(item["inputs"]), item["urn"],
                                               item["name"], _options(), _provider(item["provider"]), None, [], {})
                                for item in plan["resources"]])


def run_policy(policy, args) -> list[tuple]:
    reported: list[tuple] = []
    policy.validate(args, lambda message, urn=None: reported.append((message, urn)))
    return reported


@pytest.fixture(scope="module")
def policies() -> dict:
    return {policy.name: policy for policy in build_policies()}


@needs_sdk
def test_policies_mirror_the_rules(policies):
    assert list(policies) == [rule.name for rule in rules.RULES]
    for rule in rules.RULES:
        policy = policies[rule.name]
        assert isinstance(policy, ResourceValidationPolicy if rule.scope == "resource" else StackValidationPolicy)
        assert policy.enforcement_level == (EnforcementLevel.MANDATORY if rule.mandatory
                                            else EnforcementLevel.ADVISORY)
        assert policy.description == rule.description


@needs_sdk
def test_policy_adapter_reads_proxied_props_and_keeps_unknowns():
    args = validation_args(RELEASE, {"chart": "vcluster", "version": UNKNOWN_STRING_VALUE,
                                     "values": {"experimental": {"syncSettings": {"setOwner": False}},
                                                "list": [1, UNKNOWN_STRING_VALUE]}})
    converted = from_policy_resource(args)
    assert converted.inputs["version"] is UNKNOWN and converted.inputs["values"]["list"] == [1, UNKNOWN]
    assert converted.provider == K8S_PROVIDER and converted.type == RELEASE and converted.name == "r"
    assert from_policy_resource(validation_args(NAMESPACE, {}, provider=None)).provider is None


@needs_sdk
def test_resource_policies_report_through_pulumi_policy(policies):
    good = {"chart": "vcluster", "version": "0.36.1", "values": tenant_values()}
    for name, policy in policies.items():
        if isinstance(policy, ResourceValidationPolicy):
            assert run_policy(policy, validation_args(RELEASE, good)) == [], name
    bad = validation_args(RELEASE, {"chart": "vcluster", "version": "latest", "values": {}}, provider=DEFAULT_PROVIDER)
    reported = {name: run_policy(policy, bad) for name, policy in policies.items()
                if isinstance(policy, ResourceValidationPolicy)}
    assert {name for name, found in reported.items() if found} == {
        "helm-release-version-pinned", "vcluster-set-owner-disabled", "kubernetes-explicit-provider",
        "vcluster-resource-quota-enabled"}
    # Unknown values during a preview are not violations (and raise nothing).
    unknown = validation_args(RELEASE, {"chart": "vcluster", "version": UNKNOWN_STRING_VALUE,
                                        "values": UNKNOWN_STRING_VALUE})
    assert all(run_policy(policy, unknown) == [] for policy in policies.values()
               if isinstance(policy, ResourceValidationPolicy))


@needs_sdk
def test_stack_policies_report_through_pulumi_policy(policies, dev_plan):
    stack_policies = [policy for policy in policies.values() if isinstance(policy, StackValidationPolicy)]
    assert all(run_policy(policy, stack_args(dev_plan)) == [] for policy in stack_policies)
    plan = copy.deepcopy(dev_plan)
    remove(plan, "tenant-team-nlp-admission-policy")
    [(message, urn)] = run_policy(policies["tenant-admission-policy-present"], stack_args(plan))
    assert urn == entry(plan, "tenant-team-nlp-vcluster")["urn"] and "team-nlp" in message
    assert [r.name for r in from_stack_args(stack_args(plan))] == [item["name"] for item in plan["resources"]]


# --- python -m policy.check --------------------------------------------------------------------------


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policy.check", *args], cwd=PROJECT_DIR,
                          capture_output=True, text=True, timeout=60)


def test_check_passes_a_good_plan(dev_plan, tmp_path):
    (tmp_path / "plan.json").write_text(json.dumps(dev_plan))
    result = check(str(tmp_path / "plan.json"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 mandatory violation(s), 0 advisory warning(s)" in result.stdout


def test_check_fails_a_bad_plan_and_names_the_rule(eks_plan, tmp_path):
    plan = copy.deepcopy(eks_plan)
    entry(plan, "kai-release")["inputs"]["version"] = "latest"
    entry(plan, "tenant-team-support-vcluster")["inputs"]["values"]["policies"]["resourceQuota"]["enabled"] = False
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    result = check(str(tmp_path / "plan.json"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[mandatory] helm-release-version-pinned" in result.stdout
    assert "[advisory] vcluster-resource-quota-enabled" in result.stdout
    assert entry(plan, "kai-release")["urn"] in result.stdout


# The remaining cases call main() in-process: same code, no interpreter start-up.

def test_check_reads_the_plan_directory_and_prints_json(eks_plan, tmp_path, capsys):
    plan = copy.deepcopy(eks_plan)
    entry(plan, "kai-release")["inputs"]["version"] = "latest"
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert check_main([str(tmp_path), "--json"]) == 1
    [violation] = json.loads(capsys.readouterr().out)
    assert violation["rule"] == "helm-release-version-pinned" and violation["level"] == "mandatory"
    assert violation["urn"] == entry(plan, "kai-release")["urn"]


def test_check_passes_a_plan_with_only_advisories(dev_plan, tmp_path, capsys):
    plan = copy.deepcopy(dev_plan)
    entry(plan, "tenant-team-nlp-vcluster")["inputs"]["values"]["policies"].pop("resourceQuota")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    assert check_main([str(tmp_path / "plan.json")]) == 0
    out = capsys.readouterr().out
    assert "[advisory] vcluster-resource-quota-enabled" in out and "0 mandatory violation(s), 1 advisory" in out


@pytest.mark.parametrize("content", ['"nope"', "{not json", '{"resources": [{"name": "no type"}]}', None])
def test_check_rejects_what_is_not_a_plan(content, tmp_path, capsys):
    path = tmp_path / "plan.json"
    if content is not None:
        path.write_text(content)
    assert check_main([str(path)]) == 2
    assert "cannot read" in capsys.readouterr().err


# --- the pack as the Pulumi CLI runs it ---------------------------------------------------------------


@needs_sdk
def test_pack_runs_as_the_cli_starts_it(dev_plan):
    """``pulumi-analyzer-policy-python`` runs ``python -u -m pulumi.policy <engine> .`` in policy/:
    the pack must import from there (no `policy` package) and answer the engine over gRPC."""
    grpc = pytest.importorskip("grpc")
    from google.protobuf import empty_pb2, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

    server = subprocess.Popen([sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
                              cwd=PROJECT_DIR / "policy", stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        assert port.isdigit(), f"the pack did not start: {server.stderr.read() if server.poll() is not None else ''}"
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            analyzer = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=20)
            assert info.name == "gpu-tenancy"
            assert [policy.name for policy in info.policies] == [rule.name for rule in rules.RULES]

            def struct(value: dict) -> struct_pb2.Struct:
                message = struct_pb2.Struct()
                message.update(value)
                return message

            def provider(urn: Optional[str]) -> dict:
                if not urn:
                    return {}
                return {"provider": analyzer_pb2.AnalyzerProviderResource(
                    type="pulumi:providers:kubernetes", urn=urn, name=urn.rsplit("::", 1)[-1])}

            response = analyzer.Analyze(analyzer_pb2.AnalyzeRequest(
                type=RELEASE, urn="urn:pulumi:dev::gpu-tenancy::kubernetes:helm.sh/v3:Release::r", name="r",
                properties=struct({"chart": "vcluster", "version": "latest", "values": {"experimental": {
                    "syncSettings": {"setOwner": UNKNOWN_STRING_VALUE}}, "policies": {"resourceQuota": {
                        "enabled": True}}}}),
                **provider(DEFAULT_PROVIDER)), timeout=20)
            assert {d.policyName for d in response.diagnostics} == {"helm-release-version-pinned",
                                                                   "kubernetes-explicit-provider"}

            plan = copy.deepcopy(dev_plan)
            remove(plan, "tenant-team-nlp-admission-binding")
            request = analyzer_pb2.AnalyzeStackRequest(resources=[analyzer_pb2.AnalyzerResource(
                type=item["type"], urn=item["urn"], name=item["name"], properties=struct(item["inputs"]),
                **provider(item["provider"])) for item in plan["resources"]])
            response = analyzer.AnalyzeStack(request, timeout=20)
            assert [(d.policyName, d.urn) for d in response.diagnostics] == [
                ("tenant-admission-policy-present", entry(plan, "tenant-team-nlp-vcluster")["urn"])]
    finally:
        server.kill()
        server.communicate(timeout=10)  # reads and closes both pipes
