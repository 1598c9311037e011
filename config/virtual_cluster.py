"""What runs inside a tenant's vCluster and what its syncer may write on the host: rules over the merged settings.

Two promises depend on values a site can change through ``extraValues``:

- the host's admission policies cover every kind the syncer writes (components/admission.py for pods,
  components/synced_objects_admission.py for the rest), so ``sync.toHost`` may only enable those kinds;
- the in-vCluster defaults (components/virtual_defaults.py) use the MutatingAdmissionPolicy API, GA
  (``admissionregistration.k8s.io/v1``, on by default) from Kubernetes 1.36, so the virtual cluster must
  run 1.36 or later. ``vcluster.version``'s floor (config/versions.py VCLUSTER_MINIMUM_VERSION) is the first
  chart that does by default; what is checked here is the Kubernetes an ``extraValues`` override names.

Beyond those, an ``extraValues`` value must be one the chart has at the tenant's vCluster version and one
config/vcluster_values.py lets a site set.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Optional, Sequence

from config import versions
from config.backing_store import backing_store_findings, control_plane_shape, etcd_name_findings
from config.key_types import quantity_value
from config.limit_range_gpus import gpu_limit_range_findings
from config.model import Team, VClusterSettings
from config.reader import Reader
from config.snapshots import backup_name
from config.synced_data import cap_findings
from config.tenant_budget import KAI_SHARING_CONFIG_MAPS, kai_config_maps
from config.mirrors import Mirrors
from config.vcluster_images import (
    default_registry_findings, dig, minor_version, site_image_findings, virtual_kubernetes_version,
)
from config.vcluster_values import OWN, REFUSED
from config.vcluster_values_lookup import BLOCKS, classified, leaves

# vCluster's sync.toHost kinds the host policies have rules for (their default is on in vCluster 0.36.1).
COVERED_TO_HOST_SYNCS = ("pods", "services", "endpoints", "endpointSlices", "persistentVolumeClaims", "configMaps",
                         "secrets")
MUTATING_ADMISSION_POLICY_GA = (1, 36)


def control_plane_workloads(vcluster_name: str) -> tuple[str, str]:
    """The StatefulSets the vCluster chart runs a virtual cluster's control plane in, in its host namespace: one
    named after the release (vclusterName) and, with an external etcd, ``<name>-etcd`` (chart/templates/
    statefulset.yaml and etcd-statefulset.yaml at v0.36.1). Their pods are ``<statefulset>-<ordinal>``."""
    return vcluster_name, f"{vcluster_name}-etcd"


def control_plane_claim_prefixes(vcluster_name: str, settings: VClusterSettings) -> tuple[str, ...]:
    """The claims of the control plane's StatefulSets (control_plane_workloads), ``<template>-<statefulset>-`` and
    an ordinal: of the chart's claim template ``data``, or of each of the site's own (persistence.volumeClaimTemplates,
    config/backing_store.py)."""
    shape = control_plane_shape(settings)
    plane, etcd = control_plane_workloads(vcluster_name)
    return (*(f"{name}-{plane}-" for name in shape.claim_names),
            *(f"{name}-{etcd}-" for name in shape.etcd_claim_names))


# vCluster values that change the syncer's host Role or ClusterRole, which the host policies were checked against
# (tests/test_synced_kinds_contract.py): extra or replacement rules, and the snapshot rules the program sets.
SYNCER_RULE_VALUES = (("rbac", "role", "extraRules"), ("rbac", "role", "overwriteRules"),
                      ("rbac", "clusterRole", "extraRules"), ("rbac", "clusterRole", "overwriteRules"),
                      ("rbac", "enableVolumeSnapshotRules"))
# sync.fromHost switches that let a tenant write on the host, with what it could write (vCluster 0.36.1). Every
# other switch only copies host objects into the virtual cluster (tests/test_synced_metadata_contract.py holds the
# list to the chart's values at every accepted tag).
TENANT_WRITABLE_FROM_HOST = {
    ("nodes", "syncBackChanges"): "the API proxy copies a tenant's edits of a virtual node (labels, taints, "
                                  "unschedulable, capacity) onto the host node (pkg/server/filters/nodechanges.go), "
                                  "for every node the teams' GPU pods run on",
    ("priorityClasses", "enabled"): "the syncer keeps a pod's spec.priorityClassName, so any host priority "
                                    "class reaches the host pod unchecked, system-node-critical included, which lets "
                                    "the kubelet evict other teams' pods to admit it",
}

# What a tenant reads through a kubelet proxy of its vCluster: with either one on, the chart grants the syncer
# nodes/proxy on the host, and vCluster's API proxy forwards a tenant's node-proxy requests there with the syncer's
# credentials after only a suffix match on the path (pkg/server/filters/metrics.go).
_KUBELET_PROXY = ("the chart grants the syncer nodes/proxy on the host, where vCluster's API proxy forwards a tenant's "
                  "node-proxy requests with the syncer's credentials after only a suffix match on the path "
                  "(pkg/server/filters/metrics.go): a percent-encoded ../ after one of the tenant's own log paths "
                  "reaches every kubelet path of every node, other teams' pods, logs and containers included")
# vCluster values the program sets so that a tenant reads nothing of the host's or other teams' through its
# vCluster, each with the program's value and what a tenant would read otherwise (vCluster 0.35.0 to 0.36.1;
# tests/test_host_reads_contract.py reads both from vCluster's source at every accepted tag).
TENANT_READABLE_VALUES = {
    ("sync", "fromHost", "nodes", "clearImageStatus"): (
        True, "the node syncer copies a host node's whole status into the virtual node "
              "(pkg/controllers/resources/nodes/translate.go), status.images included: the name and digest of every "
              "image on the node, other teams' private images among them"),
    ("networking", "advanced", "proxyKubelets", "byHostname"): (False, _KUBELET_PROXY),
    ("networking", "advanced", "proxyKubelets", "byIP"): (False, _KUBELET_PROXY),
}

# sync.fromHost kinds that copy the host objects `mappings.byName` names ("<host namespace>/<name or *>") into the
# virtual cluster, with the syncer granted reads there (chart/templates/_rbac.tpl). An empty host namespace is the
# vCluster's own (pkg/syncer/from_host_syncer.go); any other is another team's or the platform's.
FROM_HOST_MAPPED_KINDS = ("configMaps", "secrets")
# Own-namespace sources that name no single object (0.35.0 to 0.36.1 pkg/syncer/translator/from_config_translator.go
# matchesHostObject): "" maps every object of the namespace, and "/*" only an object named "*", which no name can be.
WHOLE_NAMESPACE_SOURCES = {
    "": "would copy every object of its host namespace into the tenant's vCluster, vCluster's certificates and the "
        "options Secret holding the site's backup store key among them",
    "/*": "copies nothing: vCluster reads \"/*\" as the one object named \"*\", not as every object",
}
OWN_NAMESPACE_FIX = ("map only objects of the vCluster's own host namespace that the site puts there, each by name "
                     "(\"/name\"), or remove the mapping")

# A problem of a tenant's vCluster settings: (key under the settings, value, problem, fix).
Finding = tuple[str, object, str, str]


def check_virtual_clusters(reader: Reader, stack: VClusterSettings, teams: Sequence[Team], mirrors: Mirrors,
                           gpu_sharing: bool = False) -> None:
    """``stack`` is the stack's ``vcluster`` block over the defaults, which each team's settings merge over. A
    problem of the stack's block is named once, at its own key; a team's only where the team's differs.
    ``gpu_sharing``: KAI's (its binder writes ConfigMaps for fractional pods in the tenant's namespace)."""
    stacks = ("the stack's", "each team's queue")
    stack = dataclasses.replace(stack, gpu_sharing=gpu_sharing)
    teams = [dataclasses.replace(team, vcluster=dataclasses.replace(team.vcluster, gpu_sharing=gpu_sharing))
             for team in teams]
    stack_findings = _findings(stack, *stacks, mirrors)
    inherited = {repr(finding) for finding in stack_findings}
    for key, value, problem, fix in stack_findings:
        reader.fail(f"vcluster.{key}", value, problem, fix)
    for index, team in enumerate(teams):
        # The same finding worded as the stack's: what the team inherits unchanged is named once, above.
        as_stacks = _findings(team.vcluster, *stacks, mirrors)
        for finding, (key, value, problem, fix) in zip(as_stacks, _findings(team.vcluster, f"team {team.name}'s",
                                                                             f"queue {team.queue_name}", mirrors)):
            if repr(finding) not in inherited:
                reader.fail(f"teams[{index}].vcluster.{key}", value, problem, fix)
        for key, value, problem, fix in [*etcd_name_findings(index, team), *own_namespace_mapping_findings(index, team)]:
            reader.fail(key, value, problem, fix)


def _findings(settings: VClusterSettings, whose: str, queue: str, mirrors: Mirrors) -> list[Finding]:
    return [*_chart_values(settings, whose), *_to_host_syncs(settings, whose), *_from_host_writes(settings, whose), *_host_reads(settings, whose),
            *_from_host_mappings(settings, whose),
            *_syncer_rules(settings, whose), *gpu_limit_range_findings(settings, whose),
            *_virtual_version(settings, queue), *_requests_above_limits(settings, whose),
            *cap_findings(settings, whose),
            *backing_store_findings(settings, whose), *default_registry_findings(settings, mirrors, whose),
            *site_image_findings(settings, mirrors, whose)]


def _above(request: Optional[str], limit: Optional[str]) -> bool:
    """Both quantities were read (a refused one is None and has its own error) and the request is the larger."""
    return isinstance(request, str) and isinstance(limit, str) and quantity_value(request) > quantity_value(limit)


def _request_above(whose: str, request_key: str, request: str, limit_key: str, limit: str, limit_is: str,
                   refused: str) -> Finding:
    return (request_key, request, f"{whose} request is above {limit_is}limit {limit_key} = {limit}: the API server "
            f"refuses {refused}, so the vCluster release would fail",
            f"lower {request_key} to at most {limit}, or raise {limit_key} (the stack's or the team's vcluster)")


def _requests_above_limits(settings: VClusterSettings, whose: str) -> list[Finding]:
    """A request above its limit: the API server refuses the control plane's StatefulSet, or the LimitRange. The
    control plane's are the chart's own merged under the settings' (config/versions.py), as Helm merges them."""
    resources, defaults = settings.control_plane_resources, settings.limit_range
    found = []
    for name in sorted({*resources.requests, *versions.VCLUSTER_CONTROL_PLANE_REQUESTS}):
        request_key, limit_key = f"controlPlaneResources.requests.{name}", f"controlPlaneResources.limits.{name}"
        request = resources.requests.get(name, versions.VCLUSTER_CONTROL_PLANE_REQUESTS.get(name))
        limit = resources.limits.get(name, versions.VCLUSTER_CONTROL_PLANE_LIMITS.get(name))
        if not _above(request, limit):
            continue
        refused = f"the control plane's StatefulSet ({name})"
        if name not in resources.requests:
            found.append((limit_key, limit, f"{whose} limit is below the vCluster chart's own request {request_key} = "
                          f"{request}: the API server refuses {refused}, so the vCluster release would fail",
                          f"raise {limit_key} to at least {request}, or set {request_key}"))
        else:
            limit_is = "its " if name in resources.limits else "the vCluster chart's own "
            found.append(_request_above(whose, request_key, request, limit_key, limit, limit_is, refused))
    for request_key, request, limit_key, limit, what in (
            ("limitRange.defaultRequestCpu", defaults.default_request_cpu, "limitRange.defaultCpu",
             defaults.default_cpu, "CPU"),
            ("limitRange.defaultRequestMemory", defaults.default_request_memory, "limitRange.defaultMemory",
             defaults.default_memory, "memory"),
            ("limitRange.defaultRequestEphemeralStorage", defaults.default_request_ephemeral_storage,
             "limitRange.defaultEphemeralStorage", defaults.default_ephemeral_storage, "ephemeral storage")):
        if _above(request, limit):
            found.append(_request_above(whose, request_key, request, limit_key, limit, "its ",
                                        f"the LimitRange (default {what})"))
    return found + _above_maximum(settings, whose) + _ephemeral_total(settings, whose) \
        + _requests_total(settings, whose) + _sharing_config_maps(settings, whose)


