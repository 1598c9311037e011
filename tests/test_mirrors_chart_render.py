"""A site that pulls the program's charts from its own repositories (``mirrors.charts``) is rendered offline from
the chart cache, which holds each chart by name and version as pulled from its upstream
(tools/charts/cache.py find_cached): the mirror is taken to serve the same chart."""

from __future__ import annotations

import json
import shutil

from tests.conftest import real_charts_or_skip
from tests.release_renders import plan_of, site_with_every_chart
from tools.charts.cache import SOURCE_SUFFIX, chart_cache_dir, find_cached
from tools.charts.refs import chart_key, pinned_chart_key
from tools.charts.render import render_plan_releases
from tools.plan.cli import main as plan_main
from tools.plan.diff import read_manifests

MIRRORED_CHARTS = {"gpu-operator": "https://charts.mirror.test/nvidia", "vcluster": "https://charts.mirror.test/loft",
                   "kai-scheduler": "oci://mirror.test/ghcr-io/kai-scheduler/kai-scheduler",
                   "kube-prometheus-stack": "oci://mirror.test/prometheus-community"}


def test_a_site_pulling_its_charts_from_mirrors_is_rendered_and_checked_from_the_upstream_charts(tmp_path):
    """``python -m tools.plan STACK --render-charts``: the same objects and the same deployability report as the
    site that pulls from upstream, and the summary says where each chart came from."""
    config = site_with_every_chart(0)
    cache = real_charts_or_skip(plan_of(config, "eks"))
    mirrored = {**config, "gpu-tenancy:mirrors": {"charts": MIRRORED_CHARTS}}
    for name, site in (("plain", config), ("mirrored", mirrored)):
        assert plan_main(["eks", "--out", str(tmp_path / name), "--render-charts", "--chart-cache", str(cache)],
                         config=site) == 0
    assert read_manifests(tmp_path / "mirrored" / "manifests") == read_manifests(tmp_path / "plain" / "manifests")
    reports = {name: (tmp_path / name / "deployability.md").read_text().split("## Charts rendered")
               for name in ("plain", "mirrored")}
    assert reports["mirrored"][0] == reports["plain"][0]
    # Which archive was checked, and, for a mirrored chart, that the upstream's copy stood in for the mirror's.
    vclusters = [line for line in reports["mirrored"][1].splitlines() if ": vcluster " in line]
    told = ("the site pulls it from https://charts.mirror.test/loft/vcluster, rendered from the copy pulled from "
            "https://charts.loft.sh/vcluster")
    assert vclusters and all(told in line and "archive vcluster-" in line for line in vclusters)
    assert "the site pulls it" not in reports["plain"][1] and "https://charts.loft.sh/vcluster" in reports["plain"][1]
    summary_text = (tmp_path / "mirrored" / "summary.md").read_text()
    assert "(its copy pulled from https://charts.loft.sh/vcluster, which the mirror is taken to serve)" in summary_text
    summary = render_plan_releases(plan_of(mirrored, "eks")["resources"], cache, tmp_path / "summary")
    sources = {release["chart"]: (release["source"], release["cachedFrom"]) for release in summary["releases"]}
    assert set(sources) == set(MIRRORED_CHARTS)
    assert sources["vcluster"] == ("https://charts.mirror.test/loft/vcluster", "https://charts.loft.sh/vcluster")
    assert sources["kai-scheduler"][0] == "oci://mirror.test/ghcr-io/kai-scheduler/kai-scheduler/kai-scheduler"


def test_only_the_upstreams_copy_stands_in_for_a_mirror(tmp_path):
    upstream = pinned_chart_key("vcluster", "0.36.1")
    real_charts_or_skip({"resources": [{"type": "kubernetes:helm.sh/v3:Release", "name": "vcluster", "inputs": {
        "chart": upstream.ref, "version": upstream.version, "repositoryOpts": {"repo": upstream.repo}}}]})
    cached, _ = find_cached(upstream, chart_cache_dir())
    mirror = chart_key("vcluster", "https://charts.mirror.test/loft", "0.36.1")
    for origin, stands_in in ((upstream.source, True), ("https://elsewhere.example/vcluster", False)):
        cache = tmp_path / origin.split("//")[1].split("/")[0]
        cache.mkdir()
        shutil.copy(cached, cache / upstream.filename)
        (cache / f"{upstream.dirname}{SOURCE_SUFFIX}").write_text(json.dumps({"source": origin}))
        found, reason = find_cached(mirror, cache)
        assert (found is not None) == stands_in
        assert stands_in or "came from https://elsewhere.example/vcluster" in reason
        # A copy pulled from a mirror does not stand in for the upstream.
        (cache / f"{upstream.dirname}{SOURCE_SUFFIX}").write_text(json.dumps({"source": mirror.source}))
        assert find_cached(upstream, cache)[0] is None
