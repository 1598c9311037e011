"""The recording rules and alerts, run by the real promtool on synthetic series.

A three-team site (alpha 0.25 of a GPU with limit 1, beta 0.25 with limit 0.75, gamma 0.5 unlimited)
under org ml-org, and a minute-by-minute story: beta borrows, gamma waits with a pending pod, alpha sits
on an idle GPU and its application faults there (a non-fatal XID), beta's GPU reports a fatal XID, another
GPU ECC errors, the scheduler never sees gamma's queue, beta's admission policy refuses pods and gamma's refuses
Services. Every
recording rule and every alert is asserted at least once.

`promtool check rules` runs on the full rule file (templates included); the unit tests run on the same
rules with annotations removed, since promtool would compare rendered runbook text verbatim.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from components import observability_rules as rules
from components import observability_shares as shares
from config import load_platform
from config.vocabulary import project_config

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not on $PATH (Debian package prometheus; "
                                                              ".ci/run installs it)")
DEV_STACK = Path(__file__).resolve().parent.parent / "Pulumi.dev.yaml"


def site_config(**observability) -> dict:
    raw = copy.deepcopy(project_config(yaml.safe_load(DEV_STACK.read_text())["config"]))
    raw["teams"] = [
        {"name": "alpha", "resources": {"gpu": {"quota": 0.25, "limit": 1, "overQuotaWeight": 1}}},
        {"name": "beta", "resources": {"gpu": {"quota": 0.25, "limit": 0.75, "overQuotaWeight": 1}}},
        {"name": "gamma", "resources": {"gpu": {"quota": 0.5, "limit": -1, "overQuotaWeight": 1}}},
    ]
    raw["observability"] = {"prometheus": "install", **observability}
    return raw


def rule_file(platform, *, annotations: bool = True) -> dict:
    groups = copy.deepcopy(rules.rule_groups(platform))
    if not annotations:
        for group in groups:
            for rule in group["rules"]:
                rule.pop("annotations", None)
    return {"groups": groups}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def _queue(metric: str, queue: str, values: str, job: str = "queue-controller") -> dict:
    return {"series": f'{metric}{{queue_name="{queue}",queue_metadata_name="{queue}",queue_display_name="{queue}",'
                      f'job="{job}"}}', "values": values}


def _gpu(metric: str, uuid: str, namespace: str, values: str, pod: str = "work-0") -> dict:
    return {"series": f'{metric}{{UUID="{uuid}",gpu="0",Hostname="node-{uuid}",namespace="{namespace}",'
                      f'pod="{pod}",container="main"}}', "values": values}


def story_series() -> list[dict]:
    flat = "+0x150"
    return [
        # Guarantees: ml-org 1, alpha 0.25, beta 0.25, gamma 0.5; KAI's default-queue is not a team.
        *[_queue("kai_queue_deserved_gpus", queue, f"{value}{flat}")
          for queue, value in (("ml-org", 1), ("alpha", 0.25), ("beta", 0.25), ("gamma", 0.5), ("default-queue", 0))],
        # Beta borrows half a GPU over its quota; gamma holds nothing; default-queue holds a GPU.
        *[_queue("kai_queue_allocated_gpus", queue, f"{value}{flat}")
          for queue, value in (("ml-org", 1), ("alpha", 0.25), ("beta", 0.75), ("gamma", 0), ("default-queue", 1))],
        # The same alpha series scraped a second time must not double it.
        _queue("kai_queue_allocated_gpus", "alpha", f"0.25{flat}", job="kai-own-monitor"),
        # The scheduler knows every queue but gamma (its parent chain is broken).
        *[_queue("kai_queue_fair_share_gpu", queue, f"0.25{flat}", job="scheduler")
          for queue in ("ml-org", "alpha", "beta")],
        {"series": 'kai_queue_info{queue_name="alpha"}', "values": f"1{flat}"},
        # GPU a: alpha's, 5% busy; b: beta's, 80% busy; c: a shared GPU held by KAI's reservation pod.
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-a", "vcluster-alpha", f"5{flat}"),
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-b", "vcluster-beta", f"80{flat}"),
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-c", "kai-resource-reservation", f"90{flat}"),
        _gpu("DCGM_FI_DEV_XID_ERRORS", "GPU-b", "vcluster-beta", "0x10 79x140"),
        # Alpha's application faults on its GPU (13, out of bounds): the driver contains it.
        _gpu("DCGM_FI_DEV_XID_ERRORS", "GPU-a", "vcluster-alpha", "0x10 13x140"),
        _gpu("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "GPU-c", "kai-resource-reservation", "0x10 2x140"),
        # Gamma has a pending pod; alpha's pod runs.
        {"series": 'kube_pod_status_phase{namespace="vcluster-gamma",pod="train-x-vcluster-gamma",phase="Pending"}',
         "values": f"1{flat}"},
        {"series": 'kube_pod_status_phase{namespace="vcluster-alpha",pod="nb-x-vcluster-alpha",phase="Pending"}',
         "values": f"0{flat}"},
        {"series": 'kube_pod_status_phase{namespace="vcluster-alpha",pod="nb-x-vcluster-alpha",phase="Running"}',
         "values": f"1{flat}"},
        # Beta's policy refuses three pods at minute 11; another site's policy is not ours.
        {"series": 'apiserver_validating_admission_policy_check_total{policy="gpu-tenancy-beta",'
                   'policy_binding="gpu-tenancy-beta",enforcement_action="deny",error_type="no_error"}',
         "values": "0x10 3x140"},
        {"series": 'apiserver_validating_admission_policy_check_total{policy="other-policy",'
                   'policy_binding="other-policy",enforcement_action="deny",error_type="no_error"}',
         "values": "0x10 5x140"},
        # Alpha's binding of the site's pod-size policy refuses two pods at minute 11; a binding of that policy that
        # is no team's (made by hand) is not counted for any team.
        {"series": 'apiserver_validating_admission_policy_check_total{policy="gpu-tenancy-pod-size",'
                   'policy_binding="gpu-tenancy-pod-size-alpha",enforcement_action="deny",error_type="no_error"}',
         "values": "0x10 2x140"},
        {"series": 'apiserver_validating_admission_policy_check_total{policy="gpu-tenancy-pod-size",'
                   'policy_binding="gpu-tenancy-pod-size-extra",enforcement_action="deny",error_type="no_error"}',
         "values": "0x10 7x140"},
        # Gamma's synced-objects policy refuses four Services at minute 11 (a type or a port the team may not hold).
        {"series": 'apiserver_validating_admission_policy_check_total{policy="gpu-tenancy-gamma-synced-objects",'
                   'policy_binding="gpu-tenancy-gamma-synced-objects",enforcement_action="deny",'
                   'error_type="no_error"}', "values": "0x10 4x140"},
        # The installed Prometheus deletes a block for size at minute 100; another namespace's does not count.
        {"series": 'prometheus_tsdb_size_retentions_total{namespace="monitoring",'
                   'job="kube-prometheus-stack-prometheus"}', "values": "0x100 1x100"},
        {"series": 'prometheus_tsdb_size_retentions_total{namespace="elsewhere",job="prometheus"}',
         "values": "0x10 4x140"},
    ]


def _teams(record: str, values: dict[str, float]) -> dict:
    return {"expr": record, "eval_time": "10m",
            "exp_samples": [{"labels": f'{record}{{team="{team}"}}', "value": value} for team, value in values.items()]}


def story_tests() -> list[dict]:
    recording = [
        _teams(rules.QUOTA, {"alpha": 0.25, "beta": 0.25, "gamma": 0.5}),
        _teams(rules.ALLOCATED, {"alpha": 0.25, "beta": 0.75, "gamma": 0}),
        _teams(rules.UTILISATION, {"alpha": 0.05, "beta": 0.8}),
        _teams(rules.USED, {"alpha": 0.05, "beta": 0.8}),
        _teams(rules.MEASURED, {"alpha": 1, "beta": 1}),
        _teams(rules.HEADROOM, {"alpha": 0.75, "beta": 0}),
        _teams(rules.PENDING, {"alpha": 0, "gamma": 1}),
        {**_teams(rules.ALLOCATED_HOURS, {"alpha": 0.25, "beta": 0.75, "gamma": 0}), "eval_time": "90m"},
        {**_teams(rules.USED_HOURS, {"alpha": 0.05, "beta": 0.8}), "eval_time": "90m"},
        {"expr": rules.PROMISED, "eval_time": "10m", "exp_samples": [{"labels": rules.PROMISED, "value": 1}]},
        {"expr": rules.SITE_ALLOCATED, "eval_time": "10m", "exp_samples": [{"labels": rules.SITE_ALLOCATED, "value": 1}]},
        {"expr": rules.PRESENT, "eval_time": "10m", "exp_samples": [{"labels": rules.PRESENT, "value": 3}]},
        {"expr": rules.XID_NON_FATAL, "eval_time": "15m", "exp_samples": [
            {"labels": f'{rules.XID_NON_FATAL}{{UUID="GPU-a",gpu="0",Hostname="node-GPU-a",'
                       'namespace="vcluster-alpha",pod="work-0",container="main"}', "value": 13}]},
    ]
    xid = {"UUID": "GPU-b", "gpu": "0", "Hostname": "node-GPU-b", "namespace": "vcluster-beta", "pod": "work-0",
           "container": "main"}
    ecc = {**xid, "UUID": "GPU-c", "Hostname": "node-GPU-c", "namespace": "kai-resource-reservation"}
    alerts = [
        ("GpuTenancyTeamStarved", "10m", []),
        ("GpuTenancyTeamStarved", "20m", [{"severity": "warning", "team": "gamma"}]),
        ("GpuTenancyAllocatedGpuIdle", "50m", []),
        ("GpuTenancyAllocatedGpuIdle", "70m", [{"severity": "info", "team": "alpha"}]),
        ("GpuTenancyGpuXidError", "5m", []),
        ("GpuTenancyGpuXidError", "15m", [{"severity": "critical", **xid}]),
        ("GpuTenancyGpuXidNonFatal", "5m", []),
        ("GpuTenancyGpuXidNonFatal", "15m",
         [{"severity": "info", "UUID": "GPU-a", "gpu": "0", "Hostname": "node-GPU-a", "team": "alpha"}]),
        # Beta's GPU failing (79) is told to beta, the only team with pods on it.
        ("GpuTenancyTeamGpuFailed", "5m", []),
        ("GpuTenancyTeamGpuFailed", "15m",
         [{"severity": "warning", "UUID": "GPU-b", "gpu": "0", "Hostname": "node-GPU-b", "team": "beta"}]),
        ("GpuTenancyGpuEccErrors", "5m", []),
        ("GpuTenancyGpuEccErrors", "15m", [{"severity": "critical", **ecc}]),
        ("GpuTenancyQueueMissing", "5m", []),
        ("GpuTenancyQueueMissing", "15m", [{"severity": "critical", "queue_name": "gamma", "parent": "ml-org"}]),
        ("GpuTenancyKaiMetricsMissing", "30m", []),
        ("GpuTenancyAdmissionRejections", "5m", []),
        ("GpuTenancyAdmissionRejections", "15m", [{"severity": "info", "team": "beta", "policy": "gpu-tenancy-beta"},
                                                  {"severity": "info", "team": "alpha",
                                                   "policy": "gpu-tenancy-pod-size"},
                                                  {"severity": "info", "team": "gamma",
                                                   "policy": "gpu-tenancy-gamma-synced-objects"}]),
        ("GpuTenancyGpusOverPromised", "60m", []),
        ("GpuTenancyHistoryTrimmedForSize", "90m", []),
        ("GpuTenancyHistoryTrimmedForSize", "105m",
         [{"severity": "warning", "namespace": "monitoring", "job": "kube-prometheus-stack-prometheus"}]),
        # An hour after the deletion the increase is gone: the alert resolves.
        ("GpuTenancyHistoryTrimmedForSize", "200m", []),
    ]
    return [{"interval": "1m", "input_series": story_series(), "promql_expr_test": recording,
             "alert_rule_test": [{"alertname": name, "eval_time": at, "exp_alerts": [{"exp_labels": labels}
                                                                                    for labels in expected]}
                                 for name, at, expected in alerts]}]


def _pod(namespace: str, pod: str, *, group: str, phase: str = "Running", **annotations: str) -> list[dict]:
    """kube-state-metrics' series of a pod KAI bound to a GPU group (labels as v2.20.0 names them)."""
    flat = "+0x150"
    ids = f'namespace="{namespace}",pod="{pod}",uid="uid-{pod}"'
    exported = "".join(f',{shares.ksm_label_name("annotation", key.replace("_", "-"))}="{value}"'
                       for key, value in annotations.items())
    return [{"series": f'kube_pod_labels{{{ids},{shares.KSM_GROUP}="{group}"}}', "values": f"1{flat}"},
            {"series": f"kube_pod_annotations{{{ids}{exported}}}", "values": f"1{flat}"},
            {"series": f'kube_pod_status_phase{{namespace="{namespace}",pod="{pod}",phase="{phase}"}}',
             "values": f"1{flat}"}]


