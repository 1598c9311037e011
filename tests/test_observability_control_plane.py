"""Spec of what the installed Prometheus scrapes of the host's control plane (``observability.controlPlaneMetrics``):
nothing the host kind cannot serve, so none of kube-prometheus-stack's "component down" alerts fires for ever and
buries the alerts that matter.

Checked on the config, on the real kube-prometheus-stack chart rendered with the program's values (skipping
without the chart cache), and with promtool on the chart's own rule: on a host without a scheduler pod it fires
as long as the host runs."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from config import ConfigError, load_platform
from config.observability import CONTROL_PLANE_SCRAPES
from tests.config_spec import dev_config, eks_config, put
from tests.conftest import real_charts_or_skip, run
from tests.isolation_spec import prefixed
from tests.local_prometheus import PROMTOOL, needs_prometheus_and_promtool
from tools.charts.cache import chart_cache_dir, find_cached
from tools.charts.render import release_chart_key, render_release
from tools.plan.document import build_plan
from tools.plan.lookup import PlanIndex
from tools.plan.summary_site import observability_section

# The jobs of kube-prometheus-stack's control-plane scrapes, as its down alerts name them.
CONTROL_PLANE_JOBS = ("kube-scheduler", "kube-controller-manager", "kube-etcd", "kube-proxy")
DOWN_ALERTS = ("KubeSchedulerDown", "KubeControllerManagerDown", "KubeProxyDown")


def installed(config: dict, **observability) -> dict:
    return {**config, "observability": {"prometheus": "install", **observability}}


def kubeconfig_site(**observability) -> dict:
    config = put(put(dev_config(), "cluster", {"kind": "kubeconfig"}), "gpuOperator.mode", "install")
    return installed(config, **observability)


def control_plane_issue(config: dict) -> str:
    with pytest.raises(ConfigError) as error:
        load_platform(config, placeholders=["kubeconfig", "sshPrivateKey"])
    return {issue.key: str(issue) for issue in error.value.issues}["observability.controlPlaneMetrics"]


# --- config -------------------------------------------------------------------------------------


def test_off_unless_the_site_turns_it_on():
    assert load_platform(installed(dev_config())).observability.control_plane_metrics is False


@pytest.mark.parametrize("site, kind", [(dev_config, "microk8s"), (eks_config, "eks")])
def test_refused_where_the_host_kind_cannot_serve_them(site, kind):
    message = control_plane_issue(installed(site(), controlPlaneMetrics=True))
    assert f"cluster.kind is {kind}: the host's kube-scheduler" in message and "fire for ever" in message
    assert "remove observability.controlPlaneMetrics" in message
    assert load_platform(installed(site(), controlPlaneMetrics=False))


def test_an_existing_cluster_that_opened_them_may_turn_them_on():
    settings = load_platform(kubeconfig_site(controlPlaneMetrics=True), placeholders=["kubeconfig"]).observability
    assert settings.control_plane_metrics is True


def test_only_for_the_prometheus_the_program_installs():
    config = {**dev_config(), "observability": {"prometheus": "external", "external": {"releaseLabel": "prometheus"},
                                                "controlPlaneMetrics": False}}
    assert "remove observability.controlPlaneMetrics" in control_plane_issue(config)


# --- the program and the summary -------------------------------------------------------------------


def stack_values(config: dict) -> dict:
    program = run(prefixed(config), stack="dev")
    [release] = [resource for resource in program.of_type("kubernetes:helm.sh/v3:Release")
                 if resource.inputs["name"] == "kube-prometheus-stack"]
    return release.inputs


def test_the_chart_is_told_which_scrapes_to_leave_out():
    values = stack_values(installed(dev_config()))["values"]
    assert {component: values[component] for component in CONTROL_PLANE_SCRAPES} == {
        component: {"enabled": False} for component in CONTROL_PLANE_SCRAPES}
    opened = stack_values(kubeconfig_site(controlPlaneMetrics=True))["values"]
    assert all(opened[component] == {"enabled": True} for component in CONTROL_PLANE_SCRAPES)


def test_the_summary_says_what_is_not_scraped():
    plan = build_plan(run(prefixed(installed(dev_config())), stack="dev"), "dev")
    [line] = [line for line in observability_section(PlanIndex(plan)) if line.startswith("The installed chart adds")]
    assert all(f"`{component}`" in line for component in CONTROL_PLANE_SCRAPES)
    assert "observability.controlPlaneMetrics" in line


# --- the real chart ---------------------------------------------------------------------------------


def rendered(config: dict) -> list[dict]:
    inputs = stack_values(config)
    real_charts_or_skip(build_plan(run(prefixed(config), stack="dev"), "dev"))
    chart, _ = find_cached(release_chart_key(inputs), chart_cache_dir())
    manifests = render_release(chart, inputs["name"], inputs["namespace"], inputs["values"], include_crds=False)
    return [document for text in manifests.values() for document in yaml.safe_load_all(text) if document]


def alerts(objects: list[dict]) -> dict[str, dict]:
    return {rule["alert"]: rule for obj in objects if obj["kind"] == "PrometheusRule"
            for group in obj["spec"]["groups"] for rule in group["rules"] if "alert" in rule}


def scraped_jobs(objects: list[dict]) -> set[str]:
    """The control-plane components a rendered ServiceMonitor scrapes (the chart names each after its job)."""
    return {job for obj in objects if obj["kind"] == "ServiceMonitor" for job in CONTROL_PLANE_JOBS
            if obj["metadata"]["name"].endswith(job)}


@pytest.mark.parametrize("site", [dev_config, eks_config])
def test_no_scrape_and_no_down_alert_for_what_the_host_cannot_serve(site):
    objects = rendered(installed(site()))
    assert not scraped_jobs(objects)
    found = alerts(objects)
    assert not set(DOWN_ALERTS) & set(found)
    assert not [name for name, rule in found.items() for job in CONTROL_PLANE_JOBS if f'job="{job}"' in rule["expr"]]
    # The rest of the chart's alerting stays: the kubelets, the API server, Prometheus itself.
    assert {"KubeletDown", "KubeAPIDown", "TargetDown"} <= set(found)


def test_an_existing_cluster_that_opened_them_gets_their_scrapes_and_alerts():
    objects = rendered(kubeconfig_site(controlPlaneMetrics=True))
    assert scraped_jobs(objects) == set(CONTROL_PLANE_JOBS)
    assert set(DOWN_ALERTS) <= set(alerts(objects))


@needs_prometheus_and_promtool
def test_the_charts_scheduler_alert_fires_for_ever_where_no_scheduler_pod_is_found(tmp_path):
    """Why the scrapes are off: the chart's own rule, on the series a MicroK8s or EKS host gives (no target for
    the scheduler at all), is still firing after a day."""
    rule = alerts(rendered(kubeconfig_site(controlPlaneMetrics=True)))["KubeSchedulerDown"]
    (tmp_path / "rules.yml").write_text(yaml.safe_dump({"groups": [{"name": "chart", "rules": [rule]}]}))
    labels = {"alertname": "KubeSchedulerDown", "job": "kube-scheduler", **rule["labels"]}  # absent() keeps the job
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": [{"series": 'up{job="apiserver"}', "values": "1+0x1440"}],
                   "alert_rule_test": [{"eval_time": "24h", "alertname": "KubeSchedulerDown",
                                        "exp_alerts": [{"exp_labels": labels,
                                                        "exp_annotations": rule["annotations"]}]}]}]}))
    done = subprocess.run([PROMTOOL, "test", "rules", "test.yml"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
