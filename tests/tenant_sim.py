"""What the host API server sees when a tenant writes a pod, built the way upstream builds it.

tests/vcluster_pods.py models vCluster's syncer, tests/kai_pods.py KAI's webhook and controllers and
tests/apiserver_pods.py the API server's own defaulting and validation; this module adds the API server's
admission around them:

- ``Admission``: the API server's part of a ValidatingAdmissionPolicy as far as these policies use it
  (match rules, namespace selector, match conditions, variables, validations, message expressions),
  with the policy's CEL evaluated by cel-python plus the Kubernetes string functions it lacks, and by CEL C++
  (tests/reference_cel.py), which must agree; the size rules' floods by CEL C++ alone (tests/cel_judges.py).
- ``Tenant`` (``tenant_of``): one team of a program run: a virtual pod is synced, mutated by KAI's
  webhook, validated by the API server (which refuses what the webhook leaves invalid) and then
  judged by the team's admission policy; KAI's and the syncer's later updates likewise.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Callable, Iterator, Optional

import celpy

from config import load_platform
from config.model import Platform, Team
from components.pod_size_admission import POD_SIZE_POLICY
from config.vocabulary import KAI_NAMESPACE, NAMESPACE, NAMESPACE_NAME_LABEL, TEAM_LABEL, project_config
from policy.label_selectors import selector_matches
from tests.cel_runs import Inputs, run
from tests.cel_judges import CEL_FUNCTIONS, agree, judged_by_reference_alone, plain_value
from tests.reference_cel import REFERENCE
from tests.served_objects import as_served
from tests.apiserver_pods import api_validate, limit_range_max, limit_ranger, pull_policy_defaults
from tests.kai_pods import GPU_RESOURCE, WebhookRefusal, kai_bind, kai_group, kai_mutate
from tests.kai_pods import KAI_SCHEDULER  # noqa: F401 (the attack tests take it from here with the pod builders)
from tests.vcluster_pods import copy_back, syncer_update, vcluster_sync

KAI_POD_GROUPER = f"system:serviceaccount:{KAI_NAMESPACE}:pod-grouper"
KAI_BINDER = f"system:serviceaccount:{KAI_NAMESPACE}:binder"
POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


def virtual_pod(name: str = "model", namespace: str = "default", *, queue: Optional[str] = None,
                scheduler: Optional[str] = None, annotations: Optional[dict] = None, labels: Optional[dict] = None,
                containers: Optional[list] = None, **spec) -> dict:
    """A pod as a tenant writes it inside its vCluster."""
    pod_labels = dict(labels or {})
    if queue is not None:
        pod_labels["kai.scheduler/queue"] = queue
    pod_spec = {"containers": containers or [container()], **spec}
    if scheduler is not None:
        pod_spec["schedulerName"] = scheduler
    metadata = {"name": name, "namespace": namespace, "labels": pod_labels}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


def container(name: str = "main", *, gpus: Optional[str] = None, mig: Optional[str] = None,
              env: Optional[dict] = None, env_entries: Optional[list] = None, env_from: Optional[list] = None,
              cpu: str = "500m") -> dict:
    """A container; limits only, as users write them (the API server copies them to requests)."""
    limits = {"cpu": cpu, "memory": "1Gi"}
    if gpus is not None:
        limits[GPU_RESOURCE] = gpus
    if mig is not None:
        limits[mig] = "1"
    result = {"name": name, "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
              "resources": {"limits": limits, "requests": dict(limits)}}
    entries = [{"name": key, "value": value} for key, value in (env or {}).items()] + list(env_entries or [])
    if entries:
        result["env"] = entries
    if env_from:
        result["envFrom"] = env_from
    return result


# Called with (policy spec, {object, oldObject, request}, matched, refusal messages) for every review a policy's match
# constraints take: tests/celgo.py records them to judge them again with cel-go.
REVIEW_OBSERVERS: list = []
# Called with (Admission, {object, oldObject, request}, refusal messages) for every review, matched or not:
# tests/apiserver_vap.py records them to send them to the API server's own admission plugin.
ADMISSION_OBSERVERS: list = []


@contextlib.contextmanager
def recording(observers: list, record: Callable) -> Iterator[list]:
    """What ``record`` makes of each review made inside the block, called as ``observers`` (REVIEW_OBSERVERS,
    ADMISSION_OBSERVERS) are."""
    made: list = []

    def observe(*arguments) -> None:
        made.append(record(*arguments))
    observers.append(observe)
    try:
        yield made
    finally:
        observers.remove(observe)


def namespace_object(name: str, labels: Optional[dict] = None, annotations: Optional[dict] = None) -> dict:
    """A namespace as a policy reads it (``namespaceObject``, k8s.io/apiserver admission/plugin/cel
    CreateNamespaceObject): its metadata's labels, with the name label the API server adds, and annotations."""
    metadata = {"name": name, "labels": {**(labels or {}), NAMESPACE_NAME_LABEL: name}}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {"metadata": metadata, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}


