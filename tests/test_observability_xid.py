"""XID errors: what needs the platform's operator pages, what a tenant's own application raises does not.

Any tenant can make its GPU report an XID at will: a kernel that reads past an array (13), touches an unmapped
address (31) or is killed with work in flight (45). The driver contains those; paging the on-call for them let
any tenant page it whenever it liked. Run by the real promtool on synthetic DCGM series, and routed by amtool
through the Alertmanager configuration the program renders for a PagerDuty site.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from components import observability_rules as rules
from components import observability_team_series as team_series
from components import observability_xid as xid
from config import load_platform
from tests.test_observability_rules import _gpu, _pod, _shared_gpu, needs_promtool, promtool, site_config

# Every code the catalog lists (1 to 162), and codes past it, from a newer driver.
CODES = range(1, 171)
# Faults a tenant's own kernel raises (NVIDIA's XID catalog: restart the application).
TENANT_FAULTS = (13, 31, 43, 45)


def run_promtool(tmp_path, tests: list[dict], annotations: tuple[str, ...] = ()) -> None:
    """The platform's rules and the teams' own series (what a team's Grafana board reads), with only the
    ``annotations`` named (promtool compares the ones it keeps verbatim)."""
    groups = copy.deepcopy(team_series.all_rule_groups(load_platform(site_config())))
    for rule in (rule for group in groups for rule in group["rules"]):
        kept = {name: text for name, text in rule.pop("annotations", {}).items() if name in annotations}
        if kept:
            rule["annotations"] = kept
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(
        {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": tests}, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _gpu_labels(uuid: str) -> dict:
    return {"UUID": uuid, "gpu": "0", "Hostname": f"node-{uuid}"}


WINDOW = "300000"  # the exporter's default XID count window, 5 minutes, in its window_size_in_ms label


def _counted(uuid: str, namespace: str, codes: dict[int, str], none: str, pod: str = "work-0") -> list[dict]:
    """The exporter's per-code XID counts of one GPU: a series per code while it is in the window (``codes``:
    code -> values) and, while no code is, one series of value 0 without the code label (``none``)."""
    labels = f'UUID="{uuid}",gpu="0",Hostname="node-{uuid}",namespace="{namespace}",pod="{pod}",container="main"'
    return [{"series": f'{xid.COUNT_METRIC}{{{labels},window_size_in_ms="{WINDOW}"}}', "values": none},
            *[{"series": f'{xid.COUNT_METRIC}{{{labels},{xid.COUNT_LABEL}="{code}",window_size_in_ms="{WINDOW}"}}',
               "values": values} for code, values in codes.items()]]


def _counted_alert(uuid: str, namespace: str, code: int) -> dict:
    return {"exp_labels": {"severity": "critical", **_gpu_labels(uuid), "namespace": namespace, "pod": "work-0",
                           "container": "main", xid.COUNT_LABEL: str(code), "window_size_in_ms": WINDOW}}


def test_the_catalog_split_keeps_hardware_failures_fatal_and_application_faults_not():
    assert set(TENANT_FAULTS) <= xid.NON_FATAL
    # A double-bit ECC error, a GPU off the bus, an uncontained error, GSP failures, a GPU that stopped.
    assert not {46, 48, 62, 64, 74, 79, 95, 109, 119, 120, 140} & xid.NON_FATAL
    assert all(code in xid.NON_FATAL for code in range(96, 108)), "NVJPG and NVDEC engine faults are the app's"


def test_code_runs_cover_exactly_the_codes():
    runs = xid.code_runs(xid.NON_FATAL)
    assert {code for first, last in runs for code in range(first, last + 1)} == xid.NON_FATAL
    assert all(later[0] > earlier[1] + 1 for earlier, later in zip(runs, runs[1:])), "runs are maximal and sorted"
    assert xid.code_runs(frozenset({3, 1, 2, 7})) == [(1, 3), (7, 7)]


@needs_promtool
def test_every_code_fires_exactly_one_alert_of_its_class(tmp_path):
    """One GPU per code, in no team's namespace: a fatal code (or one the catalog does not know) pages, a
    non-fatal one is an info alert with no team; never both, never neither."""
    series = [_gpu(xid.METRIC, f"GPU-{code}", "elsewhere", f"0x5 {code}x20") for code in CODES]
    fatal = [{"exp_labels": {"severity": "critical", **_gpu_labels(f"GPU-{code}"), "namespace": "elsewhere",
                             "pod": "work-0", "container": "main"}} for code in CODES if code not in xid.NON_FATAL]
    contained = [{"exp_labels": {"severity": "info", **_gpu_labels(f"GPU-{code}")}}
                 for code in CODES if code in xid.NON_FATAL]
    assert fatal and contained
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "3m", "exp_alerts": []},
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "10m", "exp_alerts": fatal},
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "10m", "exp_alerts": contained},
        # Fifteen minutes after the code appeared it is no longer new: both resolve.
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "22m", "exp_alerts": []},
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "22m", "exp_alerts": []},
    ]}])


@needs_promtool
def test_where_the_exporter_counts_codes_every_code_fires_exactly_one_alert_of_its_class(tmp_path):
    """The same, on GPUs whose exporter also counts codes: the count decides what pages (one alert, naming the
    code), the last code what the teams are told; a code never fires both, and the last-code alert never adds
    a second page."""
    series = [series for code in CODES for series in (
        _gpu(xid.METRIC, f"GPU-{code}", "elsewhere", f"0x5 {code}x20"),
        *_counted(f"GPU-{code}", "elsewhere", {code: "_x5 1x4 stale"}, "0x4 stale _x4 0x10"))]
    fatal = [_counted_alert(f"GPU-{code}", "elsewhere", code) for code in CODES if code not in xid.NON_FATAL]
    contained = [{"exp_labels": {"severity": "info", **_gpu_labels(f"GPU-{code}")}}
                 for code in CODES if code in xid.NON_FATAL]
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "3m", "exp_alerts": []},
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "7m", "exp_alerts": fatal},
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "7m", "exp_alerts": contained},
        # The code left the exporter's window: the page resolves, and the last code does not page again.
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "12m", "exp_alerts": []},
    ]}])


@needs_promtool
@pytest.mark.parametrize(("fatal", "follower"), [(95, 63), (119, 154), (48, 63), (79, 13)])
def test_a_fatal_code_followed_at_once_by_another_still_pages(tmp_path, fatal, follower):
    """The driver logs a second code right after a fatal one (63 records the row remapping a double-bit error
    caused, 154 the recovery action a GSP timeout needs); within one scrape the last code shows only that one,
    non-fatal. The per-code counts still hold the fatal code: it pages, and no team is told the GPU is fine."""
    assert fatal not in xid.NON_FATAL and follower in xid.NON_FATAL
    series = [_gpu(xid.METRIC, "GPU-a", "vcluster-alpha", f"0x5 {follower}x20"),
              *_counted("GPU-a", "vcluster-alpha", {fatal: "_x5 1x4 stale", follower: "_x5 1x4 stale"},
                        "0x4 stale _x4 0x10")]
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "7m",
         "exp_alerts": [_counted_alert("GPU-a", "vcluster-alpha", fatal)]},
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "7m", "exp_alerts": []},
    ]}])


@needs_promtool
def test_the_page_names_the_fatal_code_whichever_way_it_was_seen(tmp_path):
    """Counted, the code is the alert's label (its value is how often); from the last code, it is the value."""
    series = [_gpu(xid.METRIC, "GPU-c", "vcluster-alpha", "0x5 154x20"),
              *_counted("GPU-c", "vcluster-alpha", {119: "_x5 3x4 stale", 154: "_x5 1x4 stale"}, "0x4 stale _x4 0x10"),
              _gpu(xid.METRIC, "GPU-l", "vcluster-beta", "0x5 79x20")]
    paged = {"alertname": "GpuTenancyGpuXidError", "eval_time": "7m", "exp_alerts": [
        {**_counted_alert("GPU-c", "vcluster-alpha", 119),
         "exp_annotations": {"summary": "GPU 0 on node-GPU-c reported fatal XID 119"}},
        {"exp_labels": {"severity": "critical", **_gpu_labels("GPU-l"), "namespace": "vcluster-beta", "pod": "work-0",
                        "container": "main"},
         "exp_annotations": {"summary": "GPU 0 on node-GPU-l reported fatal XID 79"}}]}
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [paged]}],
                 annotations=("summary",))


