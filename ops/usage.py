"""GPU-hours per team for chargeback, read from the platform's Prometheus.

    python -m ops.usage --prometheus http://localhost:9090 --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z
    python -m ops.usage --prometheus URL --from DATE --to DATE --csv > november.csv

Per team (team = vCluster = host namespace = KAI leaf queue) over [from, to):
- quota_gpu_hours: the GPU guarantee kept for the team (KAI's deserved GPUs), integrated over time;
- allocated_gpu_hours: GPUs KAI allocated to the team's pods, fractions as fractions;
- borrowed_gpu_hours: the part of the allocation above the quota (surplus lent by other teams);
- held_gpu_hours: GPUs the team's pods held as the node sees them: those DCGM maps to its pods (shares of shared
  GPUs as shares), plus those its ordinary init containers were given and its containers do not reuse, until
  the pod ends, which DCGM maps to no pod, plus the shares of its pods with fractions of several GPUs, which no
  GPU group joins to DCGM;
- used_gpu_hours: measured busy time (DCGM utilisation) of the whole GPUs mapped to the team's pods, plus,
  for GPUs shared under KAI fractions, each of its pods' share of that GPU's busy time (docs/observability-charging.md);
- utilisation: used / allocated.

A window that reaches back past the history Prometheus still holds is refused (``--partial`` counts from where
it begins). Each figure is the sum of one sample per ``--step`` (left end of each step, so [from, to) is counted once
whatever the range semantics of the Prometheus version) times the step in hours. The step is at most the
platform's scrape interval (30 s), so every scrape is held by a sample: a pod Prometheus saw is charged. A pod
that lives wholly between two scrapes is seen by no one (docs/observability-charging.md). The team join uses the
``gpu_tenancy_team_info`` series the platform's PrometheusRule records; the expressions are the recording
rules' own (components/observability_rules.py).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional, Sequence, TextIO

from components import observability_rules as rules
from config.observability import RETENTION_SIZE_SHARE, SCRAPE_INTERVAL_SECONDS

COLUMNS = ("team", "quota_gpu_hours", "allocated_gpu_hours", "borrowed_gpu_hours", "held_gpu_hours", "used_gpu_hours",
           "utilisation")
# The CSV keeps the columns of earlier reports where they were and adds new ones at the end, so a sheet that reads
# them by position keeps reading the same figures.
CSV_COLUMNS = ("team", "quota_gpu_hours", "allocated_gpu_hours", "borrowed_gpu_hours", "used_gpu_hours", "utilisation",
               "held_gpu_hours")
TIMEOUT_SECONDS = 30


class UsageError(Exception):
    """A problem the user can fix: bad dates, an unreachable Prometheus, no KAI data."""


@dataclass(frozen=True)
class TeamUsage:
    team: str
    quota_gpu_hours: float
    allocated_gpu_hours: float
    borrowed_gpu_hours: float
    held_gpu_hours: float
    used_gpu_hours: float

    @property
    def utilisation(self) -> Optional[float]:
        return self.used_gpu_hours / self.allocated_gpu_hours if self.allocated_gpu_hours > 0 else None

    def row(self) -> dict[str, str]:
        values = {name: getattr(self, name) for name in CSV_COLUMNS}
        return {name: value if isinstance(value, str) else "" if value is None else f"{value:.4f}"
                for name, value in values.items()}


def parse_time(text: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00") if text.endswith("Z") else text)
    except ValueError:
        raise UsageError(f"{option} {text!r} is not an ISO 8601 date; write it as 2026-11-01T00:00:00Z") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _expressions() -> dict[str, str]:
    recorded = {rule["record"]: rule["expr"] for rule in rules.recording_rules()}
    quota, allocated = f"clamp_min({recorded[rules.QUOTA]}, 0)", recorded[rules.ALLOCATED]
    return {
        "quota_gpu_hours": quota,
        "allocated_gpu_hours": allocated,
        "borrowed_gpu_hours": f"clamp_min({allocated} - {quota}, 0)",
        "held_gpu_hours": recorded[rules.HELD],
        "used_gpu_hours": recorded[rules.USED],
    }


class Prometheus:
    def __init__(self, url: str):
        self.url = url.rstrip("/")

    def query(self, expr: str, at: float) -> list[dict]:
        body = urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"}).encode()
        request = urllib.request.Request(f"{self.url}/api/v1/query", data=body, method="POST",
                                         headers={"Content-Type": "application/x-www-form-urlencoded"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
                answer = json.load(response)
        except urllib.error.HTTPError as error:
            try:
                detail = json.load(error).get("error", error.reason)
            except (ValueError, AttributeError):
                detail = error.reason
            raise UsageError(f"Prometheus at {self.url} refused the query ({error.code}): {detail}") from None
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise UsageError(f"cannot reach Prometheus at {self.url}: {reason}. Check --prometheus (for an "
                             "in-cluster Prometheus: kubectl -n monitoring port-forward "
                             "svc/kube-prometheus-stack-prometheus 9090)") from None
        except ValueError:
            raise UsageError(f"{self.url} did not answer like a Prometheus API (no JSON)") from None
        if answer.get("status") != "success":
            raise UsageError(f"Prometheus at {self.url} failed the query: {answer.get('error', answer)}")
        return answer["data"]["result"]


def evaluation_time(end: datetime, step_seconds: int) -> float:
    """When the report evaluates its sums. Samples sit at multiples of the step; evaluating half a step early puts
    every range boundary between two samples, so [from, to) holds the same samples under closed and left-open
    range semantics."""
    return end.timestamp() - step_seconds / 2


def hours_query(expr: str, start: datetime, end: datetime, step_seconds: int) -> str:
    """GPU-hours over [start, end) of a GPU-count expression: one sample per step, each held for the step."""
    range_ = f"{int((end - start).total_seconds() * 1000)}ms"
    return f"sum_over_time(({expr})[{range_}:{step_seconds}s]) * {step_seconds} / 3600"


def report(prometheus: Prometheus, start: datetime, end: datetime,
           step_seconds: int = SCRAPE_INTERVAL_SECONDS) -> list[TeamUsage]:
    if step_seconds > SCRAPE_INTERVAL_SECONDS:
        # The samples sit on whole multiples of the step (UTC), which anyone can predict, and each holds the
        # latest scrape before it: with a longer step, pods present at the scrapes no sample holds, and replaced
        # in between, would be charged nothing although Prometheus saw them.
        raise UsageError(f"--step {step_seconds} is longer than the {SCRAPE_INTERVAL_SECONDS}s the platform scrapes "
                         f"at: every scrape between two samples would go uncounted, so pods seen only there would be "
                         f"charged nothing. Use --step {SCRAPE_INTERVAL_SECONDS} (the default) or less")
    window = (end - start).total_seconds()
    if window < step_seconds:
        raise UsageError(f"--to must be at least {step_seconds}s after --from (got {start.isoformat()} to "
                         f"{end.isoformat()})")
    range_ = f"{int(window * 1000)}ms"
    end_ts = end.timestamp()
    if not prometheus.query(f"count(count_over_time(kai_queue_allocated_gpus[{range_}]))", end_ts):
        raise UsageError(f"Prometheus at {prometheus.url} has no KAI queue metrics (kai_queue_allocated_gpus) "
                         f"between {start.isoformat()} and {end.isoformat()}: is KAI's queue controller scraped "
                         "(observability.prometheus), and was the platform running then?")
    if not prometheus.query(f"count(count_over_time({rules.TEAM_INFO}[{range_}]))", end_ts):
        raise UsageError(f"Prometheus at {prometheus.url} has KAI data but no {rules.TEAM_INFO} series between "
                         f"{start.isoformat()} and {end.isoformat()}: the platform's PrometheusRule (which maps "
                         "queues and namespaces to teams) is not loaded")
    at = evaluation_time(end, step_seconds)
    figures: dict[str, dict[str, float]] = {}
    for column, expr in _expressions().items():
        for sample in prometheus.query(hours_query(expr, start, end, step_seconds), at):
            team = sample["metric"].get("team")
            if team:
                figures.setdefault(team, {})[column] = float(sample["value"][1])
    return [TeamUsage(team=team, **{column: values.get(column, 0.0) for column in _expressions()})
            for team, values in sorted(figures.items())]


def history_start(prometheus: Prometheus, start: datetime, end: datetime,
                  step_seconds: int = SCRAPE_INTERVAL_SECONDS) -> Optional[datetime]:
    """When the platform's history in Prometheus begins, if that is more than a step after ``start``; None when it
    reaches back to ``start``. Prometheus drops its oldest blocks at ``observability.retention`` or once its data
    fills its share of the volume (``retentionSize``), and a report reaching further back would count too few hours."""
    range_ = f"{int((end - start).total_seconds() * 1000)}ms"
    # Per subquery step, the time of the team series' latest sample (within the lookback): the least is the
    # first sample in the window, or one just before it when the history reaches that far.
    found = prometheus.query(f"min(min_over_time(timestamp({rules.TEAM_INFO})[{range_}:{step_seconds}s]))",
                             end.timestamp() - step_seconds / 2)
    if not found:
        return None
    earliest = float(found[0]["value"][1])
    return datetime.fromtimestamp(earliest, timezone.utc) if earliest > start.timestamp() + step_seconds else None


def write_csv(usages: list[TeamUsage], out: TextIO) -> None:
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for usage in usages:
        writer.writerow(usage.row())


def write_table(usages: list[TeamUsage], start: datetime, end: datetime, out: TextIO,
                history_from: Optional[datetime] = None, now: Optional[datetime] = None) -> None:
    out.write(f"GPU usage per team, {start.isoformat()} to {end.isoformat()} (GPU-hours)\n")
    if history_from is not None:
        out.write(f"Partial: Prometheus' history begins at {history_from.isoformat()}; nothing before it is counted\n")
    if now is not None and end > now:
        out.write(f"Partial: the window ends after the report was made ({now.isoformat()}); nothing after it is "
                  "counted\n")
    headers = ("team", "quota", "allocated", "borrowed", "held", "used", "utilisation")
    rows = [[usage.team, *(f"{getattr(usage, name):.3f}" for name in COLUMNS[1:-1]),
             "-" if usage.utilisation is None else f"{usage.utilisation:.0%}"] for usage in usages]
    totals = ["total", *(f"{sum(getattr(u, name) for u in usages):.3f}" for name in COLUMNS[1:-1]), ""]
    widths = [max(len(str(row[i])) for row in [headers, *rows, totals]) for i in range(len(headers))]
    for row in [headers, *rows, totals]:
        out.write("  ".join(str(cell).ljust(width) if i == 0 else str(cell).rjust(width)
                            for i, (cell, width) in enumerate(zip(row, widths))).rstrip() + "\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ops.usage",
        description="GPU-hours quota, allocated, borrowed, held and used per team, from the platform's Prometheus.",
        epilog="example:\n  python -m ops.usage --prometheus http://localhost:9090 "
               "--from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z --csv",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prometheus", metavar="URL", required=True, help="Prometheus base URL")
    parser.add_argument("--from", dest="start", metavar="DATE", required=True,
                        help="start, ISO 8601 (2026-11-01T00:00:00Z); UTC when no offset is given")
    parser.add_argument("--to", dest="end", metavar="DATE", required=True, help="end (excluded), ISO 8601")
    parser.add_argument("--csv", action="store_true", help="one CSV row per team on standard output")
    parser.add_argument("--step", metavar="SECONDS", type=int, default=SCRAPE_INTERVAL_SECONDS,
                        help=f"sampling step (default and most {SCRAPE_INTERVAL_SECONDS}, the platform's scrape "
                             "interval: a longer step would skip scrapes; an external Prometheus that scrapes more "
                             "often needs its own interval)")
    parser.add_argument("--partial", action="store_true",
                        help="report even when Prometheus' history begins after --from, or --to is after now "
                             "(counting what is there)")
    return parser


def main(argv: Optional[Sequence[str]] = None, out: TextIO = sys.stdout, now: Optional[datetime] = None) -> int:
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help, or a usage error argparse already printed
        return exit_.code if isinstance(exit_.code, int) else 2
    now = now or datetime.now(timezone.utc)
    try:
        start, end = parse_time(args.start, "--from"), parse_time(args.end, "--to")
        if args.step < 1:
            raise UsageError(f"--step {args.step} must be a positive number of seconds")
        if end > now and not args.partial:
            # A month's bill run before the month ends would count its days so far as the whole month.
            raise UsageError(f"--to {end.isoformat()} is after now ({now.isoformat()}): the hours after now have not "
                             "happened, so the report would count too few for the window it names. Report to a time "
                             "already past, or pass --partial to count what is there")
        prometheus = Prometheus(args.prometheus)
        # report() refuses a bad window before any query; the history check needs a good one.
        usages = report(prometheus, start, end, args.step)
        history_from = history_start(prometheus, start, end, args.step)
        if history_from is not None and not args.partial:
            raise UsageError(
                f"Prometheus at {prometheus.url} holds the platform's history from {history_from.isoformat()} only, "
                f"after --from {start.isoformat()}: the hours before it are gone (Prometheus keeps "
                f"observability.retention, and at most {RETENTION_SIZE_SHARE:.0%} of observability.storage), so the "
                f"report would count too few. Report from --from {history_from.isoformat()}, or pass --partial to "
                "count what is there")
    except UsageError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if history_from is not None:
        print(f"warning: Prometheus' history begins at {history_from.isoformat()}, after --from; nothing before it "
              "is counted", file=sys.stderr)
    if end > now:
        print(f"warning: --to is after now ({now.isoformat()}); nothing after now is counted", file=sys.stderr)
    if args.csv:
        write_csv(usages, out)
    else:
        write_table(usages, start, end, out, history_from, now)
    return 0


if __name__ == "__main__":
    sys.exit(main())
