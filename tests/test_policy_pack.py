"""The CrossGuard policy pack (policy/) as a whole: the committed stacks' offline plans (no mandatory
violation), mutated plans (caught), the pulumi_policy adapter, ``python -m policy.check`` and the pack
as the Pulumi CLI starts it (a real analyzer server from inside policy/, spoken to over gRPC). The rules
one by one are in test_policy_rules*.py. No PolicyPack is constructed in this process: that would start
a server and block."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any, Callable, Optional

import pytest

from config.stack_file import PROJECT_DIR
from policy import rules
from policy.adapters import PLAN_UNKNOWN, from_plan, from_policy_resource, from_stack_args
from policy.check import main as check_main
from policy.rule_model import UNKNOWN
from policy.rules import evaluate
from tests.policy_spec import (
    BINDING, DEFAULT_PROVIDER, K8S_PROVIDER, NAMESPACE, POLICY, QUEUE,
    RELEASE, tenant_values,
)
from tools.offline.recording import ProgramRun

import grpc
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
from pulumi_policy import (EnforcementLevel, PolicyProviderResource, PolicyResource, PolicyResourceOptions,
                           ResourceValidationArgs, ResourceValidationPolicy, StackValidationArgs,
                           StackValidationPolicy)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policy.pack import build_policies
from tools.plan.document import build_plan, render_plan_json


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


def test_policies_mirror_the_rules(policies):
    assert list(policies) == [rule.name for rule in rules.RULES]
    for rule in rules.RULES:
        policy = policies[rule.name]
        assert isinstance(policy, ResourceValidationPolicy if rule.scope == "resource" else StackValidationPolicy)
        assert policy.enforcement_level == (EnforcementLevel.MANDATORY if rule.mandatory
                                            else EnforcementLevel.ADVISORY)
        assert policy.description == rule.description


def test_policy_adapter_reads_proxied_props_and_keeps_unknowns():
    args = validation_args(RELEASE, {"chart": "vcluster", "version": UNKNOWN_STRING_VALUE,
                                     "values": {"experimental": {"syncSettings": {"setOwner": False}},
                                                "list": [1, UNKNOWN_STRING_VALUE]}})
    converted = from_policy_resource(args)
    assert converted.inputs["version"] is UNKNOWN and converted.inputs["values"]["list"] == [1, UNKNOWN]
    assert converted.provider == K8S_PROVIDER and converted.type == RELEASE and converted.name == "r"
    assert from_policy_resource(validation_args(NAMESPACE, {}, provider=None)).provider is None


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


def test_pack_runs_as_the_cli_starts_it(dev_plan):
    """``pulumi-analyzer-policy-python`` runs ``python -u -m pulumi.policy <engine> .`` in policy/:
    the pack must import from there (no `policy` package) and answer the engine over gRPC."""
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


def test_the_ci_docs_name_every_rule_of_the_pack_as_mandatory_or_advisory():
    # The docs' list had lost grafana-admin-from-secret while the pack enforced it.
    text = (PROJECT_DIR / "docs" / "ci-and-sites.md").read_text()
    paragraph = " ".join(text[text.index("**The policy pack**"):].split("\n\n")[0].split())
    mandatory, advisory = paragraph.split("Advisory:")
    for rule in rules.RULES:
        assert f"`{rule.name}`" in (mandatory if rule.mandatory else advisory), rule.name