def _sharing_config_maps(settings: VClusterSettings, whose: str) -> list[Finding]:
    """A stated ConfigMap allowance below what KAI writes for the team's pods were they all fractional: the quota
    would leave KAI's binder unable to bind some of the pods the team is promised."""
    quota = settings.resource_quota
    if not isinstance(quota.pods, int) or not isinstance(quota.config_maps, int):
        return []
    needed = kai_config_maps(quota.pods, settings.gpu_sharing)
    if quota.config_maps >= needed:
        return []
    return [("resourceQuota.configMaps", quota.config_maps,
             f"KAI shares GPUs (kaiScheduler.gpuSharing) and writes {KAI_SHARING_CONFIG_MAPS} ConfigMaps in the "
             f"namespace for each fractional pod it binds, which count against this allowance: {whose} "
             f"{quota.pods} pods (resourceQuota.pods) need {needed}, and the quota would leave some unbound",
             f"raise resourceQuota.configMaps to at least {needed} (or leave it out: the default holds them), or "
             "lower resourceQuota.pods (the stack's or the team's vcluster)")]


def _ephemeral_total(settings: VClusterSettings, whose: str) -> list[Finding]:
    """A total of ephemeral-storage limits that the team's pods at the default limit do not fit in: the ResourceQuota
    would refuse some of the pods the team is promised."""
    quota, limits = settings.resource_quota, settings.limit_range
    total, default = quota.ephemeral_storage, limits.default_ephemeral_storage
    if not (isinstance(total, str) and isinstance(default, str)):
        return []
    needed = quota.pods * quantity_value(default)
    if quantity_value(total) >= needed:
        return []
    return [("resourceQuota.ephemeralStorage", total,
             f"{whose} {quota.pods} pods (resourceQuota.pods) at the default limit limitRange.defaultEphemeralStorage "
             f"= {default} need {needed / 2 ** 30:g}Gi: the ResourceQuota would refuse some of them",
             f"raise resourceQuota.ephemeralStorage to at least {needed / 2 ** 30:g}Gi, or lower "
             "resourceQuota.pods or limitRange.defaultEphemeralStorage (the stack's or the team's vcluster)")]


