"""ops.smoke against a deployed site played offline: fake API servers on 127.0.0.1 (tests/fake_site.py), the
real ``kubernetes`` client talking to them, and the admission policy the program rendered deciding what
the host accepts (tests/tenant_sim.py)."""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from config.stack_file import PROJECT_DIR
from ops import smoke
from ops.smoke_team import Report, Settings, Step
from tests.conftest import ACCEPTED_TAGS, dev_config, git
from tests.fake_site import FakeSite, pending
from tests.tenant_sim import tenant_of

TEAMS = ("team-nlp", "team-vision", "team-recommender")
FAST = Settings(timeout=1.5, refusal_timeout=1.5, poll=0.05)


@pytest.fixture(scope="module")
def tenants(dev_run):
    return [tenant_of(dev_run, dev_config(), team) for team in TEAMS]


@pytest.fixture
def site_factory(tenants):
    sites = []

    def make(**behaviour) -> FakeSite:
        sites.append(FakeSite(tenants, **behaviour))
        return sites[-1]
    yield make
    for site in sites:
        site.close()


def run(site: FakeSite, **kwargs) -> dict[str, Report]:
    reports = smoke.run_site(site.outputs, site.outputs["hostKubeconfig"], FAST, **kwargs)
    return {report.team: report for report in reports}


def step(report: Report, name: str, obj_suffix: str = "") -> Step:
    return next(s for s in report.steps if s.name == name and s.object.endswith(obj_suffix))


def assert_cleaned(site: FakeSite) -> None:
    assert not [pod for pod in site.host.pods.values() if "gpu-tenancy/smoke" in pod["metadata"]["labels"]]
    for vcluster in site.vclusters.values():
        assert not [ns for ns in vcluster.store.namespaces if ns.startswith("gpu-tenancy-smoke-")]
        assert not vcluster.store.pods


def test_a_working_site_passes_for_every_team_and_cleans_up(site_factory):
    site = site_factory()
    reports = run(site)
    assert set(reports) == set(TEAMS)
    for team, report in reports.items():
        assert report.ok, report.table()
        assert [s.name for s in report.steps] == ["connect", "namespace", "gpu-pod", "host", "runs", "deployment",
                                                  "host", "runs", "refusal", "host-refusal", "cleanup"]
        gpu_host = step(report, "host", "smoke-gpu")
        assert f"queue {team}" in gpu_host.detail and "fraction 0.33" in gpu_host.detail
        # Inside, the vCluster's defaults move a pod naming another queue into the team's own.
        assert step(report, "refusal").detail == f"the vCluster put it in the team's queue {team}"
        # The host policy itself refuses that pod as the team's syncer writes it.
        host_refusal = step(report, "host-refusal")
        assert f"refused as system:serviceaccount:vcluster-{team}:vc-{team}: " in host_refusal.detail
        assert "denied request: [own-queue]" in host_refusal.detail
    assert {user for user, _ in site.host.dry_runs} == {f"system:serviceaccount:vcluster-{t}:vc-{t}" for t in TEAMS}
    assert_cleaned(site)


def test_a_pod_in_another_queue_refused_when_synced_counts_inside_and_the_host_refusal_is_still_asked(site_factory):
    """A tenant that removed its vCluster's queue default: the syncer's CREATE is refused by the host."""
    site = site_factory(defaults=lambda pod: pod["metadata"]["name"] != "smoke-other-queue")
    report = run(site)["team-vision"]
    assert report.ok, report.table()
    assert step(report, "refusal").detail.startswith("refused on the host: Error syncing to physical cluster: "
                                                     "admission denied: [own-queue]")
    assert "[own-queue]" in step(report, "host-refusal").detail


def test_a_pod_refused_inside_the_vcluster_counts_when_the_message_names_the_rule(site_factory):
    site = site_factory(refuse_in_vcluster=lambda pod: "[queue] pods of this team run in queue team-x only"
                        if pod["metadata"]["name"] == "smoke-other-queue" else None)
    report = run(site)["team-nlp"]
    assert report.ok
    assert step(report, "refusal").detail.startswith("refused in the vCluster: [queue]")


def test_a_site_without_host_admission_fails_the_host_refusal_step_though_the_vcluster_looks_right(site_factory):
    site = site_factory(host_admission=False)
    report = run(site)["team-vision"]
    assert step(report, "refusal").ok
    refusal = step(report, "host-refusal")
    assert not refusal.ok
    assert refusal.detail == ("the host admitted a pod in queue team-nlp from "
                              "system:serviceaccount:vcluster-team-vision:vc-team-vision (dry run)")
    assert refusal.object.startswith("pod/vcluster-team-vision/smoke-host-refusal-x-gpu-tenancy-smoke-")
    assert step(report, "cleanup").ok
    assert_cleaned(site)
    assert not site.host.pods


