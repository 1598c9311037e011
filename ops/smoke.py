"""After ``pulumi up``: can each team run a GPU workload in its own queue, and only there?

    python -m ops.smoke SITE [--outputs FILE] [--kubeconfig HOST_KUBECONFIG]
                             [--vcluster-kubeconfig TEAM=FILE ...] [--timeout SECONDS] [--table FILE]

For each team it goes into the team's vCluster with the team's kubeconfig (the stack output
``tenantKubeconfigs``, read with ``pulumi stack output --json --show-secrets``, or ``--outputs`` / a
file per team) and, in a namespace of its own:

1. ``gpu-pod``: the seeds' workload, a pod asking KAI for a GPU in the terms of the team's isolation tier
   (config/gpu_asks.py, from the ``isolation`` of output ``tenants``: a fraction for shared and memory-capped teams,
   one ``nvidia.com/gpu`` for exclusive ones, one ``nvidia.com/mig-<profile>`` for mig ones) and running
   ``nvidia-smi``;
2. ``deployment``: an unmodified Deployment (no queue label, no scheduler name);
3. ``host``: through the host kubeconfig, each lands in the team's host namespace, in the team's
   queue, scheduled by KAI, with the GPU it asked for; the GPU pod ends ``Succeeded`` (nvidia-smi
   found a GPU) and the Deployment's pod runs;
4. ``refusal``: a pod naming another team's queue never runs there: refused inside the vCluster, put in the
   team's own queue by the vCluster's defaults, or refused when vCluster syncs it (the vCluster is the
   tenant's to change, so this step only shows what a member sees);
5. ``host-refusal``: the boundary itself, with the host kubeconfig: that pod as the team's syncer writes it
   (with the vCluster's defaults the host's other rules ask for, so that its queue is all that is wrong), sent as
   the syncer (impersonated, server-side dry run: nothing is created), is refused by the team's host admission
   policy with ``[own-queue]``. It runs for teams without an endpoint too;
6. ``cleanup``: the namespace is deleted, also after a failure.

Whether a pod runs is read from its host copy, which the tenant cannot write.

It prints a table per team (``--table`` also writes it as Markdown) and exits 1 if any step failed,
naming the team, the step and the object; 2 when it cannot start (no outputs, bad arguments).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Optional, Sequence

from config.mirrors import Mirrors
from config.vocabulary import SEED_GPU_FRACTION
from ops.smoke_kube import ApiError, Kube
from ops.smoke_team import Report, Settings, TeamSmoke, TeamTarget


def stack_outputs(stack: str) -> dict:
    """The stack's outputs, secrets shown (they stay in this process)."""
    result = subprocess.run(["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"error: pulumi stack output --stack {stack} failed: {result.stderr.strip()}")
    return json.loads(result.stdout)


def targets(outputs: dict, given: dict[str, str]) -> list[TeamTarget]:
    tenants = outputs.get("tenants") or {}
    kubeconfigs = outputs.get("tenantKubeconfigs") or {}
    unknown = sorted(set(given) - set(tenants))
    if unknown:
        raise SystemExit(f"error: --vcluster-kubeconfig names unknown team(s) {', '.join(unknown)} "
                         f"(teams: {', '.join(sorted(tenants))})")
    # A site deployed before the stack exported each team's isolation has none: its teams read as shared.
    return [TeamTarget(team=name, namespace=info["namespace"], queue=info["queue"], vcluster=info["vcluster"],
                       kubeconfig=given.get(name) or kubeconfigs.get(name) or "", given=name in given,
                       isolation=info.get("isolation") or {})
            for name, info in sorted(tenants.items())]


def run_site(outputs: dict, host_kubeconfig: str, settings: Settings, given: Optional[dict[str, str]] = None,
             connect: Callable[..., Kube] = Kube) -> list[Report]:
    teams = targets(outputs, given or {})
    if not teams:
        raise SystemExit("error: the stack outputs list no tenants (output `tenants`)")
    host = connect(host_kubeconfig)
    settings = dataclasses.replace(settings, mirrors=Mirrors(images=outputs.get("imageMirrors") or {}))
    reports = []
    for index, target in enumerate(teams):
        # Another team's queue; a one-team site uses a queue name no team has.
        others = [t.queue for t in teams if t.queue != target.queue]
        other = others[0] if others else f"{target.queue}-smoke-other"
        reports.append(TeamSmoke(target, other, host, settings, connect, host_kubeconfig).run())
    return reports


def render(reports: Sequence[Report]) -> str:
    lines = ["## Smoke test", ""]
    for report in reports:
        lines += report.table()
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ops.smoke", description=__doc__.split("\n\n")[0])
    parser.add_argument("stack", help="the site (Pulumi stack) to test")
    parser.add_argument("--outputs", type=Path, help="stack outputs as JSON (`pulumi stack output --json "
                                                     "--show-secrets`) instead of asking Pulumi")
    parser.add_argument("--kubeconfig", type=Path, help="host kubeconfig (default: the hostKubeconfig output)")
    parser.add_argument("--vcluster-kubeconfig", action="append", default=[], metavar="TEAM=FILE",
                        help="a team's vCluster kubeconfig instead of the tenantKubeconfigs output")
    parser.add_argument("--fraction", default=SEED_GPU_FRACTION,
                        help="GPU fraction the seed pod asks for (shared and memory-capped teams)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds each pod may take to run")
    parser.add_argument("--table", type=Path, help="also write the tables as Markdown to this file")
    args = parser.parse_args(argv)
    # Stopped from outside (a cancelled CI job, `timeout`), the run still ends through its cleanups and the
    # interpreter's exit, where the kubernetes client deletes the certificate and key files it wrote.
    previous = signal.signal(signal.SIGTERM, _exit_on_sigterm)
    try:
        return _main(args, parser)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _exit_on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        outputs = json.loads(args.outputs.read_text()) if args.outputs else stack_outputs(args.stack)
        given = {}
        for entry in args.vcluster_kubeconfig:
            team, sep, path = entry.partition("=")
            if not sep:
                parser.error(f"--vcluster-kubeconfig {entry!r}: write it as TEAM=FILE")
            given[team] = Path(path).read_text()
        host_kubeconfig = args.kubeconfig.read_text() if args.kubeconfig else outputs.get("hostKubeconfig") or ""
        reports = run_site(outputs, host_kubeconfig, Settings(fraction=args.fraction, timeout=args.timeout), given)
    except (OSError, ValueError, ApiError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    text = render(reports)
    print(text)
    if args.table:
        args.table.write_text(text + "\n")
    failed = [(report.team, step) for report in reports for step in report.steps if not step.ok]
    for team, step in failed:
        print(f"FAILED: {team}: step {step.name} on {step.object}: {step.detail}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
