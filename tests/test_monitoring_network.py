"""A tenant's pod cannot reach Prometheus, Alertmanager or kube-state-metrics around its team's proxy.

Attack: the pods a cluster-admin of a vCluster would create, wearing the labels of Grafana, of a query proxy
and of Prometheus itself, synced to the host as vCluster 0.36.1 syncs them (tests/vcluster_pods.py), are run
through the plan's NetworkPolicies with the ingress model of tools/deployability/network_ingress.py. The
pods the platform runs (proxies, Grafana, Prometheus, KAI's usage reader) must still get through. The pod
labels the policies name are read from kube-prometheus-stack 88.5.3 and its subcharts at the pinned tags.
"""

from __future__ import annotations

import re

import pytest
import yaml

from components.observability_network import (ALERTMANAGER_POD_LABELS, ALERTMANAGER_PORT,
                                               KUBE_STATE_METRICS_POD_LABELS, PROMETHEUS_POD_LABELS, PROMETHEUS_PORT,
                                               monitoring_policies)
from components.observability_views import GRAFANA_POD_LABELS, PROXY_PORT
from config import load_platform
from config.observability import INSTALL_RELEASE
from config.model import Team
from config.vocabulary import project_config
from tests.conftest import dev_config, git, run
from tests.tenant_sim import virtual_pod
from tests.vcluster_pods import vcluster_sync
from tools.deployability.network_ingress import Pod, ingress_verdict
from tools.plan.document import build_plan
from tools.plan.summary import render_summary

NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
MONITORING = "monitoring"
KSM_PORT = 8080
CHART = ("prometheus-community/helm-charts", "kube-prometheus-stack-88.5.3")
STACK_CHART = "charts/kube-prometheus-stack"
IMPERSONATED = {**GRAFANA_POD_LABELS, **PROMETHEUS_POD_LABELS, "app.kubernetes.io/name": "prom-label-proxy",
                "gpu-tenancy/team": "team-nlp", "app.kubernetes.io/managed-by": "gpu-tenancy"}


def installed_config() -> dict:
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install", "grafanaUrl": "https://grafana.example.com",
                                           "timeAwareFairness": {"enabled": True}}
    return config


@pytest.fixture(scope="module")
def installed():
    return run(installed_config(), stack="dev")


@pytest.fixture(scope="module")
def policies(installed):
    return [{"metadata": r.inputs["metadata"], "spec": r.inputs["spec"]} for r in installed.of_type(NETWORK_POLICY)]


def platform_pods(installed) -> dict[str, Pod]:
    platform = load_platform(project_config(installed_config()))
    proxy = next(r for r in installed.of_type("kubernetes:apps/v1:Deployment")
                 if r.inputs["metadata"]["name"] == "gpu-tenancy-query-team-nlp")
    return {
        "proxy": Pod(MONITORING, proxy.inputs["spec"]["template"]["metadata"]["labels"]),
        "grafana": Pod(MONITORING, {**GRAFANA_POD_LABELS, "app.kubernetes.io/version": "13.2.0"}),
        "prometheus": Pod(MONITORING, {**PROMETHEUS_POD_LABELS, "prometheus": "kube-prometheus-stack-prometheus"}),
        "alertmanager": Pod(MONITORING, {**ALERTMANAGER_POD_LABELS, "alertmanager": "kube-prometheus-stack-alertmanager"}),
        "kube-state-metrics": Pod(MONITORING, KUBE_STATE_METRICS_POD_LABELS),
        "kai-scheduler": Pod(platform.kai_scheduler.namespace, {"app": "kai-scheduler-default"}),
    }


def tenant_pod(installed, team_name: str = "team-nlp", labels: dict = IMPERSONATED) -> Pod:
    """A pod a tenant creates in its vCluster, as the host sees it after vCluster's sync."""
    platform = load_platform(project_config(installed_config()))
    team: Team = next(team for team in platform.teams if team.name == team_name)
    host = vcluster_sync(virtual_pod(namespace=MONITORING, labels=labels), team)
    namespace = next(r for r in installed.of_type("kubernetes:core/v1:Namespace")
                     if r.inputs["metadata"]["name"] == team.namespace)
    return Pod(host["metadata"]["namespace"], host["metadata"]["labels"], namespace.inputs["metadata"].get("labels") or {})


@pytest.mark.parametrize("labels", [IMPERSONATED, {}, {"app.kubernetes.io/name": "grafana"}])
@pytest.mark.parametrize("target, port", [("prometheus", PROMETHEUS_PORT), ("prometheus", 8080),
                                          ("alertmanager", ALERTMANAGER_PORT), ("kube-state-metrics", KSM_PORT),
                                          ("proxy", PROXY_PORT)])
def test_a_tenants_pod_is_refused_whatever_labels_it_wears(installed, policies, labels, target, port):
    attacker = tenant_pod(installed, labels=labels)
    assert attacker.namespace != MONITORING  # vCluster puts it in the team's host namespace, labels kept
    allowed, isolating = ingress_verdict(attacker, platform_pods(installed)[target], policies, port)
    assert not allowed and isolating


@pytest.mark.parametrize("source, target, port", [
    ("proxy", "prometheus", PROMETHEUS_PORT), ("grafana", "prometheus", PROMETHEUS_PORT),
    ("kai-scheduler", "prometheus", PROMETHEUS_PORT), ("prometheus", "prometheus", 8080),
    ("prometheus", "alertmanager", ALERTMANAGER_PORT), ("grafana", "alertmanager", ALERTMANAGER_PORT),
    ("alertmanager", "alertmanager", 9094), ("prometheus", "kube-state-metrics", KSM_PORT),
    ("grafana", "proxy", PROXY_PORT),
])
def test_the_platforms_own_pods_get_through(installed, policies, source, target, port):
    pods = platform_pods(installed)
    assert ingress_verdict(pods[source], pods[target], policies, port)[0]