def _shared_gpu(uuid: str, group: str, busy: float) -> list[dict]:
    """A GPU KAI shares: DCGM maps it to the group's reservation pod (16384 MiB of framebuffer)."""
    pod = f"gpu-reservation-node-{uuid}"
    series = [_gpu(f"DCGM_FI_DEV_{field}", uuid, shares.RESERVATION_NAMESPACE, f"{value}+0x150", pod=pod)
              for field, value in (("GPU_UTIL", busy), ("FB_USED", 1000), ("FB_FREE", 15000), ("FB_RESERVED", 384))]
    return series + _pod(shares.RESERVATION_NAMESPACE, pod, group=group)


def fraction_story_tests() -> list[dict]:
    """Shared GPUs: s (50% busy) holds alpha's 0.5 and beta's 4096 MiB (0.25); o (100% busy) is promised twice
    over, two pods of alpha at 0.5 and two of beta at 8192 MiB, so each is charged half its share; i (2% busy)
    holds gamma's .5 alone. Alpha also holds whole GPU w, always busy. A finished pod of beta still carries
    its group and is not charged. Gamma, fractional and idle, is the reclaim candidate."""
    flat = "+0x150"
    series = [
        *[_queue("kai_queue_allocated_gpus", queue, f"{value}{flat}")
          for queue, value in (("alpha", 2.5), ("beta", 1.25), ("gamma", 0.5))],
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-w", "vcluster-alpha", f"100{flat}"),
        *_shared_gpu("GPU-s", "grp-s", 50), *_shared_gpu("GPU-o", "grp-o", 100), *_shared_gpu("GPU-i", "grp-i", 2),
        *_pod("vcluster-alpha", "nb-alpha", group="grp-s", gpu_fraction="0.5"),
        *_pod("vcluster-beta", "tr-beta", group="grp-s", gpu_memory="4096"),
        *_pod("vcluster-beta", "old-beta", group="grp-s", phase="Succeeded", gpu_fraction="0.5"),
        *[pod for name in ("a-1", "a-2") for pod in _pod("vcluster-alpha", name, group="grp-o", gpu_fraction="0.5")],
        *[pod for name in ("b-1", "b-2") for pod in _pod("vcluster-beta", name, group="grp-o", gpu_memory="8192")],
        *_pod("vcluster-gamma", "srv-gamma", group="grp-i", gpu_fraction=".5"),
    ]
    pods = {("vcluster-alpha", "nb-alpha", "grp-s", "GPU-s"): (0.5, 0.25),
            ("vcluster-beta", "tr-beta", "grp-s", "GPU-s"): (0.25, 0.125),
            **{(f"vcluster-{team}", name, "grp-o", "GPU-o"): (0.5, 0.25)
               for team, names in (("alpha", ("a-1", "a-2")), ("beta", ("b-1", "b-2"))) for name in names},
            ("vcluster-gamma", "srv-gamma", "grp-i", "GPU-i"): (0.5, 0.01)}

    def per_pod(record: str, column: int) -> dict:
        return {"expr": record, "eval_time": "10m", "exp_samples": [
            {"labels": f'{record}{{namespace="{ns}",pod="{pod}",gpu_group="{group}",UUID="{uuid}"}}',
             "value": values[column]} for (ns, pod, group, uuid), values in pods.items()]}

    recording = [
        per_pod(shares.SHARE, 0), per_pod(shares.CHARGED, 1),
        _teams(rules.HELD, {"alpha": 2.5, "beta": 1.25, "gamma": 0.5}),
        _teams(rules.MEASURED, {"alpha": 2.5, "beta": 1.25, "gamma": 0.5}),
        _teams(rules.USED, {"alpha": 1.75, "beta": 0.625, "gamma": 0.01}),
        _teams(rules.UTILISATION, {"alpha": 0.7, "beta": 0.5, "gamma": 0.02}),
    ]
    alerts = [{"alertname": "GpuTenancyAllocatedGpuIdle", "eval_time": "50m", "exp_alerts": []},
              {"alertname": "GpuTenancyAllocatedGpuIdle", "eval_time": "70m",
               "exp_alerts": [{"exp_labels": {"severity": "info", "team": "gamma"}}]}]
    return [{"interval": "1m", "input_series": series, "promql_expr_test": recording, "alert_rule_test": alerts}]