def test_a_pod_reaching_the_host_in_another_queue_fails_the_refusal_step(site_factory):
    site = site_factory(defaults=lambda pod: pod["metadata"]["name"] != "smoke-other-queue", host_admission=False)
    refusal = step(run(site)["team-vision"], "refusal")
    assert not refusal.ok and refusal.detail == "it reached the host in queue team-nlp"
    assert refusal.object.endswith("/smoke-other-queue")


def test_a_tenant_faking_refusals_and_success_inside_its_vcluster_does_not_pass_the_smoke_test(site_factory):
    """The tenant is cluster-admin inside: it can refuse pods with any message and write its pods' status."""
    site = site_factory(host_admission=False, schedule=pending("0/1 nodes are available"),
                        virtual_status={"phase": "Succeeded"},
                        refuse_in_vcluster=lambda pod: "[own-queue] refused by the tenant's own webhook"
                        if pod["metadata"]["name"] == "smoke-other-queue" else None)
    settings = Settings(timeout=0.5, refusal_timeout=0.5, poll=0.05)
    runs = {r.team: r for r in smoke.run_site(site.outputs, site.outputs["hostKubeconfig"], settings)}
    failed = [s for s in runs["team-nlp"].steps if not s.ok]
    # The GPU pod's virtual status says Succeeded; its host pod is Pending.
    assert [(s.name, s.object.rsplit("/", 1)[-1]) for s in failed] == [("runs", "smoke-gpu")]
    assert "phase Pending" in failed[0].detail
    # With the pods running, the refusal inside passes, and the host's missing policy still fails the run.
    site.vclusters["team-nlp"].schedule = lambda pod: {"phase": "Succeeded" if pod["spec"].get("restartPolicy")
                                                       == "Never" else "Running"}
    report = {r.team: r for r in smoke.run_site(site.outputs, site.outputs["hostKubeconfig"], settings)}["team-nlp"]
    assert step(report, "refusal").ok
    assert [s.name for s in report.steps if not s.ok] == ["host-refusal"]


def test_a_pending_gpu_pod_times_out_with_the_schedulers_reason(site_factory):
    site = site_factory(schedule=pending("0/1 nodes: queue team-nlp is over its GPU limit"))
    report = run(site)["team-nlp"]
    failed = [s for s in report.steps if not s.ok]
    assert [(s.name, s.object.rsplit("/", 1)[-1]) for s in failed] == [("runs", "smoke-gpu")]
    assert "not Succeeded after 1.5s" in failed[0].detail
    assert "phase Pending" in failed[0].detail and "over its GPU limit" in failed[0].detail
    # The run stops at the first failure and still removes what it created.
    assert [s.name for s in report.steps][-1] == "cleanup" and step(report, "cleanup").ok
    assert_cleaned(site)


def test_an_unmodified_deployment_without_in_vcluster_defaults_fails_with_the_hosts_reason(site_factory):
    site = site_factory(defaults=False)
    report = run(site)["team-recommender"]
    failed = next(s for s in report.steps if not s.ok)
    assert failed.name == "host" and "/smoke-plain-" in failed.object
    assert "not synced to host namespace" in failed.detail and "admission denied: [" in failed.detail
    assert step(report, "cleanup").ok
    assert_cleaned(site)


def test_a_failed_cleanup_is_reported_with_what_to_delete(site_factory):
    site = site_factory(fail_delete=True)
    cleanup = step(run(site)["team-nlp"], "cleanup")
    assert not cleanup.ok and "etcdserver" in cleanup.detail and "delete it by hand" in cleanup.detail


def test_a_team_without_endpoint_is_skipped_visibly_before_anything_is_created(site_factory):
    site = site_factory()
    outputs = site.outputs
    kubeconfig = yaml.safe_load(outputs["tenantKubeconfigs"]["team-nlp"])
    kubeconfig["clusters"][0]["cluster"]["server"] = "https://localhost:8443"  # what vCluster exports unexposed
    outputs["tenantKubeconfigs"]["team-nlp"] = yaml.safe_dump(kubeconfig)
    report = {r.team: r for r in smoke.run_site(outputs, outputs["hostKubeconfig"], FAST)}["team-nlp"]
    # The host boundary needs no endpoint: it is checked all the same.
    assert [(s.name, s.skipped, s.ok) for s in report.steps] == [("connect", True, True), ("host-refusal", False, True)]
    assert report.outcome == "SKIPPED" and "vcluster.access.exposure" in report.steps[0].detail
    assert not site.vclusters["team-nlp"].store.pods and not site.host.pods
    assert "### team-nlp: SKIPPED" in smoke.render([report])


def test_the_command_line_prints_tables_writes_them_and_exits_nonzero_naming_the_failure(site_factory, tmp_path,
                                                                                        capsys):
    site = site_factory(schedule=pending("no GPU node"))
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps(site.outputs))
    table = tmp_path / "smoke.md"
    code = smoke.main(["dev", "--outputs", str(outputs), "--timeout", "0.5", "--table", str(table)])
    captured = capsys.readouterr()
    assert code == 1
    assert "FAILED: team-nlp: step runs on pod/gpu-tenancy-smoke-" in captured.err
    assert table.read_text().startswith("## Smoke test") and "### team-vision: FAILED" in table.read_text()


