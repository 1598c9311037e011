"""Which Pulumi resources a change replaces, and what a replacement stops or loses.

The Kubernetes provider decides replacement itself (pulumi/pulumi-kubernetes, read in its newest snapshot,
tags up to v4.32.0, ``provider/pkg/provider/diff.go`` ``forceNewProperties`` and ``helm_release.go`` ``Diff``):
any object is replaced when its ``metadata.name`` or ``metadata.namespace`` changes, a few kinds also on the
fields of the ``FORCE_NEW`` table below, a ConfigMap or Secret on its data unless the provider is told they are
mutable (``enableConfigMapMutable``, ``enableSecretMutable``), and a Helm release on its ``name`` or
``namespace``. A named object is deleted before its replacement is created (``provider.go`` ``Diff``:
``deleteBeforeReplace``). The engine also replaces on a resource's own ``replaceOnChanges`` paths, and refuses
to replace or delete a protected resource: ``pulumi up`` stops there. Resources of other providers (AWS, EKS,
commands) are not read here: a change to one is reported as unknown, for ``pulumi preview`` to settle.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional

from config.mig import MIG_CONFIG_LABEL
from config.vocabulary import RELEASE
from tools.charts.cache import chart_cache_dir
from tools.plan.chart_versions import chart_version_findings
from tools.plan.diff import MISSING, Change, PlanDiff
from tools.plan.eks_upgrade import eks_version_findings
from tools.plan.host_steps import host_step_findings
from tools.plan.isolation_tier import tier_change_findings
from tools.plan.node_templates import launch_template_findings
from tools.plan.prometheus_volume import prometheus_volume_findings
from tools.plan.removal import owner, removal_findings
from tools.plan.running_site import DISRUPTS, LOST, STATE_OF_KIND, STOPS, UNKNOWN, Finding
from tools.plan.sharing_profiles import node_group_label_findings, profile_key_findings
from tools.plan.vcluster_store import store_change_findings

REPLACED = "replaced"

_SELECTOR = ("spec.selector",)
_CONTAINER_FIELDS = ("args", "command", "env", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "ports",
                     "readinessProbe", "resources", "securityContext", "stdin", "stdinOnce", "terminationMessagePath",
                     "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts", "workingDir")
# (API group, kind) -> paths whose change replaces the object, as pulumi-kubernetes lists them for the versions
# the program registers (apps/v1, core/v1, batch/v1, rbac/v1, storage/v1; policy/v1 has none).
FORCE_NEW: dict[tuple[str, str], tuple[str, ...]] = {
    ("apps", "DaemonSet"): _SELECTOR,
    ("apps", "Deployment"): _SELECTOR,
    ("apps", "StatefulSet"): ("spec.podManagementPolicy", "spec.revisionHistoryLimit", "spec.selector",
                              "spec.serviceName", "spec.volumeClaimTemplates"),
    ("batch", "Job"): ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
    ("rbac.authorization.k8s.io", "RoleBinding"): ("roleRef",),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): ("roleRef",),
    ("storage.k8s.io", "StorageClass"): ("parameters", "provisioner"),
    ("core", "PersistentVolumeClaim"): ("spec.accessModes", "spec.selector", "spec.storageClassName",
                                        "spec.volumeName"),
    ("core", "PersistentVolume"): tuple(f"spec.{source}" for source in (
        "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc", "flexVolume", "flocker",
        "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local", "nfs", "photonPersistentDisk",
        "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "vsphereVolume")),
    ("core", "Pod"): tuple(f"spec.{name}" for name in (
        "affinity", "automountServiceAccountToken", "dnsConfig", "dnsPolicy", "enableServiceLinks", "hostAliases",
        "hostIPC", "hostNetwork", "hostPID", "hostname", "imagePullSecrets", "nodeName", "nodeSelector", "overhead",
        "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "restartPolicy", "runtimeClassName",
        "schedulerName", "securityContext", "serviceAccount", "serviceAccountName", "shareProcessNamespace",
        "subdomain", "terminationGracePeriodSeconds", "volumes")) + tuple(
        f"spec.{containers}[*].{name}" for containers in ("containers", "initContainers") for name in _CONTAINER_FIELDS),
    ("core", "ResourceQuota"): ("spec.scopes",),
    ("core", "Secret"): ("type",),
    ("core", "Service"): ("spec.clusterIP",),
}
DATA_REPLACES = {"ConfigMap": (("data", "binaryData"), "enableConfigMapMutable"),
         "Secret": (("data", "stringData"), "enableSecretMutable")}

# What a replacement (or a removal) of these resource types destroys.
STATE_OF_TYPE = {
    "kubernetes:core/v1:Namespace": STATE_OF_KIND["Namespace"],
    "kubernetes:core/v1:PersistentVolumeClaim": STATE_OF_KIND["PersistentVolumeClaim"],
    RELEASE: ("every object of the release (helm uninstall, then install); its StatefulSets' volume claims stay "
              "behind, so a release under a new name or namespace starts on new, empty volumes (a vCluster: an "
              "empty virtual cluster; Prometheus: no history)"),
}
# The program's own components register nothing in the cluster or cloud themselves.
COMPONENT_PREFIX = "gpu-tenancy:"
_OPTION_PARTS = ("options", "dependencies", "provider", "parent")


def _pattern(path: str) -> str:
    """A changed path with its list elements (``[3]``, ``[name=app]``) as any element (``[*]``)."""
    return re.sub(r'\[(?:\d+|[A-Za-z]+=(?:"[^"]*"|[^\]]*))\]', "[*]", path)


def _under(path: str, prefix: str) -> bool:
    path = _pattern(path)
    return path == prefix or path.startswith(prefix + ".") or path.startswith(prefix + "[")


def _kubernetes_kind(type_token: str) -> tuple[str, str]:
    """``kubernetes:apps/v1:StatefulSet`` -> ("apps", "StatefulSet")."""
    _, group_version, kind = type_token.split(":", 2)
    return group_version.rsplit("/", 1)[0], kind


def _mutable_data(plan: Mapping[str, Any], flag: str) -> bool:
    return any(resource["type"] == "pulumi:providers:kubernetes"
               and str((resource.get("inputs") or {}).get(flag, "")).lower() == "true"
               for resource in plan.get("resources", []))


def replacing_paths(resource: Mapping[str, Any], paths: list[str], plan: Mapping[str, Any]) -> list[str] | None:
    """The changed input ``paths`` that make Pulumi replace ``resource``; None when its type's rules are unknown."""
    patterns = [_pattern(path) for path in (resource.get("options") or {}).get("replaceOnChanges") or []]
    typ = resource["type"]
    if typ == RELEASE:
        patterns += ["name", "namespace"]
    elif typ.startswith("kubernetes:") and typ.count(":") == 2:
        group, kind = _kubernetes_kind(typ)
        patterns += ["metadata.name", "metadata.namespace", *FORCE_NEW.get((group, kind), ())]
        if group == "core" and kind in DATA_REPLACES and not _mutable_data(plan, DATA_REPLACES[kind][1]):
            patterns += list(DATA_REPLACES[kind][0])
    elif not patterns:
        return None
    return [path for path in paths if any(_under(path, pattern) for pattern in patterns)]


