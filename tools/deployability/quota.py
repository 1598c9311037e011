"""The ``quota`` rule: what runs in a namespace fits the ResourceQuota that is really there.

A tenant namespace's ResourceQuota and LimitRange are what the vCluster chart renders: the program's
values merged over the chart's defaults (ephemeral storage, per-container defaults...), not the config
alone. The control plane, the tenant's CoreDNS and the platform's own Jobs are charged to that quota
like any tenant pod, so they are checked the way the API server admits pods:

* each pod gets Kubernetes' defaults first (a request equal to its limit when only the limit is set),
  then the LimitRange's ``defaultRequest`` / ``default`` for what is still unset, and is refused where a
  container exceeds the LimitRange's ``max``, or lacks a request or limit a quota counts (error);
* a pod's requests are the larger of its init containers' and the sum of its containers' (as quota
  charges them); workloads count their replicas, StatefulSets their claim templates as claims;
* everything the platform starts in the namespace must fit every unscoped quota (error: the release
  would never become ready);
* what is left must hold the pods the quota's ``count/pods`` promises the team, each sized by the
  LimitRange defaults (a warning naming the resource that runs out first).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from config.key_types import QUANTITY, quantity_value
from tools.deployability.inputs import K8sObject, pod_templates

_COMPUTE = ("cpu", "memory", "ephemeral-storage")
_POD_COUNTS = ("pods", "count/pods")
_CLAIM_COUNTS = ("persistentvolumeclaims", "count/persistentvolumeclaims")
_REPLICATED = ("Deployment", "StatefulSet", "ReplicaSet")


def amount(value: Any) -> Optional[float]:
    """A quantity as a number of base units (cores, bytes); None when it is not one."""
    text = str(value)
    return quantity_value(text) if QUANTITY.fullmatch(text) else None


def shown(resource: str, value: float) -> str:
    if resource.endswith("cpu"):
        return f"{value * 1000:g}m"
    if any(resource.endswith(name) for name in ("memory", "ephemeral-storage", "storage")):
        return f"{value / 2 ** 30:.3g}Gi"
    return f"{value:g}"


def container_resources(container: Mapping[str, Any], limit_range: Mapping[str, Any]) -> dict[str, float]:
    """``requests.X`` / ``limits.X`` of a container after Kubernetes' and the LimitRange's defaults."""
    resources = container.get("resources") or {}
    limits = {name: amount(value) for name, value in (resources.get("limits") or {}).items()}
    requests = {**limits, **{name: amount(value) for name, value in (resources.get("requests") or {}).items()}}
    for name, value in (limit_range.get("default") or {}).items():
        limits.setdefault(name, amount(value))
    for name, value in (limit_range.get("defaultRequest") or {}).items():
        requests.setdefault(name, amount(value))
    return {**{f"requests.{name}": value for name, value in requests.items() if value is not None},
            **{f"limits.{name}": value for name, value in limits.items() if value is not None}}


def pod_charge(spec: Mapping[str, Any], limit_range: Mapping[str, Any]) -> dict[str, float]:
    """What one pod of ``spec`` charges to a quota (requests and limits, ``pods``)."""
    containers = [container_resources(c, limit_range) for c in spec.get("containers") or []]
    inits = [container_resources(c, limit_range) for c in spec.get("initContainers") or []]
    keys = {key for resources in containers + inits for key in resources}
    charge = {key: max(sum(c.get(key, 0.0) for c in containers), max((i.get(key, 0.0) for i in inits), default=0.0))
              for key in keys}
    return {**charge, "pods": 1.0}


def _replicas(manifest: Mapping[str, Any], kind: str) -> int:
    spec = manifest.get("spec") or {}
    if kind in _REPLICATED:
        return int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
    if kind == "Job":
        return int(spec.get("parallelism", 1) if spec.get("parallelism") is not None else 1)
    return 1


def _charged_as(resource: str) -> str:
    """Quota resource names that count the same thing share one usage key (``cpu`` = ``requests.cpu``)."""
    if resource in _COMPUTE:
        return f"requests.{resource}"
    if resource in _POD_COUNTS:
        return "pods"
    if resource in _CLAIM_COUNTS:
        return "persistentvolumeclaims"
    return resource


def _limit_range(limit_ranges: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The ``Container`` limits of the namespace's LimitRanges (defaults: the first that sets them)."""
    merged: dict[str, Any] = {"default": {}, "defaultRequest": {}, "max": {}}
    for limit_range in limit_ranges:
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            for field in ("default", "defaultRequest"):
                for name, value in (item.get(field) or {}).items():
                    merged[field].setdefault(name, value)
            for name, value in (item.get("max") or {}).items():
                current = amount(merged["max"].get(name)) if name in merged["max"] else None
                if amount(value) is not None and (current is None or amount(value) < current):
                    merged["max"][name] = value
    return merged