@pytest.mark.parametrize("source, target, port", [
    ("proxy", "prometheus", 8080), ("proxy", "alertmanager", ALERTMANAGER_PORT),
    ("grafana", "kube-state-metrics", KSM_PORT), ("kai-scheduler", "alertmanager", ALERTMANAGER_PORT),
])
def test_platform_pods_reach_only_what_they_need(installed, policies, source, target, port):
    pods = platform_pods(installed)
    assert not ingress_verdict(pods[source], pods[target], policies, port)[0]


def test_without_time_aware_fairness_kais_namespace_is_not_let_in(installed):
    config = installed_config()
    del config["gpu-tenancy:observability"]["timeAwareFairness"]
    platform = load_platform(project_config(config))
    manifests = [{"metadata": {"name": name, "namespace": MONITORING}, "spec": spec}
                 for name, spec in monitoring_policies(platform).items()]
    pods = platform_pods(installed)
    assert not ingress_verdict(pods["kai-scheduler"], pods["prometheus"], manifests, PROMETHEUS_PORT)[0]
    assert ingress_verdict(pods["proxy"], pods["prometheus"], manifests, PROMETHEUS_PORT)[0]


def test_the_policies_exist_before_the_stack_release(installed):
    release = next(r for r in installed.of_type("kubernetes:helm.sh/v3:Release")
                   if r.inputs["name"] == "kube-prometheus-stack")
    names = {r.inputs["metadata"]["name"]: r.urn for r in installed.of_type(NETWORK_POLICY)
             if r.inputs["metadata"]["namespace"] == MONITORING}
    assert {"gpu-tenancy-prometheus", "gpu-tenancy-alertmanager", "gpu-tenancy-kube-state-metrics"} <= set(names)
    assert set(names.values()) - set(release.dependencies) == {
        names[f"gpu-tenancy-query-{team}"] for team in ("team-nlp", "team-recommender", "team-vision")}


def test_an_external_prometheus_site_gets_no_policies_in_its_namespace():
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "external", "external": {"releaseLabel": "kps"}}
    program = run(config, stack="dev")
    assert not [r for r in program.of_type(NETWORK_POLICY) if r.inputs["metadata"]["namespace"] == MONITORING]


# --- the labels, read from the charts at the pinned tag ------------------------------------------------

def _show(path: str) -> str:
    return git(CHART[0], "show", f"{CHART[1]}:{path}")


def test_the_chart_creates_no_policy_of_its_own_by_default():
    values = yaml.safe_load(_show(f"{STACK_CHART}/values.yaml"))
    assert values["prometheus"]["networkPolicy"]["enabled"] is False
    assert values["alertmanager"]["networkPolicy"]["enabled"] is False


def test_prometheus_and_alertmanager_pods_wear_the_labels_the_policies_select():
    prometheus = _show(f"{STACK_CHART}/templates/prometheus/networkpolicy.yaml")
    assert "app.kubernetes.io/name: prometheus\n" in prometheus
    assert 'operator.prometheus.io/name: {{ template "kube-prometheus-stack.prometheus.crname" . }}' in prometheus
    helpers = _show(f"{STACK_CHART}/templates/_helpers.tpl")
    crname = re.search(r'define "kube-prometheus-stack.prometheus.crname".*?else \}\}\s*(.*?)\s*\{\{- end', helpers,
                       re.S).group(1)
    assert '"-prometheus"' in crname
    assert PROMETHEUS_POD_LABELS["operator.prometheus.io/name"] == "kube-prometheus-stack-prometheus"
    alertmanager = _show(f"{STACK_CHART}/templates/alertmanager/networkpolicy.yaml")
    assert re.search(r"podSelector:\s*matchLabels:\s*app.kubernetes.io/name: alertmanager", alertmanager)


def test_kube_state_metrics_pods_wear_the_labels_the_policy_selects():
    chart = yaml.safe_load(_show(f"{STACK_CHART}/Chart.yaml"))
    [dependency] = [d for d in chart["dependencies"] if d["name"] == "kube-state-metrics"]
    assert yaml.safe_load(_show("charts/kube-state-metrics/Chart.yaml"))["version"] == dependency["version"]
    helpers = _show("charts/kube-state-metrics/templates/_helpers.tpl")
    assert "app.kubernetes.io/name: {{ include \"kube-state-metrics.name\" . }}" in helpers
    assert "app.kubernetes.io/instance: {{ .Release.Name }}" in helpers
    values = yaml.safe_load(_show(f"{STACK_CHART}/values.yaml"))["kube-state-metrics"]
    assert "nameOverride" not in values and "selectorOverride" not in values
    name = yaml.safe_load(_show("charts/kube-state-metrics/Chart.yaml"))["name"]
    assert KUBE_STATE_METRICS_POD_LABELS == {"app.kubernetes.io/name": name, "app.kubernetes.io/instance": INSTALL_RELEASE}


def test_the_summary_says_who_reaches_prometheus(installed):
    summary = render_summary(build_plan(installed, "dev"))
    assert "| `gpu-tenancy-prometheus` | `app.kubernetes.io/name=prometheus, operator.prometheus.io/name=" \
           "kube-prometheus-stack-prometheus` | `app.kubernetes.io/name=prom-label-proxy`; " in summary
    assert "namespace `kai-scheduler`" in summary
