"""The review summary answers where each team's pods run, how observability is set up, what the charts
create cluster-wide and what the site exposes, for every committed stack and for new kinds of site."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config.stack_file import read_stack_file, stack_names
from ops.sites import platform_of
from tests.conftest import dev_config, stack_config
from tests.test_plan_render import VCLUSTER_TEMPLATE, write_chart
from tools.charts.cache import cache_chart
from tools.plan import cli as plan

ROOT = Path(__file__).resolve().parent.parent


def section(summary: str, title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", summary, re.S | re.M)
    assert match, f"no section {title!r}"
    return match.group(1)


def _eks_selecting_gpu_nodes_by(node_labels: dict | None) -> dict:
    """The eks stack with tenant pods selected by ``node_labels`` (None: the default, every GPU group)."""
    config = stack_config("eks")
    if node_labels is None:
        del config["gpu-tenancy:vcluster"]["nodeLabels"]
    else:
        config["gpu-tenancy:cluster"]["eks"]["gpuNodeGroups"][0]["labels"] = dict(node_labels)
        config["gpu-tenancy:vcluster"]["nodeLabels"] = dict(node_labels)
    return config


# Valid EKS sites whose teams select their GPU nodes by another label than the committed eks stack's pool label.
SITE_VARIANTS = {"eks-default-node-labels": lambda: _eks_selecting_gpu_nodes_by(None),
                 "eks-own-node-label": lambda: _eks_selecting_gpu_nodes_by({"team": "research"})}


@pytest.mark.parametrize("stack", stack_names(ROOT) + sorted(SITE_VARIANTS))
def test_every_committed_stack_says_where_each_team_runs_and_what_it_exposes(stack, tmp_path):
    # A fresh plan, not the golden one: a newly committed site has none (tests/test_golden.py).
    if stack in SITE_VARIANTS:
        config = SITE_VARIANTS[stack]()
        assert plan.main([stack, "--out", str(tmp_path / "plan")], config=config) == 0
    else:
        assert plan.main([stack, "--out", str(tmp_path / "plan")]) == 0
        config = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")["config"]
    summary = (tmp_path / "plan" / "summary.md").read_text()
    placement = section(summary, "Where tenant pods run")
    cluster = config["gpu-tenancy:cluster"]
    gpu_pools = {group["name"] for group in cluster.get("eks", {}).get("gpuNodeGroups", [])}
    for team in config["gpu-tenancy:teams"]:
        row = next(line for line in placement.splitlines() if line.startswith(f"| `{team['name']}` |"))
        assert "none: every pod stays Pending" not in row
        if cluster["kind"] == "eks":  # a team's pods run on the site's GPU node groups, whichever label selects them
            pools = row.rstrip(" |").rsplit("|", 1)[-1]
            assert any(f"`{pool}`" in pools for pool in gpu_pools), row
    assert section(summary, "Observability")
    assert "were not rendered" in section(summary, "Cluster-scoped objects of the charts")
    exposes = section(summary, "What the site exposes")
    service_types = {"nodePort": "NodePort", "loadBalancer": "LoadBalancer"}
    exposed = {team.vcluster_name: service_types[team.vcluster.access.exposure]
               for team in platform_of(config, stack).teams
               if team.vcluster.access.exposure in service_types}
    for release, kind in exposed.items():  # each team endpoint the site opens is listed with its release
        assert re.search(rf"\| `{kind}` \| release `{re.escape(release)}` \|", exposes), (release, exposes)
    if not exposed:
        assert "No Service of type LoadBalancer or NodePort" in exposes


def run_plan(tmp_path: Path, config: dict, *extra: str) -> str:
    assert plan.main(["site", "--out", str(tmp_path / "plan"), *extra], config=config) == 0
    return (tmp_path / "plan" / "summary.md").read_text()


def test_an_existing_cluster_with_external_prometheus_names_what_must_exist(tmp_path):
    config = dev_config()
    config["gpu-tenancy:cluster"] = {"kind": "kubeconfig", "kubeconfig": {"gpus": 1}}
    config["gpu-tenancy:gpuOperator"] = {"mode": "external"}
    config["gpu-tenancy:observability"] = {"prometheus": "external", "namespace": "monitoring", "external": {
        "releaseLabel": "prom", "url": "http://prometheus-operated.monitoring:9090"}}
    summary = run_plan(tmp_path, config)
    assert "not known to the plan (existing cluster)" in section(summary, "Where tenant pods run")
    observability = section(summary, "Observability")
    assert "Mode: **external**" in observability
    assert "`http://prometheus-operated.monitoring:9090` (nothing reads it" in observability
    assert "Namespace `monitoring`: **must already exist**" in observability
    assert "`gpu-tenancy-dcgm-exporter` | `gpu-operator`" in observability
    assert "`release=prom`" in observability


def test_an_installed_stack_creates_its_namespace_and_a_load_balancer_in_values_is_shown(tmp_path):
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install", "timeAwareFairness": {"enabled": True}}
    config["gpu-tenancy:teams"][0]["vcluster"] = {"extraValues": {"controlPlane": {"service": {"spec": {
        "type": "LoadBalancer"}}}}}
    summary = run_plan(tmp_path, config)
    observability = section(summary, "Observability")
    assert "Namespace `monitoring`: created by this stack" in observability
    assert "(read by KAI's time-aware fairness)" in observability
    exposed = section(summary, "What the site exposes")
    assert "values `controlPlane.service.spec.type` | `LoadBalancer` | release `team-nlp`" in exposed


CLUSTER_WIDE_TEMPLATE = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: kai-admin
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: kai-admin
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: kai-pods
---
apiVersion: v1
kind: Service
metadata:
  name: kai-api
spec:
  type: NodePort
  ports: [{port: 80}]
"""