def _requests_total(settings: VClusterSettings, whose: str) -> list[Finding]:
    """The team's cpu or memory that its pods at the default request do not fit in, as for ephemeral storage: the
    ResourceQuota would refuse some of the pods the team is promised (the deployability check's tenant-quota rule)."""
    quota, limits = settings.resource_quota, settings.limit_range
    found = []
    for key, total, default_key, default, unit, scale in (
            ("resourceQuota.cpu", quota.cpu, "limitRange.defaultRequestCpu", limits.default_request_cpu, "", 1),
            ("resourceQuota.memory", quota.memory, "limitRange.defaultRequestMemory", limits.default_request_memory,
             "Gi", 2 ** 30)):
        if not (isinstance(total, str) and isinstance(default, str) and isinstance(quota.pods, int)) \
                or quantity_value(default) == 0:
            continue  # a value refused has its own error
        needed = quota.pods * quantity_value(default)
        if quantity_value(total) >= needed * (1 - 1e-9):
            continue
        fitting = int(quantity_value(total) / quantity_value(default) + 1e-9)
        found.append((key, total, f"{whose} {quota.pods} pods (resourceQuota.pods) at the default request {default_key} "
                      f"= {default} need {needed / scale:g}{unit}: the ResourceQuota would refuse some of them",
                      f"raise {key} to at least {needed / scale:g}{unit}, or lower resourceQuota.pods to at most "
                      f"{fitting} or {default_key} (the stack's or the team's vcluster)"))
    return found


