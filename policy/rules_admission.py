"""The tenant admission guardrail: every vCluster release has a ValidatingAdmissionPolicy and a Deny binding
that cover its synced pods, judged with the selectors as the API server evaluates them.

Like ``rules.py``, this module imports nothing from the project or from ``pulumi_policy``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

if __package__:  # imported as the `policy` package
    from .rule_model import (
        MANAGED_BY_LABEL, NAMESPACE_NAME_LABEL, QUEUE_LABEL, UNKNOWN, Finding, Resource, get, is_kind, is_known,
        is_vcluster, kubernetes_kind, release_identity,
    )
    from .label_selectors import InvalidSelector, selector_matches
else:  # the Pulumi CLI runs the pack from policy/ as top-level modules
    from rule_model import (
        MANAGED_BY_LABEL, NAMESPACE_NAME_LABEL, QUEUE_LABEL, UNKNOWN, Finding, Resource, get, is_kind, is_known,
        is_vcluster, kubernetes_kind, release_identity,
    )
    from label_selectors import InvalidSelector, selector_matches


def admission_selector_matches(selector: Any, labels: Mapping[str, str]) -> Optional[bool]:
    """Whether an admission namespaceSelector / objectSelector selects an object with exactly these labels.

    Absent, it selects everything (the API server defaults it to the empty selector). None when
    part of it is not known yet; :class:`InvalidSelector` when the API server would refuse it.
    """
    if selector is None:
        return True
    if not is_known(selector):
        return None
    return selector_matches(selector, labels)


def _namespace_labels(resources: Sequence[Resource], namespace: str) -> dict[str, str]:
    """The labels a namespace certainly has: its name label, plus those the stack gives it."""
    labels: dict[str, str] = {}
    for resource in resources:
        if is_kind(resource, "Namespace") and get(resource.inputs, "metadata", "name") == namespace:
            own = get(resource.inputs, "metadata", "labels")
            if isinstance(own, Mapping):
                labels.update({key: value for key, value in own.items() if isinstance(value, str)})
    labels[NAMESPACE_NAME_LABEL] = namespace
    return labels


def _rules_cover_pod_creation(rules: Any) -> Optional[bool]:
    if rules is UNKNOWN:
        return None
    if not isinstance(rules, Sequence) or isinstance(rules, str):
        return False
    for rule in rules:
        if not isinstance(rule, Mapping):
            continue
        groups, resources_, operations = rule.get("apiGroups"), rule.get("resources"), rule.get("operations")
        if UNKNOWN in (groups, resources_, operations):
            return None
        if (isinstance(groups, Sequence) and ("" in groups or "*" in groups)
                and isinstance(resources_, Sequence) and ("pods" in resources_ or "*" in resources_)
                and isinstance(operations, Sequence) and ("CREATE" in operations or "*" in operations)):
            return True
    return False


def _match_covers(match: Any, namespace_labels: Mapping[str, str], pod_labels: Mapping[str, str],
                  policy: bool) -> Optional[bool]:
    """Whether a policy's matchConstraints (policy=True) or a binding's matchResources select the tenant's pods.

    A policy must have matchConstraints covering pod creation; a binding without matchResources
    applies wherever its policy does. None when something needed is not known yet;
    :class:`InvalidSelector` (naming the selector) when the API server would refuse one.
    """
    if match is UNKNOWN:
        return None
    if match is None:
        return not policy
    if not isinstance(match, Mapping):
        return False
    results = []
    for field, labels in (("namespaceSelector", namespace_labels), ("objectSelector", pod_labels)):
        try:
            results.append(admission_selector_matches(match.get(field), labels))
        except InvalidSelector as error:
            raise InvalidSelector(f"{field}: {error}") from error
    if policy:
        results.append(_rules_cover_pod_creation(match.get("resourceRules")))
    if False in results:
        return False
    return None if None in results else True


def _reads_the_queue(policy: Resource) -> Optional[bool]:
    """Whether a policy's expressions read the pods' KAI queue label: the tenant's own policy holds each pod to the
    team's queue, while a site-wide policy (the pod sizes) judges other things. None when not known yet."""
    expressions = [get(policy.inputs, "spec", block) for block in ("variables", "validations")]
    if not all(is_known(block) for block in expressions):
        return None
    return any(QUEUE_LABEL in str(entry.get("expression", "")) for block in expressions if isinstance(block, Sequence)
               for entry in block if isinstance(entry, Mapping))


