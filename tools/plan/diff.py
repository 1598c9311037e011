"""What a change does, from two offline plans: resources added, removed and changed.

For a reviewer without cloud access: each changed resource lists the input paths that differ
with old -> new values. Secrets are already ``[secret]`` in both plans, so a changed secret is
invisible here by design. Resources are matched by URN, as Pulumi matches them; a resource whose
name or parent changes shows as one removal and one addition, which is also what ``pulumi up``
would do without aliases.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MISSING = "(absent)"


@dataclass(frozen=True)
class Change:
    path: str
    old: Any
    new: Any


@dataclass
class ResourceDiff:
    urn: str
    type: str
    name: str
    changes: list[Change]


@dataclass
class PlanDiff:
    added: list[dict] = field(default_factory=list)
    removed: list[dict] = field(default_factory=list)
    changed: list[ResourceDiff] = field(default_factory=list)
    outputs: list[Change] = field(default_factory=list)
    # Rendered manifest files (path under manifests/ -> unified diff), when both plans have them.
    manifests: dict[str, str] = field(default_factory=dict)
    # What a running site refuses or loses (tools.plan.running_site.Finding), and whether the charts' objects were
    # compared (only when both plans were made with --render-charts).
    running_site: list = field(default_factory=list)
    charts_checked: bool = False

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.outputs or self.manifests)


def _join(path: str, key: Any) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    text = str(key)
    plain = text.replace("-", "").replace("_", "").isalnum()
    step = text if plain else json.dumps(text)
    if not plain:
        return f"{path}[{step}]"
    return f"{path}.{step}" if path else step


def value_changes(old: Any, new: Any, path: str = "") -> list[Change]:
    """Leaf-level differences between two JSON values, in a stable order."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes = []
        for key in sorted(set(old) | set(new), key=str):
            changes += value_changes(old.get(key, MISSING), new.get(key, MISSING), _join(path, key))
        return changes
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        changes = []
        for index, (before, after) in enumerate(zip(old, new)):
            changes += value_changes(before, after, _join(path, index))
        return changes
    return [] if old == new else [Change(path, old, new)]


def diff_plans(old: dict, new: dict) -> PlanDiff:
    before = {resource["urn"]: resource for resource in old.get("resources", [])}
    after = {resource["urn"]: resource for resource in new.get("resources", [])}
    diff = PlanDiff()
    diff.added = [after[urn] for urn in sorted(set(after) - set(before))]
    diff.removed = [before[urn] for urn in sorted(set(before) - set(after))]
    for urn in sorted(set(before) & set(after)):
        changes = []
        for part in ("inputs", "options", "dependencies", "provider", "parent"):
            prefix = "" if part == "inputs" else part
            changes += value_changes(before[urn].get(part), after[urn].get(part), prefix)
        if changes:
            diff.changed.append(ResourceDiff(urn, after[urn]["type"], after[urn]["name"], changes))
    diff.outputs = value_changes(old.get("outputs", {}), new.get("outputs", {}))
    return diff


def read_manifests(directory: Path) -> dict[str, str]:
    """Rendered manifest files under ``directory`` (path -> text); empty when there are none."""
    if not directory.is_dir():
        return {}
    return {path.relative_to(directory).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(directory.rglob("*")) if path.is_file()}


def manifest_changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str]:
    """Unified diffs of the rendered manifest files that differ between two renders."""
    changes = {}
    for name in sorted(set(before) | set(after)):
        if before.get(name) != after.get(name):
            changes[name] = "".join(difflib.unified_diff(
                before.get(name, "").splitlines(keepends=True), after.get(name, "").splitlines(keepends=True),
                fromfile=f"old/{name}", tofile=f"new/{name}"))
    return changes


def _show(value: Any) -> str:
    if value == MISSING:
        return MISSING
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= 120 else text[:117] + "..."


def _protected(resource: dict) -> str:
    return " (protected)" if resource.get("options", {}).get("protect") else ""


RUNNING_SITE_TITLE = "Changes a running site refuses or that lose state"
# Finding category -> how the section heads its findings, most serious first.
RUNNING_SITE_HEADINGS = {
    "refused": "Refused by the API server: the Helm upgrade fails and rolls back, and `pulumi up` stops on the release",
    "stops": "Stops `pulumi up`: a protected resource would be replaced",
    "lost": "Loses state",
    "not applied": "Not applied: the running site keeps the old object",
    "replaced": "Replaced: deleted, then created again",
    "unknown": "Not judged: no rule known to the plan diff, check before applying",
}


def render_running_site(diff: PlanDiff) -> list[str]:
    lines = ["", f"## {RUNNING_SITE_TITLE}", ""]
    if not diff.running_site:
        lines.append("None found." + ("" if diff.charts_checked else " The charts' objects were not compared: diff "
                                      "two plans made with `--render-charts` for that."))
        return lines
    if not diff.charts_checked:
        lines += ["The charts' objects were not compared: diff two plans made with `--render-charts` for that.", ""]
    for category, heading in RUNNING_SITE_HEADINGS.items():
        found = [finding for finding in diff.running_site if finding.category == category]
        if found:
            lines += [f"**{heading}**", ""]
            lines += [f"- {finding.subject}: `{finding.field}`"
                      + (f" {_show(finding.old)} -> {_show(finding.new)}" if finding.old != MISSING
                         or finding.new != MISSING else "")
                      + f". Why: {finding.why}. Fix: {finding.fix}." for finding in found]
            lines.append("")
    return lines[:-1]


def render_diff(diff: PlanDiff, old_label: str, new_label: str) -> str:
    lines = [f"# Plan diff: {old_label} -> {new_label}", ""]
    if diff.empty:
        return "\n".join(lines + ["No changes.", ""])
    lines.append(f"{len(diff.added)} to add, {len(diff.changed)} to change, {len(diff.removed)} to remove.")
    if diff.removed:
        protected = [r["name"] for r in diff.removed if r.get("options", {}).get("protect")]
        if protected:
            lines += ["", f"**Protected resources would be removed: {', '.join(protected)}.** `pulumi up` stops "
                          "with a protected-resource error until protection is lifted (see the decommission "
                          "procedure in docs/operations.md)."]
    serious = sorted({finding.category for finding in diff.running_site} & {"refused", "stops", "lost"})
    if serious:
        lines += ["", f"**This change cannot be applied to a running site as it is, or loses state "
                      f"({', '.join(serious)}): see [{RUNNING_SITE_TITLE}](#{RUNNING_SITE_TITLE.lower().replace(' ', '-')}).**"]
    lines += render_running_site(diff)
    for title, resources, sign in (("Added", diff.added, "+"), ("Removed", diff.removed, "-")):
        if resources:
            lines += ["", f"## {title}", ""]
            lines += [f"{sign} `{r['type']}` **{r['name']}**{_protected(r)}" for r in resources]
    if diff.changed:
        lines += ["", "## Changed", ""]
        for resource in diff.changed:
            lines.append(f"~ `{resource.type}` **{resource.name}**")
            lines += [f"    - `{change.path}`: {_show(change.old)} -> {_show(change.new)}"
                      for change in resource.changes]
    if diff.outputs:
        lines += ["", "## Stack outputs", ""]
        lines += [f"~ `{change.path}`: {_show(change.old)} -> {_show(change.new)}" for change in diff.outputs]
    if diff.manifests:
        lines += ["", "## Rendered manifests", ""]
        for name, text in diff.manifests.items():
            lines += [f"### {name}", "", "```diff", text.rstrip("\n"), "```", ""]
    return "\n".join(lines) + "\n"