def _protected(resource: Mapping[str, Any]) -> bool:
    return bool((resource.get("options") or {}).get("protect"))


def _mig_layout_finding(subject: str, change: Change) -> Finding:
    """A GPU pool's MIG layout changed: the node label the GPU Operator's MIG manager applies."""
    return Finding(DISRUPTS, subject, change.path, change.old, change.new,
                   "the GPU Operator's MIG manager splits every GPU of the pool's nodes anew: the slices of the old "
                   "layout go, so pods holding them must end first (a GPU some process uses cannot be split again) "
                   "and pods asking for them stay pending",
                   "drain the pool's nodes before `pulumi up` (`kubectl drain`, or scale the group to 0 and back) "
                   "at a quiet time, and tell the pool's teams")


def pulumi_findings(diff: PlanDiff, old: Mapping[str, Any], new: Mapping[str, Any],
                    chart_cache: Optional[Path] = None) -> list[Finding]:
    """Replacements of the changed resources, state lost with removed ones, what each chart version change does
    (``tools.plan.chart_versions``, the CRDs compared from ``chart_cache``, by default the chart cache), and what a
    changed MicroK8s setup step, a grown Prometheus volume, a vCluster's new backing store, a sharing profile's new
    key or a team's new isolation tier does (``tools.plan.host_steps``, ``prometheus_volume``, ``vcluster_store``,
    ``sharing_profiles``, ``isolation_tier``)."""
    before = {resource["urn"]: resource for resource in old.get("resources", [])}
    after = {resource["urn"]: resource for resource in new.get("resources", [])}
    findings: list[Finding] = profile_key_findings(old, new) + tier_change_findings(old, new)
    # A resource whose replacement a finding above already tells is not reported again as harmless.
    told = {finding.subject for finding in findings}
    for changed in diff.changed:
        resource = after[changed.urn]
        inputs = [change for change in changed.changes if change.path.split(".")[0] not in _OPTION_PARTS]
        if not inputs or resource["type"].startswith(COMPONENT_PREFIX):
            continue
        subject = f"`{resource['type']}` {resource['name']}"
        findings += [_mig_layout_finding(subject, change) for change in inputs
                     if change.path == f'labels["{MIG_CONFIG_LABEL}"]']
        upgrade, inputs = eks_version_findings(resource, subject, inputs)
        rollout, inputs = launch_template_findings(resource, subject, inputs)
        setup, inputs = host_step_findings(resource, subject, inputs)
        labels, inputs = node_group_label_findings(resource, subject, inputs)
        findings += upgrade + rollout + setup + labels + chart_version_findings(resource, subject, inputs,
                                                                       chart_cache_dir(chart_cache))
        findings += (store_change_findings(before[changed.urn], resource, subject)
                     + prometheus_volume_findings(resource, subject, inputs))
        if not inputs:
            continue
        paths = replacing_paths(resource, [change.path for change in inputs], new)
        if paths is None:
            findings.append(Finding(UNKNOWN, subject, ", ".join(change.path for change in inputs[:5]), MISSING,
                                    MISSING, "the plan diff does not know this provider's replacement rules",
                                    "read `pulumi preview --diff`: a replacement shows as `+-`"))
            continue
        if not paths:
            continue
        change = next(change for change in inputs if change.path == paths[0])
        lost = STATE_OF_TYPE.get(resource["type"])
        if _protected(resource) or _protected(before[changed.urn]):
            findings.append(Finding(
                STOPS, subject, change.path, change.old, change.new,
                "this change replaces the resource, which is protected: `pulumi up` stops before anything "
                "changes", f"set it back: it is a new-site-only setting; {owner(before[changed.urn], old).on_purpose}"))
        elif lost:
            findings.append(Finding(LOST, subject, change.path, change.old, change.new,
                                    f"this change replaces the resource, deleting {lost}",
                                    "set it back, or back up first and restore after `pulumi up`"))
        elif subject not in told:
            findings.append(Finding(REPLACED, subject, change.path, change.old, change.new,
                                    "this change replaces the resource (deleted, then created again); nothing "
                                    "it holds is lost", "none needed"))
    findings += removal_findings(diff.removed, old, new, STATE_OF_TYPE)
    return findings
