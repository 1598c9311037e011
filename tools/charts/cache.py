"""The local chart cache: one archive per chart version, filled by pulling or from a directory.

Layout: ``<cache>/<chart name>-<version>.tgz`` (the name and version the release asks for, e.g.
``vcluster-0.36.1.tgz``, ``kai-scheduler-v0.16.4.tgz``) with a ``<name>-<version>.source.json``
sidecar saying where it came from and its sha256 digest. An unpacked chart directory
``<cache>/<name>-<version>/`` (holding ``Chart.yaml``) is accepted too when no archive is there.
The cache is ``cache_dir`` if given, else ``$GPU_TENANCY_CHART_CACHE``, else ``.charts/`` at the
project root.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence


from config.stack_file import PROJECT_DIR
from tools.charts.manifest_yaml import load_manifests
from tools.charts.refs import (
    ChartError, ChartKey, ChartPullError, ChartRenderError, chart_key, helm_sdk, pinned_chart_key,
)

CACHE_ENV = "GPU_TENANCY_CHART_CACHE"
DEFAULT_CACHE_DIR = PROJECT_DIR / ".charts"
SOURCE_SUFFIX = ".source.json"


class MissingChart(ChartError, LookupError):
    """Charts a render needs are not in the cache; the message says how to fetch them."""

    def __init__(self, missing: Sequence[ChartKey], cache_dir: Path, *, stack: Optional[str] = None,
                 reasons: Optional[Mapping[ChartKey, str]] = None):
        self.missing = list(missing)
        self.cache_dir = Path(cache_dir)
        self.stack = stack
        self.reasons = dict(reasons or {})
        cache_option = _cache_option(self.cache_dir)
        self.commands = ([f"python -m tools.charts pull --stack {stack}{cache_option}"] if stack else []) + \
            [key.pull_command() + cache_option for key in self.missing]
        lines = [f"chart{'s' if len(self.missing) > 1 else ''} not in the chart cache {self.cache_dir}:"]
        for key in self.missing:
            reason = self.reasons.get(key)
            lines.append(f"  {key.describe()}" + (f" ({reason})" if reason else ""))
        lines.append("Pull on a machine with internet access (then copy the cache directory here):")
        if stack:
            lines.append(f"  {self.commands[0]}")
            lines.append("or chart by chart:")
        lines.extend(f"  {command}" for command in self.commands[1 if stack else 0:])
        super().__init__("\n".join(lines))



def chart_cache_dir(cache_dir: Optional[os.PathLike[str] | str] = None) -> Path:
    """The cache directory: ``cache_dir`` if given, else ``$GPU_TENANCY_CHART_CACHE``, else
    ``.charts/`` at the project root."""
    if cache_dir is not None:
        return Path(cache_dir)
    from_env = os.environ.get(CACHE_ENV)
    return Path(from_env) if from_env else DEFAULT_CACHE_DIR


def _cache_option(cache: Path) -> str:
    try:
        default = cache.resolve() == DEFAULT_CACHE_DIR.resolve()
    except OSError:
        default = False
    return "" if default else f" --cache {shlex.quote(str(cache))}"


def read_source(cache: Path, key: ChartKey) -> Optional[dict[str, Any]]:
    sidecar = cache / f"{key.dirname}{SOURCE_SUFFIX}"
    if not sidecar.is_file():
        return None
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def find_cached(key: ChartKey, cache: Path) -> tuple[Optional[Path], Optional[str]]:
    """The cached chart of ``key`` and, when there is none usable, why. A chart the program installs that a site
    pulls from its own repository (``mirrors.charts``) is rendered from the upstream's cached copy of the same
    name and version: the mirror is taken to serve that chart, as a proxy or a copy does."""
    archive = cache / key.filename
    directory = cache / key.dirname
    found = archive if archive.is_file() else directory if (directory / "Chart.yaml").is_file() else None
    if found is None:
        return None, None
    source = read_source(cache, key)
    if source is not None and source.get("source") not in (key.source, upstream_source(key)):
        return None, f"the cached {found.name} came from {source.get('source')}"
    return found, None


def cached_from(cache: Path, key: ChartKey) -> str:
    """Where the cached copy of ``key``'s chart was pulled from: the release's own source, or the upstream's for a
    chart a site pulls from its mirror (``find_cached``)."""
    return (read_source(cache, key) or {}).get("source") or key.source


def upstream_source(key: ChartKey) -> Optional[str]:
    """Where the program pulls ``key``'s chart from without a site's mirror (config/versions.py), or None for a
    chart it does not install."""
    try:
        return pinned_chart_key(key.name, key.version).source
    except ValueError:
        return None


def cached_chart_path(chart: str, repo: Optional[str] = None, version: Optional[str] = None, *,
                      cache_dir: Optional[os.PathLike[str] | str] = None, stack: Optional[str] = None) -> Path:
    """The cached archive (or unpacked directory) of a chart version.

    Raises :class:`MissingChart` (naming the pull command) when it is not cached, or when the
    cached one was pulled from another source; ``stack`` adds the ``pull --stack`` command.
    """
    key = chart_key(chart, repo, version)
    cache = chart_cache_dir(cache_dir)
    found, reason = find_cached(key, cache)
    if found is None:
        raise MissingChart([key], cache, stack=stack, reasons={key: reason} if reason else None)
    return found


def _versions_match(wanted: str, actual: str) -> bool:
    return wanted == actual or wanted.lstrip("v") == actual.lstrip("v")


def cache_chart(source: os.PathLike[str] | str, chart: str, repo: Optional[str] = None,
                version: Optional[str] = None, *, cache_dir: Optional[os.PathLike[str] | str] = None,
                stamp_version: bool = False, app_version: Optional[str] = None, pulled: bool = False) -> Path:
    """Put a local chart (a directory, packaged with the SDK, or a ``.tgz``) into the cache as
    the given chart version, after checking its ``Chart.yaml`` name and version; returns the
    archive path. ``pull`` goes through here, and so can charts built or fetched by hand.

    ``stamp_version`` packages a directory as ``version`` (and ``app_version``, if given)
    whatever its ``Chart.yaml`` says, as the projects' release pipelines do: a chart directory
    taken from a git tag carries a placeholder version (``0.0.0``, ``0.0.1``, ``v1.0.0-devel``)."""
    helm = helm_sdk()
    key = chart_key(chart, repo, version)
    cache = chart_cache_dir(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    source = Path(source)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".incoming-") as scratch:
        if source.is_dir():
            try:
                stamped = dict(version=key.version, app_version=app_version) if stamp_version else {}
                archive = Path(helm.package(source, destination=scratch, **stamped))
            except helm.HelmError as error:
                raise ChartRenderError(f"cannot package chart directory {source}: {error}") from error
        elif source.is_file():
            archive = Path(scratch) / key.filename
            shutil.copyfile(source, archive)
        else:
            raise FileNotFoundError(f"no chart at {source}")
        try:
            with helm.Chart.load(archive) as loaded:
                metadata = loaded.metadata
        except helm.HelmError as error:
            raise ChartRenderError(f"{source} is not a loadable chart: {error}") from error
        name, chart_version = str(metadata.get("name", "")), str(metadata.get("version", ""))
        if name != key.name or not _versions_match(key.version, chart_version):
            raise ChartError(f"{source} holds chart {name} {chart_version}, not {key.name} {key.version}")
        target = cache / key.filename
        staged = Path(scratch) / f"staged-{key.filename}"
        shutil.copyfile(archive, staged)
        os.replace(staged, target)
    record = {"chart": key.name, "version": key.version, "chartVersion": chart_version,
              "source": key.source, "digest": helm.digest(target),
              # A chart added from a directory is only as faithful as that directory.
              "origin": "directory" if source.is_dir() else "pulled" if pulled else "archive"}
    (cache / f"{key.dirname}{SOURCE_SUFFIX}").write_text(
        json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return target


# What pull_chart did: downloaded the chart, found it cached from its own source, or found only the upstream's
# copy of a chart a site pulls from its mirror (renders use it in the mirror's place; nothing came from the mirror).
PULLED, CACHED, UPSTREAM_COPY = "pulled", "cached", "upstream copy"


def pull_chart(chart: str, repo: Optional[str] = None, version: Optional[str] = None, *,
               cache_dir: Optional[os.PathLike[str] | str] = None, force: bool = False,
               plain_http: bool = False) -> tuple[Path, str]:
    """Download a chart version into the cache with the SDK (HTTP repository or OCI registry).

    Needs internet access (or the mirror's). Returns ``(archive path, PULLED | CACHED | UPSTREAM_COPY)``: without
    ``force`` a cached chart is not downloaded again, and for a mirror's chart the upstream's cached copy is
    reported as such. With ``force`` the chart is downloaded from its source, a mirror's in place of the
    upstream's copy. ``plain_http`` talks HTTP to an OCI registry (a local one). Raises :class:`ChartPullError`.
    """
    helm = helm_sdk()
    key = chart_key(chart, repo, version)
    cache = chart_cache_dir(cache_dir)
    found, _ = find_cached(key, cache)
    if found is not None and found.suffix == ".tgz" and not force:
        source = read_source(cache, key)
        return found, UPSTREAM_COPY if source is not None and source.get("source") != key.source else CACHED
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".pull-") as scratch:
        try:
            if key.is_oci:
                helm.pull(key.ref, version=key.version, destination=scratch, plain_http=plain_http)
            else:
                helm.pull(key.name, repo_url=key.repo, version=key.version, destination=scratch)
        except helm.HelmError as error:
            raise ChartPullError(f"could not pull {key.describe()}: {error}\n(pulling needs network "
                                 "access to the chart's repository or registry)") from error
        archives = sorted(Path(scratch).glob("*.tgz"))
        if len(archives) != 1:
            raise ChartPullError(f"pulling {key.describe()} left {len(archives)} archives, expected one")
        return cache_chart(archives[0], chart, repo, version, cache_dir=cache, pulled=True), PULLED


def cached_charts(cache_dir: Optional[os.PathLike[str] | str] = None) -> list[dict[str, Any]]:
    """What the cache holds, sorted by file name: ``{"path", "chart", "version", "source",
    "digest"}`` per archive or chart directory (source and digest from the sidecar, if any)."""
    cache = chart_cache_dir(cache_dir)
    if not cache.is_dir():
        return []
    entries = []
    for path in sorted(cache.iterdir()):
        if path.name.startswith("."):
            continue
        if path.is_file() and path.name.endswith(".tgz"):
            stem = path.name[: -len(".tgz")]
        elif path.is_dir() and (path / "Chart.yaml").is_file():
            stem = path.name
        else:
            continue
        sidecar = cache / f"{stem}{SOURCE_SUFFIX}"
        record: dict[str, Any] = {}
        if sidecar.is_file():
            try:
                record = json.loads(sidecar.read_text(encoding="utf-8"))
            except ValueError:
                record = {}
        entries.append({"path": str(path), "chart": record.get("chart"), "version": record.get("version"),
                        "source": record.get("source"), "digest": record.get("digest")})
    return entries


@dataclasses.dataclass(frozen=True)
class ChartContracts:
    """What a cached chart promises about itself: its default values, its values schema (``None``
    when it ships none) and its CRDs (chart and subcharts), read from the archive."""

    key: ChartKey
    path: Path
    values: dict[str, Any]
    schema: Optional[dict[str, Any]]
    crds: list[dict[str, Any]]

    def crd(self, group: str, kind: str) -> Optional[dict[str, Any]]:
        for crd in self.crds:
            spec = crd.get("spec") or {}
            if spec.get("group") == group and (spec.get("names") or {}).get("kind") == kind:
                return crd
        return None


def chart_contracts(key: ChartKey, cache_dir: Optional[os.PathLike[str] | str] = None) -> Optional[ChartContracts]:
    """The contracts of ``key`` from the cache, or ``None`` when the cache does not hold it."""
    found, _ = find_cached(key, chart_cache_dir(cache_dir))
    if found is None:
        return None
    helm = helm_sdk()
    with helm.Chart.load(found) as chart:
        crds = [document for entry in chart.crds for document in load_manifests(entry["data"])
                if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition"]
        return ChartContracts(key=key, path=found, values=chart.values, schema=chart.schema, crds=crds)
