"""tools.deployability on what users deploy: the program's own objects, the real charts of every committed
stack (skipping, with the chart and how to get it, when the chart cache lacks one), and ``tools.plan
--render-charts`` reporting the findings."""

from __future__ import annotations

import copy

import pytest

from config import SECRET_KEYS, load_platform, versions
from config.vocabulary import project_config
from tests.conftest import COMMITTED_STACKS, dev_config, real_charts_or_skip, run, stack_config
from tests.test_deployability import sites  # noqa: F401 (fixture)
from tests.test_mirrors import registries_of
from tools.charts.cache import CACHE_ENV, cache_chart, chart_cache_dir, chart_contracts
from tools.charts.pins import pinned_chart_key
from tools.charts.render import RELEASE_TYPE, render_plan_releases
from tools.deployability import check as deployability
from tools.deployability import pod_security
from tools.deployability.findings import ERROR, INFO
from tools.deployability.inputs import K8sObject, helm_kube_version, program_objects, rendered_objects, site_from_plan
from tools.deployability.schemas import check_schemas
from tools.deployability.site_rules import check_pod_security
from tools.plan.document import build_plan


# --- the program's own objects ----------------------------------------------------------------------


def test_the_program_objects_of_every_committed_stack_validate(sites):
    for stack in COMMITTED_STACKS:
        plan = build_plan(run(stack_config(stack), stack=stack), stack)
        site = site_from_plan(plan)
        objects = program_objects(plan["resources"])
        assert objects
        found = [f for f in check_schemas(objects, site, []) if f.severity == ERROR]
        assert not found, "\n".join(map(str, found))


# --- the real charts (from the chart cache) ---------------------------------------------------------


def with_observability(config: dict, mode: str) -> dict:
    """The site in observability ``mode``: its own settings when it runs that mode already; otherwise only the mode,
    since install-only or external-only keys would make another mode's config invalid. The teams' own receivers
    (teams[].alerting) are install-only too, though outside the observability block."""
    config = copy.deepcopy(config)
    own = config.get("gpu-tenancy:observability", {})
    if own.get("prometheus") == mode:
        return config
    config["gpu-tenancy:observability"] = {"prometheus": mode}
    if mode != "install":
        for team in config.get("gpu-tenancy:teams", []):
            team.pop("alerting", None)
    return _mirroring_what_it_pulls(config)


def _mirroring_what_it_pulls(config: dict) -> dict:
    """A site with image mirrors mirrors every registry it pulls from: the monitoring stack's, once installed, too
    (under the host of the site's first mirror), as its operator would add them."""
    images = (config.get("gpu-tenancy:mirrors") or {}).get("images")
    if not images:
        return config
    unmirrored = {key: value for key, value in config.items() if key != "gpu-tenancy:mirrors"}
    platform = load_platform(project_config(unmirrored), placeholders=SECRET_KEYS)
    mirror_host = next(iter(images.values())).split("/", 1)[0]
    images.update({host: f"{mirror_host}/{host}" for host in registries_of(platform) if host not in images})
    return config


def test_a_mirrored_site_is_checked_with_the_monitoring_stack_installed_too():
    # A valid site that mirrors every registry it pulls from was refused once this file installed the monitoring
    # stack on it (quay.io unmirrored; found opening a trial site).
    config = dev_config()
    platform = load_platform(project_config(config), placeholders=SECRET_KEYS)
    config["gpu-tenancy:mirrors"] = {"images": {host: f"harbor.corp.example/{host}"
                                                for host in registries_of(platform)}}
    assert "quay.io" not in config["gpu-tenancy:mirrors"]["images"]
    installed = with_observability(config, "install")
    load_platform(project_config(installed), placeholders=SECRET_KEYS)
    assert installed["gpu-tenancy:mirrors"]["images"]["quay.io"] == "harbor.corp.example/quay.io"


def test_a_site_with_team_receivers_is_checked_with_observability_off_too():
    # A valid site whose teams have their own receivers failed this file's off run (found opening a trial site).
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    config["gpu-tenancy:teams"][0]["alerting"] = {"receiver": "webhook"}
    load_platform(project_config(config), secrets_set={"teamAlertReceivers"})
    for mode in ("off", "external"):
        changed = with_observability(config, mode)
        if mode == "external":
            changed["gpu-tenancy:observability"]["external"] = {"releaseLabel": "kube-prometheus-stack"}
        assert load_platform(project_config(changed)).observability.prometheus == mode
    assert with_observability(config, "install") == config


