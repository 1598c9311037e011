"""Stack config: the organization, team and vCluster readers of ``load_platform`` (queues, tenants)."""

from __future__ import annotations

import re
from typing import Optional

from config.errors import MISSING
from config.merge import deep_merge
from config.model import (
    ControlPlaneResources,
    Organization,
    QueueResource,
    QueueResources,
    Team,
    TenantLimitRange,
    TenantResourceQuota,
    VClusterSettings,
)
from config.reader import Reader, Section, is_number, pinned_version
from config.vocabulary import QUEUE_FIELDS, QUEUE_RESOURCES

VCLUSTER_FIELDS = ("version", "nodeLabels", "syncRuntimeClasses", "enforceTolerations",
                   "controlPlaneResources", "resourceQuota", "limitRange", "networkPolicy", "podSecurity",
                   "extraValues")
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
TEAM_FIELDS = ("name", "displayName", "priority", "resources", "vclusterName", "namespace", "protect", "vcluster")
# Keys a stack may still carry from an older release: each names what replaced it.
RETIRED_TEAM_FIELDS = {
    "strict": ("was retired: every pod a tenant's vCluster syncs, its DNS included, must now be scheduled by KAI in "
               "the team's queue, so there is nothing left to switch",
               "remove the key; see the tenant security model (docs/security-model.md)"),
}


def _queue_resources(section: Section, defaults: Optional[dict[str, QueueResource]] = None) -> QueueResources:
    """Read gpu/cpu/memory; a resource left out entirely takes its entry from ``defaults``."""
    resources = {}
    for name in QUEUE_RESOURCES:
        if defaults and name in defaults and not section.has(name):
            resources[name] = defaults[name]
            continue
        entry = section.child(name, QUEUE_FIELDS)
        quota = entry.number("quota", -1, minimum=0, allow_unlimited=True)
        limit = entry.number("limit", -1, minimum=0, allow_unlimited=True)
        weight = entry.number("overQuotaWeight", 1, minimum=0)
        # A misspelt quota or limit is reported as unknown; its default must not add a misleading second problem.
        checked = not entry.unknown
        if checked and quota == -1 and limit not in (None, -1):
            entry._fail("limit", limit, "caps a queue whose quota is -1 (unlimited)",
                        "set limit to -1, or give quota a number no larger than the limit")
        elif checked and quota is not None and limit is not None and limit != -1 and limit < quota:
            entry._fail("limit", limit, f"is below the quota ({quota:g})",
                        "raise limit to at least the quota, or set it to -1 (unlimited)")
        resources[name] = QueueResource(quota, limit, weight)
    return QueueResources(**resources)


def read_organization(section: Section) -> Organization:
    name = section.string("name", dns_label=True, fix="set organization.name, e.g. ml-org")
    return Organization(
        name=name,
        display_name=section.string("displayName", name or ""),
        priority=section.integer("priority", 100, minimum=0),
        resources=_queue_resources(section.child("resources", QUEUE_RESOURCES)),
    )


def without_retired(reader: Reader, path: str, value: object) -> object:
    """Report retired team keys once, then read the team as if they were absent."""
    if not isinstance(value, dict):
        return value
    for key, (problem, fix) in RETIRED_TEAM_FIELDS.items():
        if key in value:
            reader.fail(f"{path}.{key}", value[key], problem, fix)
    return {key: item for key, item in value.items() if key not in RETIRED_TEAM_FIELDS}


def read_team(section: Section, stack_vcluster: VClusterSettings) -> Team:
    name = section.string("name", dns_label=True, fix="give the team a DNS-1123 name, e.g. team-nlp")
    # The vCluster name is a Helm release name: at most 53 characters.
    vcluster_name = section.string("vclusterName", name[:53].rstrip("-") if name else name, dns_label=True,
                                   max_length=53)
    vcluster = read_vcluster(section.child("vcluster", VCLUSTER_FIELDS), stack_vcluster) or stack_vcluster
    return Team(
        name=name,
        display_name=section.string("displayName", name or ""),
        priority=section.integer("priority", 100, minimum=0),
        resources=_queue_resources(section.child("resources", QUEUE_RESOURCES),
                                   _cpu_memory_from_quota(vcluster.resource_quota)),
        vcluster_name=vcluster_name,
        namespace=section.string("namespace", f"vcluster-{vcluster_name}"[:63].rstrip("-"), dns_label=True),
        protect=section.boolean("protect", True),
        vcluster=vcluster,
    )


