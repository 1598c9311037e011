"""summary.md: the reviewer's digest of a plan document (see ``tools.plan_document``).

Read from the recorded resources and from what the program's components registered as outputs
(host kind, tenants, admission rules), not from resource name prefixes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

import yaml

from tools.offline.recording import REDACTED
from config.vocabulary import (
    CLUSTER_POLICY_PATCH, CONFIG_MAP, EKS_NODE_GROUP, GPU_OPERATOR_COMPONENT, NODE_PROFILE_LABEL, QUEUE, QUEUE_FIELDS,
    QUEUE_RESOURCES, RELEASE,
)
from tools.charts.values import ChartValues
from tools.plan.lookup import PlanIndex, dig
from tools.plan.markdown import code, fmt_amount, fmt_num, table
from tools.plan.summary_datastore import datastore_section
from tools.plan.summary_guarantees import guarantees_section
from tools.plan.summary_host import host_section
from tools.plan.summary_isolation import isolation_section
from tools.plan.summary_site import ChartObjects, site_sections
from tools.plan.summary_tenants import cluster_objects_section, tenant_section
from tools.plan.summary_views import views_section

SUMMARY_FILE = "summary.md"


def _release_rows(index: PlanIndex) -> list[dict[str, Any]]:
    return sorted(index.of_type(RELEASE),
                  key=lambda r: (str(r["inputs"].get("name", r["name"])), str(r["inputs"].get("namespace")), r["urn"]))


def _releases_section(index: PlanIndex) -> list[str]:
    lines = ["## Helm releases", ""]
    releases = _release_rows(index)
    if not releases:
        return lines + ["None."]
    rows = []
    for release in releases:
        inputs = release["inputs"]
        rows.append([
            code(inputs.get("name", release["name"])),
            code(inputs.get("chart", "—")),
            code(fmt_num(inputs.get("version", "—"))),
            code(inputs.get("namespace", "—")),
            code(dig(inputs, "repositoryOpts", "repo")) if dig(inputs, "repositoryOpts", "repo") else "— (OCI / none)",
            code(release["name"]) + (" (protected)" if release["options"].get("protect") else ""),
        ])
    return lines + table(["Release", "Chart", "Version", "Namespace", "Repository", "Resource"], rows)


def _profile(content: Any) -> str:
    if not isinstance(content, str):
        return fmt_num(content)
    try:
        document = yaml.safe_load(content) or {}
    except yaml.YAMLError:
        return "unparsable YAML"
    slicing = dig(document, "sharing", "timeSlicing")
    if not isinstance(slicing, dict) or not slicing.get("resources"):
        return "no sharing (whole GPUs)"
    parts = [f"time-slicing {code(r.get('name'))} x{fmt_num(r.get('replicas'))}"
             for r in slicing["resources"] if isinstance(r, dict)]
    flags = [f"{flag}={fmt_num(slicing[flag])}" for flag in ("renameByDefault", "failRequestsGreaterThanOne")
             if flag in slicing]
    return ", ".join(parts) + (f" ({', '.join(flags)})" if flags else "")


def _gpu_operator_section(index: PlanIndex, outputs: dict[str, Any]) -> list[str]:
    lines = ["## GPU operator", ""]
    mode = index.registered(GPU_OPERATOR_COMPONENT, "mode")
    releases = [r for r in index.of_type(RELEASE) if index.under(r, GPU_OPERATOR_COMPONENT)]
    patches = index.of_type(CLUSTER_POLICY_PATCH)
    config_name = config_default = None
    if mode == "install" and releases:
        release = releases[0]
        inputs = release["inputs"]
        values = inputs.get("values") or {}
        lines.append(f"- Mode: **install** — this stack owns Helm release {code(inputs.get('name'))} "
                     f"(chart {code(inputs.get('chart'))} {code(fmt_num(inputs.get('version')))}) in namespace "
                     f"{code(inputs.get('namespace'))}")
        lines.append(f"- Driver enabled: {fmt_num(dig(values, 'driver', 'enabled'))}; container toolkit enabled: "
                     f"{fmt_num(dig(values, 'toolkit', 'enabled'))}; CDI enabled: {fmt_num(dig(values, 'cdi', 'enabled'))}")
        config_name = dig(values, "devicePlugin", "config", "name")
        config_default = dig(values, "devicePlugin", "config", "default")
    elif mode == "microk8s-addon" and patches:
        patch = patches[0]
        inputs = patch["inputs"]
        config_name = dig(inputs, "spec", "devicePlugin", "config", "name")
        config_default = dig(inputs, "spec", "devicePlugin", "config", "default")
        lines.append(f"- Mode: **ClusterPolicy patch** (microk8s-addon) — the operator is already installed "
                     f"(MicroK8s nvidia addon); this stack patches ClusterPolicy "
                     f"{code(dig(inputs, 'metadata', 'name'))} and installs no operator release")
    elif mode == "external":
        lines.append("- Mode: **external** — no operator release and no ClusterPolicy patch: the operator is "
                     "managed elsewhere and must be pointed at the time-slicing ConfigMap by its owner")
    else:
        lines.append(f"- Mode: **{mode or 'unknown: the plan has no GPU operator component'}**")
    if len(releases) + len(patches) > 1:
        lines.append(f"- Note: {len(releases)} operator release(s) and {len(patches)} ClusterPolicy patch(es) in one stack")
    if config_name is not None:
        lines.append(f"- Device plugin config: ConfigMap {code(config_name)}, default key {code(config_default)}")

    time_slicing = dig(outputs, "timeSlicing") if isinstance(dig(outputs, "timeSlicing"), dict) else {}
    wanted = config_name or time_slicing.get("configMap")
    # The operator component holds other ConfigMaps too (the DCGM metric list): the device-plugin config
    # is the one the operator is pointed at.
    maps = [m for m in index.of_type(CONFIG_MAP) if wanted is not None and dig(m, "inputs", "metadata", "name") == wanted]
    for config_map in sorted(maps, key=lambda m: m["urn"]):
        metadata = config_map["inputs"].get("metadata") or {}
        data = config_map["inputs"].get("data") or {}
        default = config_default if config_default is not None else time_slicing.get("defaultKey")
        lines += ["", f"### Time-slicing ConfigMap {code(metadata.get('namespace'))}/{code(metadata.get('name'))}", ""]
        rows = [[code(key), "yes" if key == default else "", _profile(data[key])] for key in sorted(data)]
        lines += table(["Key", "Default", "Profile"], rows) if rows else ["No keys."]
        if default is not None and isinstance(data, dict) and default not in data:
            lines += ["", f"**Check:** default key {code(default)} is not in the ConfigMap (the config manager fails)."]
        selections = []
        for group in sorted(index.of_type(EKS_NODE_GROUP), key=lambda r: r["name"]):
            key = dig(group, "inputs", "labels", NODE_PROFILE_LABEL)
            if key is not None:
                note = "" if key in data else " — **not in the ConfigMap** (the config manager fails)"
                selections.append(f"- Node group {code(group['name'])} selects key {code(key)}{note}")
        if selections:
            lines += ["", *selections]
    if not maps:
        lines += ["", "No time-slicing ConfigMap."]
    return lines


def _queues(index: PlanIndex) -> dict[str, dict[str, Any]]:
    queues = {}
    for resource in sorted(index.of_type(QUEUE), key=lambda r: r["urn"]):
        inputs = resource["inputs"]
        name = dig(inputs, "metadata", "name", default=resource["name"])
        queues[str(name)] = {"resource": resource, "spec": inputs.get("spec") or {}}
    return queues


def _queue_section(index: PlanIndex) -> list[str]:
    lines = ["## KAI queues", ""]
    queues = _queues(index)
    if not queues:
        return lines + ["None."]
    children: dict[Optional[str], list[str]] = {}
    for name, queue in queues.items():
        parent = queue["spec"].get("parentQueue")
        children.setdefault(parent if parent in queues else None, []).append(name)
    order: list[tuple[str, int]] = []
    tree: list[str] = []
    seen: set[str] = set()

    def walk(name: str, prefix: str, last: bool, depth: int) -> None:
        seen.add(name)
        order.append((name, depth))
        parent = queues[name]["spec"].get("parentQueue")
        note = f"  (parent {parent} is NOT managed by this stack)" if depth == 0 and parent else ""
        gpu = dig(queues[name]["spec"], "resources", "gpu") or {}
        label = f"{name}  [gpu quota {fmt_amount(gpu.get('quota'))}, limit {fmt_amount(gpu.get('limit'))}]{note}"
        tree.append(label if depth == 0 else prefix + ("└── " if last else "├── ") + label)
        kids = sorted(child for child in children.get(name, []) if child not in seen)
        for position, child in enumerate(kids):
            walk(child, prefix + ("" if depth == 0 else ("    " if last else "│   ")), position == len(kids) - 1, depth + 1)

    for root in sorted(children.get(None, [])):
        walk(root, "", True, 0)
    for name in sorted(set(queues) - seen):  # a parentQueue cycle: nothing reaches it from a root
        walk(name, "", True, 0)
    lines += ["```text", *tree, "```", ""]

    rows = []
    for name, depth in order:
        spec = queues[name]["spec"]
        row = [("&nbsp;&nbsp;" * depth) + code(name), code(spec["parentQueue"]) if spec.get("parentQueue") else "—",
               fmt_num(spec.get("priority"))]
        for resource in QUEUE_RESOURCES:
            entry = dig(spec, "resources", resource) or {}
            row += [fmt_amount(entry.get(field)) for field in QUEUE_FIELDS]
        rows.append(row)
    headers = ["Queue", "Parent", "Priority"]
    for resource, unit in (("GPU", ""), ("CPU", " (m)"), ("Memory", " (MB)")):
        headers += [f"{resource} quota{unit}", f"{resource} limit", f"{resource} weight"]
    lines += table(headers, rows)
    lines += ["", "Units: GPU in devices (fractions allowed), CPU in millicores, memory in MB. "
                  "`unlimited` = -1; a missing (—) limit is a hard cap of zero in KAI."]

    checks = []
    for parent in sorted(name for name in children if name is not None):
        for resource in QUEUE_RESOURCES:
            parent_quota = dig(queues[parent]["spec"], "resources", resource, "quota")
            kid_quotas = [dig(queues[kid]["spec"], "resources", resource, "quota") for kid in children[parent]]
            numeric = [q for q in kid_quotas if isinstance(q, (int, float)) and not isinstance(q, bool)]
            if not isinstance(parent_quota, (int, float)) or parent_quota == -1 or len(numeric) != len(kid_quotas) \
                    or any(q == -1 for q in numeric) or not any(numeric):
                continue
            total = round(sum(numeric), 6)
            verdict = "**over-committed**" if total > parent_quota else "fits"
            checks.append(f"- {code(parent)}: children's {resource} quotas sum to {fmt_num(float(total))} "
                          f"of {fmt_num(parent_quota)} — {verdict}")
    if checks:
        lines += ["", *checks]
    return lines


def _secret_paths(value: Any, path: str = "") -> list[str]:
    if value == REDACTED:
        return [path or "(whole value)"]
    if isinstance(value, dict):
        return [p for key in sorted(value) for p in _secret_paths(value[key], f"{path}.{key}" if path else key)]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _secret_paths(item, f"{path}[{i}]")]
    return []


def render_summary(plan: dict[str, Any], charts: Optional[ChartValues] = None,
                   chart_objects: ChartObjects = None) -> str:
    """The reviewer's markdown digest of a plan document (see ``build_plan``); with ``charts``, tenants'
    quotas are shown merged with their chart's defaults (golden plans are written without); ``chart_objects``:
    the rendered charts' objects as ``(release, manifest)`` pairs, None when the charts were not rendered."""
    index = PlanIndex(plan)
    outputs = plan.get("outputs") or {}
    resources = plan["resources"]
    custom = sum(1 for r in resources if r["custom"] and not r["read"])
    reads = sum(1 for r in resources if r["read"])
    lines = [
        f"# Plan: {plan['project']} / {plan['stack']}",
        "",
        f"Offline run of the Pulumi program under SDK mocks (no engine, cloud or cluster): "
        f"{len(resources)} resources ({custom} custom, {len(resources) - custom - reads} components, "
        f"{reads} reads of existing objects), {len(outputs)} stack outputs. "
        f"Values computed by providers are mock values; secrets are shown as `{REDACTED}`.",
        "",
    ]
    lines += host_section(index) + [""]
    lines += _releases_section(index) + [""]
    lines += _gpu_operator_section(index, outputs) + [""]
    lines += _queue_section(index) + [""]
    lines += guarantees_section(index)
    lines += tenant_section(index, charts) + [""]
    lines += datastore_section(index)
    lines += isolation_section(index) + [""]

    lines += cluster_objects_section(index) + [""]
    views = views_section(index)
    lines += [*views, ""] if views else []
    lines += site_sections(index, chart_objects)

    lines += ["## Warnings", ""]
    lines += [f"- {warning}" for warning in plan.get("warnings") or []] or ["None."]
    lines += ["", "## Notes", ""]
    lines += [f"- {note}" for note in plan.get("notes") or []] or ["None."]
    lines += ["", "## Secrets", ""]
    secret_outputs = plan.get("secretOutputs") or []
    lines.append("- Secret outputs: " + (", ".join(code(name) for name in secret_outputs) or "none"))
    secret_inputs = [f"{code(r['name'])}: " + ", ".join(code(p) for p in _secret_paths(r["inputs"]))
                     for r in resources if _secret_paths(r["inputs"])]
    lines.append("- Secret inputs: none" if not secret_inputs else "- Secret inputs:")
    lines += [f"  - {entry}" for entry in secret_inputs]

    lines += ["", "## Resources by type", ""]
    counts = Counter(r["type"] for r in resources)
    lines += table(["Type", "Count"], [[code(t), str(counts[t])] for t in sorted(counts)])
    return "\n".join(lines) + "\n"
