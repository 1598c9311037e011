"""The gpu-tenancy guardrails as plain functions over a neutral resource model.

Nothing here imports ``pulumi_policy``: the same rules run inside ``pulumi preview --policy-pack
policy`` (through ``adapters.from_policy_resource`` in ``pack.py``), against an offline plan.json
(``adapters.from_plan``, ``python -m policy.check``) and in unit tests on hand-written data.

Two kinds of rule:

- resource rules, ``check(resource) -> list[str]``: one message per problem of that resource;
- stack rules, ``check(resources) -> list[Finding]``: they need the whole stack (a queue's parent,
  a tenant's admission policy), and each finding names the resource at fault (or none).

A value the engine does not know yet during a preview is ``UNKNOWN``: rules never report a
violation on a value they cannot see; the real ``pulumi up`` (whose inputs are known) checks it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

try:  # PyYAML comes with the pulumi SDK; without it the time-slicing rule reads key names only.
    import yaml
except ImportError:  # pragma: no cover
    yaml = None

if __package__:  # imported as the `policy` package
    from .rule_model import (  # noqa: F401 (re-exported: adapters, pack and tests name them through rules)
        EPSILON, EXACT_VERSION, GPU_OPERATOR_CHART, HELM_RELEASE_TYPES, KAI_CHART, MANAGED_BY_LABEL, NAMESPACE_NAME_LABEL,
        NODE_PROFILE_LABEL, QUEUE_FIELDS, QUEUE_GROUP, QUEUE_RESOURCES, RANGE_SYNTAX, TIME_SLICED_PREFIX, UNKNOWN,
        VCLUSTER_CHART, Finding, Resource, Rule, Violation, chart_name, get, is_chart, is_default_provider,
        is_helm_release, is_kind, is_known, is_number, is_queue, is_vcluster, kubernetes_kind, release_identity,
        release_label,
    )
    from .label_selectors import InvalidSelector, selector_matches
    from .rules_grafana import grafana_admin_from_secret
else:  # the Pulumi CLI runs the pack from policy/ as top-level modules
    from rule_model import (  # noqa: F401
        EPSILON, EXACT_VERSION, GPU_OPERATOR_CHART, HELM_RELEASE_TYPES, KAI_CHART, MANAGED_BY_LABEL, NAMESPACE_NAME_LABEL,
        NODE_PROFILE_LABEL, QUEUE_FIELDS, QUEUE_GROUP, QUEUE_RESOURCES, RANGE_SYNTAX, TIME_SLICED_PREFIX, UNKNOWN,
        VCLUSTER_CHART, Finding, Resource, Rule, Violation, chart_name, get, is_chart, is_default_provider,
        is_helm_release, is_kind, is_known, is_number, is_queue, is_vcluster, kubernetes_kind, release_identity,
        release_label,
    )
    from label_selectors import InvalidSelector, selector_matches
    from rules_grafana import grafana_admin_from_secret


# --- resource rules -----------------------------------------------------------------------------


def helm_version_pinned(resource: Resource) -> list[str]:
    """Every Helm release pins an exact chart version (not empty, ``latest`` or a range)."""
    if not is_helm_release(resource):
        return []
    version = resource.inputs.get("version")
    if version is UNKNOWN:
        return []
    label = release_label(resource)
    if version is None or (isinstance(version, str) and not version.strip()):
        return [f"{label} pins no chart version: Helm would install whatever is newest. "
                "Set version to an exact release (e.g. 0.36.1 or v0.16.4)."]
    if not isinstance(version, str):
        return [f"{label} has version {version!r}, which is not a version string."]
    if version.strip().lower() in ("latest", "stable", "newest"):
        return [f"{label} asks for version {version!r}, which floats. Pin an exact release."]
    if EXACT_VERSION.match(version.strip()):
        return []
    if RANGE_SYNTAX.search(version):
        return [f"{label} has version {version!r}, a range: Helm installs the newest match. "
                "Pin an exact release."]
    return [f"{label} has version {version!r}, not an exact MAJOR.MINOR.PATCH version: Helm reads a "
            "partial version as a range. Pin an exact release."]


def vcluster_set_owner_disabled(resource: Resource) -> list[str]:
    """vCluster must not set owner references on synced pods (KAI reads the queue from the top owner)."""
    if not is_vcluster(resource):
        return []
    value = get(resource.inputs, "values", "experimental", "syncSettings", "setOwner")
    if value is UNKNOWN or value is False:
        return []
    label = release_label(resource)
    why = ("KAI's pod-grouper takes the queue from a pod's top owner, and with setOwner the host "
           "Service owns every synced pod, so tenant pods lose their queue.")
    if value is None:
        return [f"{label} leaves values.experimental.syncSettings.setOwner unset (vCluster's default is "
                f"true): {why} Set it to false."]
    return [f"{label} sets values.experimental.syncSettings.setOwner to {value!r}: {why} Set it to false."]


def kai_blocks_visible_devices(resource: Resource) -> list[str]:
    """KAI's webhook must blank NVIDIA_VISIBLE_DEVICES in containers that hold no GPU."""
    if not (is_helm_release(resource) and is_chart(resource, KAI_CHART)):
        return []
    value = get(resource.inputs, "values", "global", "blockNvidiaVisibleDevices")
    if value is UNKNOWN or value is True:
        return []
    return [f"{release_label(resource)} sets values.global.blockNvidiaVisibleDevices to {value!r}: without it a "
            "tenant container whose image sets NVIDIA_VISIBLE_DEVICES=all sees every GPU of its node. Set it to true."]


