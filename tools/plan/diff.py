"""What a change does, from two offline plans: resources added, removed and changed.

For a reviewer without cloud access: each changed resource lists the input paths that differ
with old -> new values. List elements are matched by the field that names them where every element
has a distinct one (``spec.containers[name=syncer]``), else aligned by equal elements, so a removal or
an insertion reads as one; a changed long text shows what changed in it. Secrets are already ``[secret]`` in both plans, so a changed secret is
invisible here by design. Resources are matched by URN, as Pulumi matches them; a resource whose
name or parent changes shows as one removal and one addition, which is also what ``pulumi up``
would do without aliases.
"""

from __future__ import annotations

import difflib
import json
import re
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


# Fields that name a list element (a container, a rule group, an alerting or recording rule, a dashboard, a
# receiver), in the order tried: a list whose elements all carry one, each value once, is compared element by element
# by it, so that removing one element shows as one removal rather than as every later one renamed.
IDENTITY_FIELDS = ("name", "alert", "record", "uid", "receiver")


def _identity(element: Any) -> tuple[str, Any] | None:
    if isinstance(element, dict):
        for key in IDENTITY_FIELDS:
            if isinstance(element.get(key), (str, int)) and not isinstance(element.get(key), bool):
                return key, element[key]
    return None


def _by_identity(items: list) -> dict[tuple[str, Any], Any] | None:
    identities = [_identity(item) for item in items]
    if None in identities or len(set(identities)) != len(identities):
        return None
    return dict(zip(identities, items))


def _element(path: str, identity: tuple[str, Any]) -> str:
    key, value = identity
    text = str(value)
    plain = text.replace("-", "").replace("_", "").replace(".", "").isalnum()
    return f"{path}[{key}={text if plain else json.dumps(text)}]"


def _list_changes(old: list, new: list, path: str) -> list[Change]:
    """Elements matched by their identity field where every element has one, else by an alignment of equal
    elements (so an insertion is one addition): paired elements are compared field by field."""
    before, after = _by_identity(old), _by_identity(new)
    if before is not None and after is not None and (old or new):
        changes = []
        for identity in [*after, *(identity for identity in before if identity not in after)]:
            changes += value_changes(before.get(identity, MISSING), after.get(identity, MISSING),
                                     _element(path, identity))
        kept_before = [identity for identity in before if identity in after]
        kept_after = [identity for identity in after if identity in before]
        if kept_before != kept_after:  # the same elements in another order (init containers run in order)
            key = kept_after[0][0] if len({key for key, _ in kept_after}) == 1 else "identity"
            changes.append(Change(f"{path}[*].{key}", [value for _, value in kept_before],
                                  [value for _, value in kept_after]))
        return changes
    changes = []
    matcher = difflib.SequenceMatcher(None, [_canonical(item) for item in old], [_canonical(item) for item in new],
                                      autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        paired = min(old_end - old_start, new_end - new_start)
        for offset in range(paired):
            changes += value_changes(old[old_start + offset], new[new_start + offset],
                                     _join(path, new_start + offset))
        changes += [Change(_join(path, index), old[index], MISSING) for index in range(old_start + paired, old_end)]
        changes += [Change(_join(path, index), MISSING, new[index]) for index in range(new_start + paired, new_end)]
    return changes


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def value_changes(old: Any, new: Any, path: str = "") -> list[Change]:
    """Leaf-level differences between two JSON values, in a stable order."""
    if isinstance(old, dict) and isinstance(new, dict):
        changes = []
        for key in sorted(set(old) | set(new), key=str):
            changes += value_changes(old.get(key, MISSING), new.get(key, MISSING), _join(path, key))
        return changes
    if isinstance(old, list) and isinstance(new, list):
        return _list_changes(old, new, path)
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


SHOWN_LENGTH = 120
CONTEXT_WORDS = 6  # words (and the characters between them) kept either side of a change within one long line
_WORDS = re.compile(r"\w+\W*|\W+")


def _show(value: Any) -> str:
    if value == MISSING:
        return MISSING
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return text if len(text) <= SHOWN_LENGTH else text[:SHOWN_LENGTH - 3] + "..."


def _long_text(value: Any) -> bool:
    return isinstance(value, str) and ("\n" in value or len(value) > SHOWN_LENGTH)


def _text_change(old: str, new: str) -> list[str]:
    """A changed long string as what changed in it: a unified diff of its lines, or for one line each changed
    stretch of words with a few words of context either side."""
    if "\n" in old or "\n" in new:
        return ["```diff", *list(difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=2))[2:],
                "```"]
    before, after = _WORDS.findall(old), _WORDS.findall(new)
    lines = ["```diff"]
    for group in difflib.SequenceMatcher(None, before, after, autojunk=False).get_grouped_opcodes(CONTEXT_WORDS):
        (_, old_start, _, new_start, _), (_, _, old_end, _, new_end) = group[0], group[-1]
        lines += [f"- {_excerpt(before, old_start, old_end)}", f"+ {_excerpt(after, new_start, new_end)}"]
    return lines + ["```"]


