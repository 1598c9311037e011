"""Offline plan of one stack: what the program would register, for review without any cloud.

    python -m tools.plan STACK [--out DIR] [--diff-against OLD_PLAN_JSON]

Runs ``__main__.py`` for ``Pulumi.STACK.yaml`` under the SDK's mocks (``tools.offline.mockrun``: no
engine, CLI, cloud account or cluster) and writes two files to DIR (default
``build/plan/STACK/`` under the project root):

- ``plan.json``: every registered resource (type, name, URN, parent, provider, dependencies,
  options, inputs with secrets replaced by ``[secret]``), the stack outputs, the names of the
  secret outputs and the program's warnings. Keys are sorted, set-like lists are sorted and
  nothing depends on time, paths or randomness, so two runs give byte-identical files and a
  diff of two plans is a review of a change.
- ``summary.md``: a reviewer's digest derived from the recorded resources: host, Helm
  releases, GPU operator mode and time-slicing profiles, the KAI queue tree with its quotas,
  the tenants, where their pods run, observability, what the site exposes, warnings and secrets
  (with ``--render-charts`` also the charts' cluster-scoped objects and Services).

With ``--render-charts``, every Helm release is also rendered in-process from the local chart
cache (``tools.charts``; values checked against each chart's schema) into ``DIR/manifests/``, and
a diff against a plan that has manifests beside it shows object-level changes too, and the
deployability check (``tools.deployability``: storage classes, API server egress, node pools, Pod
Security, Kubernetes and CRD schemas) runs over the program's and the charts' objects and writes
its findings to ``DIR/deployability.md`` (``--fail-on-findings``: exit 3 when it finds errors).

With ``--diff-against``, the change since an earlier plan.json (resources added, removed and
changed, with the changed input paths and old -> new values; ``tools.plan.diff``) is printed and
written to ``diff.md``. It opens with what a running site refuses or loses by the change: Pulumi
replacements (``tools.plan.replacement``), each chart moved to another release (``tools.plan.chart_versions``)
and, when both plans rendered the charts, updates the API
server refuses, objects deleted with data and CRDs Helm leaves as they were (``tools.plan.running_site``). An earlier
plan of another stack is diffed all the same, but every URN holds the stack's name, so every resource shows as removed
and added: the diff then opens with a warning naming both stacks, also printed to stderr, leaves out what a running
site would refuse or lose (no removal there is one of a site), and the exit code is that of the run (the files are
written).

Exit codes: 0 written; 3 deployability errors with ``--fail-on-findings``; 2 invalid stack config (``config.ConfigError``, printed to stderr) or no
such stack file. Any other exception is a bug in the program and propagates.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from config import ConfigError
from config.stack_file import PROJECT_DIR, StackFileError
from tools.charts.render import MANIFESTS_DIR, render_plan_releases
from tools.charts.refs import ChartError
from tools.offline import mockrun
from tools.plan.diff import diff_plans, manifest_changes, other_stack, read_manifests, render_diff
from tools.plan.replacement import pulumi_findings
from tools.plan.running_site import chart_findings
from tools.plan.vcluster_store import moved_store_releases, told_by_store_change
from tools.plan.document import PLAN_FILE, build_plan, render_plan_json
from tools.charts.values import ChartValues
from tools.plan.summary import SUMMARY_FILE, render_summary



DIFF_FILE = "diff.md"
DEPLOYABILITY_FILE = "deployability.md"


def _shown(path: Path) -> str:
    """A path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def main(argv: Optional[Sequence[str]] = None, *, config: Optional[dict[str, Any]] = None,
         stack_dir: Path = PROJECT_DIR) -> int:
    """The CLI. ``config`` (a stack file's ``config:`` block) stands in for ``Pulumi.STACK.yaml``;
    without it the stack file is read from ``stack_dir``."""
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
    parser.add_argument("--fail-on-findings", action="store_true",
                        help="with --render-charts: exit 3 when the deployability check finds errors")
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
        stack_config = config if config is not None else mockrun.load_stack_file(args.stack, stack_dir)
    except (StackFileError, ConfigError) as error:
        print(f"error: stack {args.stack}: {error}", file=sys.stderr)
        return 2

    try:
        with mockrun.owned_event_loops():
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
    # Tenants' quotas are shown as the chart will merge them, when the chart cache holds the chart.
    with ChartValues(args.chart_cache) as charts:
        files = [(PLAN_FILE, render_plan_json(plan)), (SUMMARY_FILE, render_summary(plan, charts))]
    out.mkdir(parents=True, exist_ok=True)
    rendered = None
    # Read before rendering: the old plan may live in the folder this run writes to.
    old_manifests = read_manifests(args.diff_against.parent / MANIFESTS_DIR) if old_plan is not None else {}
    if args.render_charts:
        try:
            # Rendering and checking need the dev requirements (helm-python-sdk, jsonschema,
            # kubernetes-validate); a plain plan needs only requirements.txt.
            from tools.deployability import check as deployability
            from tools.deployability.findings import ERROR
            from tools.deployability.inputs import helm_kube_version
        except ModuleNotFoundError as error:
            print(f"error: --render-charts needs {error.name}: pip install -r requirements-dev.txt", file=sys.stderr)
            return 2
        try:
            rendered = render_plan_releases(plan["resources"], args.chart_cache, out, stack=args.stack,
                                            kube_version=helm_kube_version(plan))
        except ChartError as error:
            print(f"error: stack {args.stack}: {error}", file=sys.stderr)
            return 2
        site, checked, findings = deployability.check_plan(plan, rendered, out, args.chart_cache)
        with ChartValues(args.chart_cache) as charts:
            files[1] = (SUMMARY_FILE, render_summary(plan, charts, chart_objects(rendered, out, plan)))
        files.append((DEPLOYABILITY_FILE, deployability.render_report(findings, site, checked, rendered["releases"])))
    if old_plan is not None:
        diff = diff_plans(old_plan, plan)
        diff.running_site = pulumi_findings(diff, old_plan, plan, args.chart_cache)
        if rendered is not None and old_manifests:
            new_manifests = read_manifests(out / MANIFESTS_DIR)
            diff.manifests = manifest_changes(old_manifests, new_manifests)
            # A CRD a chart version change already reported is not reported again, nor an object a vCluster's
            # upgrade to another store removes.
            known = {(finding.category, finding.subject) for finding in diff.running_site}
            moved = moved_store_releases(old_plan, plan)
            diff.running_site += [finding for finding in chart_findings(old_manifests, new_manifests)
                                  if (finding.category, finding.subject) not in known
                                  and not told_by_store_change(finding, moved)]
            diff.charts_checked = True
        mismatch = other_stack(old_plan, plan)
        if mismatch:
            print(f"warning: {mismatch}.", file=sys.stderr)
        diff_text = render_diff(diff, str(args.diff_against), f"{args.stack} (this run)", mismatch)
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
    for warning in plan["warnings"]:
        print(f"  warning: {warning}")
    for note in plan["notes"]:
        print(f"  note: {note}")
    if rendered is not None:
        print(f"rendered {len(rendered['releases'])} releases for Kubernetes {rendered['kubeVersion']} -> "
              f"{_shown(out / MANIFESTS_DIR)}")
        errors = [finding for finding in findings if finding.severity == ERROR]
        print(f"deployability: {len(errors)} errors, {len(findings) - len(errors)} warnings and notes "
              f"-> {_shown(out / DEPLOYABILITY_FILE)}")
        for finding in errors:
            print(f"  {finding}")
    if old_plan is not None:
        print()
        print(diff_text, end="")
    if args.fail_on_findings and rendered is not None and errors:
        return 3
    return 0


def chart_objects(rendered: dict[str, Any], out: Path, plan: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The rendered charts' objects as (release, manifest) pairs, for the summary."""
    from tools.deployability.inputs import rendered_objects
    return [(obj.release.name if obj.release else "?", obj.manifest)
            for obj in rendered_objects(rendered, out, plan["resources"])]
