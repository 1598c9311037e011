"""Where each team's alerts go: which alerts carry a team (and that a tenant cannot put another team's name on
one, with promtool), and how the configuration the pinned chart renders routes them, checked with Debian's
``amtool`` (``check-config``, ``config routes test``) and a real Alertmanager posting to local stand-ins for the
team's and the site's channels. The receiver's config, secret and program resources:
tests/test_observability_team_alerting.py.
"""

from __future__ import annotations

import json
import re
import time

import pytest
import yaml

from components import observability_alerting as alerting
from components import observability_team_alerting as team_alerting
from config import load_platform
from tests.conftest import dev_config
from tests.local_alertmanager import (needs_alertmanager, needs_amtool, post_alerts, receiving_end,
                                      running_alertmanager)
from tests.tenant_sim import platform_of
from tests.test_observability_alerting import alertmanager_file, amtool, rendered_stack, route_of
from tests.test_observability_team_alerting import RENDERED_RECEIVERS, WITH_NAMESPACE_ALERTS, run_decrypted, team_site
from tests.test_synced_claims_admission import with_scratch_template
from tests.test_observability_rules import needs_promtool, promtool, rule_file, site_config, story_series


# --- which alerts are a team's, and who puts the team on them --------------------------------------


def team_labelled_alerts() -> set[str]:
    """The alerts the rules' promtool tests see firing with a team label (tests/test_observability_rules.py)."""
    from tests.test_observability_init_gpus import init_container_story_tests
    from tests.test_observability_rules import blind_site_tests, fraction_story_tests, story_tests
    return {test["alertname"] for block in story_tests() + fraction_story_tests() + blind_site_tests()
            + init_container_story_tests() for test in block["alert_rule_test"]
            for alert in test["exp_alerts"] if "team" in alert.get("exp_labels", {})}


def test_the_team_routes_cover_exactly_the_alerts_that_carry_a_team():
    assert team_labelled_alerts() == set(team_alerting.TEAM_ALERTS)
    defined = {rule["alert"] for rule in alerting_rules()}
    assert set(team_alerting.TEAM_ALERTS) <= defined


def alerting_rules() -> list[dict]:
    return [rule for group in rule_file(load_platform(site_config()))["groups"] for rule in group["rules"]
            if "alert" in rule]


