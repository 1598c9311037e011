"""Rule ``tenant-quota``: what a team was promised fits in what its namespace enforces.

Each tenant namespace's ResourceQuota (as the chart renders it) must hold, at once, the vCluster control
plane (its StatefulSet's pods and volume claims), the tenant's DNS pods, the Services both bring, and the
team's stated allowance: its pod count as default-sized pods (one container with nothing set, which the
namespace's LimitRange fills in), its Services, claims and storage. The API server refuses a pod missing a
resource the quota tracks, and a container above the LimitRange's ``max``, so both are reported too; so is a
control plane and DNS that alone exceed the quota (the release never becomes ready). The object counts hold
the platform's own objects in the namespace (the program's and the chart's ConfigMaps and Secrets, the ones
vCluster writes at start and copies for the DNS pod, Helm's release history, the root CA ConfigMaps, one
Endpoints and the host's EndpointSlices per Service) with the team's stated ConfigMaps, Secrets and slices,
and a Helm release that keeps every revision is reported. The team's KAI queue, when it was derived from the
quota, must hold exactly what the namespace leaves to KAI-scheduled pods (everything but the control plane). Amounts follow the API server's quota admission and LimitRanger defaulting.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Iterable, Mapping, Optional, Sequence

from config.key_types import quantity_value
from config.tenant_budget import IP_FAMILIES, ROOT_CA_CONFIG_MAPS, SYNCER_SECRETS
from config.vocabulary import RELEASE, TENANT_COMPONENT
from tools.charts.manifest_yaml import load_manifests
from tools.deployability.inputs import K8sObject, pod_templates

# The resources a quota that tracks them makes every pod state (the API server refuses a pod leaving one unset).
COMPUTE = ("cpu", "memory", "ephemeral-storage")
# Charged like them when a pod asks for some; a pod asking for none is charged none.
HUGE_PAGES = ("hugepages-2Mi", "hugepages-1Gi")
CHARGED = COMPUTE + HUGE_PAGES
QUEUE_KIND = "Queue"
QUEUE_LABEL = "kai.scheduler/queue"


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else quantity_value(str(value))


def container_defaults(limit_ranges: Iterable[Mapping[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(default limits, default requests) of the namespace's Container LimitRange items; an item's
    ``defaultRequest`` falls back to its ``default``, as the API server defaults it."""
    limits: dict[str, Any] = {}
    requests: dict[str, Any] = {}
    for limit_range in limit_ranges:
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") != "Container":
                continue
            limits.update(item.get("default") or {})
            requests.update({**(item.get("default") or {}), **(item.get("defaultRequest") or {})})
    return limits, requests


