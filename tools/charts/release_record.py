"""The size of the record Helm 3 keeps of a release, as the API server sees it.

Helm's Secret storage driver (the default, and the one pulumi-kubernetes' ``helm.sh/v3`` Release uses) keeps each
revision as one Secret whose ``release`` key holds the release encoded as JSON, gzipped at best compression and
base64'd (helm v3 pkg/storage/driver/util.go ``encodeRelease``, secrets.go ``newSecretsObject``). The API server
refuses a Secret whose data adds up to more than 1 MiB (Kubernetes' ``MaxSecretSize``), so a release whose record
outgrows it cannot be installed or upgraded.

The record is built here from the chart archive and a render of it, field by field as Helm's structs serialize:
the top chart alone (pkg/chart/chart.go does not serialize its dependencies) with its templates, files, parsed
``values.yaml`` and schema; the values the release was given (``config``); the manifest of every non-hook object
(``---\\n# Source: <template>\\n<document>``, pkg/action/action.go ``renderResources``; CRDs of ``crds/`` are not
in it); and each hook's document (pkg/releaseutil/manifest_sorter.go). Go's encoder writes compact JSON, sorts map
keys and escapes ``<``, ``>`` and ``&``. What is left out (the release's info and its notes) is a few hundred bytes;
Go's and zlib's best compression differ by a few per cent, which callers' margins absorb.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

import yaml

from tools.charts.cache import find_cached
from tools.charts.manifest_yaml import load_manifests
from tools.charts.render import release_chart_key, release_records, render_release
from tools.offline.recording import integral_numbers

# Kubernetes' limit on the sum of a Secret's data values (pkg/apis/core/validation MaxSecretSize).
SECRET_LIMIT = 1024 * 1024
# pkg/releaseutil/manifest.go's document separator.
_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")
_HOOK = "helm.sh/hook"


@dataclass(frozen=True)
class RecordSize:
    """Bytes of the Secret's ``release`` value, and what each part alone would take (for telling what grows)."""
    total: int
    chart: int
    config: int
    manifest: int
    hooks: int


def _encoded(value: Any) -> int:
    text = json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return len(base64.b64encode(gzip.compress(text.encode(), compresslevel=9, mtime=0)))


def _file(name: str, data: bytes) -> dict:
    return {"name": name, "data": base64.b64encode(data).decode()}


def stored_chart(archive: os.PathLike[str] | str) -> dict:
    """The chart as Helm serializes it in a release: the top chart's own files, its subcharts left out."""
    if Path(archive).is_dir():  # a chart directory of the cache (``tools.charts add``), as packaged
        files = sorted((path.relative_to(archive).as_posix(), path.read_bytes())
                       for path in Path(archive).rglob("*") if path.is_file())
    else:
        with tarfile.open(archive) as tar:
            files = [(member.name.split("/", 1)[1], tar.extractfile(member).read()) for member in tar.getmembers()
                     if member.isfile() and "/" in member.name]
    own = dict(files)
    rest = [(name, data) for name, data in files
            if name not in ("Chart.yaml", "Chart.lock", "values.yaml", "values.schema.json")
            and not name.startswith("templates/")
            and (not name.startswith("charts/") or name.endswith(".prov"))]
    schema = own.get("values.schema.json")
    return {"metadata": yaml.safe_load(own["Chart.yaml"]),
            "lock": yaml.safe_load(own["Chart.lock"]) if "Chart.lock" in own else None,
            "templates": [_file(name, data) for name, data in files if name.startswith("templates/")],
            "values": yaml.safe_load(own.get("values.yaml", b"")) or {},
            "schema": base64.b64encode(schema).decode() if schema is not None else None,
            "files": [_file(name, data) for name, data in rest]}


def _hook(path: str, document: str, parsed: dict) -> dict:
    metadata = parsed.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    policies = annotations.get("helm.sh/hook-delete-policy", "")
    return {"name": metadata.get("name", ""), "kind": parsed.get("kind", ""), "path": path, "manifest": document,
            "events": [event.strip() for event in str(annotations[_HOOK]).split(",")],
            "last_run": {"started_at": "0001-01-01T00:00:00Z", "completed_at": "0001-01-01T00:00:00Z",
                         "phase": ""},
            "weight": int(annotations.get("helm.sh/hook-weight", 0) or 0),
            "delete_policies": [policy.strip() for policy in policies.split(",") if policy.strip()]}


def record_parts(manifests: Mapping[str, str]) -> tuple[str, list[dict]]:
    """The release's manifest and hooks from a render (``{template path: YAML}``, CRDs of ``crds/`` left out)."""
    manifest, hooks = [], []
    for path, text in manifests.items():
        for document in _SEPARATOR.split(text.strip()):
            document = document.strip()
            if not document:
                continue
            parsed = next(iter(load_manifests(document)), None)
            if not isinstance(parsed, dict) or not parsed.get("kind"):
                continue
            if _HOOK in ((parsed.get("metadata") or {}).get("annotations") or {}):
                hooks.append(_hook(path, document, parsed))
            else:
                manifest.append(f"---\n# Source: {path}\n{document}\n")
    return "".join(manifest), hooks


def record_size(archive: os.PathLike[str] | str, release: str, namespace: str, values: Mapping[str, Any],
                manifests: Mapping[str, str]) -> RecordSize:
    """The size of the ``release`` value of the Secret Helm keeps for ``release`` installed from ``archive`` with
    ``values``, rendered to ``manifests`` (``{template path: YAML}``, without the chart's ``crds/`` files)."""
    chart = stored_chart(archive)
    manifest, hooks = record_parts(manifests)
    record = {"name": release, "info": {"status": "deployed"}, "chart": chart, "config": dict(values),
              "manifest": manifest, "hooks": hooks, "version": 1, "namespace": namespace}
    return RecordSize(total=_encoded(record), chart=_encoded(chart), config=_encoded(dict(values)),
                      manifest=_encoded(manifest), hooks=_encoded(hooks))


def release_record_sizes(resources: Iterable[Any], cache: Path, kube_version: Optional[str] = None
                         ) -> dict[str, RecordSize]:
    """Release name -> its record's size, for every ``helm.sh/v3`` Release of a plan (its ``resources``), each
    rendered from the chart cache with the values the plan gives it."""
    sizes = {}
    for resource_name, inputs in release_records(resources):
        found, reason = find_cached(release_chart_key(inputs), cache)
        if found is None:
            raise LookupError(f"release {resource_name}: {release_chart_key(inputs).describe()} is not in the "
                              f"chart cache {cache}{f' ({reason})' if reason else ''}")
        release, namespace = str(inputs.get("name") or resource_name), str(inputs.get("namespace") or "default")
        values = integral_numbers(inputs.get("values") or {})
        manifests = render_release(found, release, namespace, values, kube_version=kube_version, include_crds=False)
        sizes[release] = record_size(found, release, namespace, values, manifests)
    return sizes
