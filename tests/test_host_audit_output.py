"""The stack output ``hostAuditLog`` says where the host's audit log is kept, so whoever answers an incident on the host
(which team's syncer, tool or person did what) finds it from ``pulumi stack output`` without reading the program: the
file on a MicroK8s box, as the setup step makes the API server write it; the CloudWatch log group on EKS, as the
program creates it. No output where the program keeps none."""

from __future__ import annotations

import json

import pytest

from components.apiserver_audit import MAX_AGE_FLAG, MAX_BACKUP_FLAG, MAX_SIZE_FLAG, PATH_FLAG, POLICY_FLAG
from config.model_host import AuditLog
from tests.apiserver_audit_readers import SNAP_APISERVER_ARGS, AuditBox, audit_flags
from tests.conftest import dev_config, eks_config, run
from tests.test_eks_control_plane_logs import with_logs
from tests.test_image_volumes import kubeconfig_config

OUTPUT = "hostAuditLog"


def with_microk8s_audit_log(**settings) -> dict:
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["auditLog"] = settings
    return config


def test_a_microk8s_site_names_the_file_its_api_server_writes_and_the_policy_it_reads(dev_run, tmp_path):
    where = dev_run.outputs[OUTPUT]
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    assert box.set().returncode == 0
    written = audit_flags(box.args.read_text())
    assert written[PATH_FLAG] == where["file"]
    assert where["rotatedFiles"] == where["file"].removesuffix(".log") + "-<time>.log"
    # The box's policy file is the step's default, which the scratch box puts elsewhere.
    assert where["policyFile"].endswith("/args/gpu-tenancy-audit-policy.yaml") and written[POLICY_FLAG] != ""
    assert where["machine"] == ("the box at cluster.microk8s.host" if "host" in dev_config()["gpu-tenancy:cluster"][
        "microk8s"] else "the machine that ran pulumi up")


def test_the_microk8s_output_follows_the_sites_rotation_settings_as_the_step_writes_them(tmp_path):
    program = run(with_microk8s_audit_log(maxAgeDays=90, maxBackups=20, maxSizeMegabytes=200))
    where = program.outputs[OUTPUT]
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.set(AuditLog(max_age_days=90, max_backups=20, max_size_megabytes=200))
    written = audit_flags(box.args.read_text())
    # Numbers cross the engine as floats.
    assert (int(where["maxAgeDays"]), int(where["maxBackups"]), int(where["maxSizeMegabytes"])) == (
        int(written[MAX_AGE_FLAG]), int(written[MAX_BACKUP_FLAG]), int(written[MAX_SIZE_FLAG])) == (90, 20, 200)
    # The file being written and every rotated one kept.
    assert where["diskMegabytes"] == 21 * 200


def test_the_machine_is_named_by_its_key_never_its_address():
    """The program keeps the SSH connection secret as a whole (tests/test_plan_diff.py): the box's address stays out
    of the plain output."""
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"].pop("host", None)
    assert run(config).outputs[OUTPUT]["machine"] == "the machine that ran pulumi up"
    config["gpu-tenancy:cluster"]["microk8s"]["host"] = "192.0.2.44"
    config["gpu-tenancy:sshPrivateKey"] = {"secure": "v1:encrypted"}
    program = run(config)
    assert program.outputs[OUTPUT]["machine"] == "the box at cluster.microk8s.host"
    assert "192.0.2.44" not in json.dumps(program.outputs[OUTPUT])


def test_an_eks_site_names_the_log_group_the_program_creates_in_the_sites_region(eks_run):
    where = eks_run.outputs[OUTPUT]
    group = eks_run.named("host-control-plane-logs")
    [aws] = eks_run.of_type("pulumi:providers:aws")
    assert where == {"region": aws.inputs["region"], "cloudWatchLogGroup": group.inputs["name"],
                     "retentionDays": group.inputs["retentionInDays"]}


def test_an_eks_site_that_keeps_its_logs_forever_says_so():
    assert run(with_logs(eks_config(), retentionDays=0)).outputs[OUTPUT]["retentionDays"] == "forever"


@pytest.mark.parametrize("config", [
    pytest.param(lambda: with_microk8s_audit_log(enabled=False), id="microk8s-log-off"),
    pytest.param(lambda: with_logs(eks_config(), types=["api", "authenticator"]), id="eks-without-audit"),
    pytest.param(lambda: with_logs(eks_config(), types=[]), id="eks-no-logs"),
    pytest.param(kubeconfig_config, id="existing-cluster"),
])
def test_no_output_where_the_program_keeps_no_audit_log(config):
    assert OUTPUT not in run(config()).outputs