def stand_in_charts(tmp_path: Path, vcluster_template: str) -> Path:
    """A chart cache holding stand-ins for the dev stack's vCluster and KAI charts."""
    cache, sources = tmp_path / "cache", tmp_path / "sources"
    cache_chart(write_chart(sources, "vcluster", "0.36.1", vcluster_template, {"type": "object"}),
                "vcluster", "https://charts.loft.sh", "0.36.1", cache_dir=cache)
    cache_chart(write_chart(sources, "kai-scheduler", "v0.16.4", CLUSTER_WIDE_TEMPLATE, {"type": "object"}),
                "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", None, "v0.16.4", cache_dir=cache)
    return cache


def test_rendered_charts_list_their_cluster_scoped_objects_by_release_and_exposed_services(tmp_path):
    cache = stand_in_charts(tmp_path, VCLUSTER_TEMPLATE)
    summary = run_plan(tmp_path, dev_config(), "--render-charts", "--chart-cache", str(cache))
    charts = section(summary, "Cluster-scoped objects of the charts")
    assert "### Release `kai-scheduler`" in charts
    assert "| `ClusterRole` | 1 | `kai-admin` |" in charts and "| `MutatingWebhookConfiguration` | 1 |" in charts
    assert "team-nlp" not in charts  # the vCluster stand-in renders only a namespaced StatefulSet
    assert "`kai-scheduler`/`kai-api` | `NodePort` | release `kai-scheduler`" in section(summary,
                                                                                         "What the site exposes")


VCLUSTER_WITH_SERVICE = VCLUSTER_TEMPLATE + """\
---
apiVersion: v1
kind: Service
metadata:
  name: {{ .Release.Name }}
  namespace: {{ .Release.Namespace }}
spec:
  type: {{ with .Values.controlPlane.service }}{{ .spec.type }}{{ else }}ClusterIP{{ end }}
"""


def test_a_rendered_release_shows_its_exposed_service_once(tmp_path):
    """What a rendered release's values expose is its rendered Service: listed once, not again as values."""
    cache = stand_in_charts(tmp_path, VCLUSTER_WITH_SERVICE)
    config = dev_config()
    config["gpu-tenancy:teams"][0]["vcluster"] = {"extraValues": {"controlPlane": {"service": {"spec": {
        "type": "LoadBalancer"}}}}}
    exposed = section(run_plan(tmp_path, config, "--render-charts", "--chart-cache", str(cache)),
                      "What the site exposes")
    rows = [line for line in exposed.splitlines() if "release `team-nlp`" in line]
    assert rows == ["| `vcluster-team-nlp`/`team-nlp` | `LoadBalancer` | release `team-nlp` |"], exposed
    assert "team-vision" not in exposed
