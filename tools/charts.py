"""Helm charts of the platform's releases: a local chart cache, and in-process rendering.

Pulumi's preview of a ``helm.v3.Release`` shows the values it passes, not the objects the chart
will create. This module renders those objects offline with helm-python-sdk (the ``helm_python``
module: Helm v4's Go SDK behind a C ABI, loaded with ctypes, no ``helm`` binary):

* **Cache.** Charts are kept in a directory, by default ``.charts/`` at the project root,
  overridden by the environment variable ``GPU_TENANCY_CHART_CACHE`` or a ``cache_dir``
  argument / ``--cache DIR`` option. Layout: one archive per chart version,
  ``<cache>/<chart name>-<version>.tgz`` (the name and version the release asks for, e.g.
  ``vcluster-0.36.1.tgz``, ``kai-scheduler-v0.16.4.tgz``), and next to it
  ``<chart name>-<version>.source.json`` saying where it was pulled from and its sha256
  digest. An unpacked chart directory ``<cache>/<chart name>-<version>/`` (holding
  ``Chart.yaml``) is accepted as well, when no archive is there; ``pull`` writes archives.
* **Pulling** needs internet access to the chart's repository or registry:
  ``python -m tools.charts pull --stack STACK`` pulls every chart the stack's releases use
  (read from the offline program run), ``python -m tools.charts pull CHART --version V
  [--repo URL]`` one chart (``CHART`` is a name with ``--repo``, or an ``oci://`` reference).
  Run it on a machine with internet access and copy the cache directory over; everything
  else here works offline. ``python -m tools.charts list`` shows what is cached.
* **Rendering** (:func:`render_release`) runs Helm's template engine in-process, like
  ``helm template``: client-only, ``.Release.IsInstall`` true, ``lookup`` returns nothing, and
  the values are checked against the chart's ``values.schema.json`` and its subcharts' by Helm
  itself, whose findings become :class:`ChartValuesError`. ``NOTES.txt`` and templates that
  render to nothing are left out; the chart's ``crds/`` files are included (Helm installs them
  first, unless the release skips CRDs). Capabilities are Helm's defaults (Kubernetes v1.36 for
  Helm v4.2.3) unless ``kube_version`` / ``api_versions`` are given.
* **Plans** (:func:`render_plan_releases`) render every ``kubernetes:helm.sh/v3:Release`` of a
  plan into ``<out>/manifests/<release>/<template path>``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

import yaml

from tools.mockrun import integral_numbers, load_stack_file, run_program

PROJECT_DIR = Path(__file__).resolve().parent.parent
CACHE_ENV = "GPU_TENANCY_CHART_CACHE"
DEFAULT_CACHE_DIR = PROJECT_DIR / ".charts"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
MANIFESTS_DIR = "manifests"

SOURCE_SUFFIX = ".source.json"
_CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_PLACEHOLDERS = ("[secret]", "[unknown]")


# --- errors -------------------------------------------------------------------------------------


class ChartError(Exception):
    """Base class of this module's errors."""


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


@dataclasses.dataclass(frozen=True)
class SchemaViolation:
    chart: str  # the chart (or subchart, by its name or alias) whose schema failed
    path: str   # JSON pointer into that chart's values, "" for the top level
    message: str

    def __str__(self) -> str:
        return f"{self.chart}: {self.path or '(top level)'}: {self.message}"


class ChartValuesError(ChartError, ValueError):
    """The values do not match the chart's ``values.schema.json`` (or a subchart's).

    ``violations`` lists what Helm reported, ``detail`` is Helm's message as it is.
    """

    def __init__(self, context: str, detail: str, violations: Sequence[SchemaViolation]):
        self.detail = detail
        self.violations = list(violations)
        if self.violations:
            body = "\n".join(f"  {violation}" for violation in self.violations)
            message = f"{context}: values do not match the chart's values schema:\n{body}"
        else:
            message = f"{context}: invalid values: {detail.strip()}"
        super().__init__(message)


class ChartRenderError(ChartError):
    """The chart could not be loaded or one of its templates failed to render."""


class ChartPullError(ChartError):
    """A chart could not be downloaded (no network, unknown version, auth...)."""