def queue_resources_complete(resource: Resource) -> list[str]:
    """A KAI queue renders gpu, cpu and memory, each with quota, limit and overQuotaWeight (numbers)."""
    if not is_queue(resource):
        return []
    resources = get(resource.inputs, "spec", "resources")
    if resources is UNKNOWN:
        return []
    problems = []
    if not isinstance(resources, Mapping):
        problems.append("spec.resources is missing")
    else:
        for kind in QUEUE_RESOURCES:
            entry = resources.get(kind)
            if entry is UNKNOWN:
                continue
            if not isinstance(entry, Mapping):
                problems.append(f"spec.resources.{kind} is missing")
                continue
            for key in QUEUE_FIELDS:
                value = entry.get(key)
                if value is UNKNOWN:
                    continue
                if value is None:
                    problems.append(f"spec.resources.{kind}.{key} is missing")
                elif not is_number(value):
                    problems.append(f"spec.resources.{kind}.{key} is {value!r}, not a number")
    if not problems:
        return []
    name = get(resource.inputs, "metadata", "name") or resource.name
    return [f"KAI queue {name}: {'; '.join(problems)}. An omitted limit is a hard cap of zero and an omitted "
            "overQuotaWeight gets no surplus: render gpu, cpu and memory with quota, limit and "
            "overQuotaWeight (-1 = unlimited)."]


def explicit_kubernetes_provider(resource: Resource) -> list[str]:
    """Kubernetes resources name their provider: the default one targets the ambient kubeconfig."""
    if not resource.type.startswith("kubernetes:") or not is_default_provider(resource.provider):
        return []
    how = "uses the default provider" if resource.provider else "names no provider"
    return [f"{resource.type} {resource.name} {how}, i.e. whatever cluster the ambient kubeconfig points "
            "at. Pass the host cluster's kubernetes provider explicitly (opts=ResourceOptions(provider=...))."]


def vcluster_resource_quota_enabled(resource: Resource) -> list[str]:
    """Advisory: a tenant's vCluster enables its ResourceQuota (CPU, memory and object counts)."""
    if not is_vcluster(resource):
        return []
    enabled = get(resource.inputs, "values", "policies", "resourceQuota", "enabled")
    if enabled is UNKNOWN or enabled is True:
        return []
    return [f"{release_label(resource)} does not set values.policies.resourceQuota.enabled to true "
            f"(it is {enabled!r}): KAI queues share GPUs, but nothing caps the tenant's CPU, memory or "
            "object counts on the host."]


# --- stack rules --------------------------------------------------------------------------------


def _queues(resources: Sequence[Resource]) -> list[Resource]:
    return [resource for resource in resources if is_queue(resource)]


def _queue_name(resource: Resource) -> Any:
    return get(resource.inputs, "metadata", "name")


def queue_parents_exist(resources: Sequence[Resource]) -> list[Finding]:
    """A queue's parentQueue is a Queue of the same stack (KAI silently drops orphans and their subtree)."""
    queues = _queues(resources)
    names = [_queue_name(queue) for queue in queues]
    if any(name is UNKNOWN for name in names):
        return []
    known = {name for name in names if isinstance(name, str)}
    findings = []
    for queue in queues:
        parent = get(queue.inputs, "spec", "parentQueue")
        if parent is None or parent is UNKNOWN or parent == "":
            continue
        if parent not in known:
            findings.append(Finding(
                f"KAI queue {_queue_name(queue) or queue.name} has parentQueue {parent!r}, which is not a Queue of "
                f"this stack (queues here: {', '.join(sorted(known)) or 'none'}). KAI silently ignores a queue "
                "whose parent does not exist, with all its children.", queue.urn))
    return findings


