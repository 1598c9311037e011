"""The alerts on each team's scheduled snapshots (components/observability_backup_rules.py), run by the real promtool.

A site snapshotting its teams every 6 hours, minute by minute over a day: alpha's runs all succeed; beta's first
succeeds and the next two fail, then one succeeds; gamma is new and its runs never start. What kube-state-metrics
reports of CronJobs and Jobs is read in its source at the versions the accepted kube-prometheus-stack releases ship.
"""

from __future__ import annotations

import re

import pytest
import yaml

from components import observability_backup_rules as backup_rules
from components import observability_rules as rules
from components.observability_ksm import KSM_VALUES
from components.tenant_backup import RUN_SECONDS, STARTING_DEADLINE_SECONDS
from components import observability_alerting as alerting
from components.observability_alerting import alertmanager_config
from config import SECRET_KEYS, load_platform
from tests.local_alertmanager import needs_amtool
from tests.test_observability_alerting import amtool
from tests.test_observability_team_alerting import WITH_NAMESPACE_ALERTS, team_site
from tests.test_observability_team_routing import receivers_of
from tests.conftest import EXTRA_MIRRORED_TAGS, MIRRORED_TAGS, git, mirrored_tag
from tests.test_observability_contract import metric_names, recorded
from tests.test_observability_ksm import family
from tests.test_observability_rules import needs_promtool, promtool, rule_file, site_config

KSM = "kubernetes/kube-state-metrics"
CHARTS = "prometheus-community/helm-charts"
API = "kubernetes/api"
BACKUP = {"url": "s3://lab-backups/gpu", "endpoint": "http://192.168.1.20:9000", "region": "us-east-1",
          "every": "6h", "keep": 4}
SECRETS = {"backupAccessKeyId", "backupSecretAccessKey"}


def backed_up_site():
    return load_platform({**site_config(), "backup": BACKUP}, secrets_set=SECRETS)


# --- what kube-state-metrics exports -------------------------------------------------------------------------------


def ksm_store(tag: str, store: str) -> str:
    return git(KSM, "show", f"{mirrored_tag(KSM, tag)}:internal/store/{store}.go")


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_reports_a_cronjobs_last_success_and_creation(tag):
    source = ksm_store(tag, "cronjob")
    assert re.search(r'descCronJobLabelsDefaultLabels\s*=\s*\[\]string\{"namespace", "cronjob"\}', source)
    last = family(source, "kube_cronjob_status_last_successful_time")
    assert "float64(j.Status.LastSuccessfulTime.Unix())" in last and "LabelKeys:   []string{}," in last
    created = family(source, "kube_cronjob_created")
    assert "float64(j.CreationTimestamp.Unix())" in created and "LabelKeys:   []string{}," in created


@pytest.mark.parametrize("tag", MIRRORED_TAGS[KSM])
def test_kube_state_metrics_reports_a_jobs_failure_start_and_owning_cronjob(tag):
    source = ksm_store(tag, "job")
    assert re.search(r'descJobLabelsDefaultLabels\s*=\s*\[\]string\{"namespace", "job_name"\}', source)
    failed = family(source, "kube_job_failed")
    assert "c.Type == v1batch.JobFailed" in failed and 'metric.LabelKeys = []string{"condition"}' in failed
    # One series per condition status, labelled with it in lower case: condition="true" while failed.
    assert "LabelValues: []string{strings.ToLower(string(status))}" in ksm_store(tag, "utils")
    assert "Value: float64(j.Status.StartTime.Unix())" in family(source, "kube_job_status_start_time")
    owner = family(source, "kube_job_owner")
    assert 'labelKeys := []string{"owner_kind", "owner_name", "owner_is_controller"}' in owner
    assert "LabelValues: []string{owner.Kind, owner.Name," in owner


@pytest.mark.parametrize("tag", [tag for tag in EXTRA_MIRRORED_TAGS[CHARTS] if tag.startswith("kube-state-metrics-")])
def test_every_accepted_kube_state_metrics_chart_collects_cronjobs_and_jobs(tag):
    values = yaml.safe_load(git(CHARTS, "show", f"{tag}:charts/kube-state-metrics/values.yaml"))
    assert {"cronjobs", "jobs"} <= set(values["collectors"])
    # The program's list, the chart's but secrets (tests/test_observability_discovery_contract.py), keeps them.
    assert {"cronjobs", "jobs"} <= set(KSM_VALUES["collectors"])


