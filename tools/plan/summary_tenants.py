"""summary.md: the tenants with their guardrails, and every Job and cluster-scoped object."""

from __future__ import annotations

import re
from typing import Any, Optional

from config.vocabulary import (
    ADMISSION_BINDING, ADMISSION_COMPONENT, ADMISSION_POLICY, JOB, NAMESPACE, POD_SECURITY_LABEL, RELEASE,
    TENANT_COMPONENT,
)
from tools.plan.lookup import KUBERNETES, PlanIndex, dig
from tools.plan.markdown import code, fmt_num, table
from tools.plan.summary_access import access_section

# Each admission rule's message starts with its name in brackets (components/admission.py).
RULE_NAME = re.compile(r"^'?\[([a-z-]+)\]")


def _tenant_parts(index: PlanIndex, component: dict[str, Any]) -> dict[str, Any]:
    children = index.descendants(component)

    def first(kind: str) -> Optional[dict[str, Any]]:
        return next((r for r in children if r["type"] == kind), None)

    return {"release": first(RELEASE), "namespace": first(NAMESPACE), "admission": first(ADMISSION_COMPONENT),
            "policy": first(ADMISSION_POLICY), "binding": first(ADMISSION_BINDING),
            "outputs": component.get("outputs") or {}}




def tenant_section(index: PlanIndex) -> list[str]:
    lines = ["## Tenants", ""]
    components = sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"])
    if not components:
        return lines + ["None."]
    rows, guardrails = [], []
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
        guardrails.append(_guardrail_row(team, parts))
    lines += table(["Team", "vCluster", "Host namespace", "Queue", "vCluster chart", "Protected", "Connect"], rows)
    lines += access_section(index)
    lines += ["", "### Guardrails per tenant", ""]
    lines += table(["Team", "Admission policy", "Rules", "Pod security", "ResourceQuota", "LimitRange defaults",
                    "NetworkPolicy"], guardrails)
    lines += ["", "Admission: every pod the tenant's vCluster syncs, its DNS included, is scheduled by KAI in the "
                  "team's queue; the rules are those of the tenant security model (docs/security-model.md). GPU "
                  "shares are enforced by the KAI queues, not by the ResourceQuota."]
    return lines


def _guardrail_row(team: str, parts: dict[str, Any]) -> list[str]:
    policies = dig(parts["release"], "inputs", "values", "policies") or {}
    quota = dig(policies, "resourceQuota") or {}
    limits = dig(policies, "limitRange") or {}
    policy = dig(parts["policy"], "inputs", "metadata", "name")
    actions = dig(parts["binding"], "inputs", "spec", "validationActions") or []
    validations = dig(parts["policy"], "inputs", "spec", "validations") or []
    rules = [RULE_NAME.match(v.get("message") or v.get("messageExpression") or "") for v in validations]

    def enabled(block: dict[str, Any], text: str) -> str:
        return text if block.get("enabled") else "off"

    def pairs(mapping: Any) -> str:
        return ", ".join(f"{key}={fmt_num(value)}" for key, value in sorted((mapping or {}).items())) or "—"

    return [
        code(team),
        (code(policy) + (f" ({', '.join(actions)})" if actions else " (**no binding**)")) if policy else "**none**",
        ", ".join(rule.group(1) for rule in rules if rule) or "**none**",
        code(dig(parts["namespace"], "inputs", "metadata", "labels", POD_SECURITY_LABEL) or "—"),
        enabled(quota, pairs(quota.get("quota"))),
        enabled(limits, f"limit {pairs(limits.get('default'))}; request {pairs(limits.get('defaultRequest'))}"),
        "on" if dig(policies, "networkPolicy", "enabled") else "off",
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
    cluster_wide = sorted((r for r in index.resources if r["type"].startswith(KUBERNETES) and r["custom"]
                           and not r["read"] and r["type"] != RELEASE and isinstance(dig(r, "inputs", "metadata"), dict)
                           and not dig(r, "inputs", "metadata", "namespace")),
                          key=lambda r: (r["type"], str(dig(r, "inputs", "metadata", "name"))))
    lines += ["", "Cluster-scoped objects (no namespace):", ""]
    lines += table(["Kind", "Name", "Resource"],
                   [[code(r["type"].split(":")[-1]), code(dig(r, "inputs", "metadata", "name") or "—"),
                     code(r["name"])] for r in cluster_wide]) if cluster_wide else ["None."]
    return lines
