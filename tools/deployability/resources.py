"""Container resources and LimitRanges as the API server validates them, which no OpenAPI schema states.

- A container requests at most its limit of each resource; a resource that cannot be overcommitted (an extended
  resource such as ``nvidia.com/gpu``, huge pages) has a limit once requested, equal to the request.
- Each LimitRange item keeps ``min <= defaultRequest <= default <= max`` for every resource it names.

Otherwise the API server refuses the workload (its pod template) or the LimitRange, and the release that sends it
fails. ``check_resources`` reports each as (object, problem, fix).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from config.key_types import QUANTITY, quantity_value
from tools.deployability.inputs import CONTAINER_LISTS, K8sObject, pod_templates
from tools.offline.recording import REDACTED, UNKNOWN

RULE = "resources"
# A LimitRange item's bounds, in the order the API server requires of them.
LIMIT_RANGE_ORDER = ("min", "defaultRequest", "default", "max")


def _amount(value: Any) -> Optional[float]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return quantity_value(value) if isinstance(value, str) and QUANTITY.fullmatch(value) else None


def _not_overcommitted(resource: str) -> bool:
    """An extended resource (a domain outside kubernetes.io) or huge pages: requests must equal limits."""
    domain, _, _ = resource.rpartition("/")
    return resource.startswith("hugepages-") or bool(domain) and not domain.endswith("kubernetes.io")


def _container_problems(container: Mapping[str, Any]) -> Iterable[str]:
    resources = container.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    name = container.get("name", "?")
    for kind, values in (("request", requests), ("limit", limits)):
        for resource, value in values.items():
            if _amount(value) is None and value not in (UNKNOWN, REDACTED):  # the plan may not know a value
                yield f"container {name}: {kind} of {resource} {value!r} is not a quantity"
    for resource, value in requests.items():
        if {value, limits.get(resource)} & {UNKNOWN, REDACTED}:
            continue
        request, limit = _amount(value), _amount(limits.get(resource))
        if _not_overcommitted(resource) and (limit is None or request != limit):
            yield (f"container {name} requests {value} {resource} with "
                   + (f"a limit of {limits[resource]}" if resource in limits else "no limit")
                   + f": {resource} cannot be overcommitted, so its limit must equal its request")
        elif request is not None and limit is not None and request > limit:
            yield f"container {name} requests {value} {resource}, above its limit of {limits[resource]}"


def _limit_range_problems(limit_range: Mapping[str, Any]) -> Iterable[str]:
    for item in (limit_range.get("spec") or {}).get("limits") or []:
        bounds = {bound: item.get(bound) or {} for bound in LIMIT_RANGE_ORDER}
        for resource in sorted({resource for values in bounds.values() for resource in values}):
            named = [(bound, bounds[bound][resource]) for bound in LIMIT_RANGE_ORDER if resource in bounds[bound]]
            for (lower, low), (upper, high) in zip(named, named[1:]):
                if _amount(low) is not None and _amount(high) is not None and _amount(low) > _amount(high):
                    yield (f"{item.get('type', '?')} {resource}: {lower} {low} is above {upper} {high} (the API "
                           f"server needs {' <= '.join(LIMIT_RANGE_ORDER)})")


def check_resources(objects: Sequence[K8sObject]) -> list[tuple[K8sObject, str, str]]:
    found = [(obj, problem, "lower the request or raise the limit (the config key or chart value that sets it)")
             for obj, _, spec in pod_templates(objects)
             for field in CONTAINER_LISTS for container in spec.get(field) or []
             for problem in _container_problems(container)]
    found += [(obj, problem, "order the LimitRange's bounds (the team's vcluster.limitRange, or the chart value)")
              for obj in objects if obj.kind == "LimitRange" and not obj.patch
              for problem in _limit_range_problems(obj.manifest)]
    return found
