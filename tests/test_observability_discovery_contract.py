"""Spec of the discovery settings against the upstream sources of every accepted kube-prometheus-stack release: the
program sets every namespace selector of the Prometheus operator's Prometheus and Alertmanager types, the search
namespace of every Grafana sidecar, and keeps kube-state-metrics' collectors but ``secrets``, so an upgrade that adds
a selector, a sidecar or a collector turns this red instead of searching or reading the whole cluster. Each part
skips without the mirrors, naming them."""

from __future__ import annotations

import re

import pytest
import yaml

from components import observability_discovery as discovery
from components.observability_ksm import CHART_COLLECTORS, COLLECTORS, UNREAD_COLLECTORS
from config import versions
from tests.conftest import MIRRORED_TAGS, git, mirrored_tag
from tests.mirror_charts import chart_file, dependency_tag

OPERATOR = "prometheus-operator/prometheus-operator"
CHARTS = "prometheus-community/helm-charts"
GRAFANA_CHARTS = "grafana-community/helm-charts"
TYPES = "pkg/apis/monitoring/v1"


def namespace_selectors(tag: str, source: str) -> set[str]:
    """The JSON names of the label-selector fields of ``source`` whose name says they pick namespaces."""
    text = git(OPERATOR, "show", f"{tag}:{TYPES}/{source}")
    return set(re.findall(r'\*metav1\.LabelSelector\s+`json:"([A-Za-z]+NamespaceSelector)[,"]', text))


@pytest.mark.parametrize("tag", MIRRORED_TAGS[OPERATOR])
def test_the_program_sets_every_namespace_selector_of_prometheus_and_alertmanager(tag):
    tag = mirrored_tag(OPERATOR, tag)
    assert namespace_selectors(tag, "prometheus_types.go") == set(discovery.PROMETHEUS_DISCOVERY)
    assert namespace_selectors(tag, "alertmanager_types.go") == set(discovery.ALERTMANAGER_DISCOVERY)
    # The resources that discover by namespaces of their own are not rendered (tests/test_observability_discovery.py).
    assert namespace_selectors(tag, "thanos_types.go") == {"ruleNamespaceSelector"}


def chart_dependency(version: str, name: str) -> str:
    [wanted] = [dependency["version"] for dependency in
                yaml.safe_load(chart_file(versions.KUBE_PROMETHEUS_STACK_CHART, version, "Chart.yaml"))["dependencies"]
                if dependency["name"] == name]
    return wanted


@pytest.mark.parametrize("version", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_every_grafana_sidecar_that_lists_objects_is_given_the_monitoring_namespace(version):
    tag = dependency_tag(GRAFANA_CHARTS, "grafana", chart_dependency(version, "grafana"))
    values = yaml.safe_load(git(GRAFANA_CHARTS, "show", f"{tag}:charts/grafana/values.yaml"))
    searching = {name for name, settings in values["sidecar"].items()
                 if isinstance(settings, dict) and "searchNamespace" in settings}
    assert searching == set(discovery.GRAFANA_SIDECARS)
    # The namespaced role is the chart's own switch, read by its role and binding templates.
    assert values["rbac"]["namespaced"] is False
    templates = git(GRAFANA_CHARTS, "show", f"{tag}:charts/grafana/templates/clusterrole.yaml")
    assert "not .Values.rbac.namespaced" in templates


@pytest.mark.parametrize("version", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_kube_state_metrics_keeps_the_charts_collectors_but_secrets(version):
    """The program lists the collectors (Helm replaces a list): each must be one the chart's kube-state-metrics
    knows, and a collector the chart adds must be judged here."""
    tag = dependency_tag(CHARTS, "kube-state-metrics", chart_dependency(version, "kube-state-metrics"))
    values = yaml.safe_load(git(CHARTS, "show", f"{tag}:charts/kube-state-metrics/values.yaml"))
    assert tuple(values["collectors"]) == CHART_COLLECTORS
    assert set(CHART_COLLECTORS) - set(COLLECTORS) == set(UNREAD_COLLECTORS) == {"secrets"}
    role = git(CHARTS, "show", f"{tag}:charts/kube-state-metrics/templates/role.yaml")
    # The role grants Secrets only with the collector on ($.Values.collectors, later the list less its exclusions).
    assert '{{ if has "secrets" ' in role
