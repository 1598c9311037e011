"""Real charts from the upstream mirrors, put into a chart cache the way a user would add them.

A chart is its directory at the release tag (``git archive TAG DIR``). A chart whose ``Chart.yaml``
names dependencies from a chart repository (kube-prometheus-stack: kube-state-metrics, the node and
Windows exporters, Grafana) gets each one at its own release tag in ``charts/`` first, as
``helm dependency build`` would: ``helm package`` (and so ``python -m tools.charts add``) refuses a
chart whose dependencies are missing, even disabled ones. A version range (``0.12.*``) resolves to
the newest matching tag of the mirror. Every repository and tag read must be in
``tests.conftest.MIRRORED_TAGS`` (the PR workflow fetches exactly those); without the mirrors the
caller skips, naming GPU_TENANCY_MIRRORS.
"""

from __future__ import annotations

import fnmatch
import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

import yaml

from config import versions
from tests.conftest import MIRRORED_TAGS, mirror
from tools.charts.cache import cache_chart
from tools.charts.pins import pinned_chart_key

# Chart name -> (mirror repository, tag of a chart version, chart directory at that tag).
CHART_SOURCES = {
    versions.VCLUSTER_CHART: ("loft-sh/vcluster", "v{version}", "chart"),
    "kai-scheduler": ("kai-scheduler/KAI-Scheduler", "{version}", "deployments/kai-scheduler"),
    versions.GPU_OPERATOR_CHART: ("NVIDIA/gpu-operator", "{version}", "deployments/gpu-operator"),
    versions.KUBE_PROMETHEUS_STACK_CHART: ("prometheus-community/helm-charts", "kube-prometheus-stack-{version}",
                                           "charts/kube-prometheus-stack"),
}
# Chart repository of a dependency -> its mirror, which tags each chart version `<name>-<version>` and keeps
# the chart in charts/<name>.
DEPENDENCY_MIRRORS = {
    versions.KUBE_PROMETHEUS_STACK_REPO: "prometheus-community/helm-charts",
    "https://grafana-community.github.io/helm-charts": "grafana-community/helm-charts",
}


def _extract(repository: str, tag: str, directory: str, into: Path) -> Path:
    """``directory`` of ``repository`` at ``tag``, unpacked under ``into``."""
    assert tag in MIRRORED_TAGS[repository], f"add {tag} to MIRRORED_TAGS[{repository!r}] and the PR workflow"
    archive = subprocess.run(["git", "--git-dir", str(mirror(repository)), "archive", "--format=tar", tag, directory],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    chart = into / directory
    assert (chart / "Chart.yaml").is_file(), f"{repository} has no chart in {directory} at {tag}"
    return chart


def dependency_tag(repository: str, name: str, wanted: str) -> str:
    """The mirrored tag of dependency ``name`` at ``wanted`` (an exact version or a ``*`` range)."""
    matching = [tag for tag in MIRRORED_TAGS[repository] if fnmatch.fnmatchcase(tag, f"{name}-{wanted}")]
    assert matching, f"no tag {name}-{wanted} in MIRRORED_TAGS[{repository!r}]: add it and fetch it"
    return max(matching, key=lambda tag: versions.release_numbers(tag[len(name) + 1:]))


def _vendor_dependencies(chart: Path, scratch: Path) -> None:
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text(encoding="utf-8")) or {}
    for dependency in metadata.get("dependencies") or []:
        name, source = dependency["name"], dependency.get("repository")
        if not source or (chart / "charts" / name / "Chart.yaml").is_file():  # kept in the chart's own charts/
            continue
        repository = DEPENDENCY_MIRRORS.get(source)
        assert repository, f"{chart.name} depends on {name} from {source}: add its mirror to DEPENDENCY_MIRRORS"
        tag = dependency_tag(repository, name, str(dependency["version"]))
        unpacked = _extract(repository, tag, f"charts/{name}", scratch / tag)
        unpacked.rename(chart / "charts" / name)


def chart_file(chart: str, version: str, relative: str) -> str:
    """One file of ``chart`` at ``version`` (``values.yaml``, ``Chart.yaml``), from its mirror."""
    repository, tag, directory = CHART_SOURCES[chart]
    tag = tag.format(version=version)
    assert tag in MIRRORED_TAGS[repository], f"add {tag} to MIRRORED_TAGS[{repository!r}] and the PR workflow"
    return subprocess.run(["git", "--git-dir", str(mirror(repository)), "show", f"{tag}:{directory}/{relative}"],
                          capture_output=True, text=True, check=True).stdout


def chart_values(chart: str, version: str) -> dict:
    """The default values of ``chart`` at ``version``, from its mirror."""
    return yaml.safe_load(chart_file(chart, version, "values.yaml"))


def add_from_mirror(chart: str, version: str, cache: Path) -> Path:
    """Put ``chart`` at ``version`` from its mirror into ``cache``, as ``python -m tools.charts add`` does."""
    repository, tag, directory = CHART_SOURCES[chart]
    with tempfile.TemporaryDirectory() as scratch:
        source = _extract(repository, tag.format(version=version), directory, Path(scratch) / "chart")
        (source / "charts").mkdir(exist_ok=True)
        _vendor_dependencies(source, Path(scratch))
        key = pinned_chart_key(chart, version)
        return cache_chart(source, key.ref, key.repo, key.version, cache_dir=cache, stamp_version=True)
