"""What the host API server itself does to a pod, around the webhooks and policies.

- ``pull_policy_defaults``: the defaulting of every pull policy a pod leaves out (k8s.io/api core/v1 types.go:
  ``Always`` for an image tagged ``latest`` or not tagged, ``IfNotPresent`` otherwise).
- ``limit_ranger``: the LimitRanger admission plugin, which runs before the webhooks: containers without requests
  or limits get the namespace's defaults and the pod the ``kubernetes.io/limit-ranger`` annotation
  (plugin/pkg/admission/limitranger); ``limit_range_max`` is the same plugin's check against the LimitRange's
  ``max``.
- ``api_validate``: the validation after mutating admission, which refuses (422) what KAI's webhook leaves invalid,
  and a container whose request is above its limit, which the LimitRanger's default limit can make of one that set a
  request alone.
- ``delete_options``: a pod DELETE's options as validating admission sees them, after the pod strategy's
  ``CheckGracefulDelete`` (pkg/registry/core/pod/strategy.go, called by the store's ``BeforeDelete`` on the same
  options before the validation, k8s.io/apiserver pkg/registry/generic/registry/store.go).
"""

from __future__ import annotations

import copy
from typing import Optional

from components.tenant_quota import host_limit_range
from config.key_types import quantity_value
from config.model import VClusterSettings


def pull_policy_defaults(pod: dict) -> dict:
    """``pod`` with the pull policy of every container and image volume that leaves it out set by the API server."""
    defaulted = copy.deepcopy(pod)
    spec = defaulted["spec"]
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for entry in spec.get(field, []):
            entry.setdefault("imagePullPolicy", _default_pull_policy(entry.get("image", "")))
    for volume in spec.get("volumes", []):
        if "image" in volume:
            volume["image"].setdefault("pullPolicy", _default_pull_policy(volume["image"].get("reference", "")))
    return defaulted


def _default_pull_policy(image: str) -> str:
    name, _, digest = image.partition("@")
    tag = name.rsplit(":", 1)[1] if ":" in name.rsplit("/", 1)[-1] else ("" if digest else "latest")
    return "Always" if tag == "latest" else "IfNotPresent"


def limit_ranger(pod: dict, settings: VClusterSettings) -> dict:
    """Defaults for containers that leave out a resource the namespace's LimitRange (as the host has it, the site's
    extraValues included) gives a default of, and the annotation that says so, after the API server's own
    defaulting of a request the container left out to its limit (pkg/apis/core/v1 defaults.go ``SetDefaults_Pod``),
    which the LimitRanger's defaults never override."""
    defaulted = copy.deepcopy(pod)
    for entry in defaulted["spec"]["containers"] + defaulted["spec"].get("initContainers", []):
        resources = entry.get("resources") or {}
        if resources.get("limits"):
            resources["requests"] = {**resources["limits"], **(resources.get("requests") or {})}
    notes = []
    limit_range = host_limit_range(settings)
    defaults = {"request": limit_range.get("defaultRequest", {}), "limit": limit_range.get("default", {})}
    for entry in defaulted["spec"]["containers"] + defaulted["spec"].get("initContainers", []):
        resources = entry.setdefault("resources", {})
        for kind, values in defaults.items():
            current = resources.setdefault(f"{kind}s", {})
            missing = [name for name in values if name not in current]
            current.update({name: str(values[name]) for name in missing})
            if missing:
                notes.append(f"{', '.join(missing)} {kind} for container {entry['name']}")
    if notes:
        defaulted["metadata"].setdefault("annotations", {})["kubernetes.io/limit-ranger"] = \
            "LimitRanger plugin set: " + "; ".join(notes)
    return defaulted


def limit_range_max(pod: dict, settings: VClusterSettings) -> list[str]:
    """The LimitRanger's validation of a defaulted pod against the namespace's ``max``: a container or init
    container whose limit, or request, of a resource is above it is refused (403)."""
    maximum = host_limit_range(settings).get("max", {})
    return [f"[limit-range] maximum {name} usage per Container is {bound}, but {kind} is {value} in container "
            f"{entry['name']}"
            for entry in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
            for kind in ("limits", "requests")
            for name, bound in maximum.items()
            for value in [(entry.get("resources") or {}).get(kind, {}).get(name)]
            if value is not None and quantity_value(str(value)) > quantity_value(str(bound))]


def api_validate(pod: dict) -> list[str]:
    """The API server's own validation after mutating admission: what KAI's webhook leaves it refuses (422)."""
    problems = []
    # validateVolumeSource and validateProjectionSources (pkg/apis/core/validation): one source per volume and
    # per projection.
    for index, volume in enumerate(pod["spec"].get("volumes", [])):
        if len(set(volume) - {"name"}) != 1:
            problems.append(f"[api-validation] spec.volumes[{index}]: Invalid value: must specify exactly 1 volume "
                            "type")
        for position, source in enumerate(volume.get("projected", {}).get("sources") or []):
            if len(source) > 1:
                problems.append(f"[api-validation] spec.volumes[{index}].projected.sources[{position}]: Forbidden: "
                                "may not specify more than 1 volume type per source")
    for field in ("containers", "initContainers", "ephemeralContainers"):
        for index, entry in enumerate(pod["spec"].get(field, [])):
            problems += _requests_above_limits(entry, f"spec.{field}[{index}].resources.requests")
            for position, item in enumerate(entry.get("env", [])):
                if item.get("value") and "valueFrom" in item:
                    problems.append(f"[api-validation] spec.{field}[{index}].env[{position}].valueFrom: Invalid value: "
                                    "may not be specified when `value` is not empty")
    return problems


def _requests_above_limits(entry: dict, path: str) -> list[str]:
    """ValidateResourceRequirements (pkg/apis/core/validation): no request above the container's limit of it."""
    resources = entry.get("resources") or {}
    limits = resources.get("limits") or {}
    return [f"[api-validation] {path}: Invalid value: \"{request}\": must be less than or equal to {name} limit of "
            f"{limits[name]}"
            for name, request in (resources.get("requests") or {}).items()
            if name in limits and quantity_value(str(request)) > quantity_value(str(limits[name]))]


def delete_options(pod: dict, grace_period: Optional[int]) -> dict:
    """The period asked for, else the pod's own; none for a pod that is not on a node or has ended."""
    period = grace_period if grace_period is not None else pod["spec"].get("terminationGracePeriodSeconds", 0)
    if not pod["spec"].get("nodeName") or pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        period = 0
    return {"kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1", "gracePeriodSeconds": period}
