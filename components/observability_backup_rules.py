"""Alerts on each team's scheduled snapshots (``gpu-tenancy:backup``): the last run failed, or none succeeded for
too long (plain data, no resources).

A run's Job succeeds only once vCluster's control plane has recorded the upload as done (components/
tenant_backup.py), so the Jobs and their CronJob say what the store holds. kube-state-metrics reports both (names
and labels read at the versions the accepted kube-prometheus-stack releases ship, tests/test_backup_alerts.py): a
CronJob's ``kube_cronjob_status_last_successful_time`` and ``kube_cronjob_created`` (labels ``namespace``,
``cronjob``), a Job's ``kube_job_failed``, ``kube_job_status_start_time`` and ``kube_job_owner`` (labels
``namespace``, ``job_name``; the owner's kind and name). Constant series written from stack config name each team's
CronJob and how old its last good snapshot may grow, so only the program's CronJobs are read and each alert names
its team. A site without ``backup`` gets none of these rules.
"""

from __future__ import annotations

from components.tenant_backup import RUN_SECONDS, STARTING_DEADLINE_SECONDS
from config.model import Platform
from config.snapshots import backup_name

BACKUP_INFO = "gpu_tenancy_backup_info"
MAX_AGE = "gpu_tenancy_backup_max_age_seconds"
# A run starts up to STARTING_DEADLINE_SECONDS after its time and succeeds up to RUN_SECONDS later; the rest leaves
# room for kube-state-metrics' scrape and the rules' evaluation.
SLACK_SECONDS = STARTING_DEADLINE_SECONDS + RUN_SECONDS + 600
# Two intervals: one run may fail or be missed (the next one catches up) without paging; the second may not.
INTERVALS_WITHOUT_SUCCESS = 2

_KEY = "namespace, cronjob"
LAST_SUCCESS = f"max by ({_KEY}) (kube_cronjob_status_last_successful_time)"
CREATED = f"max by ({_KEY}) (kube_cronjob_created)"


def max_age_seconds(every_hours: int) -> int:
    return INTERVALS_WITHOUT_SUCCESS * every_hours * 3600 + SLACK_SECONDS


def info_rules(platform: Platform) -> list[dict]:
    """Per team with scheduled snapshots: its CronJob, and the oldest its last successful snapshot may be."""
    rules = []
    for team in platform.teams:
        backup = team.vcluster.backup
        if backup is None:
            continue
        labels = {"team": team.name, "namespace": team.namespace, "cronjob": backup_name(team)}
        rules += [{"record": BACKUP_INFO, "expr": "vector(1)", "labels": labels},
                  {"record": MAX_AGE, "expr": f"vector({max_age_seconds(backup.every_hours)})", "labels": labels}]
    return rules


def failed_run_start() -> str:
    """Per CronJob: when its newest failed Job started (the history keeps the last failed one)."""
    failed = ("max by (namespace, job_name) (kube_job_status_start_time) and on (namespace, job_name) "
              '(max by (namespace, job_name) (kube_job_failed{condition="true"}) == 1)')
    owner = ('label_replace(max by (namespace, job_name, owner_name) (kube_job_owner{owner_kind="CronJob"}), '
             '"cronjob", "$1", "owner_name", "(.+)")')
    return f"max by ({_KEY}) (({failed}) * on (namespace, job_name) group_left (cronjob) {owner})"


def stale_age() -> str:
    """Per team: seconds since its last successful run, or since its CronJob was created when none succeeded yet
    (a new site is not paged before its first runs had their chance), above the team's allowed age."""
    return (f"(time() - ({LAST_SUCCESS} or {CREATED})) > on ({_KEY}) group_left (team) {MAX_AGE}")


def last_run_failed() -> str:
    """Per team: the start time of its newest failed run, when no run succeeded after it started."""
    failed = failed_run_start()
    newer = f"({failed} > on ({_KEY}) {LAST_SUCCESS}) or ({failed} unless on ({_KEY}) {LAST_SUCCESS})"
    return f"({newer}) * on ({_KEY}) group_left (team) {BACKUP_INFO}"


def alert_rules(platform: Platform) -> list[dict]:
    if not any(team.vcluster.backup for team in platform.teams):
        return []
    how = ("The job's log says why (kubectl -n {{ $labels.namespace }} logs job/<the failed job>): the phase and "
           "error vCluster recorded in the snapshot request, or that it recorded none before the job's deadline. "
           "Fix the cause (the access key in the secrets backupAccessKeyId/backupSecretAccessKey, the bucket, the "
           "store's address or reachability, the team's control plane not running), then run one now: kubectl -n "
           "{{ $labels.namespace }} create job --from=cronjob/{{ $labels.cronjob }} "
           "{{ $labels.cronjob }}-$(( $(date +%s) / 60 )) "
           "(docs/operations-data.md, Backing up and restoring a team).")
    return [
        {"alert": "GpuTenancyTeamBackupFailed", "expr": last_run_failed(), "for": "0m",
         "labels": {"severity": "warning"},
         "annotations": {
             "summary": "Team {{ $labels.team }}'s last snapshot failed",
             "description": "The snapshot run of {{ $labels.team }} that started {{ $value | humanizeTimestamp }} "
                            "failed and no run has succeeded since: its newest snapshot in the store is older "
                            "than one interval.",
             "runbook": how}},
        {"alert": "GpuTenancyTeamBackupStale", "expr": stale_age(), "for": "0m",
         "labels": {"severity": "critical"},
         "annotations": {
             "summary": "Team {{ $labels.team }} has had no successful snapshot for {{ $value | humanizeDuration }}",
             "description": f"No snapshot run of {{{{ $labels.team }}}} succeeded for {INTERVALS_WITHOUT_SUCCESS} "
                            "of its intervals (backup.every) and more (or none ever did since its CronJob was "
                            "created): a restore would lose everything since.",
             "runbook": how + " A run that never starts (the CronJob suspended or its pod not scheduled: the "
                              "namespace's quota, no system node) shows as the CronJob's events."}},
    ]


def rule_groups(platform: Platform) -> list[dict]:
    """The backup group of the PrometheusRule, or none without ``backup``."""
    rules = info_rules(platform) + alert_rules(platform)
    return [{"name": "gpu-tenancy-backups", "rules": rules}] if rules else []
