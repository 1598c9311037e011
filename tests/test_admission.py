"""Tenant admission policies, evaluated for real: the rendered CEL runs in cel-python against
sample pods, after the policy's own selectors decide whether the pod is matched at all."""

from __future__ import annotations

import celpy
import pytest

from tests.conftest import dev_config, run

POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


class Admission:
    """The API server's part, as far as these policies use it: selectors, variables, validations."""

    def __init__(self, policy_spec: dict, binding_spec: dict):
        self.spec = policy_spec
        self.binding = binding_spec
        self.env = celpy.Environment()

    def _run(self, expression: str, activation: dict):
        program = self.env.program(self.env.compile(expression))
        return program.evaluate(activation)

    def matches(self, namespace: str, pod: dict, operation: str = "CREATE") -> bool:
        constraints = self.spec["matchConstraints"]
        rule = constraints["resourceRules"][0]
        namespace_labels = {"kubernetes.io/metadata.name": namespace}
        selectors = [(constraints["namespaceSelector"], namespace_labels),
                     (self.binding["matchResources"]["namespaceSelector"], namespace_labels),
                     (constraints["objectSelector"], pod["metadata"].get("labels", {}))]
        return operation in rule["operations"] and "pods" in rule["resources"] and all(
            all(labels.get(key) == value for key, value in selector["matchLabels"].items())
            for selector, labels in selectors)

    def review(self, namespace: str, pod: dict, operation: str = "CREATE") -> list[str]:
        """Rejection messages; empty when admitted (or not matched)."""
        if not self.matches(namespace, pod, operation):
            return []
        variables: dict = {}
        for variable in self.spec["variables"]:
            activation = {"object": celpy.json_to_cel(pod), "variables": celpy.json_to_cel(variables)}
            variables[variable["name"]] = _plain(self._run(variable["expression"], activation))
        activation = {"object": celpy.json_to_cel(pod), "variables": celpy.json_to_cel(variables)}
        messages = []
        for validation in self.spec["validations"]:
            if not bool(self._run(validation["expression"], activation)):
                message = validation.get("message") or str(self._run(validation["messageExpression"], activation))
                messages.append(message)
        return messages


def _plain(value):
    if isinstance(value, celpy.celtypes.BoolType):
        return bool(value)
    if isinstance(value, celpy.celtypes.StringType):
        return str(value)
    return value


def admission_for(program, team: str) -> Admission:
    policy = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == f"gpu-tenancy-{team}")
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == f"gpu-tenancy-{team}")
    return Admission(policy.inputs["spec"], binding.inputs["spec"])


