"""MIG slices in ops.usage and the dashboards' figures, against a real Prometheus backfilled by promtool.

The series are what the cluster exports. dcgm-exporter (4.5.3-4.8.2) reports each GPU instance of a MIG-split
card with the card's ``gpu`` and ``UUID`` plus ``GPU_I_PROFILE`` and ``GPU_I_ID`` (rendermetrics), mapped to
the pod holding it; the card itself (no instance labels) is mapped to no pod. KAI's queue controller counts
a slice in compute slices (config/mig.py).

The day, 2026-11-03 UTC, one sample a minute (plus loud samples just outside the day, which must not count):
- GPU m (an H100 split ``all-balanced``: 2 x 1g.10gb, 1 x 2g.20gb, 1 x 3g.40gb). alpha holds both 1g slices,
  each 50% busy; beta holds the 3g slice, 20% busy; the 2g slice is idle and held by nobody. The card's own
  series says 90% busy.
- gamma holds whole GPU w, 75% busy.
Hand-computed (KAI units: a 3g slice is 3):
  team   allocated      used                    held
  alpha  24 * 2 = 48    24 * (0.5 + 0.5) = 24   2
  beta   24 * 3 = 72    24 * 3 * 0.2 = 14.4     3
  gamma  24             24 * 0.75 = 18          1
  present: 1 whole GPU + 1 + 1 + 2 + 3 slices = 8 (the card is not counted again as a whole GPU).
"""

from __future__ import annotations

import csv
import io
from typing import Optional

import pytest

from components import observability_dashboards as dashboards
from components import observability_rules as rules
from components import observability_team_series as team_series
from ops import usage
from ops.sites import platform_of
from tests.conftest import dev_config
from tests.local_prometheus import (
    OpenMetrics, backfilled_prometheus, needs_prometheus_and_promtool, queue_labels, team_info_labels,
)
from tests.test_usage import START, run_tool

pytestmark = needs_prometheus_and_promtool

DAY = 24 * 60
TIMELINE = range(-10, DAY + 11)
FIRST = START + 2 * 86400
EXPECTED = {
    "alpha": {"allocated_gpu_hours": 48.0, "used_gpu_hours": 24.0, "quota_gpu_hours": 48.0},
    "beta": {"allocated_gpu_hours": 72.0, "used_gpu_hours": 14.4, "quota_gpu_hours": 72.0},
    "gamma": {"allocated_gpu_hours": 24.0, "used_gpu_hours": 18.0, "quota_gpu_hours": 24.0},
}
# (GPU_I_ID, profile, namespace of the holding pod or None, busy ratio) of GPU m's instances.
SLICES = (
    ("7", "1g.10gb", "vcluster-alpha", 0.5),
    ("8", "1g.10gb", "vcluster-alpha", 0.5),
    ("3", "2g.20gb", None, 0.0),
    ("2", "3g.40gb", "vcluster-beta", 0.2),
)


def inside(minute: int) -> bool:
    return 0 <= minute < DAY


def openmetrics() -> str:
    series = OpenMetrics(FIRST, TIMELINE)

    def family(name: str, constants: list[tuple[str, float]]) -> None:
        # Each series holds its value through the day and is loud just outside it.
        series.family(name, [(labels, lambda minute, v=value: v if inside(minute) else 7 * v + 1)
                             for labels, value in constants])

    for metric in ("kai_queue_deserved_gpus", "kai_queue_allocated_gpus"):
        family(metric, [(queue_labels(team), units) for team, units in (("alpha", 2), ("beta", 3), ("gamma", 1))])

    def card(uuid: str) -> str:
        return f'gpu="0",UUID="{uuid}",pci_bus_id="00000000:10:1C.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",' \
               f'Hostname="node-1"'

    def pod(namespace: Optional[str], name: str) -> str:
        return "" if namespace is None else f',container="main",namespace="{namespace}",pod="{name}"'

    family("DCGM_FI_PROF_GR_ENGINE_ACTIVE", [
        (f'{card("GPU-m")},GPU_I_PROFILE="{profile}",GPU_I_ID="{instance}"{pod(namespace, f"work-{instance}")}', busy)
        for instance, profile, namespace, busy in SLICES] + [(card("GPU-w") + pod("vcluster-gamma", "serve-0"), 0.75)])
    family("DCGM_FI_DEV_GPU_UTIL", [(card("GPU-m"), 90), (card("GPU-w") + pod("vcluster-gamma", "serve-0"), 75)])
    family("gpu_tenancy_team_info", [(team_info_labels(team), 1) for team in ("alpha", "beta", "gamma")])
    return series.text()


