"""ops.usage against a real Prometheus server on 127.0.0.1, backfilled with synthetic series.

The story, 2026-11-01 00:00 to 02:00 UTC, one sample a minute (plus loud samples just outside the window,
which must not count):
- alpha holds a whole GPU (allocated 1) for the first hour, 50% busy, then nothing; quota 0.25. DCGM still maps
  the GPU, idle, to alpha's pod in the second hour: held counts what DCGM sees, allocated what KAI counts.
- beta holds 1 GPU for both hours, 25% busy; quota 0.25.
- gamma gets a quarter GPU for the last half hour only; quota 0.5; it has no GPU of its own in DCGM.
Hand-computed GPU-hours:
  team   quota  allocated  borrowed  held  used
  alpha  0.5    1.0        0.75      2.0   0.5
  beta   0.5    2.0        1.5       2.0   0.5
  gamma  1.0    0.125      0         0     0
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timezone

import pytest

from ops import usage
from tests.local_prometheus import (
    OpenMetrics, backfilled_prometheus, free_port, needs_prometheus_and_promtool, queue_labels, team_info_labels,
)

pytestmark = needs_prometheus_and_promtool

START = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp())
# Samples from 10 minutes before the window to 10 minutes after it.
TIMELINE = range(-10, 131)
TEAMS = ("alpha", "beta", "gamma")
EXPECTED = {
    "alpha": {"quota_gpu_hours": 0.5, "allocated_gpu_hours": 1.0, "borrowed_gpu_hours": 0.75, "held_gpu_hours": 2.0,
              "used_gpu_hours": 0.5},
    "beta": {"quota_gpu_hours": 0.5, "allocated_gpu_hours": 2.0, "borrowed_gpu_hours": 1.5, "held_gpu_hours": 2.0,
             "used_gpu_hours": 0.5},
    "gamma": {"quota_gpu_hours": 1.0, "allocated_gpu_hours": 0.125, "borrowed_gpu_hours": 0.0, "held_gpu_hours": 0.0,
              "used_gpu_hours": 0.0},
}


def outside(minute: int) -> bool:
    return minute < 0 or minute >= 120


def allocated(team: str, minute: int) -> float:
    if outside(minute):
        return 5  # loud: counted only if the window leaks
    return {"alpha": 1 if minute < 60 else 0, "beta": 1, "gamma": 0.25 if minute >= 90 else 0}[team]


def utilisation(namespace: str, minute: int) -> float:
    if outside(minute):
        return 100
    return {"vcluster-alpha": 50 if minute < 60 else 0, "vcluster-beta": 25, "kai-resource-reservation": 90}[namespace]


def openmetrics() -> str:
    series = OpenMetrics(START, TIMELINE)
    quotas = {"alpha": 0.25, "beta": 0.25, "gamma": 0.5, "ml-org": 1, "default-queue": 0}
    series.family("kai_queue_deserved_gpus", [(queue_labels(q), lambda m, v=v: v) for q, v in quotas.items()])
    series.family("kai_queue_allocated_gpus",
                  [(queue_labels(team), lambda m, t=team: allocated(t, m)) for team in TEAMS]
                  + [(queue_labels("ml-org"), lambda m: 3), (queue_labels("default-queue"), lambda m: 1)])
    series.family("DCGM_FI_DEV_GPU_UTIL", [
        (f'UUID="GPU-{ns}",gpu="0",Hostname="node-1",namespace="{ns}",pod="p"', lambda m, n=ns: utilisation(n, m))
        for ns in ("vcluster-alpha", "vcluster-beta", "kai-resource-reservation")])
    series.family("gpu_tenancy_team_info", [(team_info_labels(team), lambda m: 1) for team in TEAMS])
    return series.text()


@pytest.fixture(scope="module")
def prometheus_url(tmp_path_factory):
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus"), openmetrics()) as url:
        yield url


def run_tool(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    return usage.main(list(args), out=out), out.getvalue()


def test_csv_matches_hand_computed_gpu_hours(prometheus_url):
    code, text = run_tool("--prometheus", prometheus_url, "--from", "2026-11-01T00:00:00Z",
                          "--to", "2026-11-01T02:00:00Z", "--csv")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(text)))
    assert sorted(rows[0]) == sorted(usage.COLUMNS)
    # Columns the report wrote before the held GPU-hours keep their positions: held comes last.
    assert list(rows[0]) == [*(name for name in usage.COLUMNS if name != "held_gpu_hours"), "held_gpu_hours"]
    assert [row["team"] for row in rows] == list(TEAMS), "only teams, never ml-org or KAI's default-queue"
    for row in rows:
        for column, expected in EXPECTED[row["team"]].items():
            assert float(row[column]) == pytest.approx(expected, abs=1e-9), (row["team"], column)
    assert float(rows[0]["utilisation"]) == pytest.approx(0.5)
    assert float(rows[1]["utilisation"]) == pytest.approx(0.25)


def test_a_sub_window_counts_only_its_own_samples(prometheus_url):
    """00:30 to 01:30: alpha held its GPU for the first half hour only; gamma got nothing yet."""
    code, text = run_tool("--prometheus", prometheus_url, "--from", "2026-11-01T00:30:00+00:00",
                          "--to", "2026-11-01T01:30:00Z", "--csv")
    assert code == 0
    rows = {row["team"]: row for row in csv.DictReader(io.StringIO(text))}
    assert float(rows["alpha"]["allocated_gpu_hours"]) == pytest.approx(0.5)
    assert float(rows["alpha"]["used_gpu_hours"]) == pytest.approx(0.25)
    assert float(rows["beta"]["allocated_gpu_hours"]) == pytest.approx(1.0)
    assert float(rows["gamma"]["allocated_gpu_hours"]) == pytest.approx(0.0)
    assert float(rows["gamma"]["quota_gpu_hours"]) == pytest.approx(0.5)


def test_table_output_lists_teams_and_totals(prometheus_url):
    code, text = run_tool("--prometheus", prometheus_url, "--from", "2026-11-01T00:00:00Z",
                          "--to", "2026-11-01T02:00:00Z")
    assert code == 0
    lines = text.splitlines()
    assert lines[0].startswith("GPU usage per team, 2026-11-01T00:00:00+00:00 to 2026-11-01T02:00:00+00:00")
    total = lines[-1].split()
    assert total[0] == "total" and [float(x) for x in total[1:6]] == [2.0, 3.125, 2.25, 4.0, 1.0]


def test_no_kai_data_in_the_window_is_a_clear_error(prometheus_url, capsys):
    code, _ = run_tool("--prometheus", prometheus_url, "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-02T00:00:00Z")
    assert code == 2
    assert "has no KAI queue metrics (kai_queue_allocated_gpus)" in capsys.readouterr().err


def test_unreachable_prometheus_is_a_clear_error(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code, _ = run_tool("--prometheus", url, "--from", "2026-11-01T00:00:00Z", "--to", "2026-11-02T00:00:00Z")
    assert code == 2
    assert f"cannot reach Prometheus at {url}" in capsys.readouterr().err


@pytest.mark.parametrize("start, end, words", [
    ("yesterday", "2026-11-02T00:00:00Z", "not an ISO 8601 date"),
    ("2026-11-02T00:00:00Z", "2026-11-01T00:00:00Z", "--to must be at least"),
])
def test_bad_dates_are_refused_before_any_query(start, end, words, capsys):
    code, _ = run_tool("--prometheus", "http://127.0.0.1:9", "--from", start, "--to", end)
    assert code == 2
    assert words in capsys.readouterr().err


def test_a_window_reaching_back_past_the_history_is_refused_naming_where_it_begins(prometheus_url, capsys):
    """Prometheus drops old history (observability.retention, or 80% of its volume): a report reaching further back
    would count too few hours. The synthetic history begins ten minutes before 2026-11-01."""
    code, _ = run_tool("--prometheus", prometheus_url, "--from", "2026-10-31T22:00:00Z", "--to", "2026-11-01T02:00:00Z")
    assert code == 2
    error = capsys.readouterr().err
    assert "from 2026-10-31T23:50:00+00:00 only, after --from 2026-10-31T22:00:00+00:00" in error
    assert "--from 2026-10-31T23:50:00+00:00" in error and "--partial" in error


def test_partial_reports_what_is_there_and_says_where_it_begins(prometheus_url, capsys):
    code, text = run_tool("--prometheus", prometheus_url, "--from", "2026-10-31T22:00:00Z",
                          "--to", "2026-11-01T02:00:00Z", "--partial")
    assert code == 0
    assert text.splitlines()[1] == ("Partial: Prometheus' history begins at 2026-10-31T23:50:00+00:00; nothing before "
                                    "it is counted")
    assert "history begins at 2026-10-31T23:50:00+00:00" in capsys.readouterr().err


def test_a_window_the_history_covers_is_not_partial(prometheus_url):
    """From the history's own first minute, or later: nothing is missing."""
    for start in ("2026-10-31T23:50:00Z", "2026-11-01T00:00:00Z"):
        code, text = run_tool("--prometheus", prometheus_url, "--from", start, "--to", "2026-11-01T02:00:00Z")
        assert code == 0 and "Partial" not in text, start


def test_a_window_ending_after_now_is_refused_before_any_query_naming_partial(capsys):
    # A trial billed the first 7 days of December as the whole month, with no word.
    out = io.StringIO()
    now = datetime(2026, 12, 7, 12, tzinfo=timezone.utc)
    assert usage.main(["--prometheus", "http://127.0.0.1:9", "--from", "2026-12-01T00:00:00Z",
                       "--to", "2027-01-01T00:00:00Z"], out=out, now=now) == 2
    error = capsys.readouterr().err
    assert "--to 2027-01-01T00:00:00+00:00 is after now (2026-12-07T12:00:00+00:00)" in error and "--partial" in error


def test_partial_counts_a_window_ending_after_now_and_says_so(prometheus_url, capsys):
    out = io.StringIO()
    now = datetime(2026, 11, 1, 1, tzinfo=timezone.utc)
    assert usage.main(["--prometheus", prometheus_url, "--from", "2026-11-01T00:00:00Z", "--to",
                       "2026-11-01T02:00:00Z", "--partial"], out=out, now=now) == 0
    assert ("Partial: the window ends after the report was made (2026-11-01T01:00:00+00:00); nothing after it is "
            "counted") in out.getvalue().splitlines()
    assert "--to is after now" in capsys.readouterr().err
