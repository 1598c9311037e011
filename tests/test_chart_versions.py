"""What the plan diff says of a chart moved to another release: downgrade, upgrade whose CRDs change, plain upgrade.

Built from real release pairs of the accepted lists (config/versions.py *_RELEASES), with the chart archives of the
chart cache ($GPU_TENANCY_CHART_CACHE); the rule that a hook naming files applies only those is checked on objects
built for it, and the table of CRDs a hook leaves against every accepted release's render.
"""

from __future__ import annotations

import itertools

import pytest
import yaml

from config import versions
from tests.conftest import eks_config, real_charts_or_skip
from tests.release_renders import RELEASES, every_release_renders, plan_of
from tools.plan.chart_versions import CRD_HOOKS, HOOK_LEAVES, chart_version_findings, pruned_fields
from tools.plan.diff import diff_plans, render_diff
from tools.plan.replacement import pulumi_findings
from tools.plan.running_site import chart_findings, chart_objects, crd_upgraders

GPU_OPERATOR_DRA_CRDS = {"computedomaincliques.resource.nvidia.com", "computedomains.resource.nvidia.com"}


def _site(**picks: str) -> dict:
    """The EKS stack with kube-prometheus-stack installed, each chart at the release given (else the stack's)."""
    config = eks_config()
    config["gpu-tenancy:observability"] = {"prometheus": "install",
                                           "chartVersion": picks.get("observability", "88.0.0")}
    for section, key in (("gpuOperator", "gpu"), ("kaiScheduler", "kai"), ("vcluster", "vcluster")):
        if key in picks:
            config[f"gpu-tenancy:{section}"]["version"] = picks[key]
    return config


def _findings(old: dict, new: dict, cache=None):
    before, after = plan_of(old, "eks"), plan_of(new, "eks")
    cache = cache if cache is not None else real_charts_or_skip(after)
    real_charts_or_skip(before)
    diff = diff_plans(before, after)
    diff.running_site = pulumi_findings(diff, before, after, cache)
    by_release = {}
    for finding in diff.running_site:
        by_release.setdefault(finding.subject.split(" ", 1)[-1], []).append(finding)
    return by_release, render_diff(diff, "old", "new")


def test_the_gpu_operators_upgrade_to_v26_7_leaves_its_new_dra_crds_uninstalled():
    found, text = _findings(_site(gpu="v26.3.3"), _site(gpu="v26.7.0"))
    not_applied = {f.subject.split(" ")[2] for findings in found.values() for f in findings
                   if f.category == "not applied"}
    assert not_applied == GPU_OPERATOR_DRA_CRDS
    [upgrade] = found["gpu-operator-release"]
    assert upgrade.category == "upgrade" and (upgrade.old, upgrade.new) == ("v26.3.3", "v26.7.0")
    assert "gpu-operator-upgrade-crd applies clusterpolicies.nvidia.com, gpuclusters.nvidia.com" in upgrade.why
    assert "**Not applied: the running site keeps the old object**" in text
    assert "resource.nvidia.com_computedomains.yaml of the chart at v26.7.0" in text


def test_going_back_past_kais_v0_16_3_prunes_the_fields_its_crds_added():
    found, text = _findings(_site(kai="v0.16.4"), _site(kai="v0.16.2"))
    [downgrade] = found["kai-release"]
    assert downgrade.category == "lost"
    assert "bindrequests.scheduling.run.ai: v1alpha2:.spec.predictedNUMAZones" in downgrade.why
    assert "configs.kai.scheduler" in downgrade.why and "kaiScheduler.version back to v0.16.4" in downgrade.fix
    assert "loses state (lost)" in text
    # Between releases whose CRDs are the same, going back drops nothing, but is still said loudly.
    found, text = _findings(_site(kai="v0.16.2"), _site(kai="v0.16.0"))
    [downgrade] = found["kai-release"]
    assert downgrade.category == "downgrade" and "define every field the newer ones do" in downgrade.why
    assert "**A chart goes back to an older release" in text


def test_a_vcluster_downgrade_is_called_out_for_every_tenant():
    found, _ = _findings(_site(), _site(vcluster="0.35.3"))
    for release in ("tenant-team-legal-vcluster", "tenant-team-support-vcluster"):
        [downgrade] = found[release]
        assert (downgrade.category, downgrade.old, downgrade.new) == ("downgrade", "0.36.1", "0.35.3")
        assert "it has no CRDs" in downgrade.why


@pytest.mark.parametrize("old, new, category, why", [
    ("88.0.0", "88.5.3", "upgrade", "kube-prometheus-stack-crds-upgrade applies alertmanagerconfigs"),
    ("88.0.0", "88.3.0", "upgrade", "a plain upgrade: the charts' CRDs are the same"),
])
def test_kube_prometheus_stack_upgrades_within_88_say_whether_crds_change(old, new, category, why):
    found, _ = _findings(_site(observability=old), _site(observability=new))
    [finding] = found["observability-release"]
    assert finding.category == category and why in finding.why and finding.fix == "none needed"


def test_a_chart_missing_from_the_cache_names_the_pull_command(tmp_path):
    found, _ = _findings(_site(kai="v0.16.4"), _site(kai="v0.17.0"), cache=tmp_path)
    [finding] = found["kai-release"]
    assert finding.category == "upgrade" and "not compared" in finding.why
    assert "python -m tools.charts pull oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler --version v0.16.4" \
        in finding.fix


def test_only_a_helm_releases_version_is_judged(tmp_path):
    change = diff_plans({"resources": [{"urn": "u", "type": "kubernetes:core/v1:ConfigMap", "name": "c",
                                        "inputs": {"version": "v1"}}]},
                        {"resources": [{"urn": "u", "type": "kubernetes:core/v1:ConfigMap", "name": "c",
                                        "inputs": {"version": "v0"}}]}).changed[0]
    assert chart_version_findings({"type": change.type, "name": "c"}, "c", change.changes, tmp_path) == []


