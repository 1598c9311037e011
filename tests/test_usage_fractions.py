"""ops.usage for teams that share a GPU under KAI fractions, against a real Prometheus backfilled by promtool.

The series are what the cluster exports: DCGM maps the shared GPU to KAI's reservation pod (namespace
kai-resource-reservation); kube-state-metrics (with the allowlists of the kube-prometheus-stack values) exports
the pods' GPU group label and fraction annotations; KAI's queue controller reports each queue's allocation.

The day, 2026-11-02 UTC, one sample a minute (plus loud samples just outside the day, which must not count):
- GPU s is shared. Until noon alpha's notebook holds gpu-fraction 0.33 and beta's trainer 0.66, and the GPU is
  60% busy. At noon both finish (kube-state-metrics still lists them, phase Succeeded) and the shares swap:
  alpha's new pod asks gpu-memory 10560 MiB of the 16000 MiB card (0.66), beta's gpu-fraction 0.33; the GPU is
  30% busy.
- gamma holds whole GPU w, 75% busy all day.
- GPU t is shared by delta's two pods, both Pending all day because an init container runs: warmup-1 holds 0.5
  and gave it to its init container (gpu-fraction-container-name: convert), which keeps the GPU 80% busy; fetch-1
  holds 0.25 for its main container while a CPU-only init container downloads.
Hand-computed GPU-hours (each pod is charged its share of the GPU's busy time while the container holding the
share can run):
  team   allocated               used                                     utilisation
  alpha  12*0.33 + 12*0.66 = 11.88  12*0.33*0.6 + 12*0.66*0.3 = 4.752      0.4
  beta   12*0.66 + 12*0.33 = 11.88  12*0.66*0.6 + 12*0.33*0.3 = 5.94       0.5
  gamma  24                         24*0.75 = 18                           0.75
  delta  24*(0.5 + 0.25) = 18       24*0.5*0.8 = 9.6 (fetch-1 not yet)     0.5333
"""

from __future__ import annotations

import csv
import functools
import io
from typing import Callable, Optional

import pytest

from components import observability_shares as shares
from tests.local_prometheus import (
    OpenMetrics, backfilled_prometheus, needs_prometheus_and_promtool, queue_labels, team_info_labels,
)
from tests.test_usage import START, run_tool

pytestmark = needs_prometheus_and_promtool

DAY = 24 * 60
NOON = DAY // 2
TIMELINE = range(-10, DAY + 11)
RESERVATION_POD = "gpu-reservation-node-1-abcde"
INIT_RESERVATION_POD = "gpu-reservation-node-1-fghij"
EXPECTED = {
    "alpha": {"allocated_gpu_hours": 11.88, "used_gpu_hours": 4.752, "utilisation": 0.4,
              "quota_gpu_hours": 12.0, "borrowed_gpu_hours": 12 * 0.16},
    "beta": {"allocated_gpu_hours": 11.88, "used_gpu_hours": 5.94, "utilisation": 0.5,
             "quota_gpu_hours": 12.0, "borrowed_gpu_hours": 12 * 0.16},
    "gamma": {"allocated_gpu_hours": 24.0, "used_gpu_hours": 18.0, "utilisation": 0.75,
              "quota_gpu_hours": 24.0, "borrowed_gpu_hours": 0.0},
    "delta": {"allocated_gpu_hours": 18.0, "used_gpu_hours": 9.6, "utilisation": 9.6 / 18,
              "quota_gpu_hours": 24.0, "borrowed_gpu_hours": 0.0},
}


def inside(minute: int) -> bool:
    return 0 <= minute < DAY


def morning(minute: int) -> bool:
    return minute < NOON


# (namespace, pod, annotations, runs in the morning?) of every fractional pod bound to GPU s.
FRACTIONAL_PODS = (
    ("vcluster-alpha", "nb-1", {"gpu-fraction": "0.33"}, True),
    ("vcluster-beta", "train-1", {"gpu-fraction": "0.66"}, True),
    ("vcluster-alpha", "nb-2", {"gpu-memory": "10560"}, False),
    ("vcluster-beta", "train-2", {"gpu-fraction": "0.33"}, False),
)
# (pod, annotations, its running init container) of delta's pods bound to GPU t, Pending all day.
INITIALISING_PODS = (
    ("warmup-1", {"gpu-fraction": "0.5", "gpu-fraction-container-name": "convert"}, "convert"),
    ("fetch-1", {"gpu-fraction": "0.25"}, "download"),
)