def _excerpt(words: list[str], start: int, end: int) -> str:
    return ("..." if start else "") + "".join(words[start:end]) + ("..." if end < len(words) else "")


def render_change(change: Change, bullet: str) -> list[str]:
    """A changed value as review lines: old -> new, or for two long strings what changed in them (a block indented
    under the bullet)."""
    if _long_text(change.old) and _long_text(change.new):
        nested = " " * len(bullet)
        return [f"{bullet}`{change.path}`: text changed", "",
                *(f"{nested}{line}" for line in _text_change(change.old, change.new)), ""]
    return [f"{bullet}`{change.path}`: {_show(change.old)} -> {_show(change.new)}"]


def _protected(resource: dict) -> str:
    return " (protected)" if resource.get("options", {}).get("protect") else ""


RUNNING_SITE_TITLE = "Changes a running site refuses or that lose state"
# Finding category -> how the section heads its findings, most serious first.
RUNNING_SITE_HEADINGS = {
    "refused": "Refused by the API server: the Helm upgrade fails and rolls back, and `pulumi up` stops on the release",
    "stops": "Stops `pulumi up`: a protected resource would be replaced, or the cloud refuses the change",
    "lost": "Loses state",
    "downgrade": "Goes back to an older chart release: nothing refuses it, the older release runs on what the newer "
                 "left",
    "not applied": "Not applied: the running site keeps the old object",
    "replaced": "Replaced: deleted, then created again",
    "disrupts": "Disrupts running work",
    "upgrade": "Chart upgrades, and what becomes of their CRDs",
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


def _running_site_banners(diff: PlanDiff) -> list[str]:
    """What opens the diff when a running site would refuse it or lose state."""
    link = f"[{RUNNING_SITE_TITLE}](#{RUNNING_SITE_TITLE.lower().replace(' ', '-')})"
    lines = []
    protected = [r["name"] for r in diff.removed if r.get("options", {}).get("protect")]
    if protected:
        lines += ["", f"**Protected resources would be removed: {', '.join(protected)}.** `pulumi up` stops "
                      f"with a protected-resource error until protection is lifted: each one's cause and fix are "
                      f"under {link}."]
    serious = sorted({finding.category for finding in diff.running_site} & {"refused", "stops", "lost"})
    if serious:
        lines += ["", f"**This change cannot be applied to a running site as it is, or loses state "
                      f"({', '.join(serious)}): see {link}.**"]
    if any(finding.category == "downgrade" for finding in diff.running_site):
        lines += ["", f"**A chart goes back to an older release: see {link}.**"]
    return lines


def other_stack(old: dict, new: dict) -> str | None:
    """Why a diff of two plans of different stacks says nothing of an update (None for one stack): every URN holds its
    stack's name, so no resource of the one matches a resource of the other."""
    before, after = old.get("stack"), new.get("stack")
    if before is None or before == after:
        return None
    return (f"the two plans are of different stacks: the old one of stack `{before}`, this one of stack `{after}`. "
            "Pulumi names every resource by its stack (the URN), so here every resource shows as removed and added, "
            "and nothing below describes an update of either site. To review a change, plan the old commit under the "
            f"same stack name (`python -m tools.plan {after} --out DIR` there) and diff against that DIR/plan.json")


def render_diff(diff: PlanDiff, old_label: str, new_label: str, warning: str | None = None) -> str:
    """The diff as Markdown; ``warning`` (``other_stack``'s) opens it."""
    lines = [f"# Plan diff: {old_label} -> {new_label}", ""]
    if warning:
        lines += [f"**Warning: {warning}.**", ""]
    if diff.empty:
        return "\n".join(lines + ["No changes.", ""])
    lines.append(f"{len(diff.added)} to add, {len(diff.changed)} to change, {len(diff.removed)} to remove.")
    # Between two stacks' plans every resource shows as removed and added: no removal stops an update of either site
    # and no fix applies, so only the warning speaks to a running site.
    if not warning:
        lines += _running_site_banners(diff) + render_running_site(diff)
    for title, resources, sign in (("Added", diff.added, "+"), ("Removed", diff.removed, "-")):
        if resources:
            lines += ["", f"## {title}", ""]
            lines += [f"{sign} `{r['type']}` **{r['name']}**{_protected(r)}" for r in resources]
    if diff.changed:
        lines += ["", "## Changed", ""]
        for resource in diff.changed:
            lines.append(f"~ `{resource.type}` **{resource.name}**")
            for change in resource.changes:
                lines += render_change(change, "    - ")
    if diff.outputs:
        lines += ["", "## Stack outputs", ""]
        for change in diff.outputs:
            lines += render_change(change, "~ ")
    if diff.manifests:
        lines += ["", "## Rendered manifests", ""]
        for name, text in diff.manifests.items():
            lines += [f"### {name}", "", "```diff", text.rstrip("\n"), "```", ""]
    return "\n".join(lines) + "\n"
