"""Which tenant ConfigMaps and Secrets the platform's Grafana loads, read from every accepted kube-prometheus-stack.

Grafana's sidecars (kiwigrid k8s-sidecar, one container per kind: dashboards, datasources, alerts, plugins,
notifiers) load every ConfigMap and Secret carrying their ``LABEL`` in the namespaces their ``NAMESPACE`` names
(``ALL``: every namespace; absent: Grafana's own). vCluster copies a tenant's labels to the host (renaming only its
own keys), so a sidecar that searches past Grafana's namespace would load a tenant's object as the platform's
dashboard, data source or alert rule. Rendered with the program's values at every accepted release, each such
sidecar's label must be refused by the synced-objects policy (components/synced_objects_admission.py).
"""

from __future__ import annotations

from typing import Iterator

import pytest

from config import versions
from tests.release_renders import every_release_renders
from tests.synced_objects_sim import host_metadata
from tests.test_synced_objects_admission import nlp, rules  # noqa: F401 (fixture)
from tools.charts.manifest_yaml import load_manifests

WORKLOADS = {"Deployment", "StatefulSet"}


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
def test_every_label_a_grafana_sidecar_reads_past_its_namespace_is_refused(grafana_sidecars, nlp, release):
    found = grafana_sidecars[release]
    assert any(env.get("NAMESPACE") == "ALL" for _, _, env in found), "the dashboards sidecar searches everywhere"
    for namespace, container, env in found:
        searched = set(env.get("NAMESPACE", namespace).split(","))
        if searched <= {namespace}:
            continue
        labels = {env["LABEL"]: env.get("LABEL_VALUE") or "1"}
        for kind in ("ConfigMap", "Secret"):
            obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": "x", "namespace": "default",
                                                                  "labels": labels}}
            assert rules(nlp.create(host_metadata(obj, nlp.team))), (release, container, kind)