def namespaces_of(program) -> dict[str, dict]:
    """Each namespace a program creates, by name, as a policy reads it."""
    return {metadata["name"]: namespace_object(metadata["name"], metadata.get("labels"), metadata.get("annotations"))
            for resource in program.of_type(NAMESPACE) if (metadata := resource.inputs["metadata"])}


class Admission:
    """One ValidatingAdmissionPolicy and its binding, evaluated like the API server does, in a cluster whose
    ``namespaces`` are known by name (namespace_object); any other is one with no labels or annotations of its own."""

    def __init__(self, policy_spec: dict, binding_spec: dict, namespaces: Optional[dict[str, dict]] = None):
        self.spec = policy_spec
        self.binding = binding_spec
        self.namespaces = dict(namespaces or {})
        self.env = celpy.Environment()
        self._programs: dict = {}

    def namespace(self, name: str) -> Optional[dict]:
        """The request's namespace as the policy reads it; none for a cluster-scoped request."""
        return (self.namespaces.get(name) or namespace_object(name)) if name else None

    def evaluate(self, expression: str, activation: dict):
        if expression not in self._programs:
            self._programs[expression] = self.env.program(self.env.compile(expression), functions=CEL_FUNCTIONS)
        return self._programs[expression].evaluate(activation)

    def requested(self, namespace: str, obj: dict, *, operation: str = "CREATE", subresource: str = "") -> bool:
        """The policy's match constraints and the binding's namespace selector (the part without CEL)."""
        constraints = self.spec["matchConstraints"]
        resource = "pods" + (f"/{subresource}" if subresource else "")
        if not any(operation in rule["operations"] and resource in rule["resources"]
                   for rule in constraints["resourceRules"]):
            return False
        return self.selects_namespace(namespace)

    def selects_namespace(self, namespace: str) -> bool:
        namespace_labels = self.namespace(namespace)["metadata"]["labels"]
        selectors = [self.spec["matchConstraints"].get("namespaceSelector", {}),
                     self.binding["matchResources"]["namespaceSelector"]]
        return all(selector_matches(selector, namespace_labels) for selector in selectors)

    def matches(self, namespace: str, pod: Optional[dict], *, operation: str = "CREATE", subresource: str = "",
                old: Optional[dict] = None, user: str = "", options: Optional[dict] = None) -> bool:
        pod, old = served(pod), served(old)
        return self._matched(namespace, pod, operation=operation, subresource=subresource, old=old, user=user,
                             options=options) is not None

    def _matched(self, namespace: str, pod: Optional[dict], *, operation: str, subresource: str,
                 old: Optional[dict], user: str, options: Optional[dict]) -> Optional[Inputs]:
        """The review's inputs without variables when the policy matches, else None."""
        if not self.requested(namespace, pod, operation=operation, subresource=subresource):
            return None
        inputs = Inputs(object=pod, oldObject=old, request=_request(operation, subresource, user, namespace, options),
                        namespaceObject=self.namespace(namespace), variables={})
        matched = all(bool(run(self.evaluate, condition["expression"], inputs))
                      for condition in self.spec.get("matchConditions", []))
        return inputs if matched else None

    def _inputs(self, namespace: str, pod: Optional[dict], *, operation: str, subresource: str,
                old: Optional[dict], user: str, options: Optional[dict]) -> Optional[Inputs]:
        inputs = self._matched(namespace, pod, operation=operation, subresource=subresource, old=old, user=user,
                               options=options)
        for variable in self.spec.get("variables", []) if inputs is not None else []:
            inputs.with_variable(variable["name"], plain_value(run(self.evaluate, variable["expression"], inputs)))
        return inputs

    def context(self, namespace: str, pod: Optional[dict], *, operation: str = "CREATE", subresource: str = "",
                old: Optional[dict] = None, user: str = "", options: Optional[dict] = None) -> Optional[dict]:
        """The CEL activation with the policy's variables evaluated in order, or None when the policy does not match."""
        pod, old = served(pod), served(old)
        inputs = self._inputs(namespace, pod, operation=operation, subresource=subresource, old=old, user=user,
                              options=options)
        return None if inputs is None else inputs.activation

    def review(self, namespace: str, pod: Optional[dict], *, operation: str = "CREATE", subresource: str = "",
               old: Optional[dict] = None, user: str = "", options: Optional[dict] = None) -> list[str]:
        """Rejection messages; empty when admitted or not matched. CEL C++ must reach the same (past
        ``CROSS_CHECKED_BYTES``, CEL C++ alone judges a review it evaluates without an error). A DELETE has no
        ``pod`` (null), the pod as stored in ``old`` and the request's DeleteOptions in ``options``. Each object is
        judged as the API server serves it (``served``)."""
        # The API server requires a binding's actions; this model refuses, as every binding the program makes does.
        assert self.binding.get("validationActions") == ["Deny"], f"a binding that does not deny: {self.binding}"
        pod, old = served(pod), served(old)
        requested = self.requested(namespace, pod, operation=operation, subresource=subresource)
        request = _request(operation, subresource, user, namespace, options)
        objects = {"object": pod, "oldObject": old, "request": request, "namespaceObject": self.namespace(namespace)}
        verdict = REFERENCE.review(self.spec, objects) if requested else None
        if verdict is not None and judged_by_reference_alone(verdict, pod, old):
            matched, messages = verdict.matched, [text for _, text in verdict.refusals]
        else:
            inputs = self._inputs(namespace, pod, operation=operation, subresource=subresource, old=old, user=user,
                                  options=options)
            matched, messages = inputs is not None, [] if inputs is None else [
                self._message(validation, inputs) for validation in self.spec["validations"]
                if not bool(run(self.evaluate, validation["expression"], inputs))]
            if verdict is not None:
                agree(verdict, None if inputs is None else inputs.activation, messages)
        if requested:
            for observe in REVIEW_OBSERVERS:
                observe(self.spec, copy.deepcopy(objects), matched, messages)
        for observe in ADMISSION_OBSERVERS:
            observe(self, copy.deepcopy(objects), list(messages))
        return messages

    def _message(self, validation: dict, inputs: Inputs) -> str:
        """The messageExpression's value when it yields a non-empty string, else the static message."""
        if "messageExpression" in validation:
            try:
                value = run(self.evaluate, validation["messageExpression"], inputs)
            except celpy.CELEvalError:
                value = None
            if isinstance(value, str) and value.strip():
                return str(value)
        return validation.get("message", "")


