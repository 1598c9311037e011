"""``tools.plan --render-charts``: the objects the charts will create, and their diff.

The charts here are tiny stand-ins written for the tests (named and versioned like the pinned
releases of the dev stack so the plan finds them in the cache), not the upstream charts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import dev_config
from tools.plan import cli as plan
from tools.charts.cache import cache_chart

VCLUSTER_TEMPLATE = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  template:
    spec:
      containers:
        - name: syncer
          resources:
{{ toYaml .Values.controlPlane.statefulSet.resources | indent 12 }}
"""

KAI_TEMPLATE = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: kai-config
data:
  gpuSharing: {{ .Values.global.gpuSharing | quote }}
"""


def write_chart(root: Path, name: str, version: str, template: str, schema: dict) -> Path:
    chart = root / name
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text(yaml.safe_dump({"apiVersion": "v2", "name": name, "version": version}))
    (chart / "values.yaml").write_text("{}\n")
    (chart / "values.schema.json").write_text(json.dumps(schema))
    (chart / "templates" / "main.yaml").write_text(template)
    return chart


@pytest.fixture()
def chart_cache(tmp_path):
    cache, sources = tmp_path / "cache", tmp_path / "sources"
    probe = {"type": "object", "properties": {"enabled": {"type": "boolean"}}}
    vcluster_schema = {"type": "object", "properties": {"controlPlane": {"type": "object", "properties": {
        "statefulSet": {"type": "object", "properties": {"probes": {"type": "object", "properties": {
            "livenessProbe": probe}}}}}}}}
    cache_chart(write_chart(sources, "vcluster", "0.36.1", VCLUSTER_TEMPLATE, vcluster_schema),
                "vcluster", "https://charts.loft.sh", "0.36.1", cache_dir=cache)
    cache_chart(write_chart(sources, "kai-scheduler", "v0.16.4", KAI_TEMPLATE, {"type": "object"}),
                "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", None, "v0.16.4", cache_dir=cache)
    return cache


def plan_with(config, out: Path, cache: Path, *extra: str) -> int:
    return plan.main(["dev", "--out", str(out), "--render-charts", "--chart-cache", str(cache), *extra], config=config)


def test_every_release_is_rendered_into_manifests(tmp_path, chart_cache):
    assert plan_with(dev_config(), tmp_path / "plan", chart_cache) == 0
    manifests = tmp_path / "plan" / "manifests"
    assert sorted(p.name for p in manifests.iterdir()) == ["kai-scheduler", "team-nlp", "team-recommender",
                                                          "team-vision"]
    statefulset = yaml.safe_load(next((manifests / "team-nlp").rglob("main.yaml")).read_text())
    assert statefulset["metadata"]["namespace"] == "vcluster-team-nlp"
    assert statefulset["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "200m", "memory": "256Mi"}
    kai = yaml.safe_load(next((manifests / "kai-scheduler").rglob("main.yaml")).read_text())
    assert kai["data"]["gpuSharing"] == "true"


def test_the_plan_diff_shows_object_level_changes(tmp_path, chart_cache, capsys):
    assert plan_with(dev_config(), tmp_path / "old", chart_cache) == 0
    config = dev_config()
    config["gpu-tenancy:teams"][0]["vcluster"] = {"controlPlaneResources": {"requests": {"cpu": "1"}}}
    assert plan_with(config, tmp_path / "new", chart_cache,
                     "--diff-against", str(tmp_path / "old" / "plan.json")) == 0
    diff = (tmp_path / "new" / "diff.md").read_text()
    assert "## Rendered manifests" in diff
    assert "team-nlp/" in diff and "-              cpu: 200m" in diff and '+              cpu: "1"' in diff
    assert "team-vision/" not in diff.split("## Rendered manifests")[1]


def test_diffing_into_the_same_folder_still_compares_old_and_new_manifests(tmp_path, chart_cache):
    out = tmp_path / "plan"
    assert plan_with(dev_config(), out, chart_cache) == 0
    config = dev_config()
    config["gpu-tenancy:kaiScheduler"]["gpuSharing"] = False
    assert plan_with(config, out, chart_cache, "--diff-against", str(out / "plan.json")) == 0
    diff = (out / "diff.md").read_text()
    assert '-  gpuSharing: "true"' in diff and '+  gpuSharing: "false"' in diff


def test_values_that_break_the_chart_schema_stop_the_plan(tmp_path, chart_cache, capsys):
    config = dev_config()
    # A value the site may set, of a type the chart's schema refuses.
    config["gpu-tenancy:vcluster"]["extraValues"] = {"controlPlane": {"statefulSet": {"probes": {
        "livenessProbe": {"enabled": "no"}}}}}
    assert plan_with(config, tmp_path / "plan", chart_cache) == 2
    assert "livenessProbe" in capsys.readouterr().err


def test_a_missing_chart_names_the_command_that_fetches_it(tmp_path, capsys):
    assert plan_with(dev_config(), tmp_path / "plan", tmp_path / "empty-cache") == 2
    error = capsys.readouterr().err
    assert "python -m tools.charts pull --stack dev" in error
    assert "vcluster 0.36.1" in error