# --- chart identity and the cache ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ChartKey:
    """One chart version from one source, normalised.

    ``repo`` is the HTTP(S) repository URL for repository charts and ``None`` for OCI charts,
    whose ``ref`` is the full ``oci://host/path/name`` reference; for repository charts ``ref``
    is the chart name.
    """

    name: str
    version: str
    repo: Optional[str]
    ref: str

    @property
    def is_oci(self) -> bool:
        return self.ref.startswith("oci://")

    @property
    def source(self) -> str:
        return self.ref if self.is_oci else f"{self.repo}/{self.name}"

    @property
    def filename(self) -> str:
        return f"{self.name}-{self.version}.tgz"

    @property
    def dirname(self) -> str:
        return f"{self.name}-{self.version}"

    def describe(self) -> str:
        return f"{self.name} {self.version} from {self.ref if self.is_oci else self.repo}"

    def pull_command(self) -> str:
        if self.is_oci:
            return f"python -m tools.charts pull {self.ref} --version {self.version}"
        return f"python -m tools.charts pull {self.name} --repo {self.repo} --version {self.version}"


def _normalise_url(url: str) -> str:
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


def chart_key(chart: str, repo: Optional[str] = None, version: Optional[str] = None) -> ChartKey:
    """Normalise a release's chart source (the ``chart``, ``repositoryOpts.repo`` and ``version``
    inputs of a ``helm.v3.Release``) into a :class:`ChartKey`.

    Accepted: a chart name with an HTTP(S) ``repo`` (trailing slashes and host case do not
    matter); an ``oci://host/path/name`` chart without ``repo``, optionally with the version
    as a ``:tag``; a chart name with an ``oci://host/path`` ``repo``. The version must be
    pinned (an exact version, kept as written: ``v0.16.4`` and ``0.16.4`` are different cache
    entries, as they are different tags). Raises ``ValueError`` for anything else.
    """
    chart = (chart or "").strip()
    repo = (repo or "").strip() or None
    version = (str(version) if version is not None else "").strip()
    if not chart:
        raise ValueError("a release without a chart cannot be rendered")
    if repo and repo.startswith("oci://"):
        if chart.startswith("oci://"):
            raise ValueError(f"chart {chart!r} is an oci:// reference; it takes no repository (got {repo!r})")
        chart = f"{repo.rstrip('/')}/{chart}"
        repo = None
    if chart.startswith("oci://"):
        if repo:
            raise ValueError(f"chart {chart!r} is an oci:// reference; it takes no repository (got {repo!r})")
        ref = chart.rstrip("/")
        host_and_path = ref[len("oci://"):]
        if "/" not in host_and_path:
            raise ValueError(f"oci:// chart reference {chart!r} names no chart")
        host, path = host_and_path.split("/", 1)
        last = path.rsplit("/", 1)[-1]
        if ":" in last:  # oci://host/path/name:tag
            last, tag = last.split(":", 1)
            if version and version != tag:
                raise ValueError(f"chart {chart!r} carries tag {tag!r} but version {version!r} was given")
            version = tag
            path = path[: len(path) - len(tag) - 1]
        ref = f"oci://{host.lower()}/{path}"
        name = last
    else:
        if chart.startswith(("http://", "https://", "/", ".", "file:")) or chart.endswith(".tgz"):
            raise ValueError(f"chart {chart!r}: only repository charts (name + repo) and oci:// "
                             "references are supported")
        if not repo:
            raise ValueError(f"chart {chart!r} has no repository (repositoryOpts.repo) and is not an "
                             "oci:// reference")
        if not repo.startswith(("http://", "https://")):
            raise ValueError(f"repository {repo!r} of chart {chart!r} is not an http(s):// or oci:// URL")
        if "/" in chart:
            raise ValueError(f"chart {chart!r} looks like a local 'repo/chart' alias; give the chart "
                             "name and the repository URL instead")
        repo = _normalise_url(repo)
        name = chart
        ref = chart
    if not _CHART_NAME.match(name):
        raise ValueError(f"chart name {name!r} (from {chart!r}) is not a valid chart name")
    if not version:
        raise ValueError(f"chart {name!r} has no pinned version: a render needs an exact chart version")
    if "/" in version or version.startswith("."):
        raise ValueError(f"chart {name!r}: version {version!r} is not a chart version")
    return ChartKey(name=name, version=version, repo=repo, ref=ref)


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


