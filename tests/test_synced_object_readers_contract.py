"""Which of a tenant's synced objects the platform's charts read, rendered with the program's values at every
accepted release. vCluster copies a tenant's labels to the host, renaming only its own keys.

- Grafana (kube-prometheus-stack): its sidecars (kiwigrid k8s-sidecar, one container per kind: dashboards, data
  sources, alerts, plugins, notifiers) load every ConfigMap and Secret carrying their ``LABEL`` in the namespaces
  their ``NAMESPACE`` names (``ALL``: every namespace; absent: Grafana's own). A sidecar searching past Grafana's
  namespace would load a tenant's object as the platform's dashboard, data source or alert rule: each searches
  Grafana's namespace only (components/observability_discovery.py), and the dashboards' label, which a Grafana
  searching everywhere reads (the chart's default, a site's own Grafana), is refused by the synced-objects policy
  (components/synced_objects_admission.py).
- Prometheus: a ServiceMonitor or PodMonitor whose namespace selector reaches past the namespaces it names would
  scrape a tenant's Service or pod wearing its labels, and with ``honorLabels`` take the tenant's own ``namespace``
  and ``pod`` labels for the platform's (the GPU usage the chargeback reads). Every monitor of every chart the
  program installs names its namespaces.
"""

from __future__ import annotations

from typing import Iterator

import pytest

from config import versions
from config.vocabulary import DASHBOARD_LABEL
from tests.release_renders import every_release_renders
from tests.synced_objects_sim import host_metadata
from tests.test_synced_objects_admission import nlp, rules  # noqa: F401 (fixture)
from tools.charts.manifest_yaml import load_manifests

WORKLOADS = {"Deployment", "StatefulSet"}
MONITORS = {"ServiceMonitor", "PodMonitor"}


def sidecars(manifests: dict[str, str]) -> Iterator[tuple[str, str, dict[str, str]]]:
    """(Grafana's namespace, container name, env) of each container of a Grafana workload that watches a label."""
    for text in manifests.values():
        for document in load_manifests(text):
            if not isinstance(document, dict) or document.get("kind") not in WORKLOADS:
                continue
            spec = document["spec"]["template"]["spec"]
            for container in spec.get("containers", []) + spec.get("initContainers", []):
                env = {item["name"]: item.get("value", "") for item in container.get("env", [])}
                if "LABEL" in env and "grafana" in document["metadata"]["name"]:
                    yield document["metadata"]["namespace"], container["name"], env


@pytest.fixture(scope="module")
def grafana_sidecars() -> dict[str, list[tuple[str, str, dict[str, str]]]]:
    return {release: list(sidecars(manifests))
            for release, manifests in every_release_renders()["kube-prometheus-stack"].items()}


@pytest.mark.parametrize("release", versions.KUBE_PROMETHEUS_STACK_RELEASES)
def test_every_grafana_sidecar_searches_grafanas_own_namespace_only(grafana_sidecars, release):
    found = grafana_sidecars[release]
    assert {container for _, container, _ in found} >= {"grafana-sc-dashboard", "grafana-sc-datasources"}
    for namespace, container, env in found:
        assert set(env.get("NAMESPACE", namespace).split(",")) == {namespace}, (release, container, env["NAMESPACE"])


def test_the_dashboard_label_a_grafana_searching_everywhere_reads_is_refused(nlp):
    for kind in ("ConfigMap", "Secret"):
        obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "default",
                                                              "labels": {DASHBOARD_LABEL[0]: DASHBOARD_LABEL[1]}}}
        assert rules(nlp.create(host_metadata(obj, nlp.team))) == {"dashboard-label"}, kind


def monitors(manifests: dict[str, str]) -> Iterator[dict]:
    for text in manifests.values():
        yield from (document for document in load_manifests(text)
                    if isinstance(document, dict) and document.get("kind") in MONITORS)


def reaches_unnamed_namespaces(selector: dict) -> bool:
    """Absent, a monitor's namespaceSelector is its own namespace; ``any: true`` or label terms reach the tenants'."""
    return bool(selector.get("any")) or not set(selector) <= {"matchNames"}


def test_the_namespace_check_tells_named_namespaces_from_the_rest():
    assert not reaches_unnamed_namespaces({}) and not reaches_unnamed_namespaces({"matchNames": ["gpu-operator"]})
    assert reaches_unnamed_namespaces({"any": True})
    assert reaches_unnamed_namespaces({"matchLabels": {"team": "nlp"}})


def test_every_monitor_of_every_chart_names_its_namespaces():
    found = 0
    for chart, releases in every_release_renders().items():
        for release, manifests in releases.items():
            for monitor in monitors(manifests):
                found += 1
                selector = monitor["spec"].get("namespaceSelector") or {}
                assert not reaches_unnamed_namespaces(selector), (chart, release, monitor["metadata"]["name"], selector)
    assert found