def _cpu_memory_from_quota(quota: TenantResourceQuota) -> dict[str, QueueResource]:
    """KAI schedules every tenant pod, CPU pods included: by default a team's queue guarantees, and is capped
    at, the CPU and memory its namespace's ResourceQuota allows, so the two never disagree."""
    if quota.cpu is None or quota.memory is None:
        return {}
    millicores = quantity_value(quota.cpu) * 1000
    megabytes = quantity_value(quota.memory) / 1_000_000
    return {"cpu": QueueResource(quota=round(millicores), limit=round(millicores)),
            "memory": QueueResource(quota=int(megabytes), limit=int(megabytes))}


def read_vcluster(section: Section, base: VClusterSettings) -> VClusterSettings:
    """Read a ``vcluster`` block; every key left out keeps its value from ``base``."""
    version = pinned_version(section, "version", section.string("version", base.version), prefix="")
    resources = section.child("controlPlaneResources", ("requests", "limits"))
    quota = section.child("resourceQuota", ("cpu", "memory", "pods", "services", "persistentVolumeClaims"))
    limits = section.child("limitRange", ("defaultCpu", "defaultMemory", "defaultRequestCpu", "defaultRequestMemory"))
    base_quota, base_limits = base.resource_quota, base.limit_range
    extra = section.mapping("extraValues", {})
    return VClusterSettings(
        version=version,
        node_labels=section.string_map("nodeLabels", base.node_labels),
        sync_runtime_classes=section.boolean("syncRuntimeClasses", base.sync_runtime_classes),
        enforce_tolerations=section.string_list("enforceTolerations", base.enforce_tolerations),
        control_plane_resources=ControlPlaneResources(
            requests={**base.control_plane_resources.requests, **(resources.string_map("requests", {}) or {})},
            limits={**base.control_plane_resources.limits, **(resources.string_map("limits", {}) or {})},
        ),
        resource_quota=TenantResourceQuota(
            cpu=_quantity(quota, "cpu", base_quota.cpu),
            memory=_quantity(quota, "memory", base_quota.memory),
            pods=quota.integer("pods", base_quota.pods, minimum=1),
            services=quota.integer("services", base_quota.services, minimum=0),
            persistent_volume_claims=quota.integer("persistentVolumeClaims", base_quota.persistent_volume_claims,
                                                   minimum=0),
        ),
        limit_range=TenantLimitRange(
            default_cpu=_quantity(limits, "defaultCpu", base_limits.default_cpu),
            default_memory=_quantity(limits, "defaultMemory", base_limits.default_memory),
            default_request_cpu=_quantity(limits, "defaultRequestCpu", base_limits.default_request_cpu),
            default_request_memory=_quantity(limits, "defaultRequestMemory", base_limits.default_request_memory),
        ),
        network_policy=section.boolean("networkPolicy", base.network_policy),
        pod_security=section.string("podSecurity", base.pod_security, choices=POD_SECURITY_LEVELS),
        extra_values=deep_merge(base.extra_values, extra or {}),
    )


_QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")
_QUANTITY_FACTORS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                     "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}


def quantity_value(quantity: str) -> float:
    """A validated Kubernetes quantity (``500m``, ``16``, ``64Gi``) as a plain number of base units."""
    match = _QUANTITY.fullmatch(quantity)
    assert match is not None, quantity
    suffix = match.group(2) or ""
    return float(quantity[:len(quantity) - len(suffix)]) * _QUANTITY_FACTORS[suffix]


def _quantity(section: Section, name: str, default: str) -> Optional[str]:
    section._declare(name, {"type": ["string", "number"], "pattern": _QUANTITY.pattern})
    value = section.raw(name)
    if is_number(value) and value >= 0:
        value = f"{value:g}"
    elif value is MISSING:
        return default
    if not isinstance(value, str) or not _QUANTITY.fullmatch(value):
        section._fail(name, value, "is not a Kubernetes quantity", "use a value such as 500m, 4, 512Mi or 16Gi")
        return None
    return value