def _read_source(cache: Path, key: ChartKey) -> Optional[dict[str, Any]]:
    sidecar = cache / f"{key.dirname}{SOURCE_SUFFIX}"
    if not sidecar.is_file():
        return None
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _find_cached(key: ChartKey, cache: Path) -> tuple[Optional[Path], Optional[str]]:
    """The cached chart of ``key`` and, when there is none usable, why."""
    archive = cache / key.filename
    directory = cache / key.dirname
    found = archive if archive.is_file() else directory if (directory / "Chart.yaml").is_file() else None
    if found is None:
        return None, None
    source = _read_source(cache, key)
    if source is not None and source.get("source") != key.source:
        return None, f"the cached {found.name} came from {source.get('source')}"
    return found, None


def cached_chart_path(chart: str, repo: Optional[str] = None, version: Optional[str] = None, *,
                      cache_dir: Optional[os.PathLike[str] | str] = None, stack: Optional[str] = None) -> Path:
    """The cached archive (or unpacked directory) of a chart version.

    Raises :class:`MissingChart` (naming the pull command) when it is not cached, or when the
    cached one was pulled from another source; ``stack`` adds the ``pull --stack`` command.
    """
    key = chart_key(chart, repo, version)
    cache = chart_cache_dir(cache_dir)
    found, reason = _find_cached(key, cache)
    if found is None:
        raise MissingChart([key], cache, stack=stack, reasons={key: reason} if reason else None)
    return found


def _helm():
    try:
        import helm_python
    except Exception as error:  # not installed (ImportError), or its native library unloadable
        raise ChartError(f"helm-python-sdk is not usable here ({error}); install it with "
                         "pip install -r requirements-dev.txt") from error
    return helm_python


def _versions_match(wanted: str, actual: str) -> bool:
    return wanted == actual or wanted.lstrip("v") == actual.lstrip("v")


def cache_chart(source: os.PathLike[str] | str, chart: str, repo: Optional[str] = None,
                version: Optional[str] = None, *, cache_dir: Optional[os.PathLike[str] | str] = None) -> Path:
    """Put a local chart (a directory, packaged with the SDK, or a ``.tgz``) into the cache as
    the given chart version, after checking its ``Chart.yaml`` name and version; returns the
    archive path. ``pull`` goes through here, and so can charts built or fetched by hand."""
    helm = _helm()
    key = chart_key(chart, repo, version)
    cache = chart_cache_dir(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    source = Path(source)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".incoming-") as scratch:
        if source.is_dir():
            try:
                archive = Path(helm.package(source, destination=scratch))
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
              "source": key.source, "digest": helm.digest(target)}
    (cache / f"{key.dirname}{SOURCE_SUFFIX}").write_text(
        json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return target


def pull_chart(chart: str, repo: Optional[str] = None, version: Optional[str] = None, *,
               cache_dir: Optional[os.PathLike[str] | str] = None, force: bool = False,
               plain_http: bool = False) -> tuple[Path, bool]:
    """Download a chart version into the cache with the SDK (HTTP repository or OCI registry).

    Needs internet access. Returns ``(archive path, pulled)``; ``pulled`` is false when the
    chart was already cached (and ``force`` is false). ``plain_http`` talks HTTP to an OCI
    registry (a local one). Raises :class:`ChartPullError`.
    """
    helm = _helm()
    key = chart_key(chart, repo, version)
    cache = chart_cache_dir(cache_dir)
    found, _ = _find_cached(key, cache)
    if found is not None and found.suffix == ".tgz" and not force:
        return found, False
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
        return cache_chart(archives[0], chart, repo, version, cache_dir=cache), True


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


# --- rendering ----------------------------------------------------------------------------------


def _schema_violations(detail: str) -> list[SchemaViolation]:
    """Parse Helm's schema report: ``<chart>:`` lines, each followed by ``- at '<path>': <message>``."""
    violations: list[SchemaViolation] = []
    chart = ""
    for line in detail.splitlines():
        if not line.strip() or line.startswith("values don't meet the specifications"):
            continue
        match = re.match(r"^- at '([^']*)': (.*)$", line)
        if match:
            violations.append(SchemaViolation(chart=chart, path=match.group(1), message=match.group(2)))
        elif line.endswith(":") and not line.startswith(("-", " ")):
            chart = line[:-1]
        elif violations:  # a message continued on the next line
            last = violations[-1]
            violations[-1] = dataclasses.replace(last, message=f"{last.message} {line.strip()}")
    return violations


def _render_chart(chart: Any, values: dict[str, Any], name: str, namespace: str,
                  kube_version: Optional[str], api_versions: Optional[Sequence[str]]) -> dict[str, str]:
    if kube_version is None and not api_versions:
        return chart.render(values, name=name, namespace=namespace)
    # helm-python-sdk 0.2.2's Chart.render has no capability arguments, but the native
    # helm_render it wraps accepts "kube_version" and "api_versions" options (its options are
    # decoded strictly, so an older library rejects them with HelmInvalidArgError).
    from helm_python import _native
    options: dict[str, Any] = {"name": name, "namespace": namespace}
    if kube_version is not None:
        options["kube_version"] = kube_version
    if api_versions:
        options["api_versions"] = list(api_versions)
    rendered = _native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(options))
    return json.loads(rendered)


