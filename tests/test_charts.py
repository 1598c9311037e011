"""tools.charts: in-process rendering with helm-python-sdk, and plan rendering.

The charts under tests/charts/ (schemas stored as ``values.schema.fixture.json``) are written for these tests (not upstream charts): ``demo``
(1.2.3: values schema, a Deployment from values, a ConfigMap behind a flag, helpers, a CRD and
a ``greeter`` subchart with its own schema) and ``tiny`` (v0.4.0, versioned with a leading
"v" like KAI's chart, used as an OCI chart). Nothing here needs the network. Chart identity, the
cache and pulls are in test_chart_cache.py.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from pathlib import Path

import pytest
import yaml

import helm_python as helm

from tools.charts.refs import ChartError, ChartRenderError, ChartValuesError, chart_key
from tools.charts.cache import MissingChart, cache_chart, cached_chart_path
from tools.charts.render import release_records, render_plan_releases, render_release
from tests.chart_spec import DEMO_REPO, FIXTURES, TINY_REF, one, release, tree


# --- the SDK itself ---------------------------------------------------------------------------


def test_sdk_loads_its_native_library():
    assert helm.helm_sdk_version().startswith("v4.")
    assert Path(helm.library_path).is_file()


# --- rendering --------------------------------------------------------------------------------


def test_rendering_follows_the_values(demo: Path):
    two = render_release(demo, "web", "apps", {"replicaCount": 2})
    five = render_release(demo, "web", "apps", {"replicaCount": 5, "resources": {"limits": {"memory": "1Gi"}}})
    deployment = one(two, "Deployment", "web-demo")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["metadata"]["namespace"] == "apps"
    # The helper from _helpers.tpl is used; the chart's defaults fill what the values leave out.
    assert deployment["metadata"]["labels"]["helm.sh/chart"] == "demo-1.2.3"
    assert deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"memory": "128Mi"}
    changed = one(five, "Deployment", "web-demo")["spec"]
    assert changed["replicas"] == 5
    assert changed["template"]["spec"]["containers"][0]["resources"] == {
        "limits": {"memory": "1Gi"}, "requests": {"cpu": "100m", "memory": "64Mi"}}
    assert two["demo/templates/deployment.yaml"] != five["demo/templates/deployment.yaml"]


def test_conditional_template_appears_and_disappears(demo: Path):
    off = render_release(demo, "web", "apps", {})
    assert "demo/templates/configmap.yaml" not in off
    assert "envFrom" not in off["demo/templates/deployment.yaml"]
    on = render_release(demo, "web", "apps", {"config": {"enabled": True, "data": {"LOG_LEVEL": "debug"}}})
    config = one(on, "ConfigMap", "web-demo-config")
    assert config["data"] == {"LOG_LEVEL": "debug"}
    assert one(on, "Deployment", "web-demo")["spec"]["template"]["spec"]["containers"][0]["envFrom"] == [
        {"configMapRef": {"name": "web-demo-config"}}]


def test_notes_helpers_and_crds(demo: Path):
    manifests = render_release(demo, "web", "apps", {})
    assert list(manifests) == sorted(manifests)
    assert not [path for path in manifests if path.endswith(("NOTES.txt", ".tpl"))]
    assert one(manifests, "CustomResourceDefinition", "widgets.demo.example.invalid")
    assert "demo/crds/widgets.yaml" not in render_release(demo, "web", "apps", {}, include_crds=False)


def test_subchart_renders_with_values_from_the_parent(demo: Path):
    defaults = render_release(demo, "web", "apps", {})
    assert one(defaults, "ConfigMap", "web-greeter")["data"] == {"message": "hello from the greeter's own defaults"}
    given = render_release(demo, "web", "apps", {"greeter": {"message": "hi from the parent"}})
    assert one(given, "ConfigMap", "web-greeter")["data"] == {"message": "hi from the parent"}
    # The dependency's condition (greeter.enabled) is honoured.
    disabled = render_release(demo, "web", "apps", {"greeter": {"enabled": False}})
    assert not [path for path in disabled if "/charts/greeter/" in path]


@pytest.mark.parametrize("values, chart, path, words", [
    ({"replicaCount": "three"}, "demo", "/replicaCount", ["integer"]),
    ({"replicaCount": -1}, "demo", "/replicaCount", ["minimum"]),
    ({"replicas": 2}, "demo", "", ["replicas", "not allowed"]),
    ({"image": {"repository": "x", "digest": "sha256:0"}}, "demo", "/image", ["digest"]),
    ({"image": None}, "demo", "", ["image"]),
    ({"greeter": {"message": ""}}, "greeter", "/message", ["minLength"]),
    ({"greeter": {"colour": "red"}}, "greeter", "", ["colour"]),
])
def test_schema_violations_raise_naming_the_key(demo: Path, values, chart, path, words):
    with pytest.raises(ChartValuesError) as raised:
        render_release(demo, "web", "apps", values)
    error = raised.value
    assert [(violation.chart, violation.path) for violation in error.violations] == [(chart, path)]
    message = str(error)
    assert "release web (chart demo 1.2.3)" in message
    for word in words + [path or "(top level)"]:
        assert word in message
    assert isinstance(error, ValueError) and error.detail


def test_all_violations_are_listed(demo: Path):
    with pytest.raises(ChartValuesError) as raised:
        render_release(demo, "web", "apps", {"replicaCount": "x", "extra": 1, "greeter": {"message": 5}})
    assert sorted((v.chart, v.path) for v in raised.value.violations) == [
        ("demo", ""), ("demo", "/replicaCount"), ("greeter", "/message")]


def test_a_broken_template_is_a_render_error(tmp_path: Path):
    chart = tmp_path / "broken"
    shutil.copytree(FIXTURES / "tiny", chart)
    (chart / "templates" / "bad.yaml").write_text("value: {{ .Values.serviceAccount.name | nosuchfunction }}\n")
    with pytest.raises(ChartRenderError):
        render_release(chart, "t", "apps", {})
    with pytest.raises(ChartRenderError, match="cannot load chart"):
        render_release(tmp_path / "absent", "t", "apps", {})
    with pytest.raises(ChartRenderError, match="release name"):
        render_release(FIXTURES / "tiny", "Not_A_Name", "apps", {})


def test_capabilities(cache: Path):
    tiny = cached_chart_path(TINY_REF, None, "v0.4.0", cache_dir=cache)
    default = one(render_release(tiny, "t", "apps", {}), "ServiceAccount", "tiny")["metadata"]["annotations"]
    assert default["tiny.example.invalid/kube-version"].startswith("v1.")
    assert "tiny.example.invalid/api" not in default
    pinned = one(render_release(tiny, "t", "apps", {}, kube_version="1.33.2", api_versions=["tiny.example.invalid/v1"]),
                 "ServiceAccount", "tiny")["metadata"]["annotations"]
    assert pinned == {"tiny.example.invalid/kube-version": "v1.33.2", "tiny.example.invalid/api": "present"}


def test_rendering_is_deterministic(demo: Path):
    values = {"replicaCount": 3, "config": {"enabled": True, "data": {"B": "2", "A": "1"}},
              "greeter": {"message": "x"}}
    first = render_release(demo, "web", "apps", values)
    second = render_release(demo, "web", "apps", json.loads(json.dumps(values)))
    assert first == second and list(first) == list(second)


# --- plans -----------------------------------------------------------------------------------------


def two_releases(**demo_extra) -> list[dict]:
    return [
        {"type": "kubernetes:core/v1:Namespace", "name": "apps", "inputs": {"metadata": {"name": "apps"}}},
        release("web", "demo", "1.2.3", repo=DEMO_REPO, namespace="apps",
                values={"replicaCount": 4.0, "config": {"enabled": True, "data": {"TOKEN": "[secret]"}}},
                **demo_extra),
        release("tiny", TINY_REF, "v0.4.0", namespace="system", values={"serviceAccount": {"name": "robot"}}),
    ]


def test_render_plan_releases_writes_manifests_per_release(cache: Path, tmp_path: Path):
    out = tmp_path / "plan"
    summary = render_plan_releases(two_releases(), cache, out)
    files = sorted(str(path.relative_to(out)) for path in out.rglob("*") if path.is_file())
    assert files == [
        "manifests/tiny/tiny/templates/hook.yaml",
        "manifests/tiny/tiny/templates/serviceaccount.yaml",
        "manifests/web/demo/charts/greeter/templates/configmap.yaml",
        "manifests/web/demo/crds/widgets.yaml",
        "manifests/web/demo/templates/configmap.yaml",
        "manifests/web/demo/templates/deployment.yaml",
    ]
    deployment = yaml.safe_load((out / "manifests/web/demo/templates/deployment.yaml").read_text())
    assert deployment["spec"]["replicas"] == 4  # the wire format's 4.0 is the integer the program wrote
    assert deployment["metadata"]["namespace"] == "apps"
    account = yaml.safe_load((out / "manifests/tiny/tiny/templates/serviceaccount.yaml").read_text())
    assert account["metadata"] == {"name": "robot", "namespace": "system", "annotations": {
        "tiny.example.invalid/kube-version": account["metadata"]["annotations"]["tiny.example.invalid/kube-version"]}}

    assert [entry["dir"] for entry in summary["releases"]] == ["manifests/tiny", "manifests/web"]
    tiny, web = summary["releases"]
    assert tiny["source"] == TINY_REF and tiny["version"] == "v0.4.0" and tiny["archive"] == "tiny-v0.4.0.tgz"
    assert web["resource"] == "web-release" and web["release"] == "web" and web["namespace"] == "apps"
    assert web["digest"] == helm.digest(cache / "demo-1.2.3.tgz")
    assert web["placeholders"] == ["/config/data/TOKEN = [secret]"]
    assert web["nondeterministicFiles"] == [] and tiny["nondeterministicFiles"] == []
    assert [(o["kind"], o["name"]) for o in web["objects"]] == [
        ("ConfigMap", "web-greeter"), ("CustomResourceDefinition", "widgets.demo.example.invalid"),
        ("ConfigMap", "web-demo-config"), ("Deployment", "web-demo")]
    assert [(o["kind"], o["name"], o.get("hook")) for o in tiny["objects"]] == [
        ("ConfigMap", "tiny-pre-install", "pre-install"), ("ServiceAccount", "robot", None)]
    json.dumps(summary)  # JSON-able as it is
    assert str(tmp_path) not in json.dumps(summary)


def test_render_plan_releases_flags_templates_that_render_differently_each_time(tmp_path: Path):
    chart = tmp_path / "src" / "tiny"
    shutil.copytree(FIXTURES / "tiny", chart)
    (chart / "templates" / "secret.yaml").write_text(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: token\nstringData:\n"
        "  token: {{ randAlphaNum 16 | quote }}\n")
    cache = tmp_path / "cache"
    cache_chart(chart, TINY_REF, None, "v0.4.0", cache_dir=cache)
    summary = render_plan_releases([release("tiny", TINY_REF, "v0.4.0")], cache, tmp_path / "out")
    assert summary["releases"][0]["nondeterministicFiles"] == ["tiny/templates/secret.yaml"]


def test_render_plan_releases_keeps_old_output_when_a_render_fails(cache: Path, tmp_path: Path):
    out = tmp_path / "out"
    render_plan_releases(two_releases(), cache, out)
    before = tree(out)
    with pytest.raises(ChartValuesError):
        render_plan_releases([release("web", "demo", "1.2.3", repo=DEMO_REPO, values={"replicaCount": "x"})],
                             cache, out)
    with pytest.raises(ValueError, match="release web-release: chart 'demo' has no pinned version"):
        render_plan_releases([release("web", "demo", "", repo=DEMO_REPO)], cache, out)
    assert tree(out) == before


def test_render_plan_releases_is_deterministic_and_replaces_old_output(cache: Path, tmp_path: Path):
    first, second = tmp_path / "one", tmp_path / "two"
    stale = second / "manifests" / "gone" / "old.yaml"
    stale.parent.mkdir(parents=True)
    stale.write_text("kind: Stale\n")
    summary_one = render_plan_releases(two_releases(), cache, first)
    summary_two = render_plan_releases(list(reversed(two_releases())), cache, second)
    assert summary_one == summary_two
    assert not stale.exists()
    assert tree(first) == tree(second)
    comparison = filecmp.dircmp(first, second)
    assert not comparison.diff_files and not comparison.left_only and not comparison.right_only


def test_render_plan_releases_honours_skip_crds_and_shared_names(cache: Path, tmp_path: Path):
    resources = two_releases(skipCrds=True) + [
        release("web", "demo", "1.2.3", repo=DEMO_REPO, namespace="staging", resource="web-staging")]
    summary = render_plan_releases(resources, cache, tmp_path)
    assert [entry["dir"] for entry in summary["releases"]] == [
        "manifests/tiny", "manifests/web@apps", "manifests/web@staging"]
    assert not (tmp_path / "manifests/web@apps/demo/crds").exists()
    assert (tmp_path / "manifests/web@staging/demo/crds/widgets.yaml").is_file()
    with pytest.raises(ChartError, match="two releases named web in the same namespace"):
        render_plan_releases(resources + [release("web", "demo", "1.2.3", repo=DEMO_REPO, namespace="apps",
                                                  resource="again")], cache, tmp_path)


def test_render_plan_releases_reports_bad_values(cache: Path, tmp_path: Path):
    resources = [release("web", "demo", "1.2.3", repo=DEMO_REPO, values={"replicaCount": "[secret]"})]
    with pytest.raises(ChartValuesError, match="release web .*\n.*/replicaCount: got string, want integer"):
        render_plan_releases(resources, cache, tmp_path)


def test_render_plan_releases_lists_every_missing_chart_before_writing(cache: Path, tmp_path: Path):
    resources = two_releases() + [
        release("team-a", "vcluster", "0.36.1", repo="https://charts.loft.sh"),
        release("team-b", "vcluster", "0.36.1", repo="https://charts.loft.sh/"),
        release("kai-scheduler", "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", "v0.16.4")]
    with pytest.raises(MissingChart) as raised:
        render_plan_releases(resources, cache, tmp_path / "out", stack="dev")
    error = raised.value
    assert [key.name for key in error.missing] == ["vcluster", "kai-scheduler"]
    assert error.commands[0] == f"python -m tools.charts pull --stack dev --cache {cache}"
    assert "kai-scheduler v0.16.4 from oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler" in str(error)
    assert not (tmp_path / "out").exists()


def test_the_dev_stack_needs_kai_and_vcluster(dev_run, tmp_path: Path):
    """The real program's releases, from the offline run: what `pull --stack dev` would fetch."""
    with pytest.raises(MissingChart) as raised:
        render_plan_releases(dev_run.resources, tmp_path / "empty", tmp_path / "out", stack="dev")
    assert raised.value.missing == [
        chart_key("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", None, "v0.16.4"),
        chart_key("vcluster", "https://charts.loft.sh", "0.36.1")]
    plan_dicts = [resource.to_json() for resource in dev_run.resources]
    assert [name for name, _ in release_records(plan_dicts)] == [
        name for name, _ in release_records(dev_run.resources)]
