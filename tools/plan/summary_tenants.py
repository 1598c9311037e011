"""summary.md: the tenants with their guardrails, and every Job and cluster-scoped object."""

from __future__ import annotations

import re
from typing import Any, Optional

from config.vocabulary import (
    ADMISSION_BINDING, ADMISSION_COMPONENT, ADMISSION_POLICY, CRON_JOB, JOB, NAMESPACE, NAMESPACE_NAME_LABEL,
    NETWORK_POLICY, POD_SECURITY_LABEL, POD_TEXT_BYTES_ANNOTATION, RELEASE, TENANT_COMPONENT,
)
from config.tenant_budget import bytes_quantity
from tools.charts.values import ChartValues
from tools.plan.lookup import KUBERNETES, PlanIndex, dig
from tools.plan.markdown import code, fmt_num, table
from tools.plan.summary_access import access_section
from policy.label_selectors import selector_matches

# Each admission rule's message starts with its name in brackets (components/admission.py).
RULE_NAME = re.compile(r"^'?\[([a-z-]+)\]")


def _tenant_parts(index: PlanIndex, component: dict[str, Any]) -> dict[str, Any]:
    children = index.descendants(component)

    def first(kind: str) -> Optional[dict[str, Any]]:
        return next((r for r in children if r["type"] == kind), None)

    outputs = component.get("outputs") or {}

    def named(kind: str, path: tuple[str, ...], output: str) -> Optional[dict[str, Any]]:
        """The tenant's policy (or binding) a registered output names; the first one if it names none."""
        wanted = outputs.get(output)
        found = [r for r in children if r["type"] == kind]
        return next((r for r in found if dig(r, "inputs", *path) == wanted), None if wanted else first(kind))

    pod_admission = next((r for r in children if r["type"] == ADMISSION_COMPONENT
                          and dig(r, "outputs", "maxGracePeriodSeconds") is not None), None)
    synced_admission = next((r for r in children if r["type"] == ADMISSION_COMPONENT
                             and dig(r, "outputs", "serviceBytes") is not None), None)
    deletion = dig(pod_admission, "outputs", "deletionPolicy")
    return {"release": first(RELEASE), "namespace": first(NAMESPACE), "admission": first(ADMISSION_COMPONENT),
            "policy": named(ADMISSION_POLICY, ("metadata", "name"), "admissionPolicy"),
            "binding": named(ADMISSION_BINDING, ("spec", "policyName"), "admissionPolicy"),
            "synced_policy": named(ADMISSION_POLICY, ("metadata", "name"), "syncedObjectsPolicy"),
            "deletion_policy": next((r for r in children if r["type"] == ADMISSION_POLICY and deletion is not None
                                     and dig(r, "inputs", "metadata", "name") == deletion), None),
            "network_policies": [r for r in children if r["type"] == NETWORK_POLICY], "outputs": outputs,
            "pod_admission": pod_admission, "synced_admission": synced_admission}


def _with_cap(rule: str, admission: Optional[dict[str, Any]], namespace: Optional[dict[str, Any]]) -> str:
    """A rule's name, with the team's cap for the rules a site sets per team."""
    grace = dig(admission, "outputs", "maxGracePeriodSeconds")
    text = dig(namespace, "inputs", "metadata", "annotations", POD_TEXT_BYTES_ANNOTATION)
    if rule == "grace-period" and grace is not None:
        return f"{rule} (≤ {fmt_num(grace)} s)"
    if rule == "pod-size" and text is not None:
        return f"{rule} (≤ {bytes_quantity(int(text))})"
    return rule


def _site_pod_policies(index: PlanIndex) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The pod policies of no tenant's own (one judging all teams), each with each of its bindings."""
    bindings = index.of_type(ADMISSION_BINDING)
    return [(policy, binding) for policy in index.of_type(ADMISSION_POLICY)
            if not index.under(policy, TENANT_COMPONENT)
            and any("pods" in rule.get("resources", [])
                    for rule in dig(policy, "inputs", "spec", "matchConstraints", "resourceRules") or [])
            for binding in bindings
            if dig(binding, "inputs", "spec", "policyName") == dig(policy, "inputs", "metadata", "name")]