def _above_maximum(settings: VClusterSettings, whose: str) -> list[Finding]:
    """What the LimitRange's ephemeral-storage max refuses: its own default (the API server refuses the LimitRange)
    or the control plane's limit, which the chart sets and the LimitRanger checks like any pod's of the namespace."""
    maximum, key = settings.limit_range.max_ephemeral_storage, "limitRange.maxEphemeralStorage"
    plane = settings.control_plane_resources.limits.get(
        "ephemeral-storage", versions.VCLUSTER_CONTROL_PLANE_LIMITS.get("ephemeral-storage"))
    found = []
    for other_key, value, refused in (
            ("limitRange.defaultEphemeralStorage", settings.limit_range.default_ephemeral_storage,
             "the LimitRange (its default above its max)"),
            ("controlPlaneResources.limits.ephemeral-storage", plane,
             "the control plane's pod (the namespace's LimitRange caps it too)")):
        if _above(value, maximum):
            found.append((key, maximum, f"{whose} maximum is below {other_key} = {value}: the API server refuses "
                          f"{refused}, so the vCluster release would fail",
                          f"raise {key} to at least {value}, or lower {other_key} (the stack's or the team's vcluster)"))
    return found


def _chart_values(settings: VClusterSettings, whose: str) -> list[Finding]:
    """Each value the extraValues write, against the chart's values at the vCluster version (config/vcluster_values.py):
    one the chart does not have, a block replaced whole, or one refused or the program's own."""
    if not settings.version:  # refused already, with its own error
        return []
    found, remove = [], "remove it from the stack's or the team's vcluster.extraValues"
    for path, value in leaves(settings.extra_values):
        key = f"extraValues.{path}"
        if value is None:
            found.append((key, value, "a null deletes the value from what Helm merges, so the chart's default replaces "
                          "what the program set", f"set the value itself, or {remove}"))
            continue
        match = classified(path, settings.version)
        if match is None:
            block = path in BLOCKS
            found.append((key, value, f"vCluster {settings.version}'s chart has " + (
                "a block of values here, which a single value would replace whole" if block else "no such value"),
                "set the keys under it" if block else f"check the name against the values of vCluster chart "
                f"{settings.version} (chart/values.yaml), or {remove}"))
            continue
        _, values = match
        if values.kind in (OWN, REFUSED) and not values.allows(value):
            kept = " or ".join(str(kept).lower() if isinstance(kept, bool) else f'"{kept}"'
                               for kept in values.keeps if kept not in ("", [], {}))
            found.append((key, value, (f"it is the program's own value in {whose} vCluster: " if values.kind == OWN
                                       else f"it is refused in {whose} vCluster: ") + values.why,
                          remove + (f" (or set it to {kept})" if kept else "")))
    return found