def render_release(chart_path: os.PathLike[str] | str, release_name: str, namespace: str,
                   values: Optional[Mapping[str, Any]] = None, *, kube_version: Optional[str] = None,
                   api_versions: Optional[Sequence[str]] = None, include_crds: bool = True) -> dict[str, str]:
    """Render a chart (directory or ``.tgz``) as release ``release_name`` in ``namespace``.

    Returns ``{template path: YAML text}`` sorted by path, e.g.
    ``{"demo/templates/deployment.yaml": "..."}``; with ``include_crds`` the chart's (and its
    subcharts') ``crds/`` files too, e.g. ``"demo/crds/widgets.yaml"``. Raises
    :class:`ChartValuesError` when Helm rejects the values (schema violations, by chart and
    path), :class:`ChartRenderError` when the chart cannot be loaded or a template fails.
    """
    helm = _helm()
    context = f"release {release_name} ({Path(chart_path).name})"
    try:
        helm.validate_release_name(release_name)
    except helm.HelmError as error:
        raise ChartRenderError(f"{context}: invalid release name: {error}") from error
    try:
        chart = helm.Chart.load(chart_path)
    except helm.HelmError as error:
        raise ChartRenderError(f"cannot load chart {chart_path}: {error}") from error
    with chart:
        context = f"release {release_name} (chart {chart.name} {chart.version})"
        try:
            rendered = _render_chart(chart, dict(values or {}), release_name, namespace,
                                     kube_version, api_versions)
        except helm.HelmValuesError as error:
            raise ChartValuesError(context, error.detail, _schema_violations(error.detail)) from error
        except helm.HelmError as error:
            raise ChartRenderError(f"{context}: {error}") from error
        manifests = {path: text for path, text in rendered.items()
                     if text.strip() and Path(path).name != "NOTES.txt"}
        if include_crds:
            for crd in chart.crds:
                manifests[crd["filename"]] = crd["data"]
    return dict(sorted(manifests.items()))


def _objects(path: str, text: str) -> list[dict[str, Any]]:
    """The objects of one rendered file: apiVersion, kind, name, namespace, Helm hook."""
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:  # Helm would refuse to install it too
        raise ChartRenderError(f"{path} rendered to invalid YAML: {error}") from error
    objects = []
    for document in documents:
        if not isinstance(document, dict):
            continue
        metadata = document.get("metadata") or {}
        entry = {"apiVersion": document.get("apiVersion"), "kind": document.get("kind"),
                 "name": metadata.get("name"), "file": path}
        if metadata.get("namespace"):
            entry["namespace"] = metadata["namespace"]
        hook = (metadata.get("annotations") or {}).get("helm.sh/hook")
        if hook:
            entry["hook"] = hook
        objects.append(entry)
    return objects


def _placeholder_paths(value: Any, path: str = "") -> list[str]:
    if isinstance(value, str) and value in _PLACEHOLDERS:
        return [f"{path or '/'} = {value}"]
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _placeholder_paths(item, f"{path}/{key}")]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in _placeholder_paths(item, f"{path}/{index}")]
    return []


def _fields(resource: Any) -> tuple[str, str, dict[str, Any]]:
    """(type, name, inputs) of a plan.json resource dict or a mockrun RecordedResource."""
    if isinstance(resource, Mapping):
        return resource.get("type", ""), resource.get("name", ""), resource.get("inputs") or {}
    return resource.type, resource.name, resource.inputs or {}


