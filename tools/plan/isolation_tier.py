"""What a team's new isolation tier does to the pods it already has.

A tier's host rules (components/isolation_admission.py: ``[whole-gpus]``, ``[memory-limit]``, ``[hami-core]``,
``[mig-profile]``, ``[no-mig]``) judge every CREATE and UPDATE of a pod of the team's host namespace that vCluster's
managed-by label marks as the team's, whoever writes it: KAI's service accounts too. KAI's binder writes a pod before
it binds it (kai-scheduler/KAI-Scheduler v0.17.0, ``pkg/binder/binding/binder.go`` ``Bind``: the GPU group label of a
fractional pod, then ``patchBindAnnotations``), so a pod created under the old tier that is still pending and breaks
the new rules is refused at binding, again at every retry (``pkg/binder/controllers/bindrequest_controller.go``
records a ``BindingError`` event on the pod each time). Running pods are not judged again: the kubelet writes their
status through ``pods/status``, which the rules do not match, and a rule refuses nothing already running.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from config.vocabulary import ADMISSION_POLICY, ISOLATION_ADMISSION_COMPONENT, TEAM_LABEL
from tools.plan.running_site import DISRUPTS, Finding

FIELD = "teams[].isolation.tier"
# A refusal's message opens with the rule's name (components/admission_metadata.py ``refusal``).
_RULE = re.compile(r"^\[([a-z0-9-]+)\]")


def _tiers(plan: Mapping[str, Any]) -> dict[str, str]:
    """Team name -> isolation tier, from the stack output ``tenants``."""
    tenants = (plan.get("outputs") or {}).get("tenants")
    return {team: str((tenant.get("isolation") or {}).get("tier")) for team, tenant in (tenants or {}).items()
            if isinstance(tenant, dict)} if isinstance(tenants, dict) else {}


def _tier_policy(plan: Mapping[str, Any], team: str) -> Mapping[str, Any] | None:
    """The team's tier policy in ``plan`` (none for a tier without host rules of its own)."""
    return next((resource for resource in plan.get("resources", [])
                 if resource["type"] == ADMISSION_POLICY and ISOLATION_ADMISSION_COMPONENT in resource["urn"]
                 and (((resource.get("inputs") or {}).get("metadata") or {}).get("labels") or {}).get(TEAM_LABEL)
                 == team), None)


def _rules(policy: Mapping[str, Any]) -> list[str]:
    validations = ((policy.get("inputs") or {}).get("spec") or {}).get("validations") or []
    return [f"[{found.group(1)}]" for found in (_RULE.match(str(validation.get("message", "")))
                                                for validation in validations) if found]


def tier_change_findings(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Finding]:
    """One finding per team whose tier changes to one with host rules of its own."""
    before, after = _tiers(old), _tiers(new)
    findings = []
    for team in sorted(set(before) & set(after)):
        policy = _tier_policy(new, team)
        if before[team] == after[team] or policy is None:
            continue
        rules = ", ".join(_rules(policy)) or "its rules"
        findings.append(Finding(
            DISRUPTS, f"`{policy['type']}` {policy['name']}", FIELD, before[team], after[team],
            f"team {team}'s host pods are judged by the {after[team]} tier's rules ({rules}) on every create and "
            "update, KAI's included: KAI's binder writes a pod's labels and annotations before it binds it, so a pod "
            f"created under the {before[team]} tier that is still pending and breaks the new rules is refused at "
            "each binding attempt and never runs (the tenant sees it Pending; KAI records BindingError events naming "
            "the rule on the host pod). Running pods keep running as they were admitted (the kubelet's status writes "
            "are not judged), outside the new tier's guarantee, but any later update of one (a tenant's edit of its "
            "labels or annotations, an added ephemeral container) that breaks the rules is refused",
            f"tell team {team} before `pulumi up`; right after it, the team deletes its pending pods created before "
            "the change and creates them again as the new tier asks (docs/isolation.md), and re-creates its running "
            "pods that break the new rules when it can, so the tier holds for them too; or keep "
            f"teams[].isolation.tier at {before[team]}"))
    return findings
