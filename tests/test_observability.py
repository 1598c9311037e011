"""The Observability component through the program (Pulumi mocks): what each mode registers."""

from __future__ import annotations

import json

import pytest

from components import observability_dashboards, observability_dcgm, observability_team_series
from components.observability import DCGM_EXPORTER, KAI_QUEUE_CONTROLLER, KAI_SCHEDULER
from config import load_platform, versions
from config.vocabulary import project_config
from tests.conftest import dev_config, eks_config, run

RELEASE = "kubernetes:helm.sh/v3:Release"
MONITOR = "kubernetes:monitoring.coreos.com/v1:ServiceMonitor"
RULE = "kubernetes:monitoring.coreos.com/v1:PrometheusRule"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
SHARD_PATCH = "kubernetes:kai.scheduler/v1:SchedulingShardPatch"
POLICY_PATCH = "kubernetes:nvidia.com/v1:ClusterPolicyPatch"
COMPONENT = "gpu-tenancy:platform:Observability"


def with_observability(config: dict, **settings) -> dict:
    config["gpu-tenancy:observability"] = settings
    return config


@pytest.fixture(scope="module")
def installed():
    return run(with_observability(dev_config(), prometheus="install"), stack="dev")


def monitors(program) -> dict[str, dict]:
    return {resource.inputs["metadata"]["name"]: resource.inputs for resource in program.of_type(MONITOR)}


def test_off_registers_nothing(dev_run):
    assert not dev_run.of_type(COMPONENT) and not dev_run.of_type(MONITOR) and not dev_run.of_type(RULE)
    assert all(release.inputs["name"] != "kube-prometheus-stack" for release in dev_run.of_type(RELEASE))
    assert "observability" not in dev_run.outputs


