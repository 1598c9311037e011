"""What every policy rule works on: the neutral resource model, the values a preview does not know
yet, the project's vocabulary (deliberate copies, see below) and small readers of resources.

Kept apart from ``rules.py`` (the rules themselves) so each file holds one job; like it, this module
imports nothing from the project or from ``pulumi_policy``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional


class _Unknown:
    """A value that is only known after the deployment (``pulumi preview`` of a new resource)."""

    _instance: Optional[_Unknown] = None

    def __new__(cls) -> _Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()


@dataclass
class Resource:
    """What every rule sees of a resource, whatever it was read from."""

    type: str
    name: str
    urn: str = ""
    inputs: Mapping[str, Any] = field(default_factory=dict)
    # URN of the provider resource, or None when the resource names none (a default provider).
    provider: Optional[str] = None


@dataclass(frozen=True)
class Finding:
    message: str
    urn: Optional[str] = None


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    mandatory: bool
    scope: str  # "resource" or "stack"
    check: Callable[..., Any]


@dataclass(frozen=True)
class Violation:
    rule: str
    mandatory: bool
    message: str
    urn: Optional[str] = None

    @property
    def level(self) -> str:
        return "mandatory" if self.mandatory else "advisory"


# --- vocabulary ---------------------------------------------------------------------------------
# Deliberate copies of config/vocabulary.py, config/versions.py and config/sharing.py: the Pulumi CLI
# runs this pack from policy/ in a venv of its own, where the project's config package is not
# importable. tests/test_vocabulary.py proves each copy equal to its original, in value and behaviour.

HELM_RELEASE_TYPES = ("kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart")
QUEUE_GROUP = "scheduling.run.ai"
QUEUE_RESOURCES = ("gpu", "cpu", "memory")
QUEUE_FIELDS = ("quota", "limit", "overQuotaWeight")
VCLUSTER_CHART = "vcluster"
KAI_CHART = "kai-scheduler"
GPU_OPERATOR_CHART = "gpu-operator"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
MANAGED_BY_LABEL = "vcluster.loft.sh/managed-by"
# KAI reads a pod's queue from it; the tenant's own admission policy holds every pod to the team's queue.
QUEUE_LABEL = "kai.scheduler/queue"
NODE_PROFILE_LABEL = "nvidia.com/device-plugin.config"
TIME_SLICED_PREFIX = "time-sliced-"
# Helm treats anything but a full version as a constraint ("1.2" = newest 1.2.x).
EXACT_VERSION = re.compile(r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$")
RANGE_SYNTAX = re.compile(r"[\^~<>=*|,]|\s-\s|(^|\.)[xX](\.|$)")
EPSILON = 1e-9


def get(value: Any, *path: str) -> Any:
    """``value[path[0]][path[1]]...``; None when a key is missing, UNKNOWN when a step is unknown."""
    for key in path:
        if value is UNKNOWN:
            return UNKNOWN
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def is_known(value: Any) -> bool:
    """Whether a value holds no UNKNOWN, at any depth."""
    if value is UNKNOWN:
        return False
    if isinstance(value, Mapping):
        return all(is_known(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return all(is_known(item) for item in value)
    return True


def kubernetes_kind(resource_type: str) -> tuple[str, str, str]:
    """``kubernetes:scheduling.run.ai/v2:Queue`` -> (``scheduling.run.ai``, ``v2``, ``Queue``)."""
    parts = resource_type.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes":
        return "", "", ""
    group, _, version = parts[1].rpartition("/")
    return group, version, parts[2]


def is_helm_release(resource: Resource) -> bool:
    return resource.type in HELM_RELEASE_TYPES


def chart_name(chart: Any) -> str:
    """The chart's own name from ``vcluster``, ``loft/vcluster`` or ``oci://host/path/vcluster``."""
    if not isinstance(chart, str):
        return ""
    return chart.rstrip("/").rsplit("/", 1)[-1]


def is_chart(resource: Resource, name: str) -> bool:
    return is_helm_release(resource) and chart_name(resource.inputs.get("chart")) == name


def is_vcluster(resource: Resource) -> bool:
    return is_chart(resource, VCLUSTER_CHART)


def is_queue(resource: Resource) -> bool:
    group, _, kind = kubernetes_kind(resource.type)
    return group == QUEUE_GROUP and kind == "Queue"


def is_kind(resource: Resource, kind: str) -> bool:
    return kubernetes_kind(resource.type)[2] == kind


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def release_label(resource: Resource) -> str:
    name = resource.inputs.get("name")
    shown = name if isinstance(name, str) and name else resource.name
    return f"Helm release {shown} (chart {resource.inputs.get('chart')!s})"


def release_identity(resource: Resource) -> tuple[Any, Any]:
    """(release name, namespace) of a Helm release; Helm's namespace defaults to ``default``."""
    name = resource.inputs.get("name")
    if name is None:
        name = resource.name
    namespace = resource.inputs.get("namespace")
    if namespace is None or namespace == "":
        namespace = "default"
    return name, namespace


def is_default_provider(provider_urn: Optional[str]) -> bool:
    """Default providers are named ``default`` or ``default_<version>`` by the engine."""
    if not provider_urn:
        return True
    name = provider_urn.rsplit("::", 1)[-1]
    return name == "default" or name.startswith("default_")