def test_every_metric_the_backup_rules_read_is_kube_state_metrics_or_recorded_here():
    platform = backed_up_site()
    read = set().union(*(metric_names(rule["expr"]) for group in backup_rules.rule_groups(platform)
                         for rule in group["rules"]))
    exported = set()
    for tag in MIRRORED_TAGS[KSM]:
        for store in ("cronjob", "job"):
            exported |= set(re.findall(r'"(kube_\w+)"', ksm_store(tag, store)))
    assert read - exported == {backup_rules.BACKUP_INFO, backup_rules.MAX_AGE}
    assert read - exported <= recorded(platform)


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_a_cronjob_records_its_last_successful_run(tag):
    types = git(API, "show", f"{mirrored_tag(API, tag)}:batch/v1/types.go")
    assert re.search(r'LastSuccessfulTime \*metav1\.Time `json:"lastSuccessfulTime,omitempty"', types)


# --- the rules -----------------------------------------------------------------------------------------------------


def test_a_site_without_backup_gets_no_backup_rule():
    groups = rules.rule_groups(load_platform(site_config()))
    assert "gpu-tenancy-backups" not in {group["name"] for group in groups}
    assert backup_rules.rule_groups(load_platform(site_config())) == []


def test_each_team_may_go_two_intervals_and_a_runs_deadlines_without_a_success():
    info = [rule for rule in backup_rules.info_rules(backed_up_site()) if rule["record"] == backup_rules.MAX_AGE]
    allowed = 2 * 6 * 3600 + STARTING_DEADLINE_SECONDS + RUN_SECONDS + 600
    assert {rule["labels"]["cronjob"]: rule["expr"] for rule in info} == {
        f"{team}-backup": f"vector({allowed})" for team in ("alpha", "beta", "gamma")}


def minutes(samples: dict[int, float], end: int) -> str:
    """A promtool series over minutes 0..end: the value set at each minute in ``samples`` holds until the next one;
    absent before the first."""
    values, current = [], None
    for minute in range(end + 1):
        current = samples.get(minute, current)
        values.append("_" if current is None else f"{current:g}")
    runs, out = [], []
    for value in values:
        if runs and runs[-1][0] == value:
            runs[-1][1] += 1
        else:
            runs.append([value, 1])
    for value, count in runs:
        out.append(value if count == 1 else (f"_x{count}" if value == "_" else f"{value}+0x{count - 1}"))
    return " ".join(out)


END = 24 * 60


def job(namespace: str, cronjob: str, name: str, start: int, end: int, failed: bool, owner: str = "") -> list[dict]:
    """kube-state-metrics' series of one run, from its start (minute) until the CronJob's history drops it."""
    ids = f'namespace="{namespace}",job_name="{name}"'
    return [
        {"series": f"kube_job_status_start_time{{{ids}}}", "values": minutes({start: start * 60, end: None}, END)},
        {"series": f'kube_job_failed{{{ids},condition="true"}}',
         "values": minutes({start: 0, start + 10: 1 if failed else 0, end: None}, END)},
        {"series": f'kube_job_owner{{{ids},owner_kind="CronJob",owner_name="{owner or cronjob}",'
                   'owner_is_controller="true"}', "values": minutes({start: 1, end: None}, END)},
    ]


