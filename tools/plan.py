"""Offline plan of one stack: what the program would register, for review without any cloud.

    python -m tools.plan STACK [--out DIR] [--diff-against OLD_PLAN_JSON]

Runs ``__main__.py`` for ``Pulumi.STACK.yaml`` under the SDK's mocks (``tools.mockrun``: no
engine, CLI, cloud account or cluster) and writes two files to DIR (default
``build/plan/STACK/`` under the project root):

- ``plan.json``: every registered resource (type, name, URN, parent, provider, dependencies,
  options, inputs with secrets replaced by ``[secret]``), the stack outputs, the names of the
  secret outputs and the program's warnings. Keys are sorted, set-like lists are sorted and
  nothing depends on time, paths or randomness, so two runs give byte-identical files and a
  diff of two plans is a review of a change.
- ``summary.md``: a reviewer's digest derived from the recorded resources: host, Helm
  releases, GPU operator mode and time-slicing profiles, the KAI queue tree with its quotas,
  the tenants, warnings and secrets.

With ``--render-charts``, every Helm release is also rendered in-process from the local chart
cache (``tools.charts``; values checked against each chart's schema) into ``DIR/manifests/``, and
a diff against a plan that has manifests beside it shows object-level changes too.

With ``--diff-against``, the change since an earlier plan.json (resources added, removed and
changed, with the changed input paths and old -> new values; ``tools.plan_diff``) is printed and
written to ``diff.md``.

Exit codes: 0 written; 2 invalid stack config (``config.ConfigError``, printed to stderr) or no
such stack file. Any other exception is a bug in the program and propagates.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator, Optional, Sequence

import yaml

from config import ConfigError
from config.stack_file import StackFileError
from tools import mockrun
from tools.mockrun import PROJECT, PROJECT_DIR, REDACTED, ProgramRun, integral_numbers
from tools import charts
from tools.plan_diff import diff_plans, manifest_changes, read_manifests, render_diff

PLAN_FILE = "plan.json"
SUMMARY_FILE = "summary.md"
DIFF_FILE = "diff.md"

RELEASE = "kubernetes:helm.sh/v3:Release"
QUEUE = "kubernetes:scheduling.run.ai/v2:Queue"
CLUSTER_POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
NAMESPACE = "kubernetes:core/v1:Namespace"
EKS_CLUSTER = "eks:index:Cluster"
EKS_NODE_GROUP = "eks:index:ManagedNodeGroup"
COMMANDS = ("command:local:Command", "command:remote:Command")
K8S_PROVIDER = "pulumi:providers:kubernetes"
AWS_PROVIDER = "pulumi:providers:aws"
ADMISSION_POLICY = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
HOST_COMPONENT = "gpu-tenancy:platform:HostCluster"
GPU_OPERATOR_COMPONENT = "gpu-tenancy:platform:GpuOperator"
TENANT_COMPONENT = "gpu-tenancy:platform:TenantCluster"
QUEUE_RESOURCES = ("gpu", "cpu", "memory")
QUEUE_FIELDS = ("quota", "limit", "overQuotaWeight")
NODE_PROFILE_LABEL = "nvidia.com/device-plugin.config"


# --- plan.json --------------------------------------------------------------------------------


def _options(options: dict[str, Any]) -> dict[str, Any]:
    """Resource options: every list in them (additionalSecretOutputs, ignoreChanges...) is a set."""
    return {key: sorted(value, key=_sort_key) if isinstance(value, list) else value
            for key, value in options.items()}


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def build_plan(run: ProgramRun, stack: str, project: str = PROJECT) -> dict[str, Any]:
    """The plan document of one program run (a plain JSON-able dict)."""
    resources = []
    for resource in sorted(run.resources, key=lambda r: (r.urn, r.read)):
        entry = integral_numbers(resource.to_json())
        entry["dependencies"] = sorted(set(entry.get("dependencies") or []))
        entry["options"] = _options(entry.get("options") or {})
        resources.append(entry)
    return {
        "project": project,
        "stack": stack,
        "resources": resources,
        "outputs": integral_numbers(run.outputs),
        "secretOutputs": sorted(run.secret_outputs),
        # Warnings are logged asynchronously: their arrival order is not part of the plan.
        "warnings": sorted(run.warnings),
        "notes": sorted(run.notes),
    }


def render_plan_json(plan: dict[str, Any]) -> str:
    return json.dumps(plan, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


# --- summary.md: helpers ----------------------------------------------------------------------


def _num(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(round(value, 6))
    if value is None:
        return "—"
    return str(value)


def _amount(value: Any) -> str:
    """A queue quota/limit: -1 reads as unlimited."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == -1:
        return "unlimited"
    return _num(value)