def blind_site_tests() -> list[dict]:
    """The queue controller reports quotas but neither kai_queue_info nor the scheduler's fair share arrive,
    and the queues promise 2.25 GPUs on a site where DCGM sees one."""
    series = [
        _queue("kai_queue_deserved_gpus", "gamma", "2+0x60"),
        _queue("kai_queue_deserved_gpus", "alpha", "0.25+0x60"),
        _gpu("DCGM_FI_DEV_GPU_UTIL", "GPU-a", "vcluster-alpha", "1+0x60"),
    ]
    return [{"interval": "1m", "input_series": series, "alert_rule_test": [
        {"alertname": "GpuTenancyKaiMetricsMissing", "eval_time": "10m", "exp_alerts": []},
        {"alertname": "GpuTenancyKaiMetricsMissing", "eval_time": "20m", "exp_alerts": [
            {"exp_labels": {"severity": "warning"}}]},
        {"alertname": "GpuTenancyGpusOverPromised", "eval_time": "20m", "exp_alerts": []},
        {"alertname": "GpuTenancyGpusOverPromised", "eval_time": "40m", "exp_alerts": [
            {"exp_labels": {"severity": "warning"}}]},
    ]}]


@needs_promtool
def test_rule_file_passes_promtool_check(tmp_path):
    platform = load_platform(site_config())
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_file(platform), sort_keys=False))
    result = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