def _judging(site_policies: list, host_namespace: Optional[str]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The site's pod policies whose constraints and binding select the namespace (by the name label it gets)."""
    labels = {NAMESPACE_NAME_LABEL: host_namespace or ""}
    return [(policy, binding) for policy, binding in site_policies
            if selector_matches(dig(policy, "inputs", "spec", "matchConstraints", "namespaceSelector") or {}, labels)
            and selector_matches(dig(binding, "inputs", "spec", "matchResources", "namespaceSelector") or {}, labels)]


def _effective_policies(release: Optional[dict[str, Any]],
                        charts: Optional[ChartValues]) -> tuple[dict, str, bool]:
    """The release's ``policies`` as the chart will use them, where they came from (or why only the program's values
    are shown), and whether the chart's defaults were read."""
    inputs = (release or {}).get("inputs") or {}
    if charts is not None and release is not None:
        effective = charts.effective(inputs)
        if effective.values is not None:
            return effective.values.get("policies") or {}, effective.source, True
        reason = effective.source
    else:
        reason = "no chart cache consulted"
    return _without_nulls(dig(inputs, "values", "policies") or {}), reason, False


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    return value


def tenant_section(index: PlanIndex, charts: Optional[ChartValues] = None) -> list[str]:
    lines = ["## Tenants", ""]
    components = sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"])
    if not components:
        return lines + ["None."]
    rows, guardrails, synced, deletions, sources, unread = [], [], [], [], set(), set()
    site_policies = _site_pod_policies(index)
    for component in components:
        parts = _tenant_parts(index, component)
        release, namespace, registered = parts["release"], parts["namespace"], parts["outputs"]
        team = str(registered.get("team") or "—")
        vcluster = dig(release, "inputs", "name")
        host_namespace = registered.get("namespace") or dig(release, "inputs", "namespace")
        queue = registered.get("queue")
        protected = [bool(r["options"].get("protect")) for r in (namespace, release) if r is not None]
        protection = "yes" if protected and all(protected) else "no" if not any(protected) else \
            "partial (" + ", ".join(f"{kind} {'yes' if flag else 'no'}" for kind, flag in
                                    zip(("namespace", "release"), protected)) + ")"
        connect = registered.get("connectCommand")
        rows.append([
            code(team), code(vcluster) if vcluster else "—", code(host_namespace) if host_namespace else "—",
            code(queue) if queue else "—", code(fmt_num(dig(release, "inputs", "version"))) if release else "—",
            protection, code(connect) if connect else "—",
        ])
        policies, source, read = _effective_policies(release, charts)
        (sources if read else unread).add(source)
        guardrails.append(_guardrail_row(team, parts, policies, _judging(site_policies, host_namespace)))
        synced.append(_rules_line(team, parts["synced_policy"], "no synced-objects policy",
                                  dig(parts["synced_admission"], "outputs") or {}))
        deletions.append(_rules_line(team, parts["deletion_policy"], "no deletion policy"))
    lines += table(["Team", "vCluster", "Host namespace", "Queue", "vCluster chart", "Protected", "Connect"], rows)
    lines += access_section(index)
    lines += ["", "### Guardrails per tenant", ""]
    lines += table(["Team", "Admission policy", "Rules", "Pod security", "ResourceQuota", "LimitRange",
                    "NetworkPolicy"], guardrails)
    lines += [""]
    if sources:
        lines += [f"ResourceQuota and LimitRange: what each namespace gets, the chart's defaults merged under the "
                  f"program's values as Helm merges them ({'; '.join(sorted(sources))}). Each quota holds the "
                  f"team's allowance plus its vCluster control plane and DNS.", ""]
    if unread:
        lines += [f"ResourceQuota and LimitRange: the chart's defaults were not read ({'; '.join(sorted(unread))}); "
                  f"shown are the program's values only, and a key they leave out would take the chart's default "
                  f"(`python -m tools.plan STACK` reads them from the chart cache). Each quota holds the team's "
                  f"allowance plus its vCluster control plane and DNS.", ""]
    lines += ["Admission: every pod the tenant's vCluster syncs, its DNS included, is scheduled by KAI in the "
                  "team's queue; the rules are those of the pod admission page (docs/security-admission.md). GPU "
                  "shares are enforced by the KAI queues, not by the ResourceQuota."]
    lines += ["", "Synced objects other than pods (Services, claims, endpoints, ConfigMaps, Secrets, pod status):", ""]
    lines += synced
    return lines + ["", "Pod deletions by the tenant's syncer:", "", *deletions]


# The rules whose allowance the site states per team, with the admission component's output that holds it.
LISTED_GRANTS = {"service-load-balancer-annotations": "loadBalancerAnnotations",
                 "service-load-balancer-class": "loadBalancerClasses", "service-load-balancer-tags": "loadBalancerTags"}
# The rules whose output is what they require, not what they let through.
REQUIRED_GRANTS = ("service-load-balancer-tags",)


def _rules_line(team: str, policy: Optional[dict[str, Any]], missing: str,
                grants: Optional[dict[str, Any]] = None) -> str:
    if policy is None:
        return f"- {code(team)}: **{missing}**"
    validations = dig(policy, "inputs", "spec", "validations") or []
    rules = dict.fromkeys(rule.group(1) for v in validations if (rule := RULE_NAME.match(v.get("message") or "")))
    shown = [_with_grants(rule, (grants or {}).get(LISTED_GRANTS.get(rule, ""))) for rule in rules]
    return f"- {code(team)}: {code(dig(policy, 'inputs', 'metadata', 'name'))}: {', '.join(shown) or '**none**'}"


def _with_grants(rule: str, granted: Optional[list[str]]) -> str:
    """A rule's name, with what the site lets the team through it (a load balancer's keys and classes) or requires
    of it (its tags)."""
    if granted is None:
        return rule
    entries = ", ".join(code(entry) for entry in granted)
    if rule in REQUIRED_GRANTS:
        return f"{rule} (on every load balancer: {entries})"
    return f"{rule} (allowed: {entries})" if granted else f"{rule} (none allowed)"


def _switched_on(policies: dict[str, Any], block: str, other: str) -> bool:
    """vCluster's templates: a block renders when it or the other is "true", unless it is "false"."""
    flag = str(dig(policies, block, "enabled")).lower()
    return flag != "false" and "true" in (flag, str(dig(policies, other, "enabled")).lower())


def _guardrail_row(team: str, parts: dict[str, Any], policies: dict[str, Any],
                   site_policies: list[tuple[dict[str, Any], dict[str, Any]]]) -> list[str]:
    quota = dict(dig(policies, "resourceQuota") or {}, enabled=_switched_on(policies, "resourceQuota", "limitRange"))
    limits = dict(dig(policies, "limitRange") or {}, enabled=_switched_on(policies, "limitRange", "resourceQuota"))
    judging = ([(parts["policy"], parts["binding"])] if parts["policy"] else []) + site_policies
    validations = [v for policy, _ in judging for v in dig(policy, "inputs", "spec", "validations") or []]
    rules = [RULE_NAME.match(v.get("message") or v.get("messageExpression") or "") for v in validations]

    def named(policy: dict[str, Any], binding: Optional[dict[str, Any]]) -> str:
        actions = dig(binding, "inputs", "spec", "validationActions") or []
        return code(dig(policy, "inputs", "metadata", "name")) + (
            f" ({', '.join(actions)})" if actions else " (**no binding**)")

    def enabled(block: dict[str, Any], text: str) -> str:
        return text if block.get("enabled") else "off"

    def pairs(mapping: Any) -> str:
        return ", ".join(f"{key}={fmt_num(value)}" for key, value in sorted((mapping or {}).items())) or "—"

    return [
        code(team),
        ", ".join(named(policy, binding) for policy, binding in judging) or "**none**",
        ", ".join(_with_cap(rule.group(1), parts["pod_admission"], parts["namespace"]) for rule in rules if rule)
        or "**none**",
        code(dig(parts["namespace"], "inputs", "metadata", "labels", POD_SECURITY_LABEL) or "—"),
        enabled(quota, pairs(quota.get("quota"))),
        enabled(limits, f"limit {pairs(limits.get('default'))}; request {pairs(limits.get('defaultRequest'))}"
                        + "".join(f"; {bound} {pairs(limits[bound])}" for bound in ("min", "max") if limits.get(bound))),
        # The program's own (components/tenant_network.py), or vCluster's when a site's values turn them on.
        "on" if parts["network_policies"] or dig(policies, "networkPolicy", "enabled") else "off",
    ]


def cluster_objects_section(index: PlanIndex) -> list[str]:
    """Every Job, and every Kubernetes object outside any namespace: what a reviewer must not miss."""
    lines = ["## Jobs and cluster-wide objects", ""]
    jobs = sorted(index.of_type(JOB), key=lambda r: r["urn"])
    rows = []
    for job in jobs:
        containers = dig(job, "inputs", "spec", "template", "spec", "containers") or []
        rows.append([code(dig(job, "inputs", "metadata", "name") or job["name"]),
                     code(dig(job, "inputs", "metadata", "namespace") or "—"),
                     ", ".join(code(c.get("image")) for c in containers if isinstance(c, dict)) or "—",
                     fmt_num(dig(job, "inputs", "spec", "backoffLimit"))])
    lines += table(["Job", "Namespace", "Images", "Back-off limit"], rows) if rows else ["No Jobs."]
    scheduled = sorted(index.of_type(CRON_JOB), key=lambda r: r["urn"])
    if scheduled:
        # A CronJob's pods come back on every run (the teams' snapshots, components/tenant_backup.py).
        lines += ["", "Scheduled (CronJob):", ""]
        lines += table(["CronJob", "Namespace", "Schedule", "Images"], [
            [code(dig(job, "inputs", "metadata", "name") or job["name"]),
             code(dig(job, "inputs", "metadata", "namespace") or "—"),
             code(f"{dig(job, 'inputs', 'spec', 'schedule')} {dig(job, 'inputs', 'spec', 'timeZone') or ''}".strip()),
             ", ".join(code(c.get("image")) for c in dig(job, "inputs", "spec", "jobTemplate", "spec", "template",
                                                           "spec", "containers") or [] if isinstance(c, dict)) or "—"]
            for job in scheduled])
    cluster_wide = sorted((r for r in index.resources if r["type"].startswith(KUBERNETES) and r["custom"]
                           and not r["read"] and r["type"] != RELEASE and isinstance(dig(r, "inputs", "metadata"), dict)
                           and not dig(r, "inputs", "metadata", "namespace")),
                          key=lambda r: (r["type"], str(dig(r, "inputs", "metadata", "name"))))
    lines += ["", "Cluster-scoped objects (no namespace):", ""]
    lines += table(["Kind", "Name", "Resource"],
                   [[code(r["type"].split(":")[-1]), code(dig(r, "inputs", "metadata", "name") or "—"),
                     code(r["name"])] for r in cluster_wide]) if cluster_wide else ["None."]
    return lines