def test_install_pins_kube_prometheus_stack_with_persistent_history(installed):
    release = next(r for r in installed.of_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    assert release.inputs["chart"] == versions.KUBE_PROMETHEUS_STACK_CHART
    assert release.inputs["version"] == versions.KUBE_PROMETHEUS_STACK_VERSION
    assert release.inputs["repositoryOpts"]["repo"] == versions.KUBE_PROMETHEUS_STACK_REPO
    assert release.inputs["namespace"] == "monitoring"
    spec = release.inputs["values"]["prometheus"]["prometheusSpec"]
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "microk8s-hostpath"
    assert spec["retention"] == "90d"
    sidecar = release.inputs["values"]["grafana"]["sidecar"]["dashboards"]
    assert (sidecar["label"], sidecar["labelValue"], sidecar["folderAnnotation"]) == (
        "grafana_dashboard", "1", "grafana_folder")


def test_monitors_select_the_services_kai_and_the_gpu_operator_create(installed):
    found = monitors(installed)
    assert set(found) == {"gpu-tenancy-kai-queue-controller", "gpu-tenancy-kai-scheduler",
                          "gpu-tenancy-dcgm-exporter"}
    for name, (namespace, service) in {
            "gpu-tenancy-kai-queue-controller": ("kai-scheduler", KAI_QUEUE_CONTROLLER),
            "gpu-tenancy-kai-scheduler": ("kai-scheduler", KAI_SCHEDULER),
            "gpu-tenancy-dcgm-exporter": ("gpu-operator-resources", DCGM_EXPORTER)}.items():
        spec = found[name]["spec"]
        assert spec["namespaceSelector"] == {"matchNames": [namespace]}
        assert spec["selector"] == {"matchLabels": {"app": service[0]}}
        assert spec["endpoints"][0]["port"] == service[1]
        # kube-prometheus-stack's Prometheus selects monitors by its release name.
        assert found[name]["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert found["gpu-tenancy-dcgm-exporter"]["spec"]["endpoints"][0]["honorLabels"] is True
    assert found["gpu-tenancy-kai-queue-controller"]["spec"]["endpoints"][0]["honorLabels"] is False


def test_rules_and_dashboards_are_what_the_generators_produce(installed):
    platform = load_platform(project_config(with_observability(dev_config(), prometheus="install")), stack="dev")
    (rule,) = installed.of_type(RULE)
    assert rule.inputs["spec"]["groups"] == json.loads(json.dumps(observability_team_series.all_rule_groups(platform)))
    boards = {r.inputs["metadata"]["name"]: r.inputs for r in installed.of_type(CONFIG_MAP)
              if r.inputs["metadata"].get("labels", {}).get("grafana_dashboard") == "1"}
    assert set(boards) == {"gpu-tenancy-dashboard-platform", *(f"gpu-tenancy-dashboard-team-{team.name}"
                                                               for team in platform.teams)}
    nlp = boards["gpu-tenancy-dashboard-team-team-nlp"]
    assert nlp["metadata"]["annotations"]["grafana_folder"] == "GPU tenancy - team-nlp"
    assert json.loads(nlp["data"]["team-team-nlp.json"]) == observability_dashboards.team_dashboard(platform.teams[0])


def test_every_resource_is_a_child_of_the_component_and_waits_for_the_release(installed):
    (component,) = installed.of_type(COMPONENT)
    release = next(r for r in installed.of_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    for resource in installed.of_type(MONITOR) + installed.of_type(RULE):
        assert resource.parent == component.urn
        assert release.urn in resource.dependencies
    kai = next(r for r in installed.of_type(RELEASE) if r.inputs["name"] == "kai-scheduler")
    assert kai.urn in installed.named("observability-kai-queue-controller").dependencies
    assert installed.outputs["observability"]["mode"] == "install"


def test_external_mode_labels_for_the_site_prometheus_and_installs_nothing():
    program = run(with_observability(eks_config(), prometheus="external",
                                     external={"releaseLabel": "prom-stack"}), stack="eks")
    assert all(release.inputs["name"] != "kube-prometheus-stack" for release in program.of_type(RELEASE))
    found = monitors(program)
    assert len(found) == 3 and all(m["metadata"]["labels"]["release"] == "prom-stack" for m in found.values())
    assert program.of_type(RULE)[0].inputs["metadata"]["labels"]["release"] == "prom-stack"
    assert not program.of_type(SHARD_PATCH), "time-aware fairness stays off unless asked for"
    # The site's own kube-state-metrics must export KAI's GPU groups and fractions: the run says how.
    assert [note for note in program.notes if "--metric-labels-allowlist=pods=[runai-gpu-group]" in note]
    # ... and what it must drop or cut so that no team fills that Prometheus for the others.
    assert [note for note in program.notes if "deny kube_pod_tolerations" in note and "image labels" in note]


def test_installed_kube_state_metrics_exports_gpu_groups_and_fractions(installed):
    release = next(r for r in installed.of_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack")
    values = release.inputs["values"]["kube-state-metrics"]
    assert {key: values[key] for key in ("metricLabelsAllowlist", "metricAnnotationsAllowList")} == {
        "metricLabelsAllowlist": ["pods=[runai-gpu-group]"],
        "metricAnnotationsAllowList": ["pods=[gpu-fraction,gpu-memory,gpu-fraction-container-name,gpu-fraction-num-devices]"]}
    # What one team could fill Prometheus with is dropped or cut (tests/test_observability_ksm.py).
    assert values["metricDenylist"] == ["kube_pod_tolerations"]


def test_time_aware_fairness_points_kai_default_shard_at_prometheus():
    program = run(with_observability(dev_config(), prometheus="install", timeAwareFairness={
        "enabled": True, "windowSize": "3d", "halfLifePeriod": "12h", "kValue": 2}), stack="dev")
    (patch,) = program.of_type(SHARD_PATCH)
    assert patch.inputs["metadata"]["name"] == "default"
    assert patch.inputs["spec"] == {"kValue": 2, "usageDBConfig": {
        "clientType": "prometheus",
        "connectionString": "http://kube-prometheus-stack-prometheus.monitoring.svc.cluster.local:9090",
        "usageParams": {"windowSize": "3d", "windowType": "sliding", "halfLifePeriod": "12h"}}}


def test_dcgm_exporter_enabled_in_every_operator_mode_the_program_controls(dev_run, eks_run):
    """On, and reading the platform's collector list (with ECC counters) from a ConfigMap beside the operator."""
    wanted = {"enabled": True, "config": {"name": observability_dcgm.CONFIG_MAP}}
    (patch,) = dev_run.of_type(POLICY_PATCH)
    assert patch.inputs["spec"]["dcgmExporter"] == wanted
    operator = next(r for r in eks_run.of_type(RELEASE) if r.inputs["name"] == "gpu-operator")
    assert operator.inputs["values"]["dcgmExporter"] == wanted
    for program, owner, namespace in ((dev_run, patch, "gpu-operator-resources"), (eks_run, operator, "gpu-operator")):
        (collectors,) = [r for r in program.of_type(CONFIG_MAP)
                         if r.inputs["metadata"]["name"] == observability_dcgm.CONFIG_MAP]
        assert collectors.inputs["metadata"]["namespace"] == namespace
        assert collectors.urn in owner.dependencies
        listed = collectors.inputs["data"][observability_dcgm.CONFIG_KEY].splitlines()
        assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, double-bit ECC errors since the last driver load" in listed
        assert any(line.startswith("DCGM_FI_DEV_GPU_UTIL, gauge,") for line in listed)


def test_external_operator_gets_no_collector_list():
    config = eks_config()
    config["gpu-tenancy:gpuOperator"]["mode"] = "external"
    program = run(config)
    assert not [r for r in program.of_type(CONFIG_MAP) if r.inputs["metadata"]["name"] == observability_dcgm.CONFIG_MAP]
