"""A MicroK8s host's API server keeps an audit log (cluster.microk8s.auditLog): who did what on the host, each team's
vCluster syncer and the platform's tools alike, at level Metadata (never a request's or response's body), rotated so
it takes a bounded share of the node's disk (docs/operations-running.md#the-host-api-servers-audit-log).

The step's shell runs here for real against a scratch args file (only ``snap``, ``microk8s`` and ``sudo`` are
stand-ins) and is read back the way kubelite reads it (tests/apiserver_audit_readers.py);
tests/test_apiserver_audit_contract.py reads the snap's own files and the audit API at the mirrored tags.
"""

from __future__ import annotations

import pytest
import yaml

from components.apiserver_audit import (
    MAX_AGE_FLAG, MAX_BACKUP_FLAG, MAX_SIZE_FLAG, MICROK8S_APISERVER_ARGS, PATH_FLAG, POLICY_FLAG, audit_policy,
    audit_policy_text, remove_audit_log_command, set_audit_log_command,
)
from config import load_platform
from config.review_notes import review_notes
from config.model_host import MICROK8S_AUDIT_LOG_FILE, MICROK8S_AUDIT_POLICY_FILE, AuditLog
from tests.apiserver_audit_readers import (
    REQUESTS, SNAP_APISERVER_ARGS, AuditBox, audit_flags, flag_values, other_args, policy_level,
)
from tests.config_spec import assert_rejected, dev_config as project_dev_config, eks_config as project_eks_config, put
from tests.conftest import dev_config, run
from tests.node_pid_readers import READY
from tests.tenant_sim import platform_of
from tests.test_image_volumes import kubeconfig_config

KEY = "cluster.microk8s.auditLog"

# --- config --------------------------------------------------------------------------------------------------------


def test_a_microk8s_host_keeps_an_audit_log_by_default_of_at_most_1_1_gigabytes():
    settings = load_platform(project_dev_config()).cluster.microk8s.audit_log
    assert settings == AuditLog(enabled=True, max_age_days=30, max_backups=10, max_size_megabytes=100)
    assert settings.disk_megabytes == 1100


def test_each_setting_is_taken_as_written():
    config = put(project_dev_config(), KEY, {"enabled": False, "maxAgeDays": 90, "maxBackups": 20,
                                             "maxSizeMegabytes": 200})
    settings = load_platform(config).cluster.microk8s.audit_log
    assert settings == AuditLog(enabled=False, max_age_days=90, max_backups=20, max_size_megabytes=200)
    assert settings.disk_megabytes == 21 * 200


@pytest.mark.parametrize("key, value, fix", [
    # 0 is the API server's "no bound": never deleted by age, every rotated file kept, one file never rotated.
    ("maxAgeDays", 0, "never deleting by age"),
    ("maxBackups", 0, "keeping every rotated file"),
    ("maxSizeMegabytes", 0, "never rotating"),
    ("maxAgeDays", -1, "between 1 and 3650"),
    ("maxAgeDays", 3651, "between 1 and 3650"),
    ("maxBackups", 101, "between 1 and 100"),
    ("maxSizeMegabytes", 1025, "between 1 and 1024"),
    ("maxSizeMegabytes", "100Mi", "megabytes between 1 and 1024"),
    ("maxBackups", 2.5, "between 1 and 100"),
    ("maxAgeDays", True, "days between 1 and 3650"),
    ("enabled", "yes", "true or false"),
])
def test_a_setting_that_would_not_bound_the_log_or_is_no_number_is_refused_with_its_fix(key, value, fix):
    assert_rejected(put(project_dev_config(), f"{KEY}.{key}", value), f"{KEY}.{key}", value, fix=fix)


def test_an_unknown_key_of_the_block_is_refused_with_the_near_spelling():
    issue = assert_rejected(put(project_dev_config(), f"{KEY}.maxBackup", 5), f"{KEY}.maxBackup", 5)
    assert "maxBackups" in issue.fix


def test_the_block_belongs_to_microk8s_hosts_only():
    config = put(project_eks_config(), "cluster.microk8s", {"auditLog": {"enabled": False}})
    assert_rejected(config, "cluster.microk8s", {"auditLog": {"enabled": False}}, fix="remove cluster.microk8s")


# --- the policy ----------------------------------------------------------------------------------------------------


def test_the_policy_never_records_a_body_and_records_each_request_once():
    policy = audit_policy()
    assert (policy["apiVersion"], policy["kind"]) == ("audit.k8s.io/v1", "Policy")
    assert {rule["level"] for rule in policy["rules"]} == {"None", "Metadata"}
    assert policy["omitStages"] == ["RequestReceived"]
    assert not any("omitStages" in rule for rule in policy["rules"])  # no rule puts the stage back
    # The last rule takes every request no rule before it left out.
    assert policy["rules"][-1] == {"level": "Metadata"}
    assert yaml.safe_load(audit_policy_text()) == policy


