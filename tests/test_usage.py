"""ops.usage against a real Prometheus server on 127.0.0.1, backfilled with synthetic series.

The story, 2026-11-01 00:00 to 02:00 UTC, one sample a minute (plus loud samples just outside the window,
which must not count):
- alpha holds a whole GPU (allocated 1) for the first hour, 50% busy, then nothing; quota 0.25.
- beta holds 1 GPU for both hours, 25% busy; quota 0.25.
- gamma gets a quarter GPU for the last half hour only; quota 0.5; it has no GPU of its own in DCGM.
Hand-computed GPU-hours:
  team   quota  allocated  borrowed  used
  alpha  0.5    1.0        0.75      0.5
  beta   0.5    2.0        1.5       0.5
  gamma  1.0    0.125      0         0
"""

from __future__ import annotations

import contextlib
import csv
import io
import shutil
import socket
import subprocess
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

import pytest

from ops import usage

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(PROMETHEUS is None or PROMTOOL is None,
                                reason="prometheus/promtool are not on $PATH (Debian package prometheus; .ci/run installs it)")

START = int(datetime(2026, 11, 1, tzinfo=timezone.utc).timestamp())
MINUTE = 60
# Samples from 10 minutes before the window to 10 minutes after it.
TIMELINE = range(-10, 131)
TEAMS = ("alpha", "beta", "gamma")
EXPECTED = {
    "alpha": {"quota_gpu_hours": 0.5, "allocated_gpu_hours": 1.0, "borrowed_gpu_hours": 0.75, "used_gpu_hours": 0.5},
    "beta": {"quota_gpu_hours": 0.5, "allocated_gpu_hours": 2.0, "borrowed_gpu_hours": 1.5, "used_gpu_hours": 0.5},
    "gamma": {"quota_gpu_hours": 1.0, "allocated_gpu_hours": 0.125, "borrowed_gpu_hours": 0.0, "used_gpu_hours": 0.0},
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
    lines = []

    def family(name: str, series: list[tuple[str, callable]]):
        lines.append(f"# TYPE {name} gauge")
        for labels, value in series:
            for minute in TIMELINE:
                lines.append(f"{name}{{{labels}}} {value(minute):g} {START + minute * MINUTE}")

    def queue(name: str) -> str:
        return f'queue_name="{name}",queue_metadata_name="{name}",queue_display_name="{name}",job="queue-controller"'

    quotas = {"alpha": 0.25, "beta": 0.25, "gamma": 0.5, "ml-org": 1, "default-queue": 0}
    family("kai_queue_deserved_gpus", [(queue(q), lambda m, v=v: v) for q, v in quotas.items()])
    family("kai_queue_allocated_gpus",
           [(queue(team), lambda m, t=team: allocated(t, m)) for team in TEAMS]
           + [(queue("ml-org"), lambda m: 3), (queue("default-queue"), lambda m: 1)])
    family("DCGM_FI_DEV_GPU_UTIL", [
        (f'UUID="GPU-{ns}",gpu="0",Hostname="node-1",namespace="{ns}",pod="p"', lambda m, n=ns: utilisation(n, m))
        for ns in ("vcluster-alpha", "vcluster-beta", "kai-resource-reservation")])
    family("gpu_tenancy_team_info", [
        (f'team="{team}",queue_name="{team}",namespace="vcluster-{team}",policy="gpu-tenancy-{team}"', lambda m: 1)
        for team in TEAMS])
    return "\n".join(lines) + "\n# EOF\n"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def backfilled_prometheus(root: Path, series: str) -> Iterator[str]:
    """A real Prometheus on 127.0.0.1 serving ``series`` (OpenMetrics text) backfilled with promtool; its URL."""
    (root / "series.om").write_text(series)
    data = root / "data"
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(root / "series.om"), str(data)],
                   check=True, capture_output=True, timeout=120)
    (root / "prometheus.yml").write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n")
    port = _free_port()
    log = (root / "prometheus.log").open("w")
    server = subprocess.Popen(
        [PROMETHEUS, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=100y"],
        stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not start: {(root / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


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
    assert list(rows[0]) == list(usage.COLUMNS)
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
    assert total[0] == "total" and [float(x) for x in total[1:5]] == [2.0, 3.125, 2.25, 1.0]


def test_no_kai_data_in_the_window_is_a_clear_error(prometheus_url, capsys):
    code, _ = run_tool("--prometheus", prometheus_url, "--from", "2025-01-01T00:00:00Z", "--to", "2025-01-02T00:00:00Z")
    assert code == 2
    assert "has no KAI queue metrics (kai_queue_allocated_gpus)" in capsys.readouterr().err


def test_unreachable_prometheus_is_a_clear_error(capsys):
    url = f"http://127.0.0.1:{_free_port()}"
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
