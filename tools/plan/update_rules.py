"""What the Kubernetes API server lets an update change, kind by kind: an allowlist read from its source.

Read in kubernetes/kubernetes (through the source search, the newest stored versions, December 2026):
``pkg/apis/apps/validation/validation.go`` ``ValidateStatefulSetUpdate`` (a StatefulSet's spec may change
only in replicas, ordinals, template, updateStrategy, persistentVolumeClaimRetentionPolicy and minReadySeconds),
``ValidateDaemonSetUpdate`` and ``pkg/registry/apps/{deployment,daemonset}/strategy.go`` ``ValidateUpdate`` (the
selector is immutable from apps/v1beta2 on), ``pkg/apis/batch/validation/validation.go`` ``ValidateJobSpecUpdate``
(selector, completions, completionMode, podFailurePolicy, backoffLimitPerIndex and, but for a few scheduling
directives of a suspended Job, the pod template), ``pkg/apis/core/validation/validation.go``
``ValidatePersistentVolumeClaimUpdate`` (the spec is immutable but for a larger storage request and
volumeAttributesClassName), ``ValidateServiceUpdate`` (clusterIP and clusterIPs once set), ``ValidateSecretUpdate`` /
``ValidateConfigMapUpdate`` (data of an object marked immutable, a Secret's type), ``ValidateResourceQuotaUpdate``
(scopes, scopeSelector), ``pkg/apis/storage/validation/validation.go`` ``ValidateStorageClassUpdate`` (parameters,
provisioner, reclaimPolicy, volumeBindingMode), ``pkg/apis/rbac/validation`` (a binding's roleRef),
``pkg/apis/scheduling/validation`` ``ValidatePriorityClassUpdate`` (value, preemptionPolicy),
``pkg/apis/node/validation`` (a RuntimeClass's handler), ``pkg/apis/networking/validation`` (an IngressClass's
controller) and apiextensions' ``ValidateCustomResourceDefinitionSpecUpdate`` (group, scope, names.plural). Every
kind's ``ValidateObjectMetaUpdate`` keeps name and namespace: a renamed object is another object, which Helm
creates while deleting the old one.

A kind listed nowhere here is reported as unknown when a change touches it, never passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from config.key_types import QUANTITY, quantity_value
from tools.plan.diff import MISSING


@dataclass(frozen=True)
class UpdateRule:
    """What an update of one kind may not change. ``spec_allowed``: the only spec fields an update may touch
    (None: no such list); ``immutable``: paths whose change is refused; ``defaults``: what the API server fills
    in when a manifest leaves it out, so that leaving out a default is no change."""

    source: str
    why: str
    fix: str
    spec_allowed: Optional[frozenset[str]] = None
    immutable: tuple[str, ...] = ()
    defaults: dict[str, Any] = field(default_factory=dict)
    # A refusal that depends on the values, not only on the path (a claim may grow but not shrink).
    refused: Optional[Callable[[str, Any, Any], bool]] = None


def _storage_shrinks(path: str, old: Any, new: Any) -> bool:
    if path != "spec.resources.requests.storage":
        return True
    if not (QUANTITY.fullmatch(str(old)) and QUANTITY.fullmatch(str(new))):
        return True
    return quantity_value(str(new)) < quantity_value(str(old))


def _cluster_ip_changes(path: str, old: Any, new: Any) -> bool:
    """Left out, a cluster IP is allocated and kept on update (the Service registry copies the old one); only
    a stated address, or headless ``None``, against another is a change."""
    unset = (MISSING, "", None, [])
    if old in unset or new in unset:
        return "None" in (old, new) or ["None"] in (old, new)
    return True


_ORPHAN = ("delete it without its pods right before `pulumi up` (`kubectl -n NAMESPACE delete {kind} NAME "
           "--cascade=orphan`): Helm creates it anew and it adopts the running pods")
_SELECTOR_FIX = ("set it back; to change it on a running site, delete the {kind} (`kubectl -n NAMESPACE delete "
                 "{kind} NAME`) right before `pulumi up`: its pods are replaced")

RULES: dict[tuple[str, str], UpdateRule] = {
    ("apps", "StatefulSet"): UpdateRule(
        source="apps/validation ValidateStatefulSetUpdate",
        why="a StatefulSet's spec may change only in replicas, ordinals, template, updateStrategy, "
            "persistentVolumeClaimRetentionPolicy and minReadySeconds",
        fix="set it back, or treat it as a new-site-only setting; to change it on a running site, "
            + _ORPHAN.format(kind="statefulset")
            + " (existing volume claims keep their size and class: resize a claim itself on a class that allows "
              "expansion, or back up, delete the claim and restore)",
        spec_allowed=frozenset({"replicas", "ordinals", "template", "updateStrategy",
                                "persistentVolumeClaimRetentionPolicy", "minReadySeconds"}),
        defaults={"spec.podManagementPolicy": "OrderedReady", "spec.revisionHistoryLimit": 10}),
    ("apps", "Deployment"): UpdateRule(
        source="registry/apps/deployment strategy ValidateUpdate", why="a Deployment's selector is immutable",
        fix=_SELECTOR_FIX.format(kind="deployment"), immutable=("spec.selector",)),
    ("apps", "DaemonSet"): UpdateRule(
        source="registry/apps/daemonset strategy ValidateUpdate", why="a DaemonSet's selector is immutable",
        fix=_SELECTOR_FIX.format(kind="daemonset"), immutable=("spec.selector",)),
    ("apps", "ReplicaSet"): UpdateRule(
        source="registry/apps/replicaset strategy ValidateUpdate", why="a ReplicaSet's selector is immutable",
        fix=_SELECTOR_FIX.format(kind="replicaset"), immutable=("spec.selector",)),
    ("batch", "Job"): UpdateRule(
        source="batch/validation ValidateJobSpecUpdate",
        why="a Job's selector, completions, completion mode, pod failure policy and pod template are immutable",
        fix="delete the Job (`kubectl -n NAMESPACE delete job NAME`) right before `pulumi up`: a Job only runs once",
        immutable=("spec.selector", "spec.completions", "spec.completionMode", "spec.podFailurePolicy",
                   "spec.backoffLimitPerIndex", "spec.template")),
    ("", "PersistentVolumeClaim"): UpdateRule(
        source="core/validation ValidatePersistentVolumeClaimUpdate",
        why="a claim's spec is immutable, but for a larger storage request and its volume attributes class",
        fix="a new claim is a new, empty volume: back up, delete the claim, let it be created, restore",
        spec_allowed=frozenset({"resources", "volumeAttributesClassName"}), refused=_storage_shrinks,
        defaults={"spec.volumeMode": "Filesystem"}),
    ("", "Service"): UpdateRule(
        source="core/validation ValidateServiceUpdate", why="a Service's cluster IP cannot change once set",
        fix="set it back; to change it, delete the Service right before `pulumi up` (clients see a new address)",
        immutable=("spec.clusterIP", "spec.clusterIPs"), refused=_cluster_ip_changes),
    ("", "ResourceQuota"): UpdateRule(
        source="core/validation ValidateResourceQuotaUpdate", why="a quota's scopes are immutable",
        fix="delete the quota right before `pulumi up`", immutable=("spec.scopes", "spec.scopeSelector")),
    ("storage.k8s.io", "StorageClass"): UpdateRule(
        source="storage/validation ValidateStorageClassUpdate",
        why="a StorageClass's parameters, provisioner, reclaim policy and binding mode are immutable",
        fix="delete the StorageClass right before `pulumi up` (volumes already made keep their settings)",
        immutable=("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode"),
        defaults={"reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}),
    ("rbac.authorization.k8s.io", "RoleBinding"): UpdateRule(
        source="rbac/validation ValidateRoleBindingUpdate", why="a binding's roleRef is immutable",
        fix="delete the binding right before `pulumi up`", immutable=("roleRef",)),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): UpdateRule(
        source="rbac/validation ValidateClusterRoleBindingUpdate", why="a binding's roleRef is immutable",
        fix="delete the binding right before `pulumi up`", immutable=("roleRef",)),
    ("scheduling.k8s.io", "PriorityClass"): UpdateRule(
        source="scheduling/validation ValidatePriorityClassUpdate",
        why="a PriorityClass's value and preemption policy are immutable",
        fix="delete the PriorityClass right before `pulumi up`", immutable=("value", "preemptionPolicy")),
    ("node.k8s.io", "RuntimeClass"): UpdateRule(
        source="node/validation ValidateRuntimeClassUpdate", why="a RuntimeClass's handler is immutable",
        fix="delete the RuntimeClass right before `pulumi up`", immutable=("handler",)),
    ("networking.k8s.io", "IngressClass"): UpdateRule(
        source="networking/validation ValidateIngressClassUpdate", why="an IngressClass's controller is immutable",
        fix="delete the IngressClass right before `pulumi up`", immutable=("spec.controller",)),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): UpdateRule(
        source="apiextensions/validation ValidateCustomResourceDefinitionSpecUpdate",
        why="a CRD's group, scope and plural name are immutable",
        fix="this needs a migration of every object of the CRD", immutable=("spec.group", "spec.scope",
                                                                           "spec.names.plural")),
}

# Kinds whose update validation checks only the new object and metadata (name, namespace): any other field may
# change. ConfigMaps and Secrets are here unless marked immutable (handled by immutable_data).
MUTABLE: dict[tuple[str, str], str] = {
    ("", "ConfigMap"): "core/validation ValidateConfigMapUpdate",
    ("", "Secret"): "core/validation ValidateSecretUpdate",
    ("", "ServiceAccount"): "core/validation ValidateServiceAccountUpdate",
    ("", "Namespace"): "core/validation ValidateNamespaceUpdate",
    ("", "LimitRange"): "core/validation ValidateLimitRange",
    ("", "Endpoints"): "core/validation ValidateEndpointsUpdate",
    ("rbac.authorization.k8s.io", "Role"): "rbac/validation ValidateRoleUpdate",
    ("rbac.authorization.k8s.io", "ClusterRole"): "rbac/validation ValidateClusterRoleUpdate",
    ("networking.k8s.io", "NetworkPolicy"): "networking/validation ValidateNetworkPolicyUpdate",
    ("networking.k8s.io", "Ingress"): "networking/validation ValidateIngressUpdate",
    ("policy", "PodDisruptionBudget"): "policy/validation ValidatePodDisruptionBudgetUpdate (spec mutable since 1.15)",
    ("batch", "CronJob"): "batch/validation ValidateCronJobUpdate",
    ("autoscaling", "HorizontalPodAutoscaler"): "autoscaling/validation ValidateHorizontalPodAutoscalerUpdate",
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): "admissionregistration/validation",
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): "admissionregistration/validation",
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): "admissionregistration/validation",
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): "admissionregistration/validation",
    ("apiregistration.k8s.io", "APIService"): "kube-aggregator apiregistration/validation ValidateAPIServiceUpdate",
}

SECRET_IMMUTABLE = ("data", "stringData", "binaryData")


def group_of(api_version: str) -> str:
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def rule_of(api_version: str, kind: str) -> Optional[UpdateRule]:
    return RULES.get((group_of(api_version), kind))


def is_mutable(api_version: str, kind: str) -> bool:
    return (group_of(api_version), kind) in MUTABLE


def _head(path: str) -> tuple[str, str]:
    """``spec.volumeClaimTemplates[0].spec`` -> ("spec", "volumeClaimTemplates")."""
    parts = path.replace("[", ".[").split(".")
    return (parts[0], parts[1].strip('"') if len(parts) > 1 else "")


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def refused_field(rule: UpdateRule, path: str, old: Any, new: Any) -> Optional[str]:
    """The field an update of ``path`` (old -> new) is refused at, or None when the API server takes it."""
    top, child = _head(path)
    if rule.spec_allowed is not None and top == "spec":
        if child not in rule.spec_allowed:
            return f"spec.{child}"
        if rule.refused is not None and rule.refused(path, old, new):
            return path
        return None
    for prefix in rule.immutable:
        if _under(path, prefix) and (rule.refused is None or rule.refused(path, old, new)):
            return prefix
    return None
