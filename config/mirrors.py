"""Where an air-gapped (or rate-limit-averse) site pulls the platform's images and charts from (``mirrors``).

``mirrors.images`` maps each upstream registry host to the site's mirror prefix; an image keeps its path and tag
under that prefix (the layout of a Harbor proxy-cache project): ``nvcr.io/nvidia/gpu-operator:v26.7.0`` with
``nvcr.io: harbor.corp.example/nvcr`` is ``harbor.corp.example/nvcr/nvidia/gpu-operator:v26.7.0``. ``mirrors.charts``
points a chart at another Helm repository (https) or OCI repository (oci://). The pins stay in config/versions.py;
``Mirrors.image`` is the one place a reference is mapped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Optional

from config import versions
from config.image_registries import (
    DEFAULT_DOMAIN, EXAMPLES, HOST, LEGACY_DOMAIN, LOCALHOST, OFFICIAL_PREFIX, PATH_COMPONENT, _entry_problem,
)
from config.key_types import Invalid, type_name
from config.keys import Block, Key

if TYPE_CHECKING:  # the reader reads this module's block
    from config.reader import Section

# The charts the program installs, by the name their override is keyed by.
CHARTS = ("gpu-operator", "kai-scheduler", "vcluster", "kube-prometheus-stack")
CHART_REPO_PATTERN = rf"(?:https://[^\s/]+(?:/\S*)?|oci://{HOST}(?:/{PATH_COMPONENT})*)"
MIRROR_EXAMPLE = "{nvcr.io: harbor.corp.example/nvcr, ghcr.io: harbor.corp.example/ghcr}"
# Registries on the internet, which a mirrored site's nodes are not meant to reach: an image a site's own values
# name on one of them needs a mirror even where the program pulls nothing from there.
# The port containerd dials a registry on when its host names none (an https endpoint).
DEFAULT_PORT = 443
PUBLIC_REGISTRIES = ("docker.io", "registry-1.docker.io", "ghcr.io", "quay.io", "nvcr.io", "registry.k8s.io",
                     "k8s.gcr.io", "gcr.io", "mirror.gcr.io", "public.ecr.aws", "mcr.microsoft.com",
                     "registry.gitlab.com")


def split_image(reference: str) -> tuple[str, str]:
    """``(registry host, path[:tag])`` of a reference as the node's runtime reads it (distribution/reference's
    familiar names, normalize.go: a first component is a host if it has a dot, a port or upper case, or is
    localhost; no host is Docker Hub, whose legacy name is renamed to it and whose single-component names are under
    ``library/``)."""
    first, slash, rest = reference.partition("/")
    if not (slash and ("." in first or ":" in first or first == LOCALHOST or first.lower() != first)):
        first, rest = DEFAULT_DOMAIN, reference
    if first == LEGACY_DOMAIN:
        first = DEFAULT_DOMAIN
    if first == DEFAULT_DOMAIN and "/" not in rest:
        rest = f"{OFFICIAL_PREFIX}/{rest}"
    return first, rest


def same_registry(host: str) -> str:
    """The one spelling of the registry a reference's ``host`` reaches. distribution/reference keeps a domain as
    written (normalize.go renames only the exact legacy Docker Hub name), and containerd looks a host's hosts.toml
    directory up by that text (core/remotes/docker/config/hosts.go): ``ghcr.io:443`` and ``GHCR.IO`` find none of
    ``ghcr.io``'s, yet the node dials the same server, https on port 443, its name resolved and its certificate
    checked in any case. So a host is compared in lower case, without a port that is 443."""
    # A bracketed IPv6 address without a port ends in "]", so digits after the last colon are always a port.
    name, colon, port = host.lower().rpartition(":")
    if not (colon and port.isdigit()):
        name, port = host.lower(), ""
    if port and int(port) != DEFAULT_PORT:
        return f"{name}:{port}"
    return DEFAULT_DOMAIN if name == LEGACY_DOMAIN else name


@dataclass(frozen=True)
class ImageMirrorMap:
    """Registry host -> mirror prefix (``host[:port][/path]``), neither with a scheme, a tag or a digest."""

    fix: ClassVar[str] = f"write it as a map of registry host to mirror prefix, e.g. {MIRROR_EXAMPLE}"

    def parse(self, value: object, fix: str) -> dict[str, str]:
        if not isinstance(value, dict) or not value:
            raise Invalid(f"expected a non-empty map, got {type_name(value)}", fix)
        for upstream, prefix in value.items():
            if not isinstance(upstream, str) or not re.fullmatch(HOST, upstream) or upstream == LEGACY_DOMAIN:
                raise Invalid("is not a registry host as an image reference names it (no scheme, no path)",
                              f"write the upstream host alone, e.g. nvcr.io, ghcr.io, {DEFAULT_DOMAIN}",
                              entry=str(upstream), value=prefix)
            if same_registry(upstream) != upstream:
                raise Invalid(f"is {same_registry(upstream)} written another way (port {DEFAULT_PORT} is the one "
                              "the node dials without a port)", f"write {same_registry(upstream)}",
                              entry=upstream, value=prefix)
            problem, entry_fix = _entry_problem(prefix) if isinstance(prefix, str) else \
                (f"expected a mirror prefix, got {type_name(prefix)}", "write it as host[/path], e.g. harbor.corp/nvcr")
            if problem:
                raise Invalid(problem, entry_fix, entry=upstream, value=prefix)
        return dict(value)

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "minProperties": 1, "propertyNames": {"pattern": f"^{HOST}$"},
                "additionalProperties": {"type": "string", "pattern": rf"^{HOST}(?:/{PATH_COMPONENT})*$"}}

    def shown(self) -> str:
        return "map registry host → mirror prefix (`host[:port][/path]`)"


@dataclass(frozen=True)
class ChartRepoMap:
    """Chart name -> the repository it is pulled from instead: an https Helm repository or an oci:// one."""

    fix: ClassVar[str] = "write it as a map of chart name to repository, e.g. {vcluster: https://harbor.corp/chartrepo/loft}"

    def parse(self, value: object, fix: str) -> dict[str, str]:
        if not isinstance(value, dict) or not value:
            raise Invalid(f"expected a non-empty map, got {type_name(value)}", fix)
        for chart, repo in value.items():
            if chart not in CHARTS:
                raise Invalid("is not a chart the program installs", f"use one of {', '.join(CHARTS)}",
                              entry=str(chart), value=repo)
            if not isinstance(repo, str) or not re.fullmatch(CHART_REPO_PATTERN, repo.rstrip("/")):
                raise Invalid("is not an https:// Helm repository or an oci:// repository (without the chart name)",
                              "write e.g. https://harbor.corp.example/chartrepo/nvidia or "
                              "oci://harbor.corp.example/ghcr/kai-scheduler/kai-scheduler", entry=chart, value=repo)
        return {chart: repo.rstrip("/") for chart, repo in value.items()}

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "minProperties": 1, "propertyNames": {"enum": list(CHARTS)},
                "additionalProperties": {"type": "string", "pattern": f"^{CHART_REPO_PATTERN}/?$"}}

    def shown(self) -> str:
        return "map chart → `https://` or `oci://` repository"


