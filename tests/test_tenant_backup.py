"""Scheduled snapshots (gpu-tenancy:backup): what the program registers for each team and what it may reach.

The job's shell runs in a real ``sh`` with the clock and the control plane's binary stood in for, so the slot it
picks and the options it hands over are the ones a run at that time would use. Its pod is held to the restricted
Pod Security level, the namespace's quota pays for it on top of the team's allowance, and the NetworkPolicies open
the store to the control plane and the restore pod and nothing else (the tenant network attacks' evaluation).
A hostile tenant cannot pass its pods for the snapshot pods (the store's way out) nor mount the job's Secrets.
What vCluster does with the request is read in its source (tests/test_snapshot_contract.py).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from components.tenant_backup import SCRIPT, backup_name, backup_pod_spec, options_data, run_minute, schedule
from components.tenant_network import tenant_network_policies
from config import ConfigError
from config.tenant_budget import namespace_budget
from ops import backup as backup_ops
from ops.sites import platform_of
from tests.conftest import run, stack_config
from tests.tenant_sim import Tenant, admission_for, virtual_pod
from tests.test_tenant_network import Target, reaches
from tools.deployability.network_ingress import Pod
from tools.deployability.pod_security import violations
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

MINIO = {"url": "s3://lab-backups/gpu", "endpoint": "http://192.168.1.20:9000", "region": "us-east-1", "every": "6h",
         "keep": 4}
CRON_JOB = "kubernetes:batch/v1:CronJob"


def site(stack: str, backup: dict | None) -> dict:
    config = stack_config(stack)
    config.pop("gpu-tenancy:backup", None)
    if backup is not None:
        config["gpu-tenancy:backup"] = backup
    return config


def teams_of(stack: str, backup: dict | None):
    return platform_of(site(stack, backup), stack).teams


@pytest.fixture(scope="module")
def dev_with_minio():
    return run(site("dev", MINIO), "dev")


def test_every_team_gets_one_snapshot_job_in_its_namespace(dev_with_minio):
    jobs = {job.inputs["metadata"]["namespace"]: job for job in dev_with_minio.of_type(CRON_JOB)}
    teams = teams_of("dev", MINIO)
    assert set(jobs) == {team.namespace for team in teams}
    for team in teams:
        spec = jobs[team.namespace].inputs["spec"]
        assert spec["schedule"] == f"{run_minute(team)} */6 * * *" and spec["concurrencyPolicy"] == "Forbid"
        pod = spec["jobTemplate"]["spec"]["template"]
        assert pod["metadata"]["labels"]["app"] == "vcluster-snapshot"
        [container] = pod["spec"]["containers"]
        assert container["image"] == "ghcr.io/loft-sh/vcluster-pro:0.36.1"
        volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
        assert volumes["config"]["secret"]["secretName"] == f"vc-config-{team.vcluster_name}"
    assert run(site("dev", None), "dev").of_type(CRON_JOB) == []


def test_the_job_may_only_create_the_request(dev_with_minio):
    for role in (role for role in dev_with_minio.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
                 if role.name.endswith("-backup")):
        assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["secrets", "configmaps"],
                                         "verbs": ["create"]}]


@pytest.mark.parametrize("every, hours", [("1h", "*/1"), ("8h", "*/8"), ("24h", "0")])
def test_runs_fall_in_their_hour_at_a_minute_of_each_team(every, hours):
    teams = teams_of("dev", {**MINIO, "every": every})
    assert [schedule(team.vcluster.backup, team) for team in teams] == \
        [f"{run_minute(team)} {hours} * * *" for team in teams]
    # The three teams' runs do not start together.
    assert len({run_minute(team) for team in teams}) == len(teams)


def run_script(tmp_path: Path, team, now: int) -> dict:
    """The job's shell at ``now``: its slot's options, as the control plane's binary would receive them."""
    backup = team.vcluster.backup
    options = tmp_path / "options"
    options.mkdir(exist_ok=True)
    for name, value in options_data(backup, team, "AKIAEXAMPLE", "s3cr3t/key+").items():
        (options / name).write_text(value)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "date").write_text(f"#!/bin/sh\necho {now}\n")
    (bin_dir / "vcluster").write_text('#!/bin/sh\nprintf %s "$VCLUSTER_STORAGE_OPTIONS"\n')
    for stub in ("date", "vcluster"):
        (bin_dir / stub).chmod(0o755)
    script = SCRIPT.replace("/snapshot-options", str(options)).replace("exec /vcluster", f"exec {bin_dir}/vcluster")
    env = {e["name"]: e["value"] for e in backup_pod_spec(team, backup)["containers"][0]["env"]}
    done = subprocess.run([shutil.which("sh"), "-c", script], capture_output=True, text=True, check=True,
                          env={**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return json.loads(base64.b64decode(done.stdout))


def test_each_run_writes_the_next_slot_and_the_oldest_is_overwritten(tmp_path):
    team = teams_of("dev", MINIO)[0]
    # A run at its minute of the interval's first hour, and 42 s into it.
    start = 1_765_000_800 - 1_765_000_800 % (6 * 3600) + run_minute(team) * 60 + 42
    keys = [run_script(tmp_path, team, start + run * 6 * 3600)["s3"]["key"] for run in range(5)]
    prefix = f"gpu/{team.namespace}/{team.vcluster_name}"
    assert len(set(keys[:4])) == 4 and keys[4] == keys[0]
    assert all(key.startswith(prefix + "/") and key.endswith(".tar.gz") for key in keys)
    options = run_script(tmp_path, team, start)
    assert options == {"type": "s3", "s3": {
        "bucket": "lab-backups", "key": keys[0], "access-key-id": "AKIAEXAMPLE", "secret-access-key": "s3cr3t/key+",
        "region": "us-east-1", "url": "http://192.168.1.20:9000", "force-path-style": True}}


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_the_job_passes_restricted_pod_security(stack):
    for team in teams_of(stack, MINIO):
        assert list(violations(backup_pod_spec(team, team.vcluster.backup), "restricted")) == []


def test_the_namespace_quota_pays_for_the_job_and_its_requests():
    [plain, *_] = teams_of("dev", None)
    for every, config_maps in (("24h", 3), ("1h", 35)):
        [backed_up, *_] = teams_of("dev", {**MINIO, "every": every})
        before, after = namespace_budget(plain.vcluster), namespace_budget(backed_up.vcluster)
        assert (after.pods - before.pods, after.millicores - before.millicores) == (1, 10)
        assert after.memory - before.memory == 64 * 2 ** 20
        assert (after.config_maps - before.config_maps, after.secrets - before.secrets) == (config_maps, 2)


def pods(team):
    return {"control plane": Pod(team.namespace, {"release": team.vcluster_name}),
            "restore pod": Pod(team.namespace, {"app": "vcluster-snapshot"})}


def test_on_microk8s_the_store_named_by_its_address_is_opened_there_only():
    for team in teams_of("dev", MINIO):
        policies = list(tenant_network_policies(team).values())
        for who, pod in pods(team).items():
            assert reaches(policies, pod, Target("MinIO", "192.168.1.20", 9000)), who
            for other in (Target("another LAN host", "192.168.1.21", 9000), Target("MinIO, another port",
                          "192.168.1.20", 22), Target("S3", "52.95.110.1", 443)):
                assert not reaches(policies, pod, other), (who, other)
        # The tenant's own pods gain nothing.
        workload = Pod(team.namespace, {"vcluster.loft.sh/managed-by": team.vcluster_name})
        assert not reaches(policies, workload, Target("MinIO", "192.168.1.20", 9000))


def test_on_microk8s_aws_s3_is_opened_on_the_public_internet_only():
    for team in teams_of("dev", {"url": "s3://corp-backups/lab"}):
        policies = list(tenant_network_policies(team).values())
        for who, pod in pods(team).items():
            assert reaches(policies, pod, Target("S3", "52.95.110.1", 443)), who
            for inside in ("10.1.0.7", "192.168.1.20", "169.254.169.254", "100.64.0.1"):
                assert not reaches(policies, pod, Target("inside", inside, 443)), (who, inside)
        commands, problems = backup_ops.plan("dev", team.name, "restore", "s3://corp-backups/lab/x.tar.gz",
                                             config=site("dev", {"url": "s3://corp-backups/lab"}))
        assert problems == [] and commands


def test_on_eks_the_api_servers_rule_already_reaches_s3_and_nothing_is_added():
    with_backup, without = teams_of("eks", {"url": "s3://corp-backups/eks"}), teams_of("eks", None)
    for team, plain in zip(with_backup, without):
        assert tenant_network_policies(team) == tenant_network_policies(plain)


@pytest.mark.parametrize("backup, key, words", [
    ({"url": "container:///data/snap"}, "backup.url", "container:// would write onto the volume"),
    ({"url": "s3://corp-backups/lab", "every": "5h"}, "backup.every", "must be one of 1h, 2h"),
    ({"url": "s3://corp-backups/lab", "keep": 0}, "backup.keep", "must be between 1 and 1000"),
    ({"url": "s3://corp-backups/lab", "endpoint": "minio:9000"}, "backup.endpoint", "is not an endpoint URL"),
    ({"keep": 3}, "backup.url", "required key is missing"),
    ({"url": "s3://corp-backups/lab", "endpoint": "http://192.168.1.20:9000"}, "backup.region",
     "needs the region its requests are signed for"),
])
def test_a_bad_backup_block_is_refused_naming_the_key_and_the_fix(backup, key, words):
    with pytest.raises(ConfigError) as raised:
        platform_of(site("dev", backup), "dev")
    [issue] = [issue for issue in raised.value.issues if issue.full_key == f"gpu-tenancy:{key}"]
    assert words in issue.problem and issue.fix


def test_the_job_name_fits_a_cron_job():
    [team, *_] = teams_of("dev", MINIO)
    long = dataclasses.replace(team, vcluster_name="v" * 52)
    assert len(backup_name(long)) <= 52 and not backup_name(long).endswith("-")


def test_the_review_summary_lists_each_teams_snapshot_schedule(dev_with_minio):
    summary = render_summary(build_plan(dev_with_minio, "dev"))
    section = summary[summary.index("## Jobs and cluster-wide objects"):]
    for team in teams_of("dev", MINIO):
        assert f"| `{backup_name(team)}` | `{team.namespace}` | `{run_minute(team)} */6 * * * Etc/UTC` | " \
               f"`ghcr.io/loft-sh/vcluster-pro:0.36.1` |" in section
    assert "Scheduled (CronJob)" not in render_summary(build_plan(run(site("dev", None), "dev"), "dev"))


# --- a hostile tenant, cluster-admin in its vCluster, against a backed-up site ---------------------------------------


@pytest.fixture(scope="module")
def nlp_backed_up(dev_with_minio) -> Tenant:
    team = next(team for team in teams_of("dev", MINIO) if team.name == "team-nlp")
    return Tenant(admission_for(dev_with_minio, "team-nlp"), team)


def on_kai(tenant: Tenant, **kwargs) -> dict:
    return virtual_pod(queue=tenant.team.queue_name, scheduler="kai-scheduler", **kwargs)


def refused_rules(messages: list[str]) -> set[str]:
    return {message[1:message.index("]")] for message in messages}


def test_a_tenant_pod_cannot_pass_for_the_snapshot_pods_to_reach_the_store(nlp_backed_up):
    """The store is open to pods labelled app: vcluster-snapshot: a synced pod wearing it is refused, on create and
    when relabelled later, while the honest pod still runs."""
    assert nlp_backed_up.create(on_kai(nlp_backed_up)) == []
    assert "reserved-values" in refused_rules(nlp_backed_up.create(on_kai(nlp_backed_up,
                                                                           labels={"app": "vcluster-snapshot"})))
    running = nlp_backed_up.host_pod(on_kai(nlp_backed_up))
    relabelled = {**running, "metadata": {**running["metadata"],
                                          "labels": {**running["metadata"]["labels"], "app": "vcluster-snapshot"}}}
    assert "reserved-values" in refused_rules(nlp_backed_up.update(running, relabelled))


def test_a_tenant_pod_naming_the_backup_secrets_gets_its_own_translated_ones(nlp_backed_up):
    """The store's key and the control plane's config are host Secrets of the team's namespace; a virtual pod that
    names them gets the syncer's translated names on the host, never those Secrets."""
    team = nlp_backed_up.team
    wanted = {f"{backup_name(team)}-options", f"vc-config-{team.vcluster_name}"}
    pod = on_kai(nlp_backed_up, volumes=[{"name": f"v{index}", "secret": {"secretName": name}}
                                         for index, name in enumerate(sorted(wanted))])
    host = nlp_backed_up.host_pod(pod)
    named = {volume["secret"]["secretName"] for volume in host["spec"]["volumes"] if "secret" in volume}
    assert named and not named & wanted