@needs_promtool
def test_every_team_on_a_failed_gpu_sees_it_failed_and_no_other_team_does(tmp_path):
    """GPU-s, shared by alpha and beta, fails with 119 and the driver logs 154 after it; gamma's whole GPU-g only
    faults in gamma's own kernel (13). The boards of alpha and beta show GPU-s failed (their 154 is not their
    application's); gamma's shows nothing failed. A last-code GPU failing (79, no counts) shows on its team's."""
    series = [
        *_shared_gpu("GPU-s", "grp-s", 50),
        *_pod("vcluster-alpha", "nb-alpha", group="grp-s", gpu_fraction="0.5"),
        *_pod("vcluster-beta", "tr-beta", group="grp-s", gpu_memory="4096"),
        _gpu(xid.METRIC, "GPU-s", "kai-resource-reservation", "0x5 154x20", pod="gpu-reservation-node-GPU-s"),
        *_counted("GPU-s", "kai-resource-reservation", {119: "_x5 1x4 stale", 154: "_x5 1x4 stale"},
                  "0x4 stale _x4 0x10", pod="gpu-reservation-node-GPU-s"),
        _gpu(xid.METRIC, "GPU-g", "vcluster-gamma", "0x5 13x20"),
        *_counted("GPU-g", "vcluster-gamma", {13: "_x5 1x4 stale"}, "0x4 stale _x4 0x10"),
        _gpu(xid.METRIC, "GPU-l", "vcluster-gamma", "0x10 79x20"),
    ]

    def failed(at: str, gpus: dict[str, tuple[str, ...]]) -> dict:
        return {"expr": team_series.GPU_FAILED, "eval_time": at, "exp_samples": [
            {"labels": f'{team_series.GPU_FAILED}{{team="{team}",UUID="{uuid}",gpu="0",Hostname="node-{uuid}"}}',
             "value": 1} for uuid, teams in gpus.items() for team in teams]}
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "promql_expr_test": [
        failed("3m", {}), failed("7m", {"GPU-s": ("alpha", "beta")}), failed("12m", {"GPU-l": ("gamma",)})]}])