def _code(text: Any) -> str:
    text = str(text)
    if "`" in text:
        return f"`` {text} ``"
    return f"`{text}`"


def _cell(text: str) -> str:
    """A markdown table cell (GFM needs pipes escaped even inside code spans)."""
    return text.replace("|", "\\|").replace("\n", "<br>")


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(_cell(str(cell)) for cell in row) + " |" for row in rows]
    return lines


def _get(data: Any, *path: str, default: Any = None) -> Any:
    for step in path:
        if not isinstance(data, dict) or step not in data:
            return default
        data = data[step]
    return data


def _labels(labels: Any) -> str:
    if not isinstance(labels, dict) or not labels:
        return "—"
    return ", ".join(_code(f"{key}={value}") for key, value in sorted(labels.items()))


class _Index:
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

    def under(self, resource: dict[str, Any], component_type: str) -> bool:
        return any(ancestor["type"] == component_type for ancestor in self.ancestors(resource))

    def descendants(self, component: dict[str, Any]) -> list[dict[str, Any]]:
        return [resource for resource in self.resources
                if any(ancestor["urn"] == component["urn"] for ancestor in self.ancestors(resource))]


def _topological(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
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


# --- summary.md: sections ---------------------------------------------------------------------


def _host_section(index: _Index, outputs: dict[str, Any]) -> list[str]:
    lines = ["## Host", ""]
    clusters = index.of_type(EKS_CLUSTER)
    commands = [resource for resource in index.of_type(*COMMANDS)
                if resource["parent"] is None or index.under(resource, HOST_COMPONENT)]
    if clusters:
        kind = "eks"
    elif commands:
        kind = "microk8s"
    else:
        kind = "kubeconfig"
    declared = outputs.get("hostKind")
    lines.append(f"- Kind: **{kind}**" + (f" (program output `hostKind` = {_code(declared)})"
                                            if isinstance(declared, str) and declared != kind else ""))

    if kind == "eks":
        for provider in index.of_type(AWS_PROVIDER):
            if provider["inputs"].get("region"):
                lines.append(f"- AWS region: {_code(provider['inputs']['region'])} (provider {_code(provider['name'])})")
        for cluster in clusters:
            inputs = cluster["inputs"]
            lines.append(f"- EKS cluster {_code(inputs.get('name', cluster['name']))}: Kubernetes "
                         f"{_code(_num(inputs.get('version', '—')))}, authentication mode "
                         f"{_code(inputs.get('authenticationMode', '—'))}, default node group "
                         f"{'skipped' if inputs.get('skipDefaultNodeGroup') else 'created'}")
            vpc = inputs.get("vpcId")
            if vpc is not None:
                lines.append(f"- VPC: {_code(vpc)}; public subnets: {len(inputs.get('publicSubnetIds') or [])}, "
                             f"private subnets: {len(inputs.get('privateSubnetIds') or [])}")
        groups = sorted(index.of_type(EKS_NODE_GROUP), key=lambda r: r["name"])
        lines += ["", "### Managed node groups", ""]
        if not groups:
            lines.append("None.")
        else:
            rows = []
            for group in groups:
                inputs = group["inputs"]
                scaling = inputs.get("scalingConfig") or {}
                taints = inputs.get("taints") or []
                rows.append([
                    _code(group["name"]),
                    _code(inputs.get("amiType", "—")),
                    ", ".join(_code(t) for t in inputs.get("instanceTypes") or []) or "—",
                    " / ".join(_num(scaling.get(key)) for key in ("minSize", "desiredSize", "maxSize")),
                    _num(inputs.get("diskSize")),
                    _labels(inputs.get("labels")),
                    ", ".join(_code(f"{t.get('key')}={t.get('value')}:{t.get('effect')}") for t in taints
                              if isinstance(t, dict)) or "—",
                ])
            lines += _table(["Node group", "AMI", "Instance types", "Min / desired / max", "Disk (GiB)",
                             "Labels", "Taints"], rows)
    elif kind == "microk8s":
        ordered = _topological(commands)
        remote = [c for c in ordered if c["type"] == "command:remote:Command"]
        if remote:
            connection = remote[0]["inputs"].get("connection")
            if isinstance(connection, dict):
                target = f"{connection.get('user', '?')}@{connection.get('host', '?')}:{_num(connection.get('port', 22))}"
            else:  # a connection holding a secret private key is a secret as a whole
                target = str(connection)
            lines.append(f"- Runs over SSH: connection {_code(target)}")
        else:
            lines.append("- Runs locally (`pulumi up` on the GPU machine itself)")
        lines += ["", "### Setup commands (in dependency order)", ""]
        for number, command in enumerate(ordered, 1):
            inputs = command["inputs"]
            where = "remote" if command["type"] == "command:remote:Command" else "local"
            line = f"{number}. {_code(command['name'])} ({where}): {_code(inputs.get('create', '—'))}"
            if inputs.get("delete"):
                line += f"; on destroy: {_code(inputs['delete'])}"
            if command["options"].get("additionalSecretOutputs"):
                line += f"; secret outputs: {', '.join(_code(o) for o in command['options']['additionalSecretOutputs'])}"
            lines.append(line)
    else:
        for provider in index.of_type(K8S_PROVIDER):
            context = provider["inputs"].get("context")
            lines.append(f"- Existing cluster through provider {_code(provider['name'])}: kubeconfig "
                         f"{_code(provider['inputs'].get('kubeconfig', '—'))}"
                         + (f", context {_code(context)}" if context else ""))
    return lines


def _release_rows(index: _Index) -> list[dict[str, Any]]:
    return sorted(index.of_type(RELEASE),
                  key=lambda r: (str(r["inputs"].get("name", r["name"])), str(r["inputs"].get("namespace")), r["urn"]))


def _releases_section(index: _Index) -> list[str]:
    lines = ["## Helm releases", ""]
    releases = _release_rows(index)
    if not releases:
        return lines + ["None."]
    rows = []
    for release in releases:
        inputs = release["inputs"]
        rows.append([
            _code(inputs.get("name", release["name"])),
            _code(inputs.get("chart", "—")),
            _code(_num(inputs.get("version", "—"))),
            _code(inputs.get("namespace", "—")),
            _code(_get(inputs, "repositoryOpts", "repo")) if _get(inputs, "repositoryOpts", "repo") else "— (OCI / none)",
            _code(release["name"]) + (" (protected)" if release["options"].get("protect") else ""),
        ])
    return lines + _table(["Release", "Chart", "Version", "Namespace", "Repository", "Resource"], rows)


def _profile(content: Any) -> str:
    if not isinstance(content, str):
        return _num(content)
    try:
        document = yaml.safe_load(content) or {}
    except yaml.YAMLError:
        return "unparsable YAML"
    slicing = _get(document, "sharing", "timeSlicing")
    if not isinstance(slicing, dict) or not slicing.get("resources"):
        return "no sharing (whole GPUs)"
    parts = [f"time-slicing {_code(r.get('name'))} x{_num(r.get('replicas'))}"
             for r in slicing["resources"] if isinstance(r, dict)]
    flags = [f"{flag}={_num(slicing[flag])}" for flag in ("renameByDefault", "failRequestsGreaterThanOne")
             if flag in slicing]
    return ", ".join(parts) + (f" ({', '.join(flags)})" if flags else "")


def _gpu_operator_section(index: _Index, outputs: dict[str, Any]) -> list[str]:
    lines = ["## GPU operator", ""]
    releases = [r for r in index.of_type(RELEASE)
                if index.under(r, GPU_OPERATOR_COMPONENT) or str(r["inputs"].get("chart", "")).rsplit("/", 1)[-1] == "gpu-operator"]
    patches = index.of_type(CLUSTER_POLICY_PATCH)
    config_name = config_default = None
    if releases:
        release = releases[0]
        inputs = release["inputs"]
        values = inputs.get("values") or {}
        lines.append(f"- Mode: **install** — this stack owns Helm release {_code(inputs.get('name'))} "
                     f"(chart {_code(inputs.get('chart'))} {_code(_num(inputs.get('version')))}) in namespace "
                     f"{_code(inputs.get('namespace'))}")
        lines.append(f"- Driver enabled: {_num(_get(values, 'driver', 'enabled'))}; container toolkit enabled: "
                     f"{_num(_get(values, 'toolkit', 'enabled'))}; CDI enabled: {_num(_get(values, 'cdi', 'enabled'))}")
        config_name = _get(values, "devicePlugin", "config", "name")
        config_default = _get(values, "devicePlugin", "config", "default")
    elif patches:
        patch = patches[0]
        inputs = patch["inputs"]
        config_name = _get(inputs, "spec", "devicePlugin", "config", "name")
        config_default = _get(inputs, "spec", "devicePlugin", "config", "default")
        lines.append(f"- Mode: **ClusterPolicy patch** (microk8s-addon) — the operator is already installed "
                     f"(MicroK8s nvidia addon); this stack patches ClusterPolicy "
                     f"{_code(_get(inputs, 'metadata', 'name'))} and installs no operator release")
    else:
        lines.append("- Mode: **external** — no operator release and no ClusterPolicy patch: the operator is "
                     "managed elsewhere and must be pointed at the time-slicing ConfigMap by its owner")
    if len(releases) + len(patches) > 1:
        lines.append(f"- Note: {len(releases)} operator release(s) and {len(patches)} ClusterPolicy patch(es) in one stack")
    if config_name is not None:
        lines.append(f"- Device plugin config: ConfigMap {_code(config_name)}, default key {_code(config_default)}")

    time_slicing = _get(outputs, "timeSlicing") if isinstance(_get(outputs, "timeSlicing"), dict) else {}
    wanted = config_name or time_slicing.get("configMap")
    maps = [m for m in index.of_type(CONFIG_MAP) if index.under(m, GPU_OPERATOR_COMPONENT)
            or (wanted is not None and _get(m, "inputs", "metadata", "name") == wanted)]
    for config_map in sorted(maps, key=lambda m: m["urn"]):
        metadata = config_map["inputs"].get("metadata") or {}
        data = config_map["inputs"].get("data") or {}
        default = config_default if config_default is not None else time_slicing.get("defaultKey")
        lines += ["", f"### Time-slicing ConfigMap {_code(metadata.get('namespace'))}/{_code(metadata.get('name'))}", ""]
        rows = [[_code(key), "yes" if key == default else "", _profile(data[key])] for key in sorted(data)]
        lines += _table(["Key", "Default", "Profile"], rows) if rows else ["No keys."]
        if default is not None and isinstance(data, dict) and default not in data:
            lines += ["", f"**Check:** default key {_code(default)} is not in the ConfigMap (the config manager fails)."]
        selections = []
        for group in sorted(index.of_type(EKS_NODE_GROUP), key=lambda r: r["name"]):
            key = _get(group, "inputs", "labels", NODE_PROFILE_LABEL)
            if key is not None:
                note = "" if key in data else " — **not in the ConfigMap** (the config manager fails)"
                selections.append(f"- Node group {_code(group['name'])} selects key {_code(key)}{note}")
        if selections:
            lines += ["", *selections]
    if not maps:
        lines += ["", "No time-slicing ConfigMap."]
    return lines


def _queues(index: _Index) -> dict[str, dict[str, Any]]:
    queues = {}
    for resource in sorted(index.of_type(QUEUE), key=lambda r: r["urn"]):
        inputs = resource["inputs"]
        name = _get(inputs, "metadata", "name", default=resource["name"])
        queues[str(name)] = {"resource": resource, "spec": inputs.get("spec") or {}}
    return queues


def _queue_section(index: _Index) -> list[str]:
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
        gpu = _get(queues[name]["spec"], "resources", "gpu") or {}
        label = f"{name}  [gpu quota {_amount(gpu.get('quota'))}, limit {_amount(gpu.get('limit'))}]{note}"
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
        row = [("&nbsp;&nbsp;" * depth) + _code(name), _code(spec["parentQueue"]) if spec.get("parentQueue") else "—",
               _num(spec.get("priority"))]
        for resource in QUEUE_RESOURCES:
            entry = _get(spec, "resources", resource) or {}
            row += [_amount(entry.get(field)) for field in QUEUE_FIELDS]
        rows.append(row)
    headers = ["Queue", "Parent", "Priority"]
    for resource, unit in (("GPU", ""), ("CPU", " (m)"), ("Memory", " (MB)")):
        headers += [f"{resource} quota{unit}", f"{resource} limit", f"{resource} weight"]
    lines += _table(headers, rows)
    lines += ["", "Units: GPU in devices (fractions allowed), CPU in millicores, memory in MB. "
                  "`unlimited` = -1; a missing (—) limit is a hard cap of zero in KAI."]

    checks = []
    for parent in sorted(name for name in children if name is not None):
        for resource in QUEUE_RESOURCES:
            parent_quota = _get(queues[parent]["spec"], "resources", resource, "quota")
            kid_quotas = [_get(queues[kid]["spec"], "resources", resource, "quota") for kid in children[parent]]
            numeric = [q for q in kid_quotas if isinstance(q, (int, float)) and not isinstance(q, bool)]
            if not isinstance(parent_quota, (int, float)) or parent_quota == -1 or len(numeric) != len(kid_quotas) \
                    or any(q == -1 for q in numeric) or not any(numeric):
                continue
            total = round(sum(numeric), 6)
            verdict = "**over-committed**" if total > parent_quota else "fits"
            checks.append(f"- {_code(parent)}: children's {resource} quotas sum to {_num(float(total))} "
                          f"of {_num(parent_quota)} — {verdict}")
    if checks:
        lines += ["", *checks]
    return lines


def _tenant_section(index: _Index, outputs: dict[str, Any]) -> list[str]:
    lines = ["## Tenants", ""]
    components = sorted(index.of_type(TENANT_COMPONENT), key=lambda r: r["name"])
    if not components:
        return lines + ["None."]
    exported = outputs.get("tenants") if isinstance(outputs.get("tenants"), dict) else {}
    queue_names = {q["resource"]["urn"]: name for name, q in _queues(index).items()}
    rows = []
    for component in components:
        children = index.descendants(component)
        releases = [r for r in children if r["type"] == RELEASE]
        namespaces = [r for r in children if r["type"] == NAMESPACE]
        release = releases[0] if releases else None
        namespace = namespaces[0] if namespaces else None
        vcluster = _get(release, "inputs", "name")
        host_namespace = _get(release, "inputs", "namespace") or _get(namespace, "inputs", "metadata", "name")
        team = next((key for key, entry in sorted(exported.items()) if isinstance(entry, dict)
                     and entry.get("vcluster") == vcluster and entry.get("namespace") == host_namespace), None)
        team = team or _get(namespace, "inputs", "metadata", "labels", "gpu-tenancy/team") \
            or component["name"].removeprefix("tenant-")
        queues = sorted({queue_names[dep] for r in releases for dep in r["dependencies"] if dep in queue_names})
        queue = ", ".join(_code(q) for q in queues) if queues else \
            (_code(_get(exported, team, "queue")) + " (from outputs)" if _get(exported, team, "queue") else "—")
        protected = [bool(r["options"].get("protect")) for r in (namespace, release) if r is not None]
        protection = "yes" if protected and all(protected) else "no" if not any(protected) else \
            "partial (" + ", ".join(f"{kind} {'yes' if flag else 'no'}" for kind, flag in
                                    zip(("namespace", "release"), protected)) + ")"
        guarded = "yes" if any(r["type"] == ADMISSION_POLICY for r in children) else "no"
        connect = _get(exported, team, "connectCommand")
        rows.append([
            _code(team), _code(vcluster) if vcluster else "—", _code(host_namespace) if host_namespace else "—",
            queue, _code(_num(_get(release, "inputs", "version"))) if release else "—", protection, guarded,
            _code(connect) if connect else "—",
        ])
    return lines + _table(["Team", "vCluster", "Host namespace", "Queue", "vCluster chart", "Protected",
                           "Admission policy", "Connect"], rows)


def _secret_paths(value: Any, path: str = "") -> list[str]:
    if value == REDACTED:
        return [path or "(whole value)"]
    if isinstance(value, dict):
        return [p for key in sorted(value) for p in _secret_paths(value[key], f"{path}.{key}" if path else key)]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _secret_paths(item, f"{path}[{i}]")]
    return []