def _fmt(value: float) -> str:
    return f"{value:g}"


def queue_gpu_quota_fits_parent(resources: Sequence[Resource]) -> list[Finding]:
    """Children's GPU quotas add up to at most their parent's quota (unless the parent's is -1)."""
    queues = _queues(resources)
    findings = []
    for parent in queues:
        name = _queue_name(parent)
        if not isinstance(name, str):
            continue
        children = [queue for queue in queues if get(queue.inputs, "spec", "parentQueue") == name]
        if not children:
            continue
        parent_quota = get(parent.inputs, "spec", "resources", "gpu", "quota")
        if not is_number(parent_quota) or parent_quota == -1:
            continue  # unknown, missing (queue_resources_complete says so) or unlimited
        quotas = [(get(child.inputs, "spec", "resources", "gpu", "quota"), child) for child in children]
        if any(not is_number(quota) for quota, _ in quotas):
            continue
        unlimited = [child for quota, child in quotas if quota == -1]
        for child in unlimited:
            findings.append(Finding(
                f"KAI queue {_queue_name(child) or child.name} has an unlimited (-1) gpu quota under {name}, "
                f"whose gpu quota is {_fmt(parent_quota)}: a child cannot be guaranteed more than its parent.",
                child.urn))
        if unlimited:
            continue
        total = sum(quota for quota, _ in quotas)
        if total > parent_quota + EPSILON:
            shares = ", ".join(f"{_queue_name(child) or child.name}={_fmt(quota)}"
                               for quota, child in sorted(quotas, key=lambda item: str(_queue_name(item[1]))))
            findings.append(Finding(
                f"KAI queue {name} guarantees {_fmt(parent_quota)} GPU(s) but its children's gpu quotas add up to "
                f"{_fmt(total)} ({shares}): KAI over-commits silently. Lower the children's quotas or raise "
                f"{name}'s.", parent.urn))
    return findings


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


