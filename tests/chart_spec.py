"""The fixture charts of the chart specs (tests/charts/, written for these tests, not upstream charts)
and helpers to read what they render. Its ``cache`` and ``demo`` fixtures reach the tests through conftest.py."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml

from config.vocabulary import RELEASE
from tools.charts.cache import cache_chart, cached_chart_path


def _materialize_fixture_charts() -> Path:
    """Copy tests/charts/ to a scratch folder with each ``values.schema.fixture.json`` under the
    name Helm reads, ``values.schema.json``: the repository keeps only upstream contracts under
    that name out of the tree."""
    target = Path(tempfile.mkdtemp(prefix="gpu-tenancy-fixture-charts-"))
    atexit.register(shutil.rmtree, target, ignore_errors=True)
    shutil.copytree(Path(__file__).resolve().parent / "charts", target, dirs_exist_ok=True)
    for schema in target.rglob("values.schema.fixture.json"):
        schema.rename(schema.with_name("values.schema.json"))
    return target


FIXTURES = _materialize_fixture_charts()
DEMO_REPO = "https://charts.example.invalid/stable/"
TINY_REF = "oci://registry.example.invalid/charts/tiny"


@pytest.fixture()
def cache(tmp_path: Path) -> Path:
    """A chart cache holding demo 1.2.3 (HTTP repo) and tiny v0.4.0 (OCI), packaged by the SDK."""
    directory = tmp_path / "cache"
    cache_chart(FIXTURES / "demo", "demo", DEMO_REPO, "1.2.3", cache_dir=directory)
    cache_chart(FIXTURES / "tiny", TINY_REF, None, "v0.4.0", cache_dir=directory)
    return directory


@pytest.fixture()
def demo(cache: Path) -> Path:
    return cached_chart_path("demo", DEMO_REPO, "1.2.3", cache_dir=cache)


def objects(manifests: dict[str, str]) -> list[dict]:
    return [doc for text in manifests.values() for doc in yaml.safe_load_all(text) if doc]


def one(manifests: dict[str, str], kind: str, name: str) -> dict:
    found = [doc for doc in objects(manifests) if doc["kind"] == kind and doc["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found in {sorted(manifests)}"
    return found[0]


def release(name: str, chart: str, version: str, *, repo: str | None = None, namespace: str = "apps",
            values: dict | None = None, resource: str | None = None, **extra) -> dict:
    """A helm.v3.Release as plan.json lists it."""
    inputs = {"name": name, "chart": chart, "version": version, "namespace": namespace,
              "values": values or {}, "atomic": True, **extra}
    if repo:
        inputs["repositoryOpts"] = {"repo": repo}
    return {"type": RELEASE, "name": resource or f"{name}-release", "urn": f"urn:{name}",
            "inputs": inputs}


def tree(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}