def openmetrics() -> str:
    series = OpenMetrics(START + 86400, TIMELINE)
    family = series.family

    def allocated(team: str, minute: int) -> float:
        if not inside(minute):
            return 5
        return {"alpha": 0.33 if morning(minute) else 0.66, "beta": 0.66 if morning(minute) else 0.33,
                "gamma": 1, "delta": 0.75}[team]

    family("kai_queue_deserved_gpus", [(queue_labels(q), lambda m, v=v: v) for q, v in
                                       {"alpha": 0.5, "beta": 0.5, "gamma": 1, "delta": 1, "ml-org": 3}.items()])
    family("kai_queue_allocated_gpus", [(queue_labels(team), lambda m, t=team: allocated(t, m))
                                        for team in ("alpha", "beta", "gamma", "delta")])

    def gpu(uuid: str, namespace: str, pod: str) -> str:
        return f'UUID="{uuid}",gpu="0",Hostname="node-1",namespace="{namespace}",pod="{pod}",container="main"'

    family("DCGM_FI_DEV_GPU_UTIL", [
        (gpu("GPU-s", shares.RESERVATION_NAMESPACE, RESERVATION_POD),
         lambda m: 100 if not inside(m) else 60 if morning(m) else 30),
        (gpu("GPU-w", "vcluster-gamma", "serve-0"), lambda m: 75 if inside(m) else 100),
        (gpu("GPU-t", shares.RESERVATION_NAMESPACE, INIT_RESERVATION_POD), lambda m: 80 if inside(m) else 100),
    ])
    for field, mib in (("FB_USED", 1000), ("FB_FREE", 14500), ("FB_RESERVED", 500)):
        family(f"DCGM_FI_DEV_{field}", [(gpu("GPU-s", shares.RESERVATION_NAMESPACE, RESERVATION_POD),
                                         lambda m, v=mib: v)])

    def exists(morning_pod: bool) -> Callable[[int], Optional[float]]:
        return lambda m: 1 if morning_pod or not morning(m) else None

    def ids(namespace: str, pod: str) -> str:
        return f'namespace="{namespace}",pod="{pod}",uid="uid-{pod}"'

    pods = [(shares.RESERVATION_NAMESPACE, RESERVATION_POD, {}, True)] + list(FRACTIONAL_PODS)
    initialising = [(shares.RESERVATION_NAMESPACE, INIT_RESERVATION_POD, {})] + [
        ("vcluster-delta", pod, annotations) for pod, annotations, _ in INITIALISING_PODS]
    family("kube_pod_labels", [(f'{ids(ns, pod)},{shares.KSM_GROUP}="grp-s"', exists(early))
                               for ns, pod, _, early in pods] +
           [(f'{ids(ns, pod)},{shares.KSM_GROUP}="grp-t"', lambda m: 1) for ns, pod, _ in initialising])
    family("kube_pod_annotations", [
        (ids(ns, pod) + "".join(f',{shares.ksm_label_name("annotation", key)}="{value}"'
                                for key, value in annotations.items()), exists(early))
        for ns, pod, annotations, early in pods + [(*pod, True) for pod in initialising]])
    family("kube_pod_init_container_status_running", [
        (f'{ids("vcluster-delta", pod)},container="{container}"', lambda m: 1)
        for pod, _, container in INITIALISING_PODS])

    def running(early: bool, phase: str) -> Callable[[int], Optional[float]]:
        # A morning pod runs until noon and stays listed as Succeeded; an afternoon pod runs from noon.
        def value(m: int) -> Optional[float]:
            if not early and morning(m):
                return None
            return float((phase == "Running") == (morning(m) if early else True))
        return value

    family("kube_pod_status_phase", [
        (f'namespace="{ns}",pod="{pod}",phase="{phase}"',
         (lambda m, p=phase: float(p == "Running")) if ns == shares.RESERVATION_NAMESPACE else running(early, phase))
        for ns, pod, _, early in pods for phase in ("Running", "Succeeded")] + [
        (f'namespace="{ns}",pod="{pod}",phase="{phase}"',
         lambda m, p=phase, reservation=ns == shares.RESERVATION_NAMESPACE: float(p == ("Running" if reservation
                                                                                       else "Pending")))
        for ns, pod, _ in initialising for phase in ("Pending", "Running")])
    family("gpu_tenancy_team_info", [(team_info_labels(team), lambda m: 1)
                                     for team in ("alpha", "beta", "gamma", "delta")])
    return series.text()