def render_summary(plan: dict[str, Any]) -> str:
    """The reviewer's markdown digest of a plan document (see ``build_plan``)."""
    index = _Index(plan)
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
    lines += _host_section(index, outputs) + [""]
    lines += _releases_section(index) + [""]
    lines += _gpu_operator_section(index, outputs) + [""]
    lines += _queue_section(index) + [""]
    lines += _tenant_section(index, outputs) + [""]

    lines += ["## Warnings", ""]
    lines += [f"- {warning}" for warning in plan.get("warnings") or []] or ["None."]
    lines += ["", "## Secrets", ""]
    secret_outputs = plan.get("secretOutputs") or []
    lines.append("- Secret outputs: " + (", ".join(_code(name) for name in secret_outputs) or "none"))
    secret_inputs = [f"{_code(r['name'])}: " + ", ".join(_code(p) for p in _secret_paths(r["inputs"]))
                     for r in resources if _secret_paths(r["inputs"])]
    lines.append("- Secret inputs: none" if not secret_inputs else "- Secret inputs:")
    lines += [f"  - {entry}" for entry in secret_inputs]

    lines += ["", "## Resources by type", ""]
    counts = Counter(r["type"] for r in resources)
    lines += _table(["Type", "Count"], [[_code(t), str(counts[t])] for t in sorted(counts)])
    return "\n".join(lines) + "\n"


