"""The host-wide powers the RBAC of a site's objects gives, read as the API server's authorizer reads it: a
ClusterRoleBinding grants its ClusterRole's rules in every namespace; a rule covers a request when its API group,
resource and verb match (``*`` matching any); a rule naming ``resourceNames`` covers only those objects, so it grants
no power over every object of a kind (and no ``create`` or ``list``, which name none); an aggregated ClusterRole
holds the rules of every ClusterRole its selectors pick.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from policy.label_selectors import selector_matches


@dataclass(frozen=True)
class Power:
    """A request over every object of some kinds: any of the groups, resources and verbs."""

    groups: tuple[str, ...]
    resources: tuple[str, ...]
    verbs: tuple[str, ...]


def _matches(granted: Iterable[str], wanted: tuple[str, ...]) -> bool:
    granted = set(granted or ())
    return "*" in granted or bool(granted & set(wanted))


def covers(rule: Mapping, power: Power) -> bool:
    return (not rule.get("resourceNames") and _matches(rule.get("apiGroups"), power.groups)
            and _matches(rule.get("resources"), power.resources) and _matches(rule.get("verbs"), power.verbs))


def cluster_role_rules(roles: Iterable[Mapping]) -> dict[str, list[Mapping]]:
    """Each ClusterRole's rules, an aggregated one's gathered from the roles its selectors pick."""
    roles = list(roles)
    rules = {role["metadata"]["name"]: list(role.get("rules") or []) for role in roles}
    for role in roles:
        selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        for other in roles:
            labels = (other.get("metadata") or {}).get("labels") or {}
            if other is not role and any(selector_matches(selector, labels) for selector in selectors):
                rules[role["metadata"]["name"]] += list(other.get("rules") or [])
    return rules


def holders(manifests: Iterable[Mapping], power: Power) -> dict[str, str]:
    """``namespace/name`` of each subject bound cluster-wide to the power, with the ClusterRole that grants it.
    A binding to a ClusterRole the site's objects do not define is reported under the role's name alone."""
    manifests = list(manifests)
    rules = cluster_role_rules(m for m in manifests if m.get("kind") == "ClusterRole")
    found: dict[str, str] = {}
    for binding in (m for m in manifests if m.get("kind") == "ClusterRoleBinding"):
        role = binding["roleRef"]["name"]
        if role not in rules:
            found[f"?{role}"] = role
            continue
        if any(covers(rule, power) for rule in rules[role]):
            for subject in binding.get("subjects") or []:
                found[f"{subject.get('namespace', '')}/{subject['name']}"] = role
    return found