@needs_promtool
def test_a_counting_gpu_with_no_error_fires_nothing(tmp_path):
    series = [_gpu(xid.METRIC, "GPU-a", "vcluster-alpha", "0x20"), *_counted("GPU-a", "vcluster-alpha", {}, "0x20")]
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"alertname": alert, "eval_time": f"{minute}m", "exp_alerts": []}
        for alert in ("GpuTenancyGpuXidError", "GpuTenancyGpuXidNonFatal", "GpuTenancyTeamGpuFailed")
        for minute in (1, 10, 19)]}])


@needs_promtool
@pytest.mark.parametrize("code", TENANT_FAULTS)
def test_a_tenant_faulting_its_own_gpu_is_never_told_its_gpu_failed(tmp_path, code):
    """A tenant's own fault (counted or last code) does not make its team, or a team sharing the GPU, think the
    card failed; the card failing with 79 right after on the same GPU does, for the team on it only."""
    series = [_gpu(xid.METRIC, "GPU-a", "vcluster-alpha", f"0x5 {code}x20 79x20"),
              *_counted("GPU-a", "vcluster-alpha", {code: "_x5 1x4 stale", 79: "_x25 1x4 stale"},
                        "0x4 stale _x20 0x10"),
              _gpu(xid.METRIC, "GPU-g", "vcluster-gamma", "0x50")]
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"alertname": "GpuTenancyTeamGpuFailed", "eval_time": "8m", "exp_alerts": []},
        {"alertname": "GpuTenancyTeamGpuFailed", "eval_time": "27m", "exp_alerts": [
            {"exp_labels": {"severity": "warning", **_gpu_labels("GPU-a"), "team": "alpha"}}]},
    ]}])