def _syncer_rules(settings: VClusterSettings, whose: str) -> list[Finding]:
    return [(f"extraValues.{'.'.join(path)}", value,
             f"it changes the host permissions of {whose} syncer, which runs in the tenant's control plane: every "
             "kind it may write on the host is checked by a host policy, and only the chart's own rules were checked",
             "remove it from the stack's or the team's vcluster.extraValues")
            for path in SYNCER_RULE_VALUES
            for value in [dig(settings.extra_values, *path[:-1]).get(path[-1])] if value not in (None, [])]


def _from_host_writes(settings: VClusterSettings, whose: str) -> list[Finding]:
    from_host = dig(settings.extra_values, "sync", "fromHost")
    return [(f"extraValues.sync.fromHost.{kind}.{switch}", value,
             f"it lets a tenant write on the host through {whose} vCluster: {problem}",
             "remove it from the stack's or the team's vcluster.extraValues")
            for (kind, switch), problem in TENANT_WRITABLE_FROM_HOST.items()
            for value in [dig(from_host, kind).get(switch)] if value not in (None, False)]


def _host_reads(settings: VClusterSettings, whose: str) -> list[Finding]:
    return [(f"extraValues.{'.'.join(path)}", value,
             f"it lets a tenant read what is not its own through {whose} vCluster: {problem}",
             f"remove it from the stack's or the team's vcluster.extraValues (the program sets it "
             f"{str(safe).lower()})")
            for path, (safe, problem) in TENANT_READABLE_VALUES.items()
            for value in [dig(settings.extra_values, *path[:-1]).get(path[-1])] if value != safe and value is not None]


def _mapped_sources(settings: VClusterSettings) -> list[tuple[str, str]]:
    """(kind, host source) of every sync.fromHost mapping the settings turn on."""
    from_host = dig(settings.extra_values, "sync", "fromHost")
    return [(kind, str(source)) for kind in FROM_HOST_MAPPED_KINDS
            for setting in [dig(from_host, kind)] if setting.get("enabled") not in (None, False)
            for source in sorted(dig(setting, "mappings", "byName"), key=str)]