def story_series() -> list[dict]:
    """Every 6 h at minute 70 of the interval's first hour; a run takes 10 minutes."""
    series = [{"series": f'kube_cronjob_created{{namespace="vcluster-{team}",cronjob="{team}-backup"}}',
               "values": minutes({0: 0}, END)} for team in ("alpha", "beta", "gamma")]
    # Alpha: every run succeeds, reported by two kube-state-metrics scrapes.
    for scrape in ("ksm-a", "ksm-b"):
        series.append({"series": f'kube_cronjob_status_last_successful_time{{namespace="vcluster-alpha",'
                                 f'cronjob="alpha-backup",instance="{scrape}"}}',
                       "values": minutes({run + 10: (run + 10) * 60 for run in (70, 430, 790, 1150)}, END)})
    # Beta: succeeds at 70, fails at 430 and 790 (each failed Job replaces the previous one), succeeds at 1150.
    series.append({"series": 'kube_cronjob_status_last_successful_time{namespace="vcluster-beta",'
                             'cronjob="beta-backup"}', "values": minutes({80: 80 * 60, 1160: 1160 * 60}, END)})
    series += job("vcluster-beta", "beta-backup", "beta-backup-1", 430, 790, failed=True)
    series += job("vcluster-beta", "beta-backup", "beta-backup-2", 790, END + 1, failed=True)
    series += job("vcluster-beta", "beta-backup", "beta-backup-3", 1150, END + 1, failed=False)
    # Another CronJob's failed Job in alpha's namespace is not a snapshot.
    series += job("vcluster-alpha", "alpha-backup", "cleanup-1", 100, END + 1, failed=True, owner="cleanup")
    return series


def alerts_at(name: str, at: int, teams: tuple[str, ...]) -> dict:
    severity = "warning" if name == "GpuTenancyTeamBackupFailed" else "critical"
    return {"alertname": name, "eval_time": f"{at}m", "exp_alerts": [{"exp_labels": {
        "severity": severity, "team": team, "namespace": f"vcluster-{team}", "cronjob": f"{team}-backup"}}
        for team in teams]}


def story_tests() -> list[dict]:
    failed, stale = "GpuTenancyTeamBackupFailed", "GpuTenancyTeamBackupStale"
    limit = backup_rules.max_age_seconds(6) // 60
    checks = [
        # Just installed: nothing ran yet, nothing pages.
        alerts_at(failed, 5, ()), alerts_at(stale, 5, ()),
        alerts_at(stale, 300, ()),
        # Beta's run of 430 fails (its Job fails at 440).
        alerts_at(failed, 435, ()), alerts_at(failed, 445, ("beta",)), alerts_at(stale, 445, ()),
        # Two intervals and a run's deadlines after creation, gamma's first two runs never happened.
        alerts_at(stale, limit - 5, ()), alerts_at(stale, limit + 5, ("gamma",)),
        # Beta's last success was at 80, and its run of 790 failed too.
        alerts_at(stale, 80 + limit - 5, ("gamma",)), alerts_at(stale, 80 + limit + 5, ("beta", "gamma")),
        alerts_at(failed, 80 + limit + 5, ("beta",)),
        # Beta's run of 1150 succeeds at 1160: both resolve. Alpha never alerts.
        alerts_at(failed, 1165, ()), alerts_at(stale, 1165, ("gamma",)),
    ]
    recording = [{"expr": backup_rules.failed_run_start(), "eval_time": "500m", "exp_samples": [
        {"labels": '{namespace="vcluster-beta",cronjob="beta-backup"}', "value": 430 * 60},
        {"labels": '{namespace="vcluster-alpha",cronjob="cleanup"}', "value": 100 * 60}]}]
    return [{"interval": "1m", "input_series": story_series(), "promql_expr_test": recording,
             "alert_rule_test": checks}]