def namespace_usage(workloads: Iterable[tuple[Any, dict, dict]], claims: Iterable[Mapping[str, Any]],
                    limit_range: Mapping[str, Any]) -> tuple[dict[str, float], list[tuple[Any, str]]]:
    """What the workloads (object, pod metadata, pod spec) and claims of one namespace charge, and the
    pods the API server would refuse (object, why)."""
    usage: dict[str, float] = defaultdict(float)
    refused = []
    for obj, _, spec in workloads:
        for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
            resources = container_resources(container, limit_range)
            for name, value in (limit_range.get("max") or {}).items():
                ceiling = amount(value)
                # A limit is never below its request: the larger of the two is what the max refuses.
                kind = "limits" if f"limits.{name}" in resources else "requests"
                found = resources.get(f"{kind}.{name}")
                if ceiling is not None and found is not None and found > ceiling:
                    refused.append((obj, f"container {container.get('name')} has {kind}.{name} "
                                         f"{shown(name, found)}, above the LimitRange's max {value}"))
        replicas = _replicas(obj.manifest, obj.kind)
        for key, value in pod_charge(spec, limit_range).items():
            usage[key] += value * replicas
        if obj.kind == "StatefulSet":
            for template in (obj.manifest.get("spec") or {}).get("volumeClaimTemplates") or []:
                usage["persistentvolumeclaims"] += replicas
                usage["requests.storage"] += replicas * (amount(
                    (((template.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", 0))
                    or 0.0)
    for claim in claims:
        if claim.get("kind") == "PersistentVolumeClaim":
            usage["persistentvolumeclaims"] += 1
            usage["requests.storage"] += amount(
                (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage", 0)) or 0.0
    return dict(usage), refused


def unmet_requirements(spec: Mapping[str, Any], hard: Mapping[str, Any], limit_range: Mapping[str, Any]) -> list[str]:
    """Quota resources a pod of ``spec`` does not state (after defaults): the API server refuses such a pod."""
    missing = []
    for resource in hard:
        charged = _charged_as(resource)
        if not charged.startswith(("requests.", "limits.")) or charged == "requests.storage":
            continue
        for container in spec.get("containers") or []:
            if charged not in container_resources(container, limit_range):
                missing.append(f"container {container.get('name')} states no {charged}")
    return missing


def stated_pods_capacity(hard: Mapping[str, Any], usage: Mapping[str, float],
                         limit_range: Mapping[str, Any]) -> tuple[float, Optional[str]]:
    """How many pods of one container sized by the LimitRange defaults fit besides ``usage``, and the
    quota resource that bounds it (None: only the pod count does)."""
    default_pod = pod_charge({"containers": [{"name": "default"}]}, limit_range)
    best, bound = math.inf, None
    for resource, value in hard.items():
        charged = _charged_as(resource)
        size = default_pod.get(charged)
        limit = amount(value)
        if charged == "pods" or not size or limit is None:
            continue
        fits = math.floor(max(limit - usage.get(charged, 0.0), 0.0) / size + 1e-9)
        if fits < best:
            best, bound = fits, resource
    return best, bound


@dataclass(frozen=True)
class QuotaProblem:
    blocking: bool  # the API server refuses a pod or the platform's pods exceed the quota
    object: str
    message: str
    fix: str


def quota_problems(objects: Sequence[K8sObject]) -> list[QuotaProblem]:
    """Every namespace holding a ResourceQuota, checked against what the objects start there."""
    by_namespace: dict[str, list[K8sObject]] = defaultdict(list)
    for obj in objects:
        by_namespace[obj.namespace or ""].append(obj)
    problems = []
    for namespace, members in sorted(by_namespace.items()):
        quotas = [obj for obj in members if obj.kind == "ResourceQuota"
                  and not (obj.manifest.get("spec") or {}).get("scopes")
                  and not (obj.manifest.get("spec") or {}).get("scopeSelector")]
        limit_range = _limit_range([obj.manifest for obj in members if obj.kind == "LimitRange"])
        workloads = pod_templates(members)
        usage, refused = namespace_usage(workloads, [obj.manifest for obj in members], limit_range)
        problems += [QuotaProblem(True, obj.describe(), f"the LimitRange of {namespace} refuses it: {why}",
                                  "lower the container's resources or raise the LimitRange's max")
                     for obj, why in refused]
        for quota in quotas:
            problems += _against(quota, workloads, usage, limit_range)
    return problems


def _against(quota: K8sObject, workloads, usage: Mapping[str, float], limit_range) -> list[QuotaProblem]:
    hard = (quota.manifest.get("spec") or {}).get("hard") or {}
    problems = [QuotaProblem(True, obj.describe(), f"ResourceQuota {quota.name} counts it, so the API server "
                             f"refuses its pods: {'; '.join(missing)}",
                             "state the requests and limits, or give the namespace a LimitRange default")
                for obj, _, spec in workloads for missing in [unmet_requirements(spec, hard, limit_range)] if missing]
    over = [f"{resource} {shown(resource, usage.get(_charged_as(resource), 0.0))} of {value}"
            for resource, value in sorted(hard.items())
            if amount(value) is not None and usage.get(_charged_as(resource), 0.0) > amount(value) + 1e-9]
    if over:
        problems.append(QuotaProblem(True, quota.describe(), "the pods and claims the platform starts in the namespace "
                                     f"need more than it allows ({', '.join(over)}), so some never start",
                                     "raise those quota values (vcluster.resourceQuota) or shrink those pods"))
        return problems
    stated = amount(next((hard[key] for key in _POD_COUNTS if key in hard), None))
    if stated is None:
        return problems
    promised = stated - usage.get("pods", 0.0)
    fits, bound = stated_pods_capacity(hard, usage, limit_range)
    if fits < promised:
        problems.append(QuotaProblem(False, quota.describe(), f"count/pods promises {promised:g} pods besides the "
                                     f"{usage.get('pods', 0.0):g} the platform runs there, but {bound} "
                                     f"{hard[bound]} holds only {fits:g} of the LimitRange's default size",
                                     f"raise {bound} or lower the LimitRange default for it, or promise fewer pods"))
    return problems
