"""In-process rendering of Helm charts (helm-python-sdk), one release or every release of a plan.

Helm's template engine runs client-only, like ``helm template``: ``.Release.IsInstall`` true,
``lookup`` returns nothing, values checked against the chart's ``values.schema.json`` and its
subcharts' by Helm itself (findings become :class:`ChartValuesError`). ``NOTES.txt`` and templates
that render to nothing are left out; the chart's ``crds/`` files are included (Helm installs them
first, unless the release skips CRDs). Capabilities are Helm's defaults unless ``kube_version`` /
``api_versions`` are given.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import yaml

from config.vocabulary import RELEASE as RELEASE_TYPE
from tools.charts.manifest_yaml import load_manifests
from tools.charts.cache import MissingChart, cached_from, chart_cache_dir, find_cached, read_source
from tools.charts.refs import (
    ChartError, ChartKey, ChartRenderError, ChartValuesError, SchemaViolation, chart_key, helm_sdk,
)
from tools.offline.recording import integral_numbers

MANIFESTS_DIR = "manifests"
_PLACEHOLDERS = ("[secret]", "[unknown]")


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
    helm = helm_sdk()
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
        documents = list(load_manifests(text))
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
    """(type, name, inputs) of a plan.json resource dict or a ``tools.offline.recording.RecordedResource``."""
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
    recorded ``RecordedResource`` objects. All charts are looked up first: any missing raise one
    :class:`MissingChart` listing them (with ``pull --stack STACK`` when ``stack`` is given)
    before anything is written. ``<out_dir>/manifests/`` is then replaced by
    ``manifests/<release>/<template path>`` files, ``<release>`` being the Helm release name
    (``<name>@<namespace>`` when two releases share a name). Values are rendered as the plan
    has them: secrets are the ``[secret]`` placeholder (listed in the summary).

    Returns a JSON-able summary (no absolute paths): ``{"kubeVersion", "releases": [{"dir", "resource",
    "release", "namespace", "chart", "version", "source", "cachedFrom", "archive", "digest", "files",
    "objects", "placeholders", "nondeterministicFiles"}]}``, sorted by ``dir``; ``cachedFrom`` is where the
    cached archive came from: the release's source, or the upstream's for a chart a site pulls from its mirror
    (``tools.charts.cache.find_cached``);
    ``nondeterministicFiles`` are files that came out different when rendered twice (templates
    using ``randAlphaNum``, ``genCA``, ``uuidv4``...): the written ones are from the first render.
    """
    helm = helm_sdk()
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
        found, reason = find_cached(key, cache)
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
        source = read_source(cache, key) or {}
        rendered_releases.append({
            "dir": f"{MANIFESTS_DIR}/{directory}",
            "resource": resource_name,
            "release": release,
            "namespace": namespace,
            "chart": key.name,
            "version": key.version,
            "source": key.source,
            "cachedFrom": cached_from(cache, key),
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
