"""When a team's snapshot runs and for how long (components/tenant_backup.py): the script's own wait, the retry, the
Job's deadline and the CronJob's schedule hold together for every interval a site may choose, and both tries of a
run write the slot of its scheduled time, which the Job's name carries (so the retry's request cancels the first
try's: tests/test_snapshot_contract.py). The job's shell runs in a real ``sh`` as in tests/test_tenant_backup.py.
"""

from __future__ import annotations

import re

import pytest

from components.tenant_backup import (ATTEMPTS, JOB_NAME_LABEL, RUN_SECONDS, SCRIPT, STARTING_DEADLINE_SECONDS,
                                      TRY_OVERHEAD_SECONDS, WAIT_SECONDS, backup_name, backup_pod_spec)
from config.snapshots import INTERVALS
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.test_tenant_backup import CRON_JOB, KUBECTL, MINIO, request_config_map, run_script, teams_of
from tests.test_tenant_backup import dev_with_minio  # noqa: F401 (fixture)

API = "kubernetes/api"


def test_a_retry_writes_its_runs_slot_and_a_job_named_by_hand_the_clocks(tmp_path):
    """Hourly, a run scheduled at minute 59 and started at its starting deadline retries in the next hour: both tries
    write the slot of the scheduled hour (so the retry's request, for the same URL, cancels the first's)."""
    team = teams_of("dev", {**MINIO, "every": "1h"})[0]
    scheduled = 1_765_000_800 - 1_765_000_800 % 3600 + 59 * 60
    job = f"{backup_name(team)}-{scheduled // 60}"
    completed = [request_config_map(team, "Completed")]
    first = run_script(tmp_path, team, scheduled + STARTING_DEADLINE_SECONDS, completed, job=job)
    retry = run_script(tmp_path, team, scheduled + STARTING_DEADLINE_SECONDS + RUN_SECONDS // ATTEMPTS, completed,
                       job=job)
    following = run_script(tmp_path, team, scheduled + 3600, completed)
    assert first.options["s3"]["key"] == retry.options["s3"]["key"] != following.options["s3"]["key"]
    assert (scheduled + STARTING_DEADLINE_SECONDS + RUN_SECONDS // ATTEMPTS) // 3600 != scheduled // 3600
    # A Job created by hand under another name writes the slot of the hour it runs in.
    now = run_script(tmp_path, team, scheduled + 3600 + 30, completed, job=f"{backup_name(team)}-now")
    assert now.options["s3"]["key"] == following.options["s3"]["key"]


@pytest.mark.parametrize("tag", MIRRORED_TAGS[API])
def test_the_pod_learns_its_jobs_name_from_the_label_the_job_controller_sets(tag):
    types = git(API, "show", f"{mirrored_tag(API, tag)}:batch/v1/types.go")
    prefix = re.search(r'labelPrefix\s*=\s*"([^"]+)"', types).group(1)
    assert re.search(r'JobNameLabel\s*=\s*labelPrefix \+ "job-name"', types)
    assert JOB_NAME_LABEL == f"{prefix}job-name"
    team = teams_of("dev", MINIO)[0]
    [env] = [e for e in backup_pod_spec(team, team.vcluster.backup, KUBECTL)["containers"][0]["env"]
             if e["name"] == "JOB_NAME"]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{JOB_NAME_LABEL}']"


@pytest.mark.parametrize("every", sorted(INTERVALS))
def test_both_tries_wait_alike_and_a_run_ends_before_the_next_one_starts(dev_with_minio, every):
    """A run whose Job started at its starting deadline, each try failing only at its own wait, ends within the
    Job's deadline, before the next run's time, for every interval a site may choose."""
    [job] = [job.inputs["spec"] for job in dev_with_minio.of_type(CRON_JOB)][:1]
    spec = job["jobTemplate"]["spec"]
    tries = spec["backoffLimit"] + 1
    assert tries == ATTEMPTS >= 2 and job["concurrencyPolicy"] == "Forbid"
    assert job["startingDeadlineSeconds"] == STARTING_DEADLINE_SECONDS
    worst = tries * (TRY_OVERHEAD_SECONDS + WAIT_SECONDS)
    assert worst <= spec["activeDeadlineSeconds"] == RUN_SECONDS
    assert STARTING_DEADLINE_SECONDS + RUN_SECONDS <= INTERVALS[every] * 3600
    # The wait a try announces is the one it keeps (the script's own timeout).
    assert f"-ge {WAIT_SECONDS} ]" in SCRIPT and WAIT_SECONDS >= 20 * 60