@pytest.mark.parametrize("observability", ["off", "install"])
@pytest.mark.parametrize("stack", COMMITTED_STACKS)
def test_committed_stacks_are_deployable_with_the_real_charts(stack, observability, tmp_path):
    config = with_observability(stack_config(stack), observability)
    plan = build_plan(run(config, stack=stack), stack)
    cache = real_charts_or_skip(plan)
    # Rendered for the Kubernetes version the site states, as tools.plan --render-charts does.
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    site, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    # Clean: the committed stacks are the examples a new site starts from, so not even a warning. Notes stay: they say
    # what the plan cannot know of a site (a kubeconfig host's nodes and storage classes).
    problems = [f for f in found if f.severity != INFO]
    assert not problems, "\n".join(map(str, problems))


@pytest.mark.parametrize("level", pod_security.LEVELS)
def test_tenant_pods_pass_every_pod_security_level_the_config_offers(level, tmp_path):
    config = dev_config()
    config["gpu-tenancy:vcluster"]["podSecurity"] = level
    plan = build_plan(run(config, stack="dev"), "dev")
    # Only the tenants' releases matter here; the others are checked by the stack test.
    plan["resources"] = [r for r in plan["resources"]
                         if r["type"] != RELEASE_TYPE or r["inputs"].get("chart") == "vcluster"]
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path)
    objects = program_objects(plan["resources"]) + rendered_objects(rendered, tmp_path, plan["resources"])
    tenants = deployability.tenant_pods(objects)
    assert tenants, "every tenant has a CoreDNS pod"
    found = check_pod_security(objects + tenants, site_from_plan(plan))
    assert not found, "\n".join(map(str, found))


# --- tools.plan --render-charts runs the check ------------------------------------------------------


STAND_IN_CONTROL_PLANE = """\
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ .Release.Name }}
spec:
  serviceName: {{ .Release.Name }}
  selector: {matchLabels: {app: vcluster, release: {{ .Release.Name }}}}
  template:
    metadata: {labels: {app: vcluster, release: {{ .Release.Name }}}}
    spec:
      containers: [{name: syncer, image: example.invalid/syncer:1}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: cp-{{ .Release.Name }}
spec:
  podSelector: {matchExpressions: [{key: release, operator: Equals, values: [{{ .Release.Name }}]}]}
  policyTypes: [Egress]
  egress: [{ports: [{port: 443, protocol: TCP}]}]
"""


def test_plan_with_rendered_charts_reports_the_findings(tmp_path, capsys):
    from tools.plan import cli as plan_tool
    cache, sources = tmp_path / "cache", tmp_path / "sources"
    for name, version, source, template in (
            ("vcluster", "0.36.1", "https://charts.loft.sh", STAND_IN_CONTROL_PLANE),
            ("kai-scheduler", "v0.16.4", None, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: kai}\n")):
        chart = sources / name
        (chart / "templates").mkdir(parents=True)
        (chart / "Chart.yaml").write_text(f"apiVersion: v2\nname: {name}\nversion: {version}\n")
        (chart / "templates" / "main.yaml").write_text(template)
        cache_chart(chart, "vcluster" if source else "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler",
                    source, version, cache_dir=cache)
    out = tmp_path / "plan"
    arguments = ["dev", "--out", str(out), "--render-charts", "--chart-cache", str(cache)]
    assert plan_tool.main(arguments, config=dev_config()) == 0
    report = (out / "deployability.md").read_text()
    # The chart's policy the API server would refuse, one per team (the program's own open the API server's port).
    assert "api-server-egress" in report and "refuses this NetworkPolicy" in report and "cp-team-nlp" in report
    printed = capsys.readouterr().out
    assert "deployability: 3 errors" in printed
    stated = dev_config()["gpu-tenancy:cluster"]["microk8s"]["kubernetesVersion"]
    assert f"for Kubernetes v{stated}.0" in printed and f"(microk8s, Kubernetes {stated})" in report
    assert plan_tool.main(arguments + ["--fail-on-findings"], config=dev_config()) == 3


@pytest.mark.parametrize("chart, version, manifest, words", [
    ("kai-scheduler", versions.KAI_VERSION,
     {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "q"},
      "spec": {"resources": {"gpu": {"quota": 1, "limit": -1, "overquotaWeight": 1}}}}, "overquotaWeight"),
    ("gpu-operator", versions.MICROK8S_ADDON_GPU_OPERATOR_VERSION,
     {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
      "spec": {"devicePlugin": {"config": {"name": "c", "defualt": "x"}}}}, "defualt"),
])
def test_the_real_crds_catch_a_misspelled_field(chart, version, manifest, words, sites):
    contracts = chart_contracts(pinned_chart_key(chart, version))
    if contracts is None:
        pytest.skip(f"the chart cache {chart_cache_dir()} (${CACHE_ENV}) lacks {chart} {version}: run `python -m tools.charts pull` "
                    f"(network) or `python -m tools.charts add DIR --version {version}`")
    patch = manifest["kind"] == "ClusterPolicy"  # the program patches the addon's ClusterPolicy
    found = check_schemas([K8sObject(manifest, "test", patch=patch)], sites["eks"], contracts.crds)
    assert [f.rule for f in found] == ["custom-resource"] and words in found[0].message
    fixed = copy.deepcopy(manifest)
    if patch:
        fixed["spec"]["devicePlugin"]["config"] = {"name": "c", "default": "x"}
    else:
        fixed["spec"]["resources"]["gpu"]["overQuotaWeight"] = fixed["spec"]["resources"]["gpu"].pop("overquotaWeight")
    assert not check_schemas([K8sObject(fixed, "test", patch=patch)], sites["eks"], contracts.crds)