def container_maximums(limit_ranges: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """The lowest ``max`` of each resource over the namespace's Container LimitRange items."""
    maximums: dict[str, float] = {}
    for limit_range in limit_ranges:
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") == "Container":
                for resource, amount in (item.get("max") or {}).items():
                    maximums[resource] = min(_number(amount), maximums.get(resource, float("inf")))
    return maximums


def filled(container: Mapping[str, Any], defaults: tuple[dict[str, Any], dict[str, Any]]
           ) -> tuple[dict[str, float], dict[str, float]]:
    """A container's (requests, limits) of cpu, memory, ephemeral storage and huge pages after the API server's
    defaulting: a request equal to its limit when only the limit is set, then the LimitRange's defaults."""
    default_limits, default_requests = defaults
    resources = container.get("resources") or {}
    limits = dict(resources.get("limits") or {})
    requests = {**limits, **(resources.get("requests") or {})}
    for resource, amount in default_limits.items():
        limits.setdefault(resource, amount)
    for resource, amount in default_requests.items():
        requests.setdefault(resource, amount)
    return ({r: _number(v) for r, v in requests.items() if r in CHARGED},
            {r: _number(v) for r, v in limits.items() if r in CHARGED})


def above_maximum(spec: Mapping[str, Any], defaults: tuple[dict[str, Any], dict[str, Any]],
                  maximums: Mapping[str, float]) -> list[str]:
    """The containers of a pod the LimitRange's ``max`` refuses (a limit, or a request where no limit is set)."""
    found = []
    for container in list(spec.get("containers") or []) + list(spec.get("initContainers") or []):
        requests, limits = filled(container, defaults)
        for resource, ceiling in sorted(maximums.items()):
            kind, amounts = ("limits", limits) if resource in limits else ("requests", requests)
            if amounts.get(resource, 0.0) > ceiling * (1 + 1e-9):
                found.append(f"container {container.get('name')} has {kind}.{resource} {amounts[resource]:g}, "
                             f"above the max {ceiling:g}")
    return found


def pod_usage(spec: Mapping[str, Any], defaults: tuple[dict[str, Any], dict[str, Any]]) -> tuple[Counter, set[str]]:
    """What one pod counts against a quota (``requests.cpu``, ``limits.memory``, ``count/pods``...), and
    the ``limits.*`` keys it leaves unset (a quota tracking one of them refuses the pod)."""
    containers = [filled(c, defaults) for c in spec.get("containers") or []]
    inits = [(c.get("restartPolicy") == "Always", filled(c, defaults)) for c in spec.get("initContainers") or []]
    usage: Counter = Counter({"count/pods": 1, "pods": 1})
    unset: set[str] = set()
    for index, kind in ((0, "requests"), (1, "limits")):
        for resource in CHARGED:
            # A sidecar (an init container that keeps running) adds to every container started after it; an
            # ordinary init container runs alone, beside the sidecars started before it.
            sidecars, peak = 0.0, 0.0
            for sidecar, amounts in inits:
                if sidecar:
                    sidecars += amounts[index].get(resource, 0.0)
                else:
                    peak = max(peak, sidecars + amounts[index].get(resource, 0.0))
            total = sidecars + sum(amounts[index].get(resource, 0.0) for amounts in containers)
            usage[f"{kind}.{resource}"] = max(total, peak)
            if kind == "limits" and resource in COMPUTE and any(
                    resource not in amounts[1] for amounts in containers + [amounts for _, amounts in inits]):
                unset.add(f"limits.{resource}")
    usage["cpu"], usage["memory"] = usage["requests.cpu"], usage["requests.memory"]
    return usage, unset


def _workloads(objects: Sequence[K8sObject], namespace: str) -> Iterable[tuple[K8sObject, dict[str, Any], int]]:
    """Pod specs that run for good in the namespace, with their replica counts, and a CronJob's that comes back on
    every run (one at a time, as the program's runs; a Job ends, so it is left out)."""
    for obj, _, spec in pod_templates(o for o in objects if o.namespace == namespace):
        if obj.kind == "Job":
            continue
        replicas = (obj.manifest.get("spec") or {}).get("replicas", 1) if obj.kind != "Pod" else 1
        yield obj, spec, int(replicas if replicas is not None else 1)


def _claims(obj: K8sObject, replicas: int) -> Counter:
    usage: Counter = Counter()
    for template in (obj.manifest.get("spec") or {}).get("volumeClaimTemplates") or []:
        storage = ((template.get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", 0)
        usage["count/persistentvolumeclaims"] += replicas
        usage["requests.storage"] += _number(storage) * replicas
    return usage


def _dns_services(obj: K8sObject) -> int:
    manifests = ((obj.release.values if obj.release else {}).get("controlPlane") or {}).get("coredns", {}) \
        .get("overwriteManifests") if obj.release else None
    if not manifests:
        return 1  # vCluster's own CoreDNS brings its kube-dns Service
    return sum(1 for d in load_manifests(manifests) if isinstance(d, dict) and d.get("kind") == "Service")


def _synced_config_maps(spec: Mapping[str, Any]) -> set[str]:
    """The ConfigMaps a platform pod's volumes name that must exist (vCluster copies them to the host)."""
    return {volume["configMap"]["name"] for volume in spec.get("volumes") or []
            if (volume.get("configMap") or {}).get("name") and not volume["configMap"].get("optional")}


def tenant_allowances(plan: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Host namespace -> the team's stated allowance (each TenantCluster's registered outputs), with the revisions
    Helm keeps of the releases in that namespace (``helmHistory``: each is a Secret there; 0: every revision)."""
    releases = [r.get("inputs") or {} for r in plan["resources"] if r["type"] == RELEASE]
    return {outputs["namespace"]: {**outputs["workloadQuota"], "helmHistory": [
                int(inputs.get("maxHistory") or 0) for inputs in releases
                if inputs.get("namespace") == outputs["namespace"]]}
            for outputs in ((r.get("outputs") or {}) for r in plan["resources"] if r["type"] == TENANT_COMPONENT)
            if outputs.get("namespace") and isinstance(outputs.get("workloadQuota"), dict)}


def _platform_objects(objects: Sequence[K8sObject], namespace: str, allowance: Mapping[str, Any],
                      dns_config_maps: set[str], services: float) -> Counter:
    """The object counts the platform keeps in the namespace (a release with unbounded history: see
    :func:`check_tenant_quotas`)."""
    here = [o for o in objects if o.namespace == namespace and not o.patch]
    releases = sum(1 for o in objects if o.release is not None and o.release.chart == "vcluster"
                   and o.release.namespace == namespace and o.kind == "StatefulSet")
    history = sum(allowance.get("helmHistory") or [])
    return Counter({"count/configmaps": sum(1 for o in here if o.kind == "ConfigMap") + ROOT_CA_CONFIG_MAPS
                    + len(dns_config_maps),
                    "count/secrets": sum(1 for o in here if o.kind == "Secret") + SYNCER_SECRETS * releases + history,
                    "count/endpoints": services,
                    "count/endpointslices.discovery.k8s.io": IP_FAMILIES * services})


def check_tenant_quotas(objects: Sequence[K8sObject], allowances: Mapping[str, Mapping[str, Any]],
                        finding: Any) -> list:
    """``allowances``: host namespace -> the team's stated ``pods``, ``services``, ``persistentVolumeClaims``,
    ``storage``, ``configMaps``, ``secrets``, ``endpointSlices`` (the TenantCluster component's ``workloadQuota``
    output) and ``helmHistory`` (:func:`tenant_allowances`). ``finding(severity, object, message,
    fix)`` builds the report's findings."""
    results = []
    for quota in (o for o in objects if o.kind == "ResourceQuota" and o.namespace in allowances):
        namespace = quota.namespace
        hard = {key: _number(value) for key, value in ((quota.manifest.get("spec") or {}).get("hard") or {}).items()}
        limit_ranges = [o.manifest for o in objects if o.kind == "LimitRange" and o.namespace == namespace]
        defaults, maximums = container_defaults(limit_ranges), container_maximums(limit_ranges)
        allowance = allowances[namespace]
        platform: Counter = Counter()
        kai_scheduled: Counter = Counter()
        queue: Optional[str] = None
        dns_config_maps: set[str] = set()
        for obj, spec, replicas in _workloads(objects, namespace):
            usage, unset = pod_usage(spec, defaults)
            refused = sorted(key for key in unset if key in hard)
            if refused:
                results.append(finding("error", obj.describe(), f"its pods set no {', '.join(refused)}, which the "
                                       f"ResourceQuota {quota.name} tracks: the API server refuses them",
                                       "give the namespace a LimitRange default for it, or drop it from the quota"))
            too_large = above_maximum(spec, defaults, maximums)
            if too_large:
                results.append(finding("error", obj.describe(), f"the LimitRange of {namespace} refuses its pods: "
                                       f"{'; '.join(too_large)}", "lower the container's resources or raise the "
                                       "LimitRange's max"))
            scaled = Counter({key: amount * replicas for key, amount in usage.items()})
            platform += scaled + _claims(obj, replicas)
            if spec.get("schedulerName") == "kai-scheduler":
                kai_scheduled += scaled
                queue = queue or (obj.manifest.get("metadata") or {}).get("labels", {}).get(QUEUE_LABEL)
            if obj.kind == "Pod" and obj.release is not None:
                platform["count/services"] += _dns_services(obj)
                dns_config_maps |= _synced_config_maps(spec)
        platform["count/services"] += sum(1 for o in objects if o.kind == "Service" and o.namespace == namespace)
        team_services = allowance.get("services", 0)
        platform += _platform_objects(objects, namespace, allowance, dns_config_maps, platform["count/services"])
        default_pod, _ = pod_usage({"containers": [{"name": "app"}]}, defaults)
        team: Counter = Counter({key: amount * allowance.get("pods", 0) for key, amount in default_pod.items()})
        team["count/services"] += team_services
        team["count/endpoints"] += team_services
        team["count/endpointslices.discovery.k8s.io"] += (IP_FAMILIES * team_services
                                                           + allowance.get("endpointSlices", 0))
        team["count/configmaps"] += allowance.get("configMaps", 0)
        team["count/secrets"] += allowance.get("secrets", 0)
        team["count/persistentvolumeclaims"] += allowance.get("persistentVolumeClaims", 0)
        team["requests.storage"] += _number(allowance.get("storage", 0))
        platform_short = exceeded(hard, platform)
        short = exceeded(hard, platform + team)
        if platform_short:
            results.append(finding("error", quota.describe(), "the control plane, the DNS and the platform's objects "
                                   f"alone need more than it allows, so some of them never start: {'; '.join(platform_short)}",
                                   "raise those quota values (vcluster.resourceQuota) or shrink those pods and objects"))
        elif short:
            results.append(finding("error", quota.describe(), f"the control plane, the DNS, the platform's objects, "
                                   f"the team's stated objects and its {allowance.get('pods', 0)} default-sized pods "
                                   f"do not fit: {'; '.join(short)}", "raise the quota by what the control plane, "
                                   "the DNS and the platform's objects take, or lower the LimitRange defaults"))
        if 0 in (allowance.get("helmHistory") or []):
            results.append(finding("error", quota.describe(), "a Helm release in the namespace keeps every revision "
                                   "(no maxHistory), each a Secret its count/secrets holds: after enough upgrades "
                                   "the quota refuses the release's next one", "set the release's max_history "
                                   "(config/vocabulary.py HELM_MAX_HISTORY)"))
        results += _queue_agreement(objects, queue, hard, platform - kai_scheduled, quota, finding)
    return results


def exceeded(hard: Mapping[str, float], usage: Counter) -> list[str]:
    """The quota resources ``usage`` exceeds, as ``key hard < needed``."""
    return [f"{key} {hard[key]:g} < {usage[key]:g}" for key in sorted(hard)
            if key in usage and usage[key] > hard[key] * (1 + 1e-9)]


def _queue_agreement(objects: Sequence[K8sObject], queue: Optional[str], hard: Mapping[str, float],
                     outside_kai: Counter, quota: K8sObject, finding: Any) -> list:
    """The queue derived from the quota holds what the namespace leaves to KAI-scheduled pods."""
    found = next((o for o in objects if o.kind == QUEUE_KIND and o.name == queue), None)
    if found is None:
        return []
    resources = (found.manifest.get("spec") or {}).get("resources") or {}
    expected = {"cpu": round((hard.get("requests.cpu", 0) - outside_kai["requests.cpu"]) * 1000),
                # Whole MB rounded up, or the queue would be short of the namespace by a fraction of one.
                "memory": math.ceil((hard.get("requests.memory", 0) - outside_kai["requests.memory"]) / 1_000_000)}
    wrong = [f"{name} quota {resources[name]['quota']:g}, namespace leaves {expected[name]}" for name in expected
             if f"requests.{name}" in hard and (resources.get(name) or {}).get("quota", -1) not in (-1, expected[name])]
    return [finding("warning", found.describe(), f"the queue and the ResourceQuota {quota.name} disagree: "
                    f"{'; '.join(wrong)}", "leave the team's cpu and memory to be derived from its resourceQuota")] \
        if wrong else []