def tenant_admission_policy_present(resources: Sequence[Resource]) -> list[Finding]:
    """Every vCluster release has a ValidatingAdmissionPolicy + Deny binding covering its synced pods.

    A policy covers a tenant when its matchConstraints select pod creation in the release's
    namespace (judged on the labels the namespace certainly has) and pods labelled
    ``vcluster.loft.sh/managed-by=<release>``; a binding names that policy, denies, and its
    matchResources (if any) select the same namespace and pods. A policy or binding with a selector
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


def profile_is_time_sliced(key: Any, content: Any = None) -> bool:
    """A device-plugin profile shares GPUs by time-slicing: by its key name, or by its content."""
    if not isinstance(key, str):
        return False
    if key.startswith(TIME_SLICED_PREFIX):
        return True
    if isinstance(content, str) and yaml is not None:
        try:
            content = yaml.safe_load(content)
        except yaml.YAMLError:
            return False
    entries = get(content, "sharing", "timeSlicing", "resources")
    if isinstance(entries, Sequence) and not isinstance(entries, str):
        return any(is_number(get(entry, "replicas")) and get(entry, "replicas") > 1 for entry in entries)
    return False


def _device_plugin_configs(resources: Sequence[Resource]) -> Iterable[tuple[Resource, Mapping[str, Any]]]:
    """(resource, devicePlugin.config) of GPU Operator releases and ClusterPolicy (patches)."""
    for resource in resources:
        config = None
        if is_chart(resource, GPU_OPERATOR_CHART):
            config = get(resource.inputs, "values", "devicePlugin", "config")
        elif kubernetes_kind(resource.type)[0] == "nvidia.com" and kubernetes_kind(resource.type)[2].startswith(
                "ClusterPolicy"):
            config = get(resource.inputs, "spec", "devicePlugin", "config")
        if isinstance(config, Mapping):
            yield resource, config


def _profile_content(resources: Sequence[Resource], config: Mapping[str, Any], key: str) -> Any:
    inline = get(config, "data", key)
    if inline is not None:
        return inline
    for resource in resources:
        if is_kind(resource, "ConfigMap") and get(resource.inputs, "metadata", "name") == config.get("name"):
            content = get(resource.inputs, "data", key)
            if content is not None:
                return content
    return None


def time_slicing_with_kai_sharing(resources: Sequence[Resource]) -> list[Finding]:
    """Advisory: no device-plugin time-slicing by default (or on labelled nodes) while KAI shares GPUs."""
    sharing = [resource for resource in resources if is_chart(resource, KAI_CHART)
               and get(resource.inputs, "values", "global", "gpuSharing") in (True, "true")]
    if not sharing:
        return []
    why = ("KAI counts each time-slice replica as a whole GPU and then hands out fractions of it, so the same "
           "card is promised several times over. Use a no-sharing profile where KAI shares GPUs.")
    findings = []
    for resource, config in _device_plugin_configs(resources):
        default = config.get("default")
        if isinstance(default, str) and profile_is_time_sliced(default, _profile_content(resources, config, default)):
            findings.append(Finding(
                f"{resource.type} {resource.name} makes the time-slicing profile {default!r} the device plugin's "
                f"default while the KAI release has global.gpuSharing on: {why}", resource.urn))
    for resource in resources:
        for labels in (get(resource.inputs, "labels"), get(resource.inputs, "metadata", "labels")):
            value = get(labels, NODE_PROFILE_LABEL) if isinstance(labels, Mapping) else None
            if isinstance(value, str) and value.startswith(TIME_SLICED_PREFIX):
                findings.append(Finding(
                    f"{resource.type} {resource.name} labels nodes {NODE_PROFILE_LABEL}={value} (time-slicing) while "
                    f"the KAI release has global.gpuSharing on: {why}", resource.urn))
    return findings


# --- the rule set -------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule("helm-release-version-pinned",
         "Every Helm release pins an exact chart version (not empty, 'latest' or a range).",
         True, "resource", helm_version_pinned),
    Rule("vcluster-set-owner-disabled",
         "Every vCluster release sets values.experimental.syncSettings.setOwner to false (KAI reads a pod's queue "
         "from its top owner).",
         True, "resource", vcluster_set_owner_disabled),
    Rule("kai-blocks-visible-devices",
         "The KAI release sets values.global.blockNvidiaVisibleDevices to true (containers without a GPU allocation "
         "get NVIDIA_VISIBLE_DEVICES=void).",
         True, "resource", kai_blocks_visible_devices),
    Rule("kai-queue-resources-complete",
         "Every KAI Queue renders gpu, cpu and memory, each with quota, limit and overQuotaWeight.",
         True, "resource", queue_resources_complete),
    Rule("grafana-admin-from-secret",
         "A release that installs Grafana reads its admin login from admin.existingSecret: no chart default, no "
         "published password, no password in the values.",
         True, "resource", grafana_admin_from_secret),
    Rule("kubernetes-explicit-provider",
         "Every Kubernetes resource names an explicit provider instead of the default (ambient kubeconfig) one.",
         True, "resource", explicit_kubernetes_provider),
    Rule("kai-queue-parent-exists",
         "Every KAI Queue's parentQueue is a Queue of the same stack.",
         True, "stack", queue_parents_exist),
    Rule("kai-queue-gpu-quota-fits-parent",
         "Children's GPU quotas add up to at most their parent queue's GPU quota (unless it is -1).",
         True, "stack", queue_gpu_quota_fits_parent),
    Rule("tenant-admission-policy-present",
         "Every tenant vCluster has a ValidatingAdmissionPolicy and a Deny binding covering its namespace's pods.",
         True, "stack", tenant_admission_policy_present),
    Rule("no-time-slicing-with-kai-sharing",
         "Device-plugin time-slicing is not the default (or a node label) while KAI's global.gpuSharing is on.",
         False, "stack", time_slicing_with_kai_sharing),
    Rule("vcluster-resource-quota-enabled",
         "Every tenant vCluster enables values.policies.resourceQuota.",
         False, "resource", vcluster_resource_quota_enabled),
)


def evaluate(resources: Sequence[Resource], rules: Iterable[Rule] = RULES) -> list[Violation]:
    """Run rules over a stack's resources; mandatory violations first, then advisory ones."""
    violations = []
    for rule in rules:
        if rule.scope == "resource":
            for resource in resources:
                violations.extend(Violation(rule.name, rule.mandatory, message, resource.urn or None)
                                  for message in rule.check(resource))
        else:
            violations.extend(Violation(rule.name, rule.mandatory, finding.message, finding.urn)
                              for finding in rule.check(resources))
    return sorted(violations, key=lambda violation: not violation.mandatory)


def rule_named(name: str) -> Rule:
    return next(rule for rule in RULES if rule.name == name)