# The Kubernetes release whose host serves the objects judged (tests/served_objects.py RELEASES); None: the pin.
_SERVING: list[Optional[str]] = [None]


@contextlib.contextmanager
def served_by(release: Optional[str]) -> Iterator[None]:
    """Every object judged inside the block is served as a host of Kubernetes ``release`` serves it."""
    _SERVING.append(release)
    try:
        yield
    finally:
        _SERVING.pop()


def served(obj: Optional[dict]) -> Optional[dict]:
    """A request's object as the API server hands it to admission (tests/served_objects.py). The API server decodes a
    body into the type of the resource it is sent to, whatever it says; the model knows that type by ``kind``, so an
    object without one would reach the policy unserved (unknown fields kept, nulls missing): an error."""
    if obj is None:
        return None
    assert obj.get("kind"), f"a judged object without kind: {obj.get('apiVersion')} " \
                            f"{obj.get('metadata', {}).get('name')!r}: {str(obj)[:200]}"
    return as_served(obj["kind"], obj, _SERVING[-1])


def platform_of(config: dict) -> Platform:
    """The platform of a stack's ``config:`` block (full ``gpu-tenancy:`` keys)."""
    return load_platform(project_config(config))


def admission_for(program, team: str, policy: Optional[str] = None) -> Admission:
    """The policy ``policy`` of a program run (team ``team``'s pod policy unless named), with the team's binding of
    it, in the run's namespaces."""
    name = policy or f"gpu-tenancy-{team}"
    spec = next(p for p in program.of_type(POLICY) if p.inputs["metadata"]["name"] == name)
    binding = next(b for b in program.of_type(BINDING) if b.inputs["spec"]["policyName"] == name
                   and b.inputs["metadata"]["labels"][TEAM_LABEL] == team)
    return Admission(spec.inputs["spec"], binding.inputs["spec"], namespaces_of(program))


