"""Why the plan diff says a resource goes, and what to do: by the program component that owns it.

A resource leaves the program when the setting that made it changes; most often a whole component goes with it (a
team left ``teams``, monitoring no longer installed). The component a removed resource belongs to (its outermost
ancestor that goes too) names the cause and the documented way to remove or move its protected resources on purpose;
a protected resource replaced in place is told by the component it belongs to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from config.vocabulary import OBSERVABILITY_COMPONENT, RELEASE, TENANT_COMPONENT
from tools.plan.diff import MISSING
from tools.plan.running_site import LOST, STOPS, Finding


@dataclass(frozen=True)
class Owner:
    """What a component's resources go by, and what to do about it."""

    removed: str  # what takes the whole component out of the program
    keep: str  # how to keep it
    backup: str  # what to back up first, where the docs say how
    on_purpose: str  # how to remove or move a protected resource of it deliberately


OWNERS = {
    OBSERVABILITY_COMPONENT: Owner(
        "observability.prometheus is no longer `install`, which takes the program's whole monitoring stack out",
        "set observability.prometheus back to install",
        "back up what you need first (the usage report, `kubectl -n monitoring get pvc`: docs/operations-data.md, "
        "Monitoring data)",
        "to turn monitoring off or move it on purpose, follow docs/operations-data.md (Monitoring data): back up what "
        "you need, set observability.protect: false, run `pulumi up`, then make the change"),
    TENANT_COMPONENT: Owner(
        "its team left teams[] (removed or renamed), which takes the team's whole tenant out",
        "put the team back in teams[] as it was",
        "back the team up first (docs/operations-data.md, Backing up and restoring a team)",
        "to remove, rename or move the team on purpose, follow the decommission procedure in docs/operations-data.md "
        "(Data safety and decommissioning a team): back up, set teams[].protect: false for one `pulumi up`, then "
        "make the change and restore what the team needs"),
}
UNKNOWN_OWNER = Owner(
    "a setting that made it changed", "keep the setting that makes it", "back up first",
    "to remove it on purpose, set the protect key that covers it (teams[].protect, observability.protect) to false "
    "for one `pulumi up` first (docs/operations-data.md)")

# What a removal (not a replacement) deletes with a resource of these types, where it differs.
REMOVED_STATE = {
    RELEASE: "every object of the release (helm uninstall; nothing is installed again); its StatefulSets' volume "
             "claims, which hold a vCluster's virtual cluster or Prometheus' history, stay behind until their "
             "namespace goes",
}


def _ancestors(resource: Mapping[str, Any], plan: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The resource and its parents in ``plan``, innermost first."""
    by_urn = {item["urn"]: item for item in plan.get("resources", [])}
    chain = [resource]
    while chain[-1].get("parent") in by_urn and len(chain) <= len(by_urn):
        chain.append(by_urn[chain[-1]["parent"]])
    return chain


def owner(resource: Mapping[str, Any], plan: Mapping[str, Any], gone: frozenset[str] = frozenset()) -> Owner:
    """The owner of ``resource`` in ``plan``: the outermost of its ancestors whose URN is in ``gone`` and that
    ``OWNERS`` knows, else the innermost known one."""
    known = [item for item in _ancestors(resource, plan) if item["type"] in OWNERS]
    removed = [item for item in known if item["urn"] in gone]
    if removed:
        return OWNERS[removed[-1]["type"]]
    return OWNERS[known[0]["type"]] if known else UNKNOWN_OWNER


def removal_findings(removed: list[dict], old: Mapping[str, Any], new: Mapping[str, Any],
                     state_of_type: Mapping[str, str]) -> list[Finding]:
    """Protected resources the change removes (``pulumi up`` stops) and removed ones that take data with them."""
    gone = frozenset(item["urn"] for item in old.get("resources", [])) - frozenset(
        item["urn"] for item in new.get("resources", []))
    findings = []
    for resource in removed:
        cause = owner(resource, old, gone)
        subject = f"`{resource['type']}` {resource['name']}"
        lost = REMOVED_STATE.get(resource["type"], state_of_type.get(resource["type"]))
        if (resource.get("options") or {}).get("protect"):
            findings.append(Finding(STOPS, subject, "(the resource)", "present", MISSING,
                                    f"removed from the program ({cause.removed}), but protected: `pulumi up` stops "
                                    "before anything changes", f"{cause.keep}; {cause.on_purpose}"))
        elif lost:
            findings.append(Finding(LOST, subject, "(the resource)", "present", MISSING,
                                    f"removed from the program ({cause.removed}): Pulumi deletes it, and with it "
                                    f"{lost}", f"{cause.backup}, or {cause.keep}"))
    return findings
