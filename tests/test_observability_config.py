"""Spec of the ``observability`` stack key: modes, external release label, thresholds, time-aware fairness."""

from __future__ import annotations

import pytest

from config import ConfigError, load_platform, versions
from config.observability import DCGM_FIELDS_BEYOND_DEFAULTS
from config.vocabulary import project_config
from tests.conftest import stack_config
from tests.test_observability_rules import site_config


def issues(raw: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as error:
        load_platform(raw)
    return {issue.key: str(issue) for issue in error.value.issues}


def test_existing_stacks_without_the_key_get_no_observability():
    raw = site_config()
    del raw["observability"]
    settings = load_platform(raw).observability
    assert settings.prometheus == "off" and not settings.enabled
    assert not settings.fairness.enabled


def test_install_defaults_pin_the_chart_and_select_by_its_release():
    settings = load_platform(site_config()).observability
    assert settings.chart_version == versions.KUBE_PROMETHEUS_STACK_VERSION
    assert settings.release_label == "kube-prometheus-stack"
    assert settings.alerts.pending_minutes == 15 and settings.alerts.idle_minutes == 60
    assert settings.alerts.idle_utilisation_percent == 10 and settings.alerts.admission_rejections == 1
    assert settings.prometheus_url == "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090"


def test_unknown_mode_names_key_value_and_choices():
    found = issues(site_config(prometheus="grafana-cloud"))
    assert "observability.prometheus" in found
    assert "'grafana-cloud'" in found["observability.prometheus"]
    assert "install, external, off" in found["observability.prometheus"]


def test_external_needs_a_release_label():
    found = issues(site_config(prometheus="external"))
    assert "observability.external.releaseLabel" in found
    assert "release" in found["observability.external.releaseLabel"]


def test_external_release_label_must_be_a_label_value():
    found = issues(site_config(prometheus="external", external={"releaseLabel": "my prom!"}))
    assert "'my prom!'" in found["observability.external.releaseLabel"]


def test_external_settings_with_install_are_refused():
    found = issues(site_config(external={"releaseLabel": "prom"}))
    assert "prometheus is install" in found["observability.external"]


def test_external_mode_keeps_the_site_release_label():
    settings = load_platform(site_config(prometheus="external", external={
        "releaseLabel": "prom-stack", "url": "http://prometheus-operated.monitoring:9090"})).observability
    assert settings.release_label == "prom-stack"
    assert settings.prometheus_url == "http://prometheus-operated.monitoring:9090"


@pytest.mark.parametrize("key, value, words", [
    ("pendingMinutes", 0, "between 1 and 1440"),
    ("idleUtilisationPercent", 150, "between 0 and 100"),
    ("idleMinutes", "1h", "whole number"),
    ("admissionRejections", -2, ">= 1"),
])
def test_bad_thresholds_name_key_value_and_fix(key, value, words):
    found = issues(site_config(alerts={key: value}))
    assert f"observability.alerts.{key}" in found
    assert words in found[f"observability.alerts.{key}"]
    assert repr(value) in found[f"observability.alerts.{key}"]


def test_time_aware_fairness_needs_prometheus():
    raw = site_config(prometheus="off", timeAwareFairness={"enabled": True})
    assert "set observability.prometheus to install or external" in issues(raw)[
        "observability.timeAwareFairness.enabled"]


def test_time_aware_fairness_with_external_prometheus_needs_its_url():
    raw = site_config(prometheus="external", external={"releaseLabel": "prom"}, timeAwareFairness={"enabled": True})
    assert "observability.external.url" in issues(raw)["observability.timeAwareFairness.enabled"]


@pytest.mark.parametrize("key, value", [("windowSize", "1 week"), ("halfLifePeriod", "10 minutes"),
                                        ("windowType", "rolling"), ("kValue", -1)])
def test_bad_fairness_knobs(key, value):
    found = issues(site_config(timeAwareFairness={"enabled": True, key: value}))
    assert f"observability.timeAwareFairness.{key}" in found


def test_fairness_knobs_read():
    fairness = load_platform(site_config(timeAwareFairness={
        "enabled": True, "windowSize": "3d", "windowType": "tumbling", "halfLifePeriod": "12h",
        "kValue": 2})).observability.fairness
    assert (fairness.enabled, fairness.window_size, fairness.window_type, fairness.half_life_period,
            fairness.k_value) == (True, "3d", "tumbling", "12h", 2)


def test_chart_version_must_be_exact():
    assert "observability.chartVersion" in issues(site_config(chartVersion="latest"))
    assert "observability.chartVersion" in issues(site_config(chartVersion="v84.5.0"))


def test_grafana_switch_only_for_install():
    raw = site_config(prometheus="external", external={"releaseLabel": "prom"}, grafana=False)
    assert "observability.grafana" in issues(raw)


def test_unknown_key_suggests_the_near_one():
    found = issues(site_config(alerts={"pendingMinute": 5}))
    assert "did you mean 'pendingMinutes'" in found["observability.alerts.pendingMinute"]


def test_installed_stack_needs_a_namespace_of_its_own():
    found = issues(site_config(namespace="kai-scheduler"))
    assert "KAI Scheduler" in found["observability.namespace"]
    found = issues(site_config(namespace="vcluster-beta"))
    assert "team beta" in found["observability.namespace"]


def test_external_objects_may_share_the_operator_namespace_but_not_a_tenant_one():
    external = {"prometheus": "external", "external": {"releaseLabel": "prom"}}
    assert load_platform(site_config(**external, namespace="gpu-operator-resources")).observability.namespace == \
        "gpu-operator-resources"
    assert "observability.namespace" in issues(site_config(**external, namespace="vcluster-alpha"))


def test_external_prometheus_is_told_the_kube_state_metrics_flags_shared_gpus_need():
    external = {"prometheus": "external", "external": {"releaseLabel": "prom"}}
    (note,) = [note for note in load_platform(site_config(**external)).notes if "kube-state-metrics must run" in note]
    assert "--metric-labels-allowlist=pods=[runai-gpu-group]" in note
    assert "--metric-annotations-allowlist=pods=[gpu-fraction,gpu-memory,gpu-fraction-container-name,gpu-fraction-num-devices]" in note
    assert "honorLabels" in note
    assert not [note for note in load_platform(site_config()).notes if "kube-state-metrics" in note], \
        "an installed stack sets the flags itself"
    raw = site_config(**external)
    raw["kaiScheduler"] = {**raw.get("kaiScheduler", {}), "gpuSharing": False}
    assert not [note for note in load_platform(raw).notes if "kube-state-metrics must run" in note], \
        "no fractions, no note"


@pytest.mark.parametrize("prometheus", ["install", "external"])
def test_an_external_gpu_operator_is_told_the_exporter_fields_the_alerts_need(prometheus):
    external = {"external": {"releaseLabel": "prom"}} if prometheus == "external" else {}
    settings = {"prometheus": prometheus, **external}

    def operator_notes(mode: str, **observability) -> list[str]:
        raw = site_config(**observability)
        raw["gpuOperator"] = {**raw["gpuOperator"], "mode": mode}
        return [note for note in load_platform(raw).notes if note.startswith("gpuOperator.mode")]
    (note,) = operator_notes("external", **settings)
    assert all(field in note for field in DCGM_FIELDS_BEYOND_DEFAULTS) and "dcgmExporter.config" in note
    assert "dcgmExporter.enablePodLabels" in note, "scraped with honorLabels: tenant labels must not reach it"
    assert not operator_notes("microk8s-addon", **settings), "the program patches the addon's collector list itself"
    assert not operator_notes("external", prometheus="off"), "no metrics, no alerts, no note"


def test_an_external_prometheus_is_told_to_keep_out_of_the_teams_namespaces():
    """A tenant controls what its pods expose; the installed Prometheus never scrapes them
    (tests/test_observability_scrapes.py), a site's own is told not to, whether or not GPUs are shared."""
    def scrape_notes(raw: dict) -> list[str]:
        return [note for note in load_platform(raw).notes if "must not scrape the teams' host namespaces" in note]
    raw = site_config(prometheus="external", external={"releaseLabel": "prom"})
    (note,) = scrape_notes(raw)
    assert "gpu_tenancy_team_info" in note and "kai_queue_*" in note
    raw["kaiScheduler"] = {**raw["kaiScheduler"], "gpuSharing": False}
    assert len(scrape_notes(raw)) == 1
    assert not scrape_notes(site_config()), "the installed stack scrapes no tenant namespace"


def test_an_external_prometheus_is_told_which_kube_state_metrics_charges_init_container_gpus():
    """Whole GPUs an ordinary init container holds are charged from kube-state-metrics' init-container series
    (DCGM names no pod for them), whether or not GPUs are shared; the installed stack ships a release that has them."""
    def init_notes(raw: dict) -> list[str]:
        return [note for note in load_platform(raw).notes if "ordinary init containers" in note]
    raw = site_config(prometheus="external", external={"releaseLabel": "prom"})
    (note,) = init_notes(raw)
    assert "v2.11.0" in note and "kube_pod_init_container_info" in note
    assert "kube_pod_init_container_status_running" in note
    raw["kaiScheduler"] = {**raw["kaiScheduler"], "gpuSharing": False}
    assert len(init_notes(raw)) == 1
    assert not init_notes(site_config()), "the installed stack's kube-state-metrics has them"


def test_gpus_on_the_time_sliced_profile_are_noted_as_not_charged_per_team():
    def accounting_notes(raw: dict) -> list[str]:
        return [note for note in load_platform(raw).notes if "not theirs" in note]
    raw = site_config()
    raw["kaiScheduler"] = {**raw["kaiScheduler"], "gpuSharing": False}
    assert not accounting_notes(raw), "the exclusive profile: DCGM maps each GPU to the pod holding it"
    raw["gpuOperator"] = {**raw["gpuOperator"], "timeSlicing": {**raw["gpuOperator"]["timeSlicing"],
                                                                "defaultProfile": "time-sliced"}}
    (note,) = accounting_notes(raw)
    assert note.startswith("gpuOperator.timeSlicing.defaultProfile put GPUs on the time-sliced profile")
    raw["observability"] = {"prometheus": "off"}
    assert not accounting_notes(raw), "nothing is charged"
    eks = project_config(stack_config("eks"))
    eks["observability"] = {"prometheus": "install"}
    assert not accounting_notes(eks)
    eks["cluster"]["eks"]["gpuNodeGroups"][0]["sharingProfile"] = "time-sliced"
    (note,) = accounting_notes(eks)
    assert note.startswith("cluster.eks.gpuNodeGroups[0].sharingProfile (")


def test_an_external_url_nothing_reads_is_warned_about():
    raw = site_config(prometheus="external", external={"releaseLabel": "prom", "url": "http://prom.monitoring:9090"})
    warnings = [w for w in load_platform(raw).warnings if "external.url" in w]
    assert len(warnings) == 1 and "timeAwareFairness.enabled is false" in warnings[0]
    raw["observability"]["timeAwareFairness"] = {"enabled": True}
    assert not [w for w in load_platform(raw).warnings if "external.url" in w]