def _from_host_mappings(settings: VClusterSettings, whose: str) -> list[Finding]:
    found = []
    for kind, source in _mapped_sources(settings):
        key = f"extraValues.sync.fromHost.{kind}.mappings.byName"
        if source.split("/", 1)[0]:
            found.append((key, source, f"{whose} syncer would copy {kind} of host namespace "
                          f"{source.split('/', 1)[0]} into the tenant's vCluster: another team's or the platform's, "
                          "which the tenant would read", OWN_NAMESPACE_FIX))
        elif source in WHOLE_NAMESPACE_SOURCES:
            found.append((key, source, f"{whose} syncer {WHOLE_NAMESPACE_SOURCES[source]}", OWN_NAMESPACE_FIX))
    return found


def own_namespace_mapping_findings(index: int, team: Team) -> list[tuple[str, Any, str, str]]:
    """A mapping of the vCluster's own host namespace naming an object vCluster, Helm or the platform writes there:
    (full key, value, problem, fix)."""
    return [(f"teams[{index}].vcluster.extraValues.sync.fromHost.{kind}.mappings.byName", source,
             f"names {kind} of team {team.name}'s host namespace that vCluster, Helm or the platform write (names "
             f"starting {', '.join(platform_object_prefixes(team))}): its kubeconfig and certificates, its release "
             "records, the snapshot requests and the options Secret holding the site's backup store key, which "
             "opens every team's snapshots", OWN_NAMESPACE_FIX)
            for kind, source in _mapped_sources(team.vcluster)
            if source.startswith("/") and source[1:].startswith(platform_object_prefixes(team))]


def platform_object_prefixes(team: Team) -> tuple[str, ...]:
    """How the names start of what vCluster (vc-<vCluster>, vc-config-<vCluster>, <vCluster>-certs, the snapshot
    requests), Helm (its release records) and the platform (components/tenant_backup.py) write in a team's host
    namespace."""
    return ("vc-", "sh.helm.release.", f"{team.vcluster_name}-", backup_name(team))


def _to_host_syncs(settings: VClusterSettings, whose: str) -> list[Finding]:
    found: list[Finding] = []
    to_host = dig(settings.extra_values, "sync", "toHost")
    for kind, setting in sorted((to_host or {}).items()):
        if kind in COVERED_TO_HOST_SYNCS:
            continue
        if kind == "customResources":
            enabled = [name for name, custom in (setting or {}).items()
                       if isinstance(custom, dict) and custom.get("enabled")]
        else:
            enabled = [kind] if isinstance(setting, dict) and setting.get("enabled") not in (None, False) else []
        for name in enabled:
            key = f"sync.toHost.{kind}" + (f".{name}" if kind == "customResources" else "") + ".enabled"
            found.append((f"extraValues.{key}", True,
                          f"{whose} syncer would write {name} into the host namespace, and the host has no admission "
                          f"rules for them (covered: {', '.join(COVERED_TO_HOST_SYNCS)})",
                          "remove it from the stack's or the team's vcluster.extraValues"))
    return found


def _virtual_version(settings: VClusterSettings, queue: str) -> list[Finding]:
    if not settings.version:  # refused already, with its own error
        return []
    version = virtual_kubernetes_version(settings)
    minor = minor_version(version)
    if minor is not None and minor >= MUTATING_ADMISSION_POLICY_GA:
        return []
    wanted = ".".join(map(str, MUTATING_ADMISSION_POLICY_GA))
    return [("version", settings.version,
             f"its virtual cluster runs Kubernetes {version}, which has no GA MutatingAdmissionPolicy: the defaults "
             f"that put every pod in KAI and {queue} need Kubernetes {wanted} or later",
             f"use vcluster.version {versions.VCLUSTER_VERSION} (Kubernetes "
             f"{versions.VCLUSTER_VIRTUAL_KUBERNETES[versions.VCLUSTER_VERSION]}), or set vcluster.extraValues."
             f"controlPlane.distro.k8s.image.tag to v{wanted}.0 or later")]