class Tenant:
    """One team's view: sync a virtual pod as its vCluster would, then ask the host API server: the team's pod policy
    (``admission``) and the site's pod-size policy (``size_admission``, components/pod_size_admission.py)."""

    def __init__(self, admission: Admission, team: Team, size_admission: Optional[Admission] = None):
        self.admission = admission
        self.size_admission = size_admission
        self.team = team
        self.syncer = f"system:serviceaccount:{team.namespace}:vc-{team.vcluster_name}"
        self._defaults: list = []

    def vcluster_defaults(self, pod: dict) -> dict:
        """The pod after the vCluster's device-features and limit defaults (components/virtual_defaults.py), which
        every GPU pod, and every pod requesting more than the host's default limit without a limit, needs on the
        host; the other in-vCluster defaults are left to each test (a tenant may delete any of them)."""
        from components.virtual_defaults import device_features_policy, limit_defaults_policy
        from tests.virtual_sim import Mutation
        if not self._defaults:
            self._defaults = [Mutation(policy(self.team)["spec"], {"matchResources": {"namespaceSelector": {}}})
                              for policy in (device_features_policy, limit_defaults_policy)]
        for mutation in self._defaults:
            pod = mutation.mutate(pod["metadata"].get("namespace", "default"), pod, "kubernetes-admin")
        return pod

    def host_pod(self, pod: dict, *, mutated: bool = True, kai_version: str = "v0.16.4", defaults: bool = True) -> dict:
        """The synced pod after the host API server's defaulting and admission chain: LimitRanger, then KAI's
        webhook. ``defaults``: the vCluster's device-features and limit defaults ran first; a tenant that deleted
        them sends the pod as written."""
        virtual = self.vcluster_defaults(pod) if defaults else pod
        synced = limit_ranger(pull_policy_defaults(vcluster_sync(virtual, self.team)), self.team.vcluster)
        return self.host_webhooks(synced, kai_version=kai_version) if mutated else synced

    def host_webhooks(self, pod: dict, *, kai_version: str = "v0.16.4") -> dict:
        """The host's mutating webhooks on a pod sent to the team's namespace: KAI's."""
        return kai_mutate(pod, kai_version=kai_version)

    def create(self, pod: dict, *, mutated: bool = True, kai_version: str = "v0.16.4", defaults: bool = True) -> list[str]:
        """Refusals of the whole CREATE path: KAI's webhook, API validation, then the admission policy."""
        try:
            host = self.host_pod(pod, mutated=mutated, kai_version=kai_version, defaults=defaults)
        except WebhookRefusal as refusal:
            return [str(refusal)]
        return self.create_host(host)

    def create_host(self, host: dict, *, user: Optional[str] = None) -> list[str]:
        return api_validate(host) or limit_range_max(host, self.team.vcluster) \
            or self.review(host, user=user or self.syncer)

    def update(self, old_host: dict, new_host: dict, *, user=None, subresource: str = "") -> list[str]:
        return self.review(new_host, operation="UPDATE", old=old_host, user=user or self.syncer,
                           subresource=subresource)

    def review(self, host: dict, **request) -> list[str]:
        """Every pod policy's refusals of a request on the team's namespace, the team's own first."""
        admissions = [self.admission] + ([self.size_admission] if self.size_admission else [])
        return [message for admission in admissions for message in admission.review(self.team.namespace, host,
                                                                                     **request)]

    def scheduled_by_kai(self, created: dict, groups: tuple[str, ...] = ()) -> tuple[list[str], dict]:
        """KAI's pod-grouper, then its binder (with the scheduler's GPU ``groups``), updating a created host pod:
        their refusals, and the bound pod."""
        grouped = kai_group(created)
        bound = kai_bind(grouped, groups=groups)
        return self.update(created, grouped, user=KAI_POD_GROUPER) + self.update(grouped, bound, user=KAI_BINDER), bound

    def run_and_edit(self, virtual: dict, edit) -> list[str]:
        """Refusals of a pod's life after creation: KAI groups and binds the host pod, vCluster copies KAI's keys
        into the virtual pod, ``edit`` changes that copy in place as the tenant would, and the syncer carries the
        edit, KAI's keys with it, back to the host."""
        created = self.host_pod(virtual)
        refusals, bound = self.scheduled_by_kai(created)
        seen = copy_back(bound, virtual, self.team)
        edited = copy.deepcopy(seen)
        edit(edited)
        return self.create_host(created) + refusals + self.update(bound, syncer_update(bound, seen, edited, self.team))


def tenant_of(program, config: dict, team: str) -> Tenant:
    """Team ``team`` of a run of ``config``, with the admission policy that run rendered for it."""
    settings = next(t for t in platform_of(config).teams if t.name == team)
    return Tenant(admission_for(program, team), settings, admission_for(program, team, POD_SIZE_POLICY))


def _request(operation: str, subresource: str, user: str, namespace: str = "", options: Optional[dict] = None) -> dict:
    request = {"operation": operation, "subResource": subresource, "namespace": namespace,
               "userInfo": {"username": user}}
    return request if options is None else {**request, "options": options}