def test_the_real_crds_rules_are_evaluated_on_what_the_chart_renders(tmp_path):
    """kube-prometheus-stack's Prometheus, as the chart renders it with the program's values, keeps its CRD's CEL
    rules; sharded by a topology with more values than shards, the API server would refuse it, and so does the
    check."""
    config = dev_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install"}
    plan = build_plan(run(config), "dev")
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    objects = rendered_objects(rendered, tmp_path, plan["resources"])
    crds = deployability.crds_of(objects)
    [prometheus] = [obj for obj in objects if obj.kind == "Prometheus"]
    site = site_from_plan(plan)
    assert not check_schemas([prometheus], site, crds)
    sharded = copy.deepcopy(prometheus.manifest)
    sharded["spec"].update(shards=1, shardingStrategy={"mode": "Topology", "topology": {"values": ["a", "b"]}})
    [finding] = check_schemas([K8sObject(sharded, "test")], site, crds)
    assert finding.rule == "custom-resource" and "breaks a validation rule of CRD prometheuses" in finding.message
    assert "shards must be greater than or equal to the number of topology values" in finding.message


def test_a_team_with_the_longest_name_the_config_takes_is_deployable(tmp_path):
    """Every name derived from a 63-character team name, the vCluster's StatefulSet (52) and what the charts name
    after it included, is one the API server and its controllers take."""
    config = dev_config()
    config["gpu-tenancy:teams"][0]["name"] = "x" * 63
    plan = build_plan(run(config), "dev")
    cache = real_charts_or_skip(plan)
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    objects = rendered_objects(rendered, tmp_path, plan["resources"])
    assert any(obj.kind == "StatefulSet" and obj.name == "x" * 52 for obj in objects)
    _, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    errors_found = [f for f in found if f.severity == ERROR]
    assert not errors_found, "\n".join(map(str, errors_found))


def test_an_external_prometheus_sites_monitors_are_checked_against_the_prometheus_operator_crds(tmp_path):
    """With ``prometheus: external`` no release of the plan brings the monitoring.coreos.com CRDs: the site's own
    operator serves them. The check reads them from the pinned kube-prometheus-stack instead of warning, for every
    such valid site, that the API has no ServiceMonitor; and a broken monitor is still caught."""
    config = stack_config("eks")
    config["gpu-tenancy:observability"] = {"prometheus": "external", "external": {"releaseLabel": "prom"}}
    plan = build_plan(run(config, stack="eks"), "eks")
    cache = real_charts_or_skip(plan)
    key = pinned_chart_key(versions.KUBE_PROMETHEUS_STACK_CHART, versions.KUBE_PROMETHEUS_STACK_VERSION)
    if chart_contracts(key, cache) is None:
        pytest.skip(f"the chart cache {cache} (${CACHE_ENV}) lacks {key.describe()}: {key.pull_command()}")
    rendered = render_plan_releases(plan["resources"], cache, tmp_path, kube_version=helm_kube_version(plan))
    monitors = [r for r in plan["resources"] if r["type"].startswith("kubernetes:monitoring.coreos.com/")]
    assert {r["inputs"]["kind"] for r in monitors} == {"ServiceMonitor", "PrometheusRule"}
    _, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    assert [f for f in found if f.severity != INFO] == []

    broken = next(r for r in monitors if r["inputs"]["kind"] == "ServiceMonitor")
    broken["inputs"]["spec"]["endpoints"][0]["intervall"] = "30s"
    _, _, found = deployability.check_plan(plan, rendered, tmp_path, cache)
    assert [(f.severity, f.rule) for f in found if "intervall" in f.message] == [(ERROR,
                                                                                  "custom-resource")]