MIRRORS = Block(title="image and chart mirrors", intro="""\
For an air-gapped site, or one that avoids the public registries' rate limits: what to mirror is listed in
docs/operations-versions.md (An air-gapped site).""", keys=(
    Key("images", ImageMirrorMap(), {}, "Registry host → mirror prefix; every image keeps its path and tag under it.",
        example=MIRROR_EXAMPLE, default_note="none: images come from their upstream registries",
        details="Once set, every registry the site's deployment pulls from must be in it: a missing one is an "
                "error that lists them; a team's vCluster with its own `controlPlane.advanced.defaultImageRegistry` "
                "pulls its images from there instead (docs/operations-versions.md). An image a site names in "
                "`vcluster.extraValues` (a chart image's registry, the control plane's init and sidecar containers, "
                "`translateImage`) or its `defaultImageRegistry` may be on neither a registry listed here nor a "
                "public one that is not: write the mirror's address. A registry is one whatever its spelling: "
                "`ghcr.io:443` and `GHCR.IO` are `ghcr.io` (the node dials the same server), a key is written the "
                "plain way, and another port is another server. Docker Hub is `docker.io` (official "
                "images keep their `library/` path). "
                f"A prefix is written as a registry entry is ({EXAMPLES})."),
    Key("charts", ChartRepoMap(), {}, "Chart → the repository it is pulled from instead.",
        example="{gpu-operator: https://harbor.corp.example/chartrepo/nvidia}",
        default_note="none: each chart's upstream repository",
        details=f"Charts: {', '.join(f'`{chart}`' for chart in CHARTS)}. An `oci://` repository is named without the "
                "chart, which the program appends."),
))