def synced_pod(*, queue=None, scheduler=None, annotations=None, limits=None, requests=None, init_gpu=False,
               vcluster="team-nlp", virtual_namespace="default"):
    labels = {"vcluster.loft.sh/managed-by": vcluster, "vcluster.loft.sh/namespace": virtual_namespace}
    if queue is not None:
        labels["kai.scheduler/queue"] = queue
    container = {"name": "main", "image": "nvidia/cuda:12.4.0-base-ubuntu22.04"}
    resources = {}
    if limits:
        resources["limits"] = limits
    if requests:
        resources["requests"] = requests
    if resources:
        container["resources"] = resources
    spec = {"containers": [container]}
    if init_gpu:
        spec["initContainers"] = [{"name": "warmup", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    metadata = {"name": f"model-x-default-x-{vcluster}", "labels": labels}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


NAMESPACE = "vcluster-team-nlp"


@pytest.fixture(scope="module")
def nlp(dev_run):
    return admission_for(dev_run, "team-nlp")


@pytest.fixture(scope="module")
def strict_nlp():
    config = dev_config()
    config["gpu-tenancy:teams"][0]["strict"] = True
    return admission_for(run(config), "team-nlp")


def test_fractional_gpu_pod_in_its_own_queue_is_admitted(nlp):
    pod = synced_pod(queue="team-nlp", scheduler="kai-scheduler", annotations={"gpu-fraction": "0.33"})
    assert nlp.review(NAMESPACE, pod) == []


def test_whole_gpu_pod_in_its_own_queue_is_admitted(nlp):
    pod = synced_pod(queue="team-nlp", scheduler="kai-scheduler", limits={"nvidia.com/gpu": "1"})
    assert nlp.review(NAMESPACE, pod) == []


def test_a_pod_naming_another_teams_queue_is_rejected_with_the_fix(nlp):
    pod = synced_pod(queue="team-vision", scheduler="kai-scheduler", annotations={"gpu-fraction": "0.33"})
    messages = nlp.review(NAMESPACE, pod)
    assert messages
    assert "team-vision" in messages[0] and "kai.scheduler/queue: team-nlp" in messages[0]


def test_a_cpu_pod_naming_another_teams_queue_is_rejected(nlp):
    assert nlp.review(NAMESPACE, synced_pod(queue="ml-org", scheduler="kai-scheduler"))


@pytest.mark.parametrize("gpu", [
    {"annotations": {"gpu-fraction": "0.5"}},
    {"annotations": {"gpu-memory": "4096"}},
    {"limits": {"nvidia.com/gpu": "1"}},
    {"requests": {"nvidia.com/gpu": "1"}},
    {"init_gpu": True},
])
def test_a_gpu_pod_on_the_default_scheduler_is_rejected(nlp, gpu):
    pod = synced_pod(queue="team-nlp", **gpu)
    messages = nlp.review(NAMESPACE, pod)
    assert any("schedulerName: kai-scheduler" in message for message in messages)


def test_a_gpu_pod_on_kai_without_a_queue_is_rejected(nlp):
    pod = synced_pod(scheduler="kai-scheduler", annotations={"gpu-fraction": "0.5"})
    assert any("kai.scheduler/queue: team-nlp" in message for message in nlp.review(NAMESPACE, pod))


def test_a_plain_cpu_pod_is_admitted_so_tenants_can_install_ordinary_charts(nlp):
    assert nlp.review(NAMESPACE, synced_pod(limits={"cpu": "1", "memory": "1Gi"})) == []


def test_a_strict_team_requires_kai_and_its_queue_for_every_pod(strict_nlp):
    assert strict_nlp.review(NAMESPACE, synced_pod(limits={"cpu": "1"}))
    assert strict_nlp.review(NAMESPACE, synced_pod(queue="team-nlp", scheduler="kai-scheduler")) == []


def test_strict_mode_keeps_the_tenants_own_dns_running(strict_nlp):
    coredns = synced_pod(virtual_namespace="kube-system", limits={"cpu": "100m"})
    assert strict_nlp.review(NAMESPACE, coredns) == []
    gpu_in_kube_system = synced_pod(virtual_namespace="kube-system", annotations={"gpu-fraction": "0.5"})
    assert strict_nlp.review(NAMESPACE, gpu_in_kube_system), "GPU pods are checked in every namespace"


def test_updates_are_checked_too(nlp):
    pod = synced_pod(queue="team-vision", scheduler="kai-scheduler")
    assert nlp.review(NAMESPACE, pod, operation="UPDATE")


def test_the_vcluster_control_plane_pod_is_never_matched(strict_nlp):
    control_plane = {"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": "team-nlp-0", "labels": {"app": "vcluster", "release": "team-nlp"}},
                     "spec": {"containers": [{"name": "syncer"}]}}
    assert not strict_nlp.matches(NAMESPACE, control_plane)
    assert strict_nlp.review(NAMESPACE, control_plane) == []


def test_a_policy_only_covers_its_own_tenant_namespace(nlp):
    foreign = synced_pod(queue="team-nlp", vcluster="team-vision")
    assert not nlp.matches("vcluster-team-vision", foreign)
    assert not nlp.matches(NAMESPACE, foreign)


def test_every_tenant_of_every_stack_has_its_policy_and_binding(dev_run, eks_run):
    for program in (dev_run, eks_run):
        teams = set(program.outputs["tenants"])
        policies = {p.inputs["metadata"]["name"] for p in program.of_type(POLICY)}
        bindings = {b.inputs["spec"]["policyName"]: b for b in program.of_type(BINDING)}
        assert policies == {f"gpu-tenancy-{team}" for team in teams} == set(bindings)
        assert all(b.inputs["spec"]["validationActions"] == ["Deny"] for b in bindings.values())


def test_the_policy_is_in_place_before_the_vcluster_syncs_pods(dev_run):
    release = next(r for r in dev_run.of_type("kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "team-nlp")
    binding = dev_run.named("tenant-team-nlp-admission-binding")
    assert binding.urn in release.dependencies


def test_eks_policies_use_the_configured_namespace_and_vcluster_name(eks_run):
    legal = admission_for(eks_run, "team-legal")
    pod = synced_pod(queue="team-legal", scheduler="kai-scheduler", annotations={"gpu-fraction": "0.5"},
                     vcluster="rag-legal")
    assert legal.matches("team-legal", pod)
    assert legal.review("team-legal", pod) == []
    assert legal.review("team-legal", synced_pod(queue="team-support", vcluster="rag-legal"))