def test_the_command_line_rejects_a_kubeconfig_for_an_unknown_team(site_factory, tmp_path):
    site = site_factory()
    outputs, kubeconfig = tmp_path / "outputs.json", tmp_path / "kc"
    outputs.write_text(json.dumps(site.outputs))
    kubeconfig.write_text(site.outputs["hostKubeconfig"])
    with pytest.raises(SystemExit, match="unknown team.*team-typo"):
        smoke.main(["dev", "--outputs", str(outputs), "--vcluster-kubeconfig", f"team-typo={kubeconfig}"])


def test_the_host_refusal_pod_meets_restricted_pod_security_so_only_the_policy_can_refuse_it(site_factory):
    """The API server runs Pod Security before the admission policy: a restricted team's namespace would otherwise
    refuse the dry run for the wrong reason."""
    from tools.deployability.pod_security import violations
    site = site_factory()
    run(site)
    assert site.host.dry_runs
    for _, pod in site.host.dry_runs:
        assert violations(pod["spec"], "restricted", pod["metadata"].get("annotations")) == []


@pytest.mark.parametrize("tag", ACCEPTED_TAGS["kai-scheduler/KAI-Scheduler"])
def test_the_host_refusal_dry_run_passes_kais_webhooks(tag):
    """The API server refuses a dry run outright when a webhook it would call declares side effects: the
    host-refusal pod (a kai-scheduler pod) meets KAI's pod webhooks, so each of KAI's webhooks must declare none,
    at every accepted tag, or the step would fail on every healthy site."""
    repository = "kai-scheduler/KAI-Scheduler"
    found = [line for line in git(repository, "grep", "-h", "SideEffects:", tag, "--", "pkg/operator/operands")
             .splitlines() if line.strip()]
    assert len(found) >= 3, "KAI's operator declares its webhooks"
    assert all(re.search(r"SideEffects:\s+\S*(SideEffectClassNone|sideEffectsNone\(\))", line) for line in found), found


# --- the kubeconfigs it handles: never printed, not left on disk ----------------------------------


def test_a_kubeconfig_that_is_not_yaml_is_refused_without_quoting_it(tmp_path, capsys):
    # PyYAML's own message quotes the line it stopped at: here the one holding the token.
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nusers:\n- name: admin\n  user:\n    token: token-7c41e2: x\n")
    outputs = tmp_path / "outputs.json"
    outputs.write_text(json.dumps({"tenants": {"team-nlp": {"namespace": "team-nlp", "queue": "team-nlp",
                                                           "vcluster": "nlp"}}}))
    assert smoke.main(["dev", "--outputs", str(outputs), "--kubeconfig", str(kubeconfig)]) == 2
    err = capsys.readouterr().err
    assert "the kubeconfig is not YAML (line 5" in err and "token-7c41e2" not in err


def test_a_smoke_test_stopped_by_sigterm_leaves_no_key_on_disk(tmp_path):
    """The kubernetes client writes a kubeconfig's certificate and key to temporary files, removed when the
    interpreter exits; SIGTERM (a cancelled CI job, `timeout`) must end the run that way too."""
    key = "client-key-4be09d"
    encoded = base64.b64encode(key.encode()).decode()
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts requests and never answers them
        host = yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "host",
            "clusters": [{"name": "host", "cluster": {"server": f"http://127.0.0.1:{silent.getsockname()[1]}"}}],
            "contexts": [{"name": "host", "context": {"cluster": "host", "user": "admin"}}],
            "users": [{"name": "admin", "user": {"token": "host-token"}}]})
        # An admin kubeconfig as vCluster writes it, without an endpoint: read, then skipped for the host's check.
        tenant = yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "team-nlp",
            "clusters": [{"name": "team-nlp", "cluster": {"server": "https://localhost:8443"}}],
            "contexts": [{"name": "team-nlp", "context": {"cluster": "team-nlp", "user": "admin"}}],
            "users": [{"name": "admin", "user": {"client-certificate-data": encoded, "client-key-data": encoded}}]})
        outputs = tmp_path / "outputs.json"
        outputs.write_text(json.dumps({
            "hostKubeconfig": host, "tenantKubeconfigs": {"team-nlp": tenant},
            "tenants": {"team-nlp": {"namespace": "team-nlp", "queue": "team-nlp", "vcluster": "nlp"}}}))
        temporary = tmp_path / "tmp"
        temporary.mkdir()

        def holding_key() -> list[Path]:
            return [path for path in temporary.iterdir() if key.encode() in path.read_bytes()]

        process = subprocess.Popen([sys.executable, "-m", "ops.smoke", "dev", "--outputs", str(outputs)],
                                   cwd=PROJECT_DIR, env={**os.environ, "TMPDIR": str(temporary)},
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 30
            while not holding_key() and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert holding_key(), "the kubernetes client wrote no key file: nothing is being tested"
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=20)
        finally:
            process.kill()
    assert process.returncode != 0
    assert holding_key() == [] and key not in err