def test_every_recording_rule_and_alert_driven_by_promtool_unit_tests(tmp_path):
    platform = load_platform(site_config())
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_file(platform, annotations=False), sort_keys=False))
    # Imported here: that module builds its story from this one's helpers.
    from tests.test_observability_init_gpus import init_container_story_tests
    from tests.test_observability_multi_fractions import story_tests as multi_fraction_story_tests
    stories = (story_tests() + fraction_story_tests() + blind_site_tests() + init_container_story_tests()
               + multi_fraction_story_tests())
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": stories}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr

    recorded = {rule["record"] for group in rules.rule_groups(platform) for rule in group["rules"] if "record" in rule}
    alerts = {rule["alert"] for group in rules.rule_groups(platform) for rule in group["rules"] if "alert" in rule}
    tested_records = {test["expr"] for block in tests["tests"] for test in block.get("promql_expr_test", [])}
    fired = {test["alertname"] for block in tests["tests"] for test in block["alert_rule_test"] if test["exp_alerts"]}
    info = {rules.TEAM_INFO, rules.POLICY_INFO, rules.QUEUE_INFO, rules.TEAM_GPU_LIMIT}
    assert recorded - info <= tested_records, f"recording rules without a promtool test: {recorded - info - tested_records}"
    assert alerts == fired, f"alerts never seen firing in a promtool test: {alerts - fired}"