@needs_promtool
def test_a_tenant_cannot_put_another_teams_name_on_an_alert(tmp_path):
    """The team label is copied from the platform's gpu_tenancy_team_info by namespace (DCGM, kube-state-metrics),
    queue or policy, over any ``team`` label the metric carried: series from alpha's namespace wearing
    ``team="beta"`` (as a pod label exported by a misconfigured exporter would) raise alpha's alerts, never beta's."""
    forged = []
    for series in story_series():
        if 'namespace="vcluster-alpha"' in series["series"] or 'namespace="vcluster-gamma"' in series["series"]:
            series = {**series, "series": series["series"].replace("}", ',team="beta"}', 1)}
        forged.append(series)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_file(load_platform(site_config()), annotations=False)))
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [
        {"interval": "1m", "input_series": forged, "alert_rule_test": [
            # Gamma's pending pod (wearing beta's name) starves gamma, not beta.
            {"alertname": "GpuTenancyTeamStarved", "eval_time": "20m",
             "exp_alerts": [{"exp_labels": {"severity": "warning", "team": "gamma"}}]},
            # Alpha's 5%-busy GPU is alpha's idle GPU.
            {"alertname": "GpuTenancyAllocatedGpuIdle", "eval_time": "70m",
             "exp_alerts": [{"exp_labels": {"severity": "info", "team": "alpha"}}]},
        ]}]}
    (tmp_path / "tests.yml").write_text(yaml.safe_dump(tests))
    result = promtool("test", "rules", "tests.yml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert sum('team="beta"' in series["series"] for series in forged) >= 3


# --- the real chart, amtool and a real Alertmanager ---------------------------------------------------


@pytest.fixture(scope="module")
def team_render(tmp_path_factory):
    config = team_site(receivers=RENDERED_RECEIVERS)
    run_decrypted(config)  # the secret's content passes: what the chart is rendered with is what pulumi up sends
    return alertmanager_file(rendered_stack(config), tmp_path_factory.mktemp("teams"))


@needs_amtool
def test_alertmanager_accepts_the_configuration_with_team_receivers(team_render):
    assert "SUCCESS" in amtool("check-config", str(team_render))


def receivers_of(path, *labels: str) -> set[str]:
    return set(route_of(path, *labels).split(","))


@needs_amtool
def test_a_teams_alert_goes_to_that_team_and_the_site_and_no_other_team(team_render):
    for name in team_alerting.TEAM_ALERTS:
        assert receivers_of(team_render, f"alertname={name}", "team=alpha", "severity=info") == {
            "gpu-tenancy-team-alpha", alerting.RECEIVER}, name
    # Beta hears warnings and up; its info alerts go to the site only.
    assert receivers_of(team_render, "alertname=GpuTenancyTeamStarved", "team=beta", "severity=warning") == {
        "gpu-tenancy-team-beta", alerting.RECEIVER}
    assert receivers_of(team_render, "alertname=GpuTenancyAllocatedGpuIdle", "team=beta", "severity=info") == {
        alerting.RECEIVER}
    # Gamma's pager hears nothing below critical.
    assert receivers_of(team_render, "alertname=GpuTenancyTeamStarved", "team=gamma", "severity=warning") == {
        alerting.RECEIVER}


@needs_amtool
def test_platform_alerts_and_other_alerts_naming_a_team_reach_no_team(team_render):
    for labels in (("alertname=GpuTenancyGpuXidError", "severity=critical", "namespace=vcluster-alpha"),
                   ("alertname=GpuTenancyQueueMissing", "severity=critical", "queue_name=alpha"),
                   ("alertname=GpuTenancyGpusOverPromised", "severity=warning"),
                   # A chart alert that happens to carry a team label is not one of the program's per-team alerts.
                   ("alertname=KubePodCrashLooping", "team=alpha", "severity=warning")):
        assert not {receiver for receiver in receivers_of(team_render, *labels)
                    if receiver.startswith("gpu-tenancy-team-")}, labels
    assert receivers_of(team_render, "alertname=Watchdog") == {"null"}


def namespace_render(tmp_path, site_alerts: str) -> object:
    config = team_site(receivers=WITH_NAMESPACE_ALERTS)
    config["observability"]["alerting"]["alerts"] = site_alerts
    run_decrypted(config)
    return alertmanager_file(rendered_stack(config), tmp_path)


@needs_amtool
@pytest.mark.parametrize("site_alerts", ["platform", "all"])
def test_with_alerts_all_a_team_hears_of_its_own_namespace_and_nothing_of_its_control_plane(tmp_path, site_alerts):
    """The chart's alerts about a tenant's pods, jobs and volumes reach that team (and never the site, which keeps
    them in Alertmanager under `alerts: all`); its vCluster's control plane, another team's namespace and a team
    without `alerts: all` do not."""
    path = namespace_render(tmp_path, site_alerts)
    assert "SUCCESS" in amtool("check-config", str(path))
    # all: the site keeps the tenants' own alerts in Alertmanager, sent nowhere (`null`); platform: no site route
    # matches them, and having reached the team's route they go nowhere else.
    site_keeps = {"null"} if site_alerts == "all" else set()
    pod = "pod=train-x-default-x-alpha"
    for labels in (("alertname=KubePodCrashLooping", "namespace=vcluster-alpha", pod, "severity=warning"),
                   ("alertname=KubeJobFailed", "namespace=vcluster-alpha", "job_name=etl-x-default-x-alpha",
                    "severity=warning"),
                   ("alertname=KubePersistentVolumeFillingUp", "namespace=vcluster-alpha",
                    "persistentvolumeclaim=data-x-default-x-alpha", "severity=critical")):
        assert receivers_of(path, *labels) == {"gpu-tenancy-team-alpha"} | site_keeps, labels
    platforms = alerting.RECEIVER if site_alerts == "all" else "null"
    for labels in (("alertname=KubeStatefulSetReplicasMismatch", "namespace=vcluster-alpha", "statefulset=alpha",
                    "severity=warning"),
                   ("alertname=KubePodNotReady", "namespace=vcluster-alpha", "pod=alpha-0", "severity=warning"),
                   ("alertname=KubePersistentVolumeFillingUp", "namespace=vcluster-alpha",
                    "persistentvolumeclaim=data-alpha-0", "severity=critical")):
        assert receivers_of(path, *labels) == {platforms}, labels
    # Beta did not ask for them; alpha hears nothing of beta's namespace.
    assert receivers_of(path, "alertname=KubePodCrashLooping", "namespace=vcluster-beta",
                        "pod=web-x-default-x-beta", "severity=warning") == {"null"}
    # The program's alerts still go to alpha once, by the team label, and to the site.
    assert receivers_of(path, "alertname=GpuTenancyAllocatedGpuIdle", "team=alpha", "namespace=vcluster-alpha",
                        "severity=info") == {"gpu-tenancy-team-alpha", alerting.RECEIVER}


@needs_amtool
def test_without_a_site_receiver_a_teams_alert_still_reaches_the_team(tmp_path):
    config = team_site("none", RENDERED_RECEIVERS)
    run_decrypted(config)
    path = alertmanager_file(rendered_stack(config), tmp_path)
    assert "SUCCESS" in amtool("check-config", str(path))
    assert receivers_of(path, "alertname=GpuTenancyAllocatedGpuIdle", "team=alpha", "severity=info") == {
        "gpu-tenancy-team-alpha"}
    assert receivers_of(path, "alertname=GpuTenancyGpuXidError", "severity=critical") == {"null"}


@needs_alertmanager
def test_a_real_alertmanager_posts_a_teams_alert_to_the_team_and_the_site(team_render, tmp_path):
    config = yaml.safe_load(team_render.read_text())
    config["route"]["group_wait"] = "1s"
    files = {"gpu-tenancy-team-alpha": tmp_path / "alpha", alerting.RECEIVER: tmp_path / "site"}
    receivers = {receiver["name"]: receiver for receiver in config["receivers"]}
    for name, path in files.items():
        receivers[name]["slack_configs"][0]["api_url_file"] = str(path)
    idle = {"labels": {"alertname": "GpuTenancyAllocatedGpuIdle", "team": "alpha", "severity": "info"},
            "annotations": {"summary": "Team alpha holds GPUs it barely uses"}}
    beta_idle = {"labels": {**idle["labels"], "team": "beta"}, "annotations": {"summary": "Team beta idles"}}
    with receiving_end() as (team_hook, team_got), receiving_end() as (site_hook, site_got):
        files["gpu-tenancy-team-alpha"].write_text(team_hook + "\n")
        files[alerting.RECEIVER].write_text(site_hook + "\n")
        with running_alertmanager(config, tmp_path) as url:
            post_alerts(url, [idle, beta_idle])
            deadline = time.monotonic() + 30
            while len(site_got) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2)
    assert [(message["channel"], message["attachments"][0]["title"]) for message in team_got] == [
        ("#alpha-alerts", "[FIRING:1] GpuTenancyAllocatedGpuIdle (alpha)")]
    assert sorted(message["attachments"][0]["title"] for message in site_got) == [
        "[FIRING:1] GpuTenancyAllocatedGpuIdle (alpha)", "[FIRING:1] GpuTenancyAllocatedGpuIdle (beta)"]
    assert not re.search("beta", json.dumps(team_got))


def test_a_control_plane_volume_of_the_sites_own_template_is_the_platforms():
    """A site's own claim template (persistence.volumeClaimTemplates) names a control-plane claim scratch-<name>-0:
    its alerts are the platform's, like data-<name>-0's, never the team's own."""
    platform = platform_of(with_scratch_template(dev_config()))
    [claims] = [m for m in team_alerting.tenants_own_alerts(platform.teams) if m.startswith("persistentvolumeclaim")]
    pattern = re.compile(claims.split('"')[1])
    for name in ("data-team-nlp-0", "scratch-team-nlp-0", "data-team-nlp-etcd-0"):
        assert pattern.fullmatch(name), name
    assert not pattern.fullmatch("scratch-x-default-x-team-nlp")