@pytest.mark.parametrize("request_", REQUESTS, ids=lambda request: f"{request[0][0]}-{request[1]}-"
                         f"{request[3] or request[7]}-{request[5]}")
def test_who_did_what_is_recorded_and_only_probes_and_lease_renewals_are_left_out(request_):
    assert policy_level(audit_policy(), request_) == request_[-1]


# --- MicroK8s: the args file kubelite reads ------------------------------------------------------------------------

OURS = {POLICY_FLAG: "{policy}", PATH_FLAG: MICROK8S_AUDIT_LOG_FILE, MAX_AGE_FLAG: "30", MAX_BACKUP_FLAG: "10",
        MAX_SIZE_FLAG: "100"}


def ours(box: AuditBox, **changed: str) -> dict[str, str]:
    return {flag: value.format(policy=box.policy) for flag, value in {**OURS, **changed}.items()}


def test_the_step_writes_the_policy_and_the_flags_restarts_kubelite_and_waits_for_the_cluster(tmp_path):
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    result = box.set()
    assert result.returncode == 0, result.stderr
    text = box.args.read_text()
    assert box.policy.read_text() == audit_policy_text()
    assert audit_flags(text) == ours(box)
    assert all(len(values) == 1 for values in flag_values(text).values())
    # The snap's arguments stay as they were, and the program's lines follow them.
    assert text.startswith(SNAP_APISERVER_ARGS) and other_args(text) == other_args(SNAP_APISERVER_ARGS)
    assert box.restarts == 1 and box.waited


def test_running_the_step_again_changes_nothing_and_restarts_nothing(tmp_path):
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.set()
    args, policy = box.args.read_text(), box.policy.read_text()
    result = box.set()
    assert result.returncode == 0, result.stderr
    assert (box.args.read_text(), box.policy.read_text()) == (args, policy)
    assert box.restarts == 0 and box.waited


def test_changed_settings_replace_the_old_flags(tmp_path):
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.set()
    result = box.set(AuditLog(max_age_days=7, max_backups=3, max_size_megabytes=50))
    assert result.returncode == 0, result.stderr
    text = box.args.read_text()
    assert audit_flags(text) == ours(box, **{MAX_AGE_FLAG: "7", MAX_BACKUP_FLAG: "3", MAX_SIZE_FLAG: "50"})
    assert all(len(values) == 1 for values in flag_values(text).values())
    assert box.restarts == 1


def test_a_policy_file_changed_on_the_box_is_written_back_and_read_again(tmp_path):
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.set()
    box.policy.write_text("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: RequestResponse\n")
    assert box.set().returncode == 0
    assert box.policy.read_text() == audit_policy_text()
    assert box.restarts == 1


@pytest.mark.parametrize("existing", [
    "--audit-policy-file={policy}\n--audit-log-maxsize 0\n",        # the value after a space: kubelite splits there
    '--audit-policy-file={policy}\n  --audit-log-path="/var/log/audit.log"\n',  # leading blanks and quotes: dropped
    "'--audit-policy-file={policy}'\n",                             # a quote before the flag
    '--audit-policy-file "{policy}"\n--audit-log-maxage=0\n--audit-log-maxage=1',  # twice, the last without newline
])
def test_any_spelling_kubelite_would_read_is_replaced_by_the_programs_one_line(tmp_path, existing):
    # The program's policy file among them marks the lines as the program's, from an earlier run or edited since.
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.args.write_text(SNAP_APISERVER_ARGS + existing.format(policy=box.policy))
    assert flag_values(box.args.read_text()), "the case must hold a flag kubelite reads"
    assert box.set().returncode == 0
    text = box.args.read_text()
    assert audit_flags(text) == ours(box)
    assert all(len(values) == 1 for values in flag_values(text).values())
    assert text == SNAP_APISERVER_ARGS + "".join(f"{flag}={value}\n" for flag, value in ours(box).items())


@pytest.mark.parametrize("existing", [
    "--audit-policy-file=/etc/kubernetes/audit-policy.yaml\n--audit-log-path=/var/log/site-audit.log\n",
    '  --audit-log-path="/var/log/audit.log"\n',
    "--audit-log-maxage 0\n",
])
def test_the_sites_own_audit_log_stops_the_step_before_anything_changes(tmp_path, existing):
    # Replaced, the site's own log would be gone, and pulumi destroy would then take every audit flag away.
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS + existing)
    result = box.set()
    assert result.returncode != 0
    assert "the site's own" in result.stderr and "cluster.microk8s.auditLog.enabled: false" in result.stderr
    assert box.args.read_text() == SNAP_APISERVER_ARGS + existing
    assert not box.policy.exists() and box.restarts == 0 and not box.waited


