"""Scheduled snapshots (gpu-tenancy:backup): what the program registers for each team and what it may reach.

The job's shell runs in a real ``sh`` with the clock and the control plane's binary stood in for, so the slot it
picks and the options it hands over are the ones a run at that time would use; with the answers of its proxy stood
in for too, it succeeds once the control plane recorded the upload, and fails with the recorded reason, or at its
deadline, never printing the store's key. Its pod is held to the restricted
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
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from components.tenant_backup import (POLL_SECONDS, RUN_SECONDS, SCRIPT, TRY_OVERHEAD_SECONDS, WAIT_SECONDS,
                                      WGET_TIMEOUT_SECONDS, backup_name, backup_pod_spec, options_data, run_minute,
                                      schedule)
from components.pod_size_admission import POD_SIZE_POLICY
from components.tenant_network import tenant_network_policies
from config import ConfigError
from config.tenant_budget import namespace_budget
from ops import backup as backup_ops
from ops.sites import platform_of
from tests.conftest import run, stack_config
from tests.test_snapshot_contract import BUSYBOX_WGET_TIMEOUT
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


def test_the_job_may_only_create_the_request_and_read_it_back(dev_with_minio):
    roles = [role for role in dev_with_minio.of_type("kubernetes:rbac.authorization.k8s.io/v1:Role")
             if role.name.endswith("-backup")]
    assert len(roles) == 3
    for role in roles:
        assert role.inputs["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
                                        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}]


@pytest.mark.parametrize("every, hours", [("1h", "*/1"), ("8h", "*/8"), ("24h", "0")])
def test_runs_fall_in_their_hour_at_a_minute_of_each_team(every, hours):
    teams = teams_of("dev", {**MINIO, "every": every})
    assert [schedule(team.vcluster.backup, team) for team in teams] == \
        [f"{run_minute(team)} {hours} * * *" for team in teams]
    # The three teams' runs do not start together.
    assert len({run_minute(team) for team in teams}) == len(teams)


KUBECTL = "registry.k8s.io/kubectl:v1.36.3"
ACCESS_KEY, SECRET_KEY = "AKIAEXAMPLE", "s3cr3t/key+"
REQUEST = "team-nlp-vc-snapshot-request-x7k2p"


def request_config_map(team, phase: str | None = None, message: str | None = None) -> str:
    """The request's ConfigMap as the API server returns it: the request's JSON, as loft-sh/api marshals it (metadata,
    spec, status; the status's phase first, its error last: tests/test_snapshot_contract.py), a string in ``data``."""
    status = {**({"phase": phase} if phase else {}), "error": {"message": message} if message else {}}
    request = {"metadata": {"name": REQUEST, "creationTimestamp": "2026-12-05T18:07:00Z"},
               "spec": {"url": "s3://lab-backups/gpu/x/0.tar.gz"}, "status": status}
    return json.dumps({"kind": "ConfigMap", "apiVersion": "v1", "metadata": {
        "name": REQUEST, "namespace": team.namespace, "labels": {"vcluster.loft.sh/snapshot-request": ""},
        "finalizers": ["vcluster.loft.sh/snapshot-controller"]},
        "data": {"snapshotRequest": json.dumps(request, separators=(",", ":"))}}, separators=(",", ":"))


@dataclasses.dataclass
class Run:
    returncode: int
    output: str
    options: dict
    polls: list[str]


def run_script(tmp_path: Path, team, now: int, answers: list[str | None] = (), create_fails: bool = False,
               job: str | None = None, script: str = SCRIPT) -> Run:
    """The job's shell at ``now`` in a real ``sh``, in a pod of the Job ``job`` (by default the CronJob's, scheduled
    at ``now``'s minute): the control plane's binary, the clock, ``sleep`` and the proxy's answers (``wget``: each
    call the next answer, the last repeated; None for no answer) stood in for."""
    backup = team.vcluster.backup
    options = tmp_path / "options"
    options.mkdir(exist_ok=True)
    for name, value in options_data(backup, team, ACCESS_KEY, SECRET_KEY).items():
        (options / name).write_text(value)
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    for folder in (bin_dir, state):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    (state / "clock").write_text(str(now))
    for index, answer in enumerate(answers or [None]):
        (state / f"answer-{index}").write_text("FAIL" if answer is None else answer)
    created = {"metadata": {"name": REQUEST, "creationTimestamp": "2026-12-05T18:07:00Z"},
               "spec": {"url": "s3://lab-backups/gpu/x/0.tar.gz"}, "status": {"error": {}}}
    stubs = {
        "date": f'cat {state}/clock',
        "sleep": f'echo $(( $(cat {state}/clock) + $1 )) > {state}/clock',
        "vcluster": (f'printf %s "$VCLUSTER_STORAGE_OPTIONS" > {state}/options\n'
                     + ("echo 'Error: failed to init client config' >&2; exit 1" if create_fails else
                        f"printf '%s' '{json.dumps(created, separators=(',', ':'))}'")),
        # A silent proxy (HANG) holds wget for its -T, busybox's default when none is given, then it fails.
        "wget": (f'echo "$*" >> {state}/polls\nn=$(wc -l < {state}/polls); i=$(( n - 1 ))\n'
                 f'while [ ! -f {state}/answer-$i ]; do i=$(( i - 1 )); done\n'
                 f'timeout={BUSYBOX_WGET_TIMEOUT}; while [ $# -gt 0 ]; do [ "$1" = -T ] && timeout=$2; shift; done\n'
                 f'[ "$(cat {state}/answer-$i)" = HANG ] && echo $(( $(cat {state}/clock) + timeout )) > {state}/clock '
                 f'&& exit 1\n'
                 f'[ "$(cat {state}/answer-$i)" = FAIL ] && exit 1\ncat {state}/answer-$i'),
    }
    for stub, body in stubs.items():
        (bin_dir / stub).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / stub).chmod(0o755)
    script = script.replace("/snapshot-options", str(options)).replace("/vcluster snapshot",
                                                                      f"{bin_dir}/vcluster snapshot")
    env = {e["name"]: e["value"] for e in backup_pod_spec(team, backup, KUBECTL)["containers"][0]["env"]
           if "value" in e}
    env["JOB_NAME"] = f"{backup_name(team)}-{now // 60}" if job is None else job
    done = subprocess.run([shutil.which("sh"), "-c", script], capture_output=True, text=True, timeout=60,
                          env={**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    seen = (state / "options").read_text() if (state / "options").exists() else ""
    polls = (state / "polls").read_text().splitlines() if (state / "polls").exists() else []
    return Run(done.returncode, done.stdout + done.stderr, json.loads(base64.b64decode(seen)) if seen else {}, polls)


def test_each_run_writes_the_next_slot_and_the_oldest_is_overwritten(tmp_path):
    team = teams_of("dev", MINIO)[0]
    # A run at its minute of the interval's first hour, and 42 s into it.
    start = 1_765_000_800 - 1_765_000_800 % (6 * 3600) + run_minute(team) * 60 + 42
    completed = [request_config_map(team, "Completed")]
    keys = [run_script(tmp_path, team, start + run * 6 * 3600, completed).options["s3"]["key"] for run in range(5)]
    prefix = f"gpu/{team.namespace}/{team.vcluster_name}"
    assert len(set(keys[:4])) == 4 and keys[4] == keys[0]
    assert all(key.startswith(prefix + "/") and key.endswith(".tar.gz") for key in keys)
    options = run_script(tmp_path, team, start, completed).options
    assert options == {"type": "s3", "s3": {
        "bucket": "lab-backups", "key": keys[0], "access-key-id": ACCESS_KEY, "secret-access-key": SECRET_KEY,
        "region": "us-east-1", "url": "http://192.168.1.20:9000", "force-path-style": True}}


def accepted_by_the_proxy(team, path: str) -> bool:
    """Whether the sidecar's ``kubectl proxy`` passes a GET of ``path`` (its --accept-paths, matched as Go does)."""
    [sidecar] = backup_pod_spec(team, team.vcluster.backup, KUBECTL)["initContainers"]
    [accept] = [arg.split("=", 1)[1] for arg in sidecar["args"] if arg.startswith("--accept-paths=")]
    return any(re.search(pattern, path) for pattern in accept.split(","))


def test_a_run_succeeds_once_the_control_plane_recorded_the_upload(tmp_path):
    team = teams_of("dev", MINIO)[0]
    # The proxy not answering yet, the request not started, under way, then done.
    run = run_script(tmp_path, team, 1_765_000_000, [None, request_config_map(team),
                                                      request_config_map(team, "CreatingEtcdBackup"),
                                                      request_config_map(team, "Completed")])
    assert run.returncode == 0, run.output
    assert f"snapshot uploaded (request {REQUEST} Completed)" in run.output
    assert len(run.polls) == 4
    url = f"http://127.0.0.1:8001/api/v1/namespaces/{team.namespace}/configmaps/{REQUEST}"
    assert all(poll == f"-q -T {WGET_TIMEOUT_SECONDS} -O - {url}" for poll in run.polls)
    path = url.removeprefix("http://127.0.0.1:8001")
    assert accepted_by_the_proxy(team, path)
    for other in (path.replace("configmaps", "secrets"), path.replace(team.namespace, "kube-system"),
                  f"/api/v1/namespaces/{team.namespace}/configmaps", f"{path}/x"):
        assert not accepted_by_the_proxy(team, other), other
    assert ACCESS_KEY not in run.output and SECRET_KEY not in run.output


@pytest.mark.parametrize("phase", ["Failed", "PartiallyFailed", "Canceled"])
def test_a_run_fails_with_the_reason_the_control_plane_recorded(tmp_path, phase):
    team = teams_of("dev", MINIO)[0]
    message = ("failed to reconcile etcd backup creation for snapshot request: failed to run snapshot client: "
               "operation error S3: PutObject, https response error StatusCode: 403, api error AccessDenied")
    run = run_script(tmp_path, team, 1_765_000_000, [request_config_map(team, "CreatingEtcdBackup"),
                                                      request_config_map(team, phase, message)])
    assert run.returncode == 1
    assert f"snapshot request {REQUEST} {phase}: {message}" in run.output
    assert ACCESS_KEY not in run.output and SECRET_KEY not in run.output


def test_a_run_fails_when_the_control_plane_records_nothing_before_the_deadline(tmp_path):
    team = teams_of("dev", MINIO)[0]
    run = run_script(tmp_path, team, 1_765_000_000, [request_config_map(team, "CreatingEtcdBackup")])
    assert run.returncode == 1
    assert f"snapshot request {REQUEST} still CreatingEtcdBackup after {WAIT_SECONDS}s" in run.output
    # It polls every POLL_SECONDS until then, and gives up before the Job's own deadline.
    assert len(run.polls) == WAIT_SECONDS // POLL_SECONDS + 1 and WAIT_SECONDS < RUN_SECONDS
    unread = run_script(tmp_path, team, 1_765_000_000, [None])
    assert unread.returncode == 1 and f"snapshot request {REQUEST} still unread after" in unread.output


def test_a_proxy_that_stops_answering_keeps_no_run_past_its_own_deadline(tmp_path):
    team = teams_of("dev", MINIO)[0]
    start = 1_765_000_000
    silent = run_script(tmp_path, team, start, ["HANG"])
    assert silent.returncode == 1 and f"snapshot request {REQUEST} still unread after {WAIT_SECONDS}s" in silent.output
    assert all(poll.startswith(f"-q -T {WGET_TIMEOUT_SECONDS} ") for poll in silent.polls)
    # The shell says why within the try's overhead past its wait, before the Job's deadline would end it unsaid.
    overrun = int((tmp_path / "state" / "clock").read_text()) - start - WAIT_SECONDS
    assert 0 < overrun <= POLL_SECONDS + WGET_TIMEOUT_SECONDS < TRY_OVERHEAD_SECONDS
    # Without -T, wget's own default outlasts the overhead.
    untimed = run_script(tmp_path, team, start, ["HANG"], script=SCRIPT.replace(f"-T {WGET_TIMEOUT_SECONDS} ", ""))
    assert untimed.returncode == 1
    assert int((tmp_path / "state" / "clock").read_text()) - start - WAIT_SECONDS > TRY_OVERHEAD_SECONDS


def test_a_run_fails_when_the_request_cannot_be_written(tmp_path):
    team = teams_of("dev", MINIO)[0]
    run = run_script(tmp_path, team, 1_765_000_000, [request_config_map(team, "Completed")], create_fails=True)
    assert run.returncode != 0 and "failed to init client config" in run.output and run.polls == []


@pytest.mark.parametrize("stack", ["dev", "eks"])
def test_the_job_passes_restricted_pod_security(stack):
    for team in teams_of(stack, MINIO):
        spec = backup_pod_spec(team, team.vcluster.backup, KUBECTL)
        assert [container["name"] for container in spec["initContainers"]] == ["api-proxy"]
        assert list(violations(spec, "restricted")) == []


def test_the_namespace_quota_pays_for_the_job_and_its_requests():
    [plain, *_] = teams_of("dev", None)
    for every, config_maps in (("24h", 3), ("1h", 35)):
        [backed_up, *_] = teams_of("dev", {**MINIO, "every": every})
        before, after = namespace_budget(plain.vcluster), namespace_budget(backed_up.vcluster)
        # The snapshot container and its proxy sidecar run together.
        assert (after.pods - before.pods, after.millicores - before.millicores) == (1, 20)
        assert after.memory - before.memory == (64 + 32) * 2 ** 20
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
    # A trial site's URLs, once all told they were no s3:// URL: each now names what S3 refuses.
    ({"url": "s3://ab/lab"}, "backup.url", "names a bucket S3 does not accept: a bucket's name is 3 to 63"),
    ({"url": "s3://My_Bucket/lab"}, "backup.url", "names a bucket S3 does not accept"),
    ({"url": "s3://corp-backups/lab 2"}, "backup.url", "has a key prefix with characters other than"),
    ({"url": "s3://corp-backups/lab+2"}, "backup.url", "has a key prefix with characters other than"),
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
    return Tenant(admission_for(dev_with_minio, "team-nlp"), team,
                  admission_for(dev_with_minio, "team-nlp", POD_SIZE_POLICY))


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