@needs_promtool
def test_a_fault_on_a_shared_gpu_is_told_to_every_team_on_it_and_pages_nobody(tmp_path):
    """GPU-s is shared under KAI fractions by alpha and beta: DCGM maps it to KAI's reservation pod, so the teams
    are those holding shares of it. A fault of either team's kernel tells both; gamma, elsewhere, is not told.
    Then the card itself fails (79, off the bus): that pages."""
    series = [
        *_shared_gpu("GPU-s", "grp-s", 50), *_shared_gpu("GPU-i", "grp-i", 2),
        *_pod("vcluster-alpha", "nb-alpha", group="grp-s", gpu_fraction="0.5"),
        *_pod("vcluster-beta", "tr-beta", group="grp-s", gpu_memory="4096"),
        *_pod("vcluster-gamma", "srv-gamma", group="grp-i", gpu_fraction="0.5"),
        _gpu(xid.METRIC, "GPU-s", "kai-resource-reservation", "0x10 31x20 79x20", pod="gpu-reservation-node-GPU-s"),
    ]
    shared = _gpu_labels("GPU-s")

    def teams_see(at: str, code: int) -> dict:
        """What each team's board reads: the code on the GPU it shares, labelled with that team only."""
        return {"expr": team_series.GPU_XID, "eval_time": at, "exp_samples": [
            {"labels": f'{team_series.GPU_XID}{{team="{team}",UUID="GPU-s",gpu="0",Hostname="node-GPU-s"}}',
             "value": code} for team in ("alpha", "beta")]}
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series,
                             "promql_expr_test": [teams_see("15m", 31), teams_see("35m", 79)], "alert_rule_test": [
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "15m", "exp_alerts": [
            {"exp_labels": {"severity": "info", **shared, "team": team}} for team in ("alpha", "beta")]},
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "15m", "exp_alerts": []},
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "35m", "exp_alerts": []},
        {"alertname": "GpuTenancyGpuXidError", "eval_time": "35m", "exp_alerts": [
            {"exp_labels": {"severity": "critical", **shared, "namespace": "kai-resource-reservation",
                            "pod": "gpu-reservation-node-GPU-s", "container": "main"}}]},
        # The card failing is told to both teams sharing it, as a warning of their own; a tenant's own fault
        # before it was not a failure of the GPU.
        {"alertname": "GpuTenancyTeamGpuFailed", "eval_time": "15m", "exp_alerts": []},
        {"alertname": "GpuTenancyTeamGpuFailed", "eval_time": "35m", "exp_alerts": [
            {"exp_labels": {"severity": "warning", **shared, "team": team}} for team in ("alpha", "beta")]},
    ]}])


@needs_promtool
@pytest.mark.parametrize("code", TENANT_FAULTS)
def test_a_tenant_faulting_its_own_gpu_over_and_over_never_pages(tmp_path, code):
    """A hostile tenant alternates two faulting kernels on its whole GPU for an hour, so the code changes every
    minute and both are always in the exporter's counts: the team hears of it, the on-call never."""
    other = 43 if code != 43 else 13
    values = " ".join(str(code if minute % 2 else other) for minute in range(60))
    # The exporter's counts hold both codes all hour.
    series = [_gpu(xid.METRIC, "GPU-a", "vcluster-alpha", values),
              *_counted("GPU-a", "vcluster-alpha", {code: "2x60", other: "3x60"}, "_x60")]
    run_promtool(tmp_path, [{"interval": "1m", "input_series": series, "alert_rule_test": [
        *[{"alertname": "GpuTenancyGpuXidError", "eval_time": f"{minute}m", "exp_alerts": []}
          for minute in (1, 10, 30, 59)],
        {"alertname": "GpuTenancyGpuXidNonFatal", "eval_time": "30m", "exp_alerts": [
            {"exp_labels": {"severity": "info", **_gpu_labels("GPU-a"), "team": "alpha"}}]},
    ]}])


def test_the_severities_the_receivers_filter_on():
    platform = load_platform(site_config())
    severity = {rule["alert"]: rule["labels"]["severity"] for group in rules.rule_groups(platform)
                for rule in group["rules"] if "alert" in rule}
    assert severity["GpuTenancyGpuXidError"] == "critical"
    assert severity["GpuTenancyGpuXidNonFatal"] == "info"
    # A team's pager (least severity critical by default) is not woken for the platform's hardware failure.
    assert severity["GpuTenancyTeamGpuFailed"] == "warning"
