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

This module holds the rules on a single Helm release or provider, and ``RULES``, the rule set; the
rules on KAI queues are in ``rules_queues``, the tenant admission rule in ``rules_admission``, the
time-slicing advisory in ``rules_time_slicing`` and the Grafana login rule in ``rules_grafana``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

if __package__:  # imported as the `policy` package
    from .rule_model import (
        EXACT_VERSION, KAI_CHART, RANGE_SYNTAX, UNKNOWN, Resource, Rule, Violation, get, is_chart, is_default_provider,
        is_helm_release, is_vcluster, release_label,
    )
    from .rules_admission import tenant_admission_policy_present
    from .rules_grafana import grafana_admin_from_secret
    from .rules_queues import queue_gpu_quota_fits_parent, queue_parents_exist, queue_resources_complete
    from .rules_time_slicing import time_slicing_with_kai_sharing
else:  # the Pulumi CLI runs the pack from policy/ as top-level modules
    from rule_model import (
        EXACT_VERSION, KAI_CHART, RANGE_SYNTAX, UNKNOWN, Resource, Rule, Violation, get, is_chart, is_default_provider,
        is_helm_release, is_vcluster, release_label,
    )
    from rules_admission import tenant_admission_policy_present
    from rules_grafana import grafana_admin_from_secret
    from rules_queues import queue_gpu_quota_fits_parent, queue_parents_exist, queue_resources_complete
    from rules_time_slicing import time_slicing_with_kai_sharing


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
         "Every tenant vCluster has a ValidatingAdmissionPolicy holding its pods to their KAI queue, with a Deny "
         "binding covering its namespace's pods.",
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