@needs_promtool
def test_the_backup_rules_pass_promtool_check(tmp_path):
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_file(backed_up_site()), sort_keys=False))
    result = promtool("check", "rules", "rules.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def split_backup_group(whole: dict) -> tuple[dict, dict]:
    """The rule file's backup group and its other groups, once the story cannot reach the others nor they the
    backup group: the backup rules read no alert state, and no other rule records a series the backup group or
    the story reads or records, alerts under a backup alert's name or reads a series of the story. The others
    then compute the same with or without the story's series, at every minute after they settle, which a short
    run without series shows; over the story's day they cost promtool about 50 s of CPU, the backup group 1 s."""
    backup = [group for group in whole["groups"] if group["name"] == "gpu-tenancy-backups"]
    others = [group for group in whole["groups"] if group not in backup]
    [group] = backup
    story = {re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", item["series"]).group(0) for item in story_series()}
    read = set().union(*(metric_names(rule["expr"]) for rule in group["rules"])) | metric_names(
        backup_rules.failed_run_start())
    written = {rule.get("record") or rule["alert"] for rule in group["rules"]}
    assert not read & {"ALERTS", "ALERTS_FOR_STATE"}
    other_rules = [rule for other in others for rule in other["rules"]]
    assert not {rule.get("record") or rule["alert"] for rule in other_rules} & (read | written | story)
    assert not set().union(*(metric_names(rule["expr"]) for rule in other_rules)) & (story | written)
    return {"groups": backup}, {"groups": others}


def settled(rules_yml: dict) -> dict:
    """A check at a minute by which rules without series have settled: each alert's ``for`` and a minute per group
    for recordings read across groups, and ten more."""
    waits = [int(rule["for"].removesuffix("m")) for group in rules_yml["groups"] for rule in group["rules"]
             if "for" in rule]
    minute = max(waits, default=0) + len(rules_yml["groups"]) + 10
    return {"expr": "vector(1)", "eval_time": f"{minute}m", "exp_samples": [{"labels": "{}", "value": 1}]}


@needs_promtool
def test_failing_and_stale_backups_alert_and_healthy_or_new_ones_do_not(tmp_path):
    backup, others = split_backup_group(rule_file(backed_up_site(), annotations=False))
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(backup, sort_keys=False))
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": story_tests()}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests, sort_keys=False))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # promtool fails a test when any rule of its files fails to evaluate: the other groups, without series.
    (tmp_path / "others.yml").write_text(yaml.safe_dump(others, sort_keys=False))
    (tmp_path / "settle.yml").write_text(yaml.safe_dump({"rule_files": ["others.yml"], "evaluation_interval": "1m",
                                                         "tests": [{"interval": "1m", "input_series": [],
                                                                    "promql_expr_test": [settled(others)]}]}))
    result = promtool("test", "rules", "settle.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    fired = {test["alertname"] for block in tests["tests"] for test in block["alert_rule_test"] if test["exp_alerts"]}
    assert fired == {rule["alert"] for rule in backup_rules.alert_rules(backed_up_site())}


# --- who is told ---------------------------------------------------------------------------------------------------


@needs_amtool
def test_the_backup_alerts_and_the_snapshot_jobs_are_the_platforms_not_the_teams(tmp_path):
    """The site hears the backup alerts, no team does; with a team hearing of its own namespace (``alerts: all``),
    the chart's alerts about the snapshot CronJob's Jobs stay the platform's, while the team's own pods stay its."""
    config = {**team_site(receivers=WITH_NAMESPACE_ALERTS), "backup": BACKUP}
    config["observability"]["alerting"]["alerts"] = "all"
    platform = load_platform(config, placeholders=SECRET_KEYS)
    path = tmp_path / "alertmanager.yaml"
    path.write_text(yaml.safe_dump(alertmanager_config(platform.observability.alerting, platform.teams)))
    assert "SUCCESS" in amtool("check-config", str(path))
    alpha = ("namespace=vcluster-alpha", "team=alpha", "cronjob=alpha-backup")
    for name, severity in (("GpuTenancyTeamBackupStale", "critical"), ("GpuTenancyTeamBackupFailed", "warning")):
        assert receivers_of(path, f"alertname={name}", f"severity={severity}", *alpha) == {alerting.RECEIVER}
    job = ("alertname=KubeJobFailed", "severity=warning", "namespace=vcluster-alpha")
    assert receivers_of(path, *job, "job_name=alpha-backup-29441520") == {alerting.RECEIVER}
    # Without the snapshot job's name, an alert about alpha's namespace is still alpha's own.
    assert receivers_of(path, *job, "job_name=other-29441520") == {"gpu-tenancy-team-alpha", "null"}
    assert receivers_of(path, "alertname=KubePodCrashLooping", "severity=warning", "namespace=vcluster-alpha",
                        "pod=alpha-backup-29441520-x-default-x-alpha") == {"gpu-tenancy-team-alpha", "null"}