def release_records(resources: Iterable[Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(resource name, inputs)`` of each ``helm.v3.Release`` among ``resources``."""
    records = []
    for resource in resources:
        typ, name, inputs = _fields(resource)
        if typ == RELEASE_TYPE:
            records.append((name, inputs))
    return records


def release_chart_key(inputs: Mapping[str, Any]) -> ChartKey:
    repository = inputs.get("repositoryOpts") or {}
    return chart_key(inputs.get("chart", ""), repository.get("repo"), inputs.get("version"))


def render_plan_releases(resources: Iterable[Any], cache_dir: Optional[os.PathLike[str] | str],
                         out_dir: os.PathLike[str] | str, *, stack: Optional[str] = None,
                         kube_version: Optional[str] = None,
                         api_versions: Optional[Sequence[str]] = None) -> dict[str, Any]:
    """Render every ``kubernetes:helm.sh/v3:Release`` in ``resources`` from the chart cache.

    ``resources`` are plan.json resource dicts (``type``, ``name``, ``inputs`` with ``name``,
    ``chart``, ``version``, ``repositoryOpts.repo``, ``namespace``, ``values``, ``skipCrds``) or
    mockrun ``RecordedResource`` objects. All charts are looked up first: any missing raise one
    :class:`MissingChart` listing them (with ``pull --stack STACK`` when ``stack`` is given)
    before anything is written. ``<out_dir>/manifests/`` is then replaced by
    ``manifests/<release>/<template path>`` files, ``<release>`` being the Helm release name
    (``<name>@<namespace>`` when two releases share a name). Values are rendered as the plan
    has them: secrets are the ``[secret]`` placeholder (listed in the summary).

    Returns a JSON-able summary (no absolute paths): ``{"kubeVersion", "releases": [{"dir", "resource",
    "release", "namespace", "chart", "version", "source", "archive", "digest", "files",
    "objects", "placeholders", "nondeterministicFiles"}]}``, sorted by ``dir``;
    ``nondeterministicFiles`` are files that came out different when rendered twice (templates
    using ``randAlphaNum``, ``genCA``, ``uuidv4``...): the written ones are from the first render.
    """
    helm = _helm()
    cache = chart_cache_dir(cache_dir)
    out = Path(out_dir)
    jobs = []
    missing: list[ChartKey] = []
    reasons: dict[ChartKey, str] = {}
    for resource_name, inputs in release_records(resources):
        if inputs.get("valueYamlFiles"):
            raise ChartError(f"release {resource_name}: valueYamlFiles are not supported by the offline render")
        try:
            key = release_chart_key(inputs)
        except ValueError as error:
            raise ValueError(f"release {resource_name}: {error}") from error
        found, reason = _find_cached(key, cache)
        if found is None:
            if key not in missing:
                missing.append(key)
            if reason:
                reasons[key] = reason
            continue
        release = str(inputs.get("name") or resource_name)
        namespace = str(inputs.get("namespace") or "default")
        jobs.append((resource_name, release, namespace, key, found, inputs))
    if missing:
        raise MissingChart(missing, cache, stack=stack, reasons=reasons)

    names: dict[str, list[str]] = {}
    for _, release, namespace, *_ in jobs:
        names.setdefault(release, []).append(namespace)
    for release, namespaces in names.items():
        if len(set(namespaces)) != len(namespaces):
            raise ChartError(f"two releases named {release} in the same namespace")

    rendered_releases = []
    for resource_name, release, namespace, key, found, inputs in jobs:
        values = integral_numbers(inputs.get("values") or {})
        options = dict(kube_version=kube_version, api_versions=api_versions,
                       include_crds=not inputs.get("skipCrds"))
        manifests = render_release(found, release, namespace, values, **options)
        # Templates using rand*/gen*/uuidv4 render differently every time; a second render finds
        # them, so a reviewer knows which files change from one plan to the next by themselves.
        again = render_release(found, release, namespace, values, **options)
        nondeterministic = sorted(path for path in set(manifests) | set(again)
                                  if manifests.get(path) != again.get(path))
        directory = release if len(names[release]) == 1 else f"{release}@{namespace}"
        source = _read_source(cache, key) or {}
        rendered_releases.append({
            "dir": f"{MANIFESTS_DIR}/{directory}",
            "resource": resource_name,
            "release": release,
            "namespace": namespace,
            "chart": key.name,
            "version": key.version,
            "source": key.source,
            "archive": found.name,
            "digest": source.get("digest") or (helm.digest(found) if found.is_file() else None),
            "manifests": manifests,
            "placeholders": _placeholder_paths(values),
            "nondeterministicFiles": nondeterministic,
        })
    rendered_releases.sort(key=lambda entry: entry["dir"])

    # Everything is checked before the old output is replaced.
    writes: list[tuple[Path, str]] = []
    for entry in rendered_releases:
        manifests = entry.pop("manifests")
        objects = []
        for path, text in manifests.items():
            relative = Path(path)
            if relative.is_absolute() or ".." in relative.parts:
                raise ChartRenderError(f"release {entry['release']}: unsafe template path {path!r}")
            objects.extend(_objects(path, text))
            writes.append((out / entry["dir"] / relative, text))
        entry["files"] = list(manifests)
        entry["objects"] = objects
    target = out / MANIFESTS_DIR
    if target.exists():
        shutil.rmtree(target)
    for file, text in writes:
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(text.encode("utf-8"))
    return {"kubeVersion": kube_version, "releases": rendered_releases}


# --- stacks -------------------------------------------------------------------------------------


def stack_chart_keys(stack: str) -> list[ChartKey]:
    """The charts a stack's releases use, read from an offline run of the program (no network)."""
    run = run_program(load_stack_file(stack), stack=stack)
    keys: list[ChartKey] = []
    for _, inputs in release_records(run.resources):
        key = release_chart_key(inputs)
        if key not in keys:
            keys.append(key)
    return sorted(keys, key=lambda key: (key.name, key.version, key.source))


# --- CLI ----------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.charts",
        description="The Helm chart cache used to render the stack's releases offline. "
                    "'pull' needs internet access; run it on a machine that has it.")
    commands = parser.add_subparsers(dest="command", required=True)
    pull = commands.add_parser("pull", help="download charts into the cache (needs internet access)")
    pull.add_argument("chart", nargs="?", metavar="CHART",
                      help="chart name (with --repo) or oci:// reference; omit with --stack")
    pull.add_argument("--stack", metavar="STACK", help="pull every chart the stack's releases use")
    pull.add_argument("--repo", metavar="URL", help="HTTP(S) chart repository of CHART")
    pull.add_argument("--version", metavar="V", help="exact chart version")
    pull.add_argument("--force", action="store_true", help="download again even if cached")
    pull.add_argument("--plain-http", action="store_true", help="plain HTTP to the OCI registry (local ones)")
    pull.add_argument("--cache", metavar="DIR", type=Path, default=None,
                      help=f"cache directory (default: ${CACHE_ENV}, else .charts/ at the project root)")
    listing = commands.add_parser("list", help="show the cached charts")
    listing.add_argument("--cache", metavar="DIR", type=Path, default=None)
    args = parser.parse_args(argv)
    cache = chart_cache_dir(args.cache)

    if args.command == "list":
        entries = cached_charts(cache)
        if not entries:
            print(f"chart cache {cache}: empty")
            return 0
        print(f"chart cache {cache}:")
        for entry in entries:
            print(f"  {Path(entry['path']).name}  {entry['source'] or '(source unknown)'}  "
                  f"{entry['digest'] or ''}".rstrip())
        return 0

    if bool(args.stack) == bool(args.chart):
        parser.error("pull takes either --stack STACK or CHART --version V [--repo URL]")
    try:
        if args.stack:
            if args.repo or args.version:
                parser.error("--repo and --version go with CHART, not with --stack")
            keys = stack_chart_keys(args.stack)
            wanted = [(key.ref, key.repo, key.version) for key in keys]
        else:
            wanted = [(args.chart, args.repo, args.version)]
            keys = [chart_key(*wanted[0])]
    except (ValueError, FileNotFoundError, yaml.YAMLError) as error:  # config.ConfigError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 2
    failed = 0
    for key, (chart, repo, version) in zip(keys, wanted):
        try:
            path, pulled = pull_chart(chart, repo, version, cache_dir=cache, force=args.force,
                                      plain_http=args.plain_http)
        except ChartError as error:
            failed += 1
            print(f"error: {error}", file=sys.stderr)
            continue
        print(f"{'pulled' if pulled else 'cached'} {key.describe()} -> {path}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