# --- the hook's reach, read from every accepted release's render ------------------------------------------------


@pytest.fixture(scope="module")
def every_release():
    return every_release_renders()


@pytest.mark.parametrize("chart", [chart for chart in RELEASES if chart != "vcluster"])
def test_each_charts_hook_leaves_exactly_the_crds_the_table_says(chart, every_release):
    for release, manifests in every_release[chart].items():
        objects = chart_objects(manifests)
        crds = {item.manifest["metadata"]["name"] for item in objects.values()
                if item.crd_file and item.manifest.get("kind") == "CustomResourceDefinition"}
        assert crds, f"{chart} {release}"
        hooks = [item for item in objects.values() if item.manifest.get("kind") == "Job"
                 and item.manifest["metadata"]["name"] == CRD_HOOKS[chart]]
        assert hooks and "pre-upgrade" in hooks[0].manifest["metadata"]["annotations"]["helm.sh/hook"]
        written = crd_upgraders(objects.values(), next(iter(objects.values())).release)
        assert crds - written == set(HOOK_LEAVES.get(chart, {}).get(release, ())), f"{chart} {release}"


@pytest.mark.parametrize("chart", RELEASES)
def test_no_downgrade_between_accepted_releases_is_refused_by_the_api_server(chart, every_release):
    """What a downgrade keeps: the older chart's objects patch the newer's without a refused field. Each release
    going back one suffices: a fixed field that differs between any two releases differs between two neighbours
    in between, and a value that may only grow shrinks between two neighbours if it shrinks at all."""
    renders = every_release[chart]
    for older, newer in itertools.pairwise(RELEASES[chart]):
        findings = chart_findings(renders[newer], renders[older])
        assert [f for f in findings if f.category in ("refused", "stops", "unknown")] == [], \
            f"{chart} {newer} -> {older}"


def test_the_versions_table_covers_every_chart_of_the_release_lists():
    assert set(CRD_HOOKS) | {versions.VCLUSTER_CHART} == set(RELEASES)
    assert all(release in RELEASES[chart] for chart, table in HOOK_LEAVES.items() for release in table)


# --- the rule, on objects built for it -------------------------------------------------------------------------


def _files(files: dict[str, list[dict]]) -> dict[str, str]:
    return {f"demo/{path}": yaml.safe_dump_all(objects) for path, objects in files.items()}


def _crd(name: str) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": name},
            "spec": {"versions": [{"name": "v1"}]}}


@pytest.mark.parametrize("args, applied", [
    (["apply", "--filepath=/opt/a.yaml"], {"a.example.com"}),  # names a.yaml only, though its role writes any CRD
    (["apply", "-f", "/opt/a.yaml;", "apply", "-f", "/opt/b.yaml"], {"a.example.com", "b.example.com"}),
    (["apply", "-f", "/tmp/crds.yaml"], {"*"}),  # names no file of the chart: it applies what it unpacked
])
def test_a_hook_that_names_the_charts_crd_files_applies_only_those(args, applied):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "up", "annotations": {
        "helm.sh/hook": "pre-upgrade"}}, "spec": {"template": {"spec": {"serviceAccountName": "up", "containers": [
            {"name": "up", "image": "u:1", "args": args}]}}}}
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "up"},
            "rules": [{"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                       "verbs": ["patch"]}]}
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "up"},
               "roleRef": {"kind": "ClusterRole", "name": "up"},
               "subjects": [{"kind": "ServiceAccount", "name": "up", "namespace": "ns"}]}
    objects = chart_objects(_files({"crds/a.yaml": [_crd("a.example.com")], "crds/b.yaml": [_crd("b.example.com")],
                                    "templates/hook.yaml": [job, role, binding]}))
    assert crd_upgraders(objects.values(), "demo") == applied


def _schema_crd(spec: dict) -> dict:
    return {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": spec}}}}]}}


@pytest.mark.parametrize("older_spec, pruned", [
    ({"type": "object", "properties": {"size": {"type": "integer"}}}, ["v1:.spec.zones", "v1:.spec.zones[*].name"]),
    ({"type": "object", "properties": {"size": {"type": "integer"}, "zones": {"type": "array"}}},
     ["v1:.spec.zones[*].name"]),  # the list stays, its elements' fields go
    ({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, []),  # the older keeps whatever is there
])
def test_a_downgrade_prunes_only_what_the_older_schema_neither_defines_nor_keeps(older_spec, pruned):
    newer = _schema_crd({"type": "object", "properties": {"size": {"type": "integer"}, "zones": {
        "type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}}})
    assert pruned_fields(newer, _schema_crd(older_spec)) == pruned


def test_the_cli_reports_a_crd_left_by_the_version_change_once_with_rendered_charts(tmp_path):
    from tools.plan import cli as plan
    old, new = _site(gpu="v26.3.3"), _site(gpu="v26.7.0")
    cache = real_charts_or_skip(plan_of(new, "eks"))
    common = ["--render-charts", "--chart-cache", str(cache)]
    assert plan.main(["eks", "--out", str(tmp_path / "old"), *common], config=old) == 0
    assert plan.main(["eks", "--out", str(tmp_path / "new"), *common, "--diff-against",
                      str(tmp_path / "old" / "plan.json")], config=new) == 0
    section = (tmp_path / "new" / "diff.md").read_text().split("## Changes a running site")[1].split("\n## ")[0]
    for crd in GPU_OPERATOR_DRA_CRDS:
        assert section.count(f"CustomResourceDefinition {crd} ") == 1, section