# --- CLI ----------------------------------------------------------------------------------------


class _TrackingLoopPolicy(asyncio.DefaultEventLoopPolicy):
    """The default policy, remembering every loop it creates (the SDK's mocks make one per thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.loops: list[asyncio.AbstractEventLoop] = []

    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        self.loops.append(loop)
        return loop


def _shut_down(loop: asyncio.AbstractEventLoop) -> None:
    if loop.is_closed() or loop.is_running():
        return
    try:
        pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()


@contextlib.contextmanager
def _owned_event_loops() -> Iterator[None]:
    """Run the program on event loops this CLI owns, and close them all afterwards.

    The SDK runs the program on the main thread's loop and answers mock calls from worker
    threads that each create a loop of their own; none is ever closed, so the interpreter
    reports "unclosed event loop" / "Exception ignored in BaseEventLoop.__del__" at exit. The
    previous policy (and with it any loop the caller had) is restored afterwards.
    """
    previous = asyncio.get_event_loop_policy()
    policy = _TrackingLoopPolicy()
    asyncio.set_event_loop_policy(policy)
    try:
        yield
    finally:
        try:
            for loop in policy.loops:  # the main thread's loop first: it joins the worker threads
                _shut_down(loop)
        finally:
            asyncio.set_event_loop_policy(previous)


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.plan",
        description="Run the program offline for Pulumi.STACK.yaml and write plan.json and summary.md.")
    parser.add_argument("stack", metavar="STACK", help="stack name: reads Pulumi.STACK.yaml in the project root")
    parser.add_argument("--out", metavar="DIR", type=Path, default=None,
                        help="output directory (default: build/plan/STACK/ under the project root)")
    parser.add_argument("--diff-against", metavar="OLD_PLAN_JSON", type=Path, default=None,
                        help="print what changed since an earlier plan.json (also written to DIR/diff.md)")
    parser.add_argument("--render-charts", action="store_true",
                        help="also render every Helm release from the local chart cache into DIR/manifests/")
    parser.add_argument("--chart-cache", metavar="DIR", type=Path, default=None,
                        help="chart cache (default: $GPU_TENANCY_CHART_CACHE or .charts/; filled by "
                             "python -m tools.charts pull --stack STACK)")
    args = parser.parse_args(argv)
    old_plan = None
    if args.diff_against is not None:
        try:
            old_plan = json.loads(args.diff_against.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            print(f"error: cannot read the plan to diff against ({args.diff_against}): {error}", file=sys.stderr)
            return 2
    out = args.out if args.out is not None else PROJECT_DIR / "build" / "plan" / args.stack

    try:
        stack_config = mockrun.load_stack_file(args.stack)
    except (StackFileError, ConfigError) as error:
        print(f"error: stack {args.stack}: {error}", file=sys.stderr)
        return 2

    try:
        with _owned_event_loops():
            run = mockrun.run_program(stack_config, stack=args.stack)
    except ConfigError as error:
        print(f"error: stack {args.stack}: {error}", file=sys.stderr)
        # A plan left over from an earlier run would now describe a config that no longer exists.
        for name in (PLAN_FILE, SUMMARY_FILE):
            stale = out / name
            if stale.is_file():
                stale.unlink()
        return 2

    plan = build_plan(run, args.stack)
    files = [(PLAN_FILE, render_plan_json(plan)), (SUMMARY_FILE, render_summary(plan))]
    out.mkdir(parents=True, exist_ok=True)
    rendered = None
    # Read before rendering: the old plan may live in the folder this run writes to.
    old_manifests = read_manifests(args.diff_against.parent / charts.MANIFESTS_DIR) if old_plan is not None else {}
    if args.render_charts:
        try:
            rendered = charts.render_plan_releases(plan["resources"], args.chart_cache, out, stack=args.stack,
                                                   kube_version=_kube_version(plan))
        except charts.ChartError as error:
            print(f"error: stack {args.stack}: {error}", file=sys.stderr)
            return 2
    if old_plan is not None:
        diff = diff_plans(old_plan, plan)
        if rendered is not None and old_manifests:
            diff.manifests = manifest_changes(old_manifests, read_manifests(out / charts.MANIFESTS_DIR))
        diff_text = render_diff(diff, str(args.diff_against), f"{args.stack} (this run)")
        files.append((DIFF_FILE, diff_text))
    for name, text in files:
        target = out / name
        temporary = out / f".{name}.tmp"
        temporary.write_text(text, encoding="utf-8", newline="\n")
        os.replace(temporary, target)

    resources = plan["resources"]
    print(f"plan {args.stack}: {len(resources)} resources "
          f"({sum(1 for r in resources if r['custom'] and not r['read'])} custom, "
          f"{sum(1 for r in resources if r['read'])} reads), {len(plan['outputs'])} outputs "
          f"({len(plan['secretOutputs'])} secret), {len(plan['warnings'])} warnings "
          f"-> {_shown(out / PLAN_FILE)}, {_shown(out / SUMMARY_FILE)}")
    if rendered is not None:
        print(f"rendered {len(rendered['releases'])} releases for Kubernetes {rendered['kubeVersion']} -> "
              f"{_shown(out / charts.MANIFESTS_DIR)}")
    if old_plan is not None:
        print()
        print(diff_text, end="")
    return 0


def _kube_version(plan: dict[str, Any]) -> Optional[str]:
    """The Kubernetes version charts render for: the EKS cluster's, else Helm's default."""
    for resource in plan["resources"]:
        if resource["type"] == "eks:index:Cluster" and resource["inputs"].get("version"):
            return f"v{resource['inputs']['version']}.0"
    return None


if __name__ == "__main__":
    sys.exit(main())
