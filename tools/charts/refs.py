"""Chart references (which chart version from which source), the chart errors, and the SDK.

A ``helm.v3.Release`` names its chart by ``chart`` + ``repositoryOpts.repo`` + ``version``;
:func:`chart_key` turns that into one normalised :class:`ChartKey`, the identity the cache
(``tools.chart_cache``) and the renderer (``tools.chart_render``) agree on.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Optional, Sequence
from urllib.parse import urlsplit, urlunsplit

from config import versions

_CHART_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# --- errors -------------------------------------------------------------------------------------


class ChartError(Exception):
    """Base class of this module's errors."""



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



def pinned_chart_key(name: str, version: str) -> ChartKey:
    """The source the program installs chart ``name`` at ``version`` from (config/versions.py)."""
    if name == versions.VCLUSTER_CHART:
        return chart_key(name, versions.VCLUSTER_REPO, version)
    if name == versions.GPU_OPERATOR_CHART:
        return chart_key(name, versions.GPU_OPERATOR_REPO, version)
    if name == "kai-scheduler":
        return chart_key(versions.KAI_CHART, None, version)
    if name == versions.KUBE_PROMETHEUS_STACK_CHART:
        return chart_key(name, versions.KUBE_PROMETHEUS_STACK_REPO, version)
    raise ValueError(f"the program installs no chart named {name!r}; give its source with --chart/--repo")


def helm_sdk():
    try:
        import helm_python
    except Exception as error:  # not installed (ImportError), or its native library unloadable
        raise ChartError(f"helm-python-sdk is not usable here ({error}); install it with "
                         "pip install -r requirements-dev.txt") from error
    return helm_python