def test_a_commented_flag_and_the_sites_other_audit_flags_are_left_alone(tmp_path):
    site = "# --audit-log-path=/tmp/old.log\n--audit-log-format=json\n--audit-log-maxsizes=1\n"
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS + site)
    assert box.set().returncode == 0
    assert site in box.args.read_text()
    assert audit_flags(box.args.read_text())[PATH_FLAG] == MICROK8S_AUDIT_LOG_FILE


def test_removing_the_step_restores_the_snaps_file_and_deletes_the_policy(tmp_path):
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.set()
    result = box.remove()
    assert result.returncode == 0, result.stderr
    assert box.args.read_text() == SNAP_APISERVER_ARGS
    assert not box.policy.exists()
    assert box.restarts == 1 and box.waited
    result = box.remove()
    assert result.returncode == 0 and box.restarts == 0 and not box.waited


def test_removing_the_step_after_microk8s_is_gone_succeeds(tmp_path):
    box = AuditBox(tmp_path, SNAP_APISERVER_ARGS)
    box.args.unlink()
    result = box.remove()
    assert result.returncode == 0, result.stderr
    assert box.restarts == 0


def test_a_missing_args_file_fails_clearly_without_writing_or_restarting_anything(tmp_path):
    box = AuditBox(tmp_path, "")
    result = box.set()
    assert result.returncode == 1
    assert "is missing or empty" in result.stderr and "snap list microk8s" in result.stderr
    assert not box.policy.exists() and box.restarts == 0 and not box.waited


# --- the program ---------------------------------------------------------------------------------------------------


def host_steps(program) -> dict:
    return {r.name.removeprefix("host-"): r for r in program.resources if r.type.startswith("command:")}


def test_the_microk8s_host_sets_the_audit_log_after_the_process_limits_and_before_any_addon(dev_run):
    steps = host_steps(dev_run)
    step = steps["apiserver-audit-log"]
    assert step.inputs["create"] == set_audit_log_command("sudo ", AuditLog(), READY)
    assert step.inputs["delete"] == remove_audit_log_command("sudo ", READY)
    assert f"test -s {MICROK8S_APISERVER_ARGS}" in step.inputs["create"]
    assert f"{POLICY_FLAG}={MICROK8S_AUDIT_POLICY_FILE}" in step.inputs["create"]
    # The snap is held first, the two kubelite restarts do not overlap, and nothing uses the cluster before.
    assert steps["pod-pids-limit"].urn in step.dependencies
    assert steps["hold-refresh"].urn in steps["pod-pids-limit"].dependencies
    assert step.urn in steps["enable-dns"].dependencies


def test_changed_settings_change_only_the_create_command_so_pulumi_updates_the_step_in_place():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["auditLog"] = {"maxSizeMegabytes": 250}
    step = host_steps(run(config))["apiserver-audit-log"]
    assert step.inputs["create"] == set_audit_log_command("sudo ", AuditLog(max_size_megabytes=250), READY)
    assert step.inputs["delete"] == remove_audit_log_command("sudo ", READY)
    assert "triggers" not in step.inputs and "update" not in step.inputs


def test_a_microk8s_host_with_the_log_off_registers_no_step():
    config = dev_config()
    config["gpu-tenancy:cluster"]["microk8s"]["auditLog"] = {"enabled": False}
    steps = host_steps(run(config))
    assert "apiserver-audit-log" not in steps
    assert steps["pod-pids-limit"].urn in steps["enable-dns"].dependencies


def test_an_eks_site_registers_none_its_control_plane_logs_are_amazons(eks_run):
    assert not any("audit" in resource.name for resource in eks_run.resources)


def test_an_existing_cluster_registers_none_its_api_server_is_the_sites():
    assert not any("audit" in resource.name for resource in run(kubeconfig_config()).resources)


def test_a_microk8s_site_that_turns_its_audit_log_off_is_told_nothing_records_what_happened():
    config = dev_config()
    assert not [note for note in review_notes(platform_of(config)) if "auditLog" in note]
    config["gpu-tenancy:cluster"]["microk8s"]["auditLog"] = {"enabled": False}
    [note] = [note for note in review_notes(platform_of(config)) if "auditLog" in note]
    assert note.startswith("cluster.microk8s.auditLog.enabled is false: nothing records which team's syncer")