def tenant_admission_policy_present(resources: Sequence[Resource]) -> list[Finding]:
    """Every vCluster release has a ValidatingAdmissionPolicy + Deny binding covering its synced pods.

    A policy covers a tenant when its matchConstraints select pod creation in the release's
    namespace (judged on the labels the namespace certainly has) and pods labelled
    ``vcluster.loft.sh/managed-by=<release>``, and it reads the pods' KAI queue label; a binding names that policy,
    denies, and its matchResources (if any) select the same namespace and pods. A policy or binding with a selector
    the API server refuses covers nothing, and is a finding of its own.
    """
    policies = [resource for resource in resources if is_kind(resource, "ValidatingAdmissionPolicy")]
    bindings = [resource for resource in resources if is_kind(resource, "ValidatingAdmissionPolicyBinding")]
    findings = []
    refused: dict[tuple[str, str], Finding] = {}  # one finding per refused object, however many tenants

    def covers(resource: Resource, field: str, namespace_labels: Mapping[str, str],
               pod_labels: Mapping[str, str]) -> Optional[bool]:
        try:
            return _match_covers(get(resource.inputs, "spec", field), namespace_labels, pod_labels,
                                 policy=field == "matchConstraints")
        except InvalidSelector as error:
            refused[(resource.urn, resource.name)] = Finding(
                f"{kubernetes_kind(resource.type)[2]} {get(resource.inputs, 'metadata', 'name') or resource.name}: "
                f"spec.{field}.{error}; the API server refuses it, so it enforces nothing.", resource.urn)
            return False

    for release in resources:
        if not is_vcluster(release):
            continue
        name, namespace = release_identity(release)
        if name is UNKNOWN or namespace is UNKNOWN:
            continue
        namespace_labels = _namespace_labels(resources, namespace)
        pod_labels = {MANAGED_BY_LABEL: name}
        undecided = False
        covering = []
        for policy in policies:
            result = covers(policy, "matchConstraints", namespace_labels, pod_labels)
            if result is not False:
                queue = _reads_the_queue(policy)
                result = False if queue is False else None if None in (result, queue) else True
            undecided = undecided or result is None
            if result:
                covering.append(policy)
        label = f"tenant vCluster {name} (namespace {namespace})"
        if not covering:
            if not undecided:
                findings.append(Finding(
                    f"{label} has no ValidatingAdmissionPolicy matching pod creation in {namespace} for pods labelled "
                    f"{MANAGED_BY_LABEL}={name}: its tenants could use another team's KAI queue or bypass KAI. "
                    "Add the tenant's TenantAdmission (components/admission.py).", release.urn))
            continue
        bound = False
        for policy in covering:
            policy_name = get(policy.inputs, "metadata", "name")
            for binding in bindings:
                if get(binding.inputs, "spec", "policyName") != policy_name or policy_name is None:
                    continue
                actions = get(binding.inputs, "spec", "validationActions")
                if actions is UNKNOWN:
                    undecided = True
                    continue
                if not isinstance(actions, Sequence) or "Deny" not in actions:
                    continue
                result = covers(binding, "matchResources", namespace_labels, pod_labels)
                undecided = undecided or result is None
                bound = bound or bool(result)
        if not bound and not undecided:
            names = ", ".join(str(get(policy.inputs, "metadata", "name")) for policy in covering)
            findings.append(Finding(
                f"{label}: admission policy {names} has no ValidatingAdmissionPolicyBinding with validationActions "
                f"[Deny] whose matchResources select namespace {namespace}: the policy is never enforced.",
                release.urn))
    return findings + list(refused.values())
