"""Markdown building blocks of the review summary, and lookups over a plan's resources."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

# Resource types and labels the summary reads (config/vocabulary.py defines them).
from config.vocabulary import (  # noqa: F401  (the summary modules import them from here)
    ADMISSION_BINDING, ADMISSION_COMPONENT, ADMISSION_POLICY, AWS_PROVIDER, CLUSTER_POLICY_PATCH, COMMANDS,
    CONFIG_MAP, EKS_CLUSTER, EKS_NODE_GROUP, GPU_OPERATOR_COMPONENT, HOST_COMPONENT, JOB, K8S_PROVIDER, NAMESPACE,
    NAT_GATEWAY, NODE_PROFILE_LABEL, POD_SECURITY_LABEL, QUEUE, QUEUE_FIELDS, QUEUE_RESOURCES, RELEASE, SUBNET,
    TENANT_COMPONENT, VPC,
)

KUBERNETES = "kubernetes:"


def fmt_num(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(round(value, 6))
    if value is None:
        return "—"
    return str(value)


def fmt_amount(value: Any) -> str:
    """A queue quota/limit: -1 reads as unlimited."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == -1:
        return "unlimited"
    return fmt_num(value)


def code(text: Any) -> str:
    text = str(text)
    if "`" in text:
        return f"`` {text} ``"
    return f"`{text}`"


def cell(text: str) -> str:
    """A markdown table cell (GFM needs pipes escaped even inside code spans)."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(cell(str(item)) for item in row) + " |" for row in rows]
    return lines


def dig(data: Any, *path: str, default: Any = None) -> Any:
    for step in path:
        if not isinstance(data, dict) or step not in data:
            return default
        data = data[step]
    return data


def fmt_labels(labels: Any) -> str:
    if not isinstance(labels, dict) or not labels:
        return "—"
    return ", ".join(code(f"{key}={value}") for key, value in sorted(labels.items()))


class PlanIndex:
    """Lookups over the plan's resources."""

    def __init__(self, plan: dict[str, Any]):
        self.resources: list[dict[str, Any]] = plan["resources"]
        self.by_urn = {resource["urn"]: resource for resource in self.resources}

    def of_type(self, *types: str) -> list[dict[str, Any]]:
        return [resource for resource in self.resources if resource["type"] in types]

    def ancestors(self, resource: dict[str, Any]) -> list[dict[str, Any]]:
        chain, seen = [], set()
        parent = resource.get("parent")
        while parent in self.by_urn and parent not in seen:
            seen.add(parent)
            chain.append(self.by_urn[parent])
            parent = self.by_urn[parent].get("parent")
        return chain

    def registered(self, component_type: str, key: str) -> Any:
        """What the (first) component of ``component_type`` registered as output ``key``: the program's own
        decision (host kind, operator mode...), or None when the plan has no such component."""
        components = sorted(self.of_type(component_type), key=lambda resource: resource["urn"])
        return dig(components[0], "outputs", key) if components else None

    def under(self, resource: dict[str, Any], component_type: str) -> bool:
        return any(ancestor["type"] == component_type for ancestor in self.ancestors(resource))

    def descendants(self, component: dict[str, Any]) -> list[dict[str, Any]]:
        return [resource for resource in self.resources
                if any(ancestor["urn"] == component["urn"] for ancestor in self.ancestors(resource))]


def topological(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dependency order (ties by name): the order the engine would run them in."""
    by_urn = {resource["urn"]: resource for resource in resources}
    pending = {urn: {dep for dep in resource["dependencies"] if dep in by_urn and dep != urn}
               for urn, resource in by_urn.items()}
    ordered: list[dict[str, Any]] = []
    while pending:
        ready = sorted((urn for urn, deps in pending.items() if not deps), key=lambda u: by_urn[u]["name"])
        if not ready:  # a cycle: cannot happen with a real engine, keep the rest by name
            ready = sorted(pending, key=lambda u: by_urn[u]["name"])
        for urn in ready[:1]:
            ordered.append(by_urn[urn])
            del pending[urn]
            for deps in pending.values():
                deps.discard(urn)
    return ordered
