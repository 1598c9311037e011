"""Every accepted release of every chart, rendered with the program's values (a session fixture).

The EKS stack with the GPU Operator, KAI, one tenant and kube-prometheus-stack is planned once per position in
the charts' release lists (each chart at its release of that index, its newest past the end of its list) and its
releases rendered from the chart cache ($GPU_TENANCY_CHART_CACHE), once per test run; without the charts the
caller skips.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

from config import versions
from tests.conftest import eks_config, real_charts_or_skip, run
from tools.charts.render import render_plan_releases
from tools.deployability.inputs import helm_kube_version
from tools.plan.diff import read_manifests
from tools.plan.document import build_plan, render_plan_json

RELEASES = {"vcluster": versions.VCLUSTER_RELEASES, "kai-scheduler": versions.KAI_RELEASES,
            "gpu-operator": versions.GPU_OPERATOR_RELEASES,
            "kube-prometheus-stack": versions.KUBE_PROMETHEUS_STACK_RELEASES}
# Release name -> chart, where they differ (the tenant's vCluster is released under its team's name).
RELEASE_CHARTS = {"rag-legal": "vcluster"}


def plan_of(config: dict, stack: str = "dev") -> dict:
    return json.loads(render_plan_json(build_plan(run(config, stack=stack), stack)))


def rendered(config: dict, out: Path, stack: str = "dev") -> dict[str, str]:
    """The manifests of every release of ``config`` (``<release>/<template path>`` -> YAML), rendered from the real
    charts of the chart cache."""
    planned = plan_of(config, stack)
    cache = real_charts_or_skip(planned)
    render_plan_releases(planned["resources"], cache, out, stack=stack, kube_version=helm_kube_version(planned))
    return read_manifests(out / "manifests")


def site_with_every_chart(index: int) -> dict:
    pick = {chart: releases[min(index, len(releases) - 1)] for chart, releases in RELEASES.items()}
    config = eks_config()
    config["gpu-tenancy:teams"] = config["gpu-tenancy:teams"][:1]
    config["gpu-tenancy:vcluster"]["version"] = pick["vcluster"]
    config["gpu-tenancy:kaiScheduler"]["version"] = pick["kai-scheduler"]
    config["gpu-tenancy:gpuOperator"]["version"] = pick["gpu-operator"]
    config["gpu-tenancy:observability"] = {"prometheus": "install", "chartVersion": pick["kube-prometheus-stack"]}
    return config


@functools.lru_cache(maxsize=None)
def every_release_renders() -> dict[str, dict[str, dict[str, str]]]:
    """chart -> release -> that release's manifests, rendered with the program's values (once per test run)."""
    by_chart: dict[str, dict[str, dict[str, str]]] = {chart: {} for chart in RELEASES}
    scratch = Path(tempfile.mkdtemp(prefix="every-release-"))
    atexit.register(shutil.rmtree, scratch, True)
    for index in range(max(map(len, RELEASES.values()))):
        manifests = rendered(site_with_every_chart(index), scratch / f"release-{index}", "eks")
        for chart, releases in RELEASES.items():
            release = releases[min(index, len(releases) - 1)]
            by_chart[chart][release] = {path: text for path, text in manifests.items()
                                        if RELEASE_CHARTS.get(path.split("/")[0], path.split("/")[0]) == chart}
    return by_chart