@pytest.fixture(scope="module")
def mig_day_url(tmp_path_factory):
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus-mig"), openmetrics()) as url:
        yield url


def recorded(name: str) -> str:
    return next(rule["expr"] for rule in rules.recording_rules() if rule["record"] == name)


def at_noon(url: str, expr: str) -> dict[str, float]:
    samples = usage.Prometheus(url).query(expr, FIRST + DAY * 30)
    return {sample["metric"].get("team", ""): float(sample["value"][1]) for sample in samples}


def test_mig_slices_are_charged_per_instance_in_kai_units(mig_day_url):
    code, text = run_tool("--prometheus", mig_day_url, "--from", "2026-11-03T00:00:00Z", "--to",
                          "2026-11-04T00:00:00Z", "--csv")
    assert code == 0
    rows = {row["team"]: row for row in csv.DictReader(io.StringIO(text))}
    assert set(rows) == set(EXPECTED)
    for team, expected in EXPECTED.items():
        for column, value in expected.items():
            assert float(rows[team][column]) == pytest.approx(value, rel=0.01), (team, column)
    # Busy time and allocation are in the same units, so utilisation stays a ratio of one card's time.
    assert float(rows["alpha"]["utilisation"]) == pytest.approx(0.5, rel=0.01)
    assert float(rows["beta"]["utilisation"]) == pytest.approx(0.2, rel=0.01)


def test_two_slices_of_one_card_held_by_one_team_count_twice(mig_day_url):
    assert at_noon(mig_day_url, recorded(rules.HELD)) == pytest.approx({"alpha": 2, "beta": 3, "gamma": 1})


def test_gpus_present_count_slices_like_the_quotas_they_are_compared_with(mig_day_url):
    assert at_noon(mig_day_url, recorded(rules.PRESENT)) == pytest.approx({"": 8})
    assert at_noon(mig_day_url, recorded(rules.PROMISED).replace(
        rules.QUOTA, recorded(rules.QUOTA))) == pytest.approx({"": 6})


def test_a_team_board_shows_each_slice_its_pods_hold(mig_day_url):
    expr = next(rule["expr"] for rule in team_series.team_series_rules()
                if rule["record"] == team_series.POD_GPU_UTILISATION)
    samples = usage.Prometheus(mig_day_url).query(expr, FIRST + DAY * 30)
    busy = {(s["metric"]["team"], s["metric"]["pod"], s["metric"].get("GPU_I_ID", "")): float(s["value"][1])
            for s in samples}
    assert busy == pytest.approx({("alpha", "work-7", "7"): 50, ("alpha", "work-8", "8"): 50,
                                  ("beta", "work-2", "2"): 20, ("gamma", "serve-0", ""): 75})


def test_the_site_boards_node_panels_count_a_mig_card_once_and_its_slices_busy_time(mig_day_url):
    # DCGM reports no device utilisation for a MIG-split card: the card-level series must not decide it.
    board = dashboards.platform_dashboard(platform_of(dev_config(), stack="dev"))
    queries = {panel["title"]: panel["targets"][0]["expr"] for panel in board["panels"]
               if panel["title"] in ("GPUs per node", "GPU utilisation per node")}
    per_node = {title: usage.Prometheus(mig_day_url).query(expr, FIRST + DAY * 30) for title, expr in queries.items()}
    values = {(title, s["metric"]["Hostname"]): float(s["value"][1]) for title, samples in per_node.items()
              for s in samples}
    card_m = (0.5 * 1 + 0.5 * 1 + 0.0 * 2 + 0.2 * 3) / (1 + 1 + 2 + 3)  # its slices' busy time, in KAI units
    assert values == pytest.approx({("GPUs per node", "node-1"): 2,
                                    ("GPU utilisation per node", "node-1"): 100 * (0.75 + card_m) / 2})