@dataclass(frozen=True)
class Mirrors:
    images: dict[str, str] = field(default_factory=dict)
    charts: dict[str, str] = field(default_factory=dict)

    def image(self, reference: str) -> str:
        """``reference`` under its registry's mirror, unchanged without one (or without a mirror map)."""
        host, rest = split_image(reference)
        if same_registry(host) != host:
            host, rest = split_image(f"{same_registry(host)}/{rest}")
        prefix = self.images.get(host)
        return f"{prefix}/{rest}" if prefix else reference

    def registry(self, host: str) -> str:
        """A chart's ``registry`` value (a host, or a host and path): under its mirror, else as it was."""
        first, _, path = host.partition("/")
        prefix = self.images.get(same_registry(first))
        return (f"{prefix}/{path}" if path else prefix) if prefix else host

    def chart(self, name: str, chart: str, repo: Optional[str]) -> tuple[str, Optional[str]]:
        """``(chart, repository)`` of a Helm release: an oci:// override names the chart by its path, an https one
        is the release's repository."""
        override = self.charts.get(name)
        if override is None:
            return chart, repo
        if override.startswith("oci://"):
            return f"{override}/{name}", None
        return name, override


def past_the_mirrors(host: str, mirrors: Mirrors, pulls: str, mirrored: str) -> Optional[tuple[str, str]]:
    """(problem, fix) of a value a site writes that has its nodes pull (``pulls``: who pulls what) from ``host``
    on a site with a mirror map: a registry a mirror stands in for (``mirrored`` is the value under it), or a
    public one none does. None for any other host (the site's own registry, a mirror)."""
    if not mirrors.images:
        return None
    registry = same_registry(host)
    on = f"is on {host}" + (f" (the registry {registry}, written another way)" if registry != host else "")
    if registry in mirrors.images:
        return (f"{on}, which mirrors.images mirrors to {mirrors.images[registry]}: {pulls} from {registry} itself, "
                "past the mirror", f"write the mirror's address, {mirrored}")
    if registry in PUBLIC_REGISTRIES:
        return (f"{on}, a public registry that mirrors.images has no mirror of: {pulls} from the internet, "
                "past the site's mirrors",
                f"add a mirror of {registry} to mirrors.images and write the address under it here (or one on a "
                "registry of the site's own)")
    return None


def gpu_operator_repositories(version: str) -> dict[str, str]:
    """Chart value path (``driver.manager``) -> the image repository the GPU Operator chart ``version`` sets there."""
    repositories: dict[str, Optional[str]] = {}
    for first, changes in versions.GPU_OPERATOR_IMAGE_REPOSITORIES.items():
        if versions.release_order(first) <= versions.release_order(version):
            repositories.update(changes)
    return {path: repository for path, repository in repositories.items() if repository}


def mirrored_values(sources: dict[str, str], leaf: str, mirrors: Mirrors) -> dict:
    """Chart values setting ``<path>.<leaf>`` to the site's mirror of each source (a registry, or a repository
    under one), for every ``path -> source``; nothing without mirrors."""
    values: dict = {}
    if not mirrors.images:
        return values
    for path, source in sources.items():
        node = values
        for step in path.split("."):
            node = node.setdefault(step, {})
        node[leaf] = mirrors.registry(source)
    return values


def read_mirrors(section: Section) -> Mirrors:
    return Mirrors(images=section.read("images") or {}, charts=section.read("charts") or {})