@pytest.fixture(scope="module")
def shared_day_url(tmp_path_factory):
    with backfilled_prometheus(tmp_path_factory.mktemp("prometheus-fractions"), openmetrics()) as url:
        yield url


@functools.cache
def _report_run(url: str, start: str, end: str) -> tuple[int, str]:
    """The tool's exit code and output for one window of the module's server, which no test changes: three tests
    read the whole day's report, about 8 s of queries each, so it is asked once per worker."""
    return run_tool("--prometheus", url, "--from", start, "--to", end, "--csv")


def report(url: str, start: str, end: str) -> dict[str, dict[str, str]]:
    code, text = _report_run(url, start, end)
    assert code == 0
    return {row["team"]: row for row in csv.DictReader(io.StringIO(text))}


def test_shared_gpu_is_charged_to_the_teams_sharing_it_by_their_fractions(shared_day_url):
    rows = report(shared_day_url, "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")
    assert set(rows) == set(EXPECTED)
    for team, expected in EXPECTED.items():
        for column, value in expected.items():
            assert float(rows[team][column]) == pytest.approx(value, rel=0.01, abs=1e-9), (team, column)


def test_a_share_used_by_an_init_container_is_charged_while_it_runs(shared_day_url):
    """KAI gives a share to the init container gpu-fraction-container-name names; its pod stays Pending for as
    long as that container runs. Counting Running pods only, a tenant that did all its GPU work in an init
    container was charged nothing for it. A pending pod whose init container is not the share's is not charged."""
    delta = report(shared_day_url, "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")["delta"]
    assert float(delta["used_gpu_hours"]) == pytest.approx(24 * 0.5 * 0.8, rel=0.01)
    assert float(delta["allocated_gpu_hours"]) == pytest.approx(24 * 0.75, rel=0.01)


def test_each_half_day_charges_the_shares_of_that_half(shared_day_url):
    """Before noon alpha holds 0.33 of a 60%-busy GPU; after noon 0.66 (by gpu-memory) of a 30%-busy one."""
    morning_rows = report(shared_day_url, "2026-11-02T00:00:00Z", "2026-11-02T12:00:00Z")
    afternoon_rows = report(shared_day_url, "2026-11-02T12:00:00Z", "2026-11-03T00:00:00Z")
    assert float(morning_rows["alpha"]["used_gpu_hours"]) == pytest.approx(12 * 0.33 * 0.6, rel=0.01)
    assert float(afternoon_rows["alpha"]["used_gpu_hours"]) == pytest.approx(12 * 0.66 * 0.3, rel=0.01)
    assert float(morning_rows["beta"]["used_gpu_hours"]) == pytest.approx(12 * 0.66 * 0.6, rel=0.01)
    assert float(afternoon_rows["beta"]["used_gpu_hours"]) == pytest.approx(12 * 0.33 * 0.3, rel=0.01)


def test_the_shared_gpu_is_never_charged_more_than_its_busy_time(shared_day_url):
    rows = report(shared_day_url, "2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")
    charged = sum(float(rows[team]["used_gpu_hours"]) for team in ("alpha", "beta"))
    busy = 12 * 0.6 + 12 * 0.3
    assert charged <= busy
    assert charged == pytest.approx(0.99 * busy, rel=0.01), "0.33 + 0.66 of the card: 99% of its busy time"