@needs_promtool
def test_thresholds_from_stack_config_reach_the_alerts(tmp_path):
    """pendingMinutes 30: gamma's pod, pending since minute 0, alerts at 31m but not at 20m."""
    platform = load_platform(site_config(alerts={"pendingMinutes": 30, "idleUtilisationPercent": 4}))
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_file(platform, annotations=False), sort_keys=False))
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": story_series(), "alert_rule_test": [
            {"alertname": "GpuTenancyTeamStarved", "eval_time": "20m", "exp_alerts": []},
            {"alertname": "GpuTenancyTeamStarved", "eval_time": "31m",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "team": "gamma"}}]},
            # alpha's GPU is 5% busy: not idle under a 4% threshold.
            {"alertname": "GpuTenancyAllocatedGpuIdle", "eval_time": "70m", "exp_alerts": []},
        ]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_team_info_joins_team_namespace_queue_and_each_binding_judging_its_writes():
    """Which bindings judge a team in a real program run: tests/test_admission_metrics.py."""
    platform = load_platform(site_config())
    info = [rule["labels"] for rule in rules.info_rules(platform) if rule["record"] == rules.TEAM_INFO]
    assert info == [{"team": team.name, "queue_name": team.name, "namespace": team.namespace}
                    for team in platform.teams]
    policies = [rule["labels"] for rule in rules.info_rules(platform) if rule["record"] == rules.POLICY_INFO]
    assert policies == [{"team": team.name, "policy": policy, "policy_binding": binding} for team in platform.teams
                        for policy, binding in (
                            *((own, own) for own in (f"gpu-tenancy-{team.name}",
                                                     f"gpu-tenancy-{team.name}-synced-objects",
                                                     f"gpu-tenancy-{team.name}-deletion")),
                            ("gpu-tenancy-pod-size", f"gpu-tenancy-pod-size-{team.name}"))]
    limits = {rule["labels"]["team"]: rule["expr"] for rule in rules.info_rules(platform)
              if rule["record"] == rules.TEAM_GPU_LIMIT}
    assert limits == {"alpha": "vector(1)", "beta": "vector(0.75)"}, "an unlimited team has no limit series"
