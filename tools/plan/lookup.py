"""Lookups over a plan's resources: nested values, the component tree, dependency order."""

from __future__ import annotations

from typing import Any

# The type prefix of every pulumi-kubernetes resource.
KUBERNETES = "kubernetes:"


def dig(data: Any, *path: str, default: Any = None) -> Any:
    for step in path:
        if not isinstance(data, dict) or step not in data:
            return default
        data = data[step]
    return data


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
