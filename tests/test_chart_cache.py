"""tools.charts' cache: chart identity, the cache's layout and misses, pulling charts (from an HTTP
repository and an OCI registry served on 127.0.0.1 by the test itself), filling the cache offline from
a chart directory, and the contracts a cached chart carries. Rendering and plan rendering are in
test_charts.py."""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

import helm_python as helm

from config.stack_file import PROJECT_DIR
from tools.charts import cli as charts
from tools.charts.pins import pinned_chart_key, stack_chart_keys
from tools.charts.cache import (
    CACHE_ENV, DEFAULT_CACHE_DIR, PULLED, MissingChart, cache_chart, cached_chart_path, chart_cache_dir,
    chart_contracts,
)
from tools.charts.refs import ChartError, ChartKey, chart_key
from tools.charts.render import render_release
from tests.chart_spec import DEMO_REPO, FIXTURES, TINY_REF, one


# --- chart identity and the cache ---------------------------------------------------------------


def test_chart_key_normalises_sources():
    assert chart_key("vcluster", "https://Charts.Loft.sh/", "0.36.1") == chart_key("vcluster", "https://charts.loft.sh", "0.36.1")
    kai = chart_key("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", None, "v0.16.4")
    assert kai == ChartKey(name="kai-scheduler", version="v0.16.4", repo=None,
                           ref="oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler")
    assert chart_key("kai-scheduler", "oci://ghcr.io/kai-scheduler/kai-scheduler/", "v0.16.4") == kai
    assert chart_key("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler:v0.16.4", None, None) == kai
    assert kai.filename == "kai-scheduler-v0.16.4.tgz"
    assert kai.pull_command() == ("python -m tools.charts pull oci://ghcr.io/kai-scheduler/kai-scheduler/"
                                  "kai-scheduler --version v0.16.4")
    gpu = chart_key("gpu-operator", "https://helm.ngc.nvidia.com/nvidia", "v26.3.3")
    assert gpu.filename == "gpu-operator-v26.3.3.tgz"
    assert gpu.source == "https://helm.ngc.nvidia.com/nvidia/gpu-operator"
    # A version is a tag: v0.16.4 and 0.16.4 are different entries.
    assert chart_key("x", "https://r.invalid", "0.1.0") != chart_key("x", "https://r.invalid", "v0.1.0")


@pytest.mark.parametrize("chart, repo, version, words", [
    ("vcluster", "https://charts.loft.sh", None, "pinned version"),
    ("vcluster", "https://charts.loft.sh", "", "pinned version"),
    ("vcluster", None, "0.36.1", "no repository"),
    ("loft/vcluster", "https://charts.loft.sh", "0.36.1", "repo/chart"),
    ("./charts/vcluster", None, "0.36.1", "only repository charts"),
    ("oci://ghcr.io/x/chart:v1", None, "v2", "tag"),
    ("oci://ghcr.io/x/chart", "https://charts.loft.sh", "v1", "no repository"),
    ("vcluster", "ftp://charts.invalid", "1.0.0", "not an http"),
    ("", "https://charts.loft.sh", "1.0.0", "without a chart"),
])
def test_chart_key_rejects(chart, repo, version, words):
    with pytest.raises(ValueError, match=words):
        chart_key(chart, repo, version)


def test_cache_directory_resolution(monkeypatch, tmp_path: Path):
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert chart_cache_dir() == PROJECT_DIR / ".charts"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))
    assert chart_cache_dir() == tmp_path / "env-cache"
    assert chart_cache_dir(tmp_path / "given") == tmp_path / "given"


def test_cache_layout_and_listing(cache: Path, capsys):
    assert sorted(path.name for path in cache.iterdir()) == [
        "demo-1.2.3.source.json", "demo-1.2.3.tgz", "tiny-v0.4.0.source.json", "tiny-v0.4.0.tgz"]
    record = json.loads((cache / "demo-1.2.3.source.json").read_text())
    assert record["source"] == "https://charts.example.invalid/stable/demo"
    assert record["digest"] == helm.digest(cache / "demo-1.2.3.tgz")
    assert charts.main(["list", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert "demo-1.2.3.tgz  https://charts.example.invalid/stable/demo  sha256:" in out
    assert "tiny-v0.4.0.tgz  oci://registry.example.invalid/charts/tiny" in out
    assert charts.main(["list", "--cache", str(cache / "nothing")]) == 0
    assert "empty" in capsys.readouterr().out


def test_an_unpacked_chart_directory_is_a_cache_entry(tmp_path: Path):
    shutil.copytree(FIXTURES / "tiny", tmp_path / "tiny-v0.4.0")
    path = cached_chart_path(TINY_REF, None, "v0.4.0", cache_dir=tmp_path)
    assert path == tmp_path / "tiny-v0.4.0"
    assert "tiny/templates/serviceaccount.yaml" in render_release(path, "t", "apps", {})


def test_cache_chart_checks_name_and_version(tmp_path: Path):
    with pytest.raises(ChartError, match="holds chart demo 1.2.3, not demo 1.2.4"):
        cache_chart(FIXTURES / "demo", "demo", DEMO_REPO, "1.2.4", cache_dir=tmp_path)
    with pytest.raises(ChartError, match="not other"):
        cache_chart(FIXTURES / "demo", "other", DEMO_REPO, "1.2.3", cache_dir=tmp_path)
    assert not list(tmp_path.glob("*.tgz"))


def test_missing_chart_names_the_chart_and_the_pull_command(cache: Path):
    with pytest.raises(MissingChart) as raised:
        cached_chart_path("vcluster", "https://charts.loft.sh", "0.36.1", cache_dir=cache)
    message = str(raised.value)
    assert "vcluster 0.36.1 from https://charts.loft.sh" in message
    assert (f"python -m tools.charts pull vcluster --repo https://charts.loft.sh --version 0.36.1 --cache {cache}"
            in message)
    assert raised.value.missing == [chart_key("vcluster", "https://charts.loft.sh", "0.36.1")]
    # Another version of a cached chart is missing too.
    with pytest.raises(MissingChart, match="demo 1.2.4"):
        cached_chart_path("demo", DEMO_REPO, "1.2.4", cache_dir=cache)


def test_missing_chart_in_the_default_cache_names_the_stack_command():
    error = MissingChart([chart_key("vcluster", "https://charts.loft.sh", "0.36.1")], DEFAULT_CACHE_DIR,
                         stack="dev")
    assert error.commands == [
        "python -m tools.charts pull --stack dev",
        "python -m tools.charts pull vcluster --repo https://charts.loft.sh --version 0.36.1"]
    assert "python -m tools.charts pull --stack dev\n" in str(error)


def test_a_chart_cached_from_another_source_is_missing(cache: Path):
    with pytest.raises(MissingChart, match="came from https://charts.example.invalid/stable/demo"):
        cached_chart_path("demo", "https://mirror.example.invalid/charts", "1.2.3", cache_dir=cache)


# --- pulling, from servers on 127.0.0.1 ------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture()
def serve():
    """Serve a request handler on 127.0.0.1 for the test; yields a function returning the base URL."""
    servers = []

    def start(handler) -> str:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def test_pull_from_an_http_chart_repository(serve, tmp_path: Path, capsys):
    repository = tmp_path / "repository"
    helm.package(FIXTURES / "demo", destination=repository)
    url = serve(functools.partial(_Quiet, directory=str(repository)))
    helm.repo_index_generate(repository, base_url=url)
    cache = tmp_path / "cache"

    assert charts.main(["pull", "demo", "--repo", url + "/", "--version", "1.2.3", "--cache", str(cache)]) == 0
    assert f"pulled demo 1.2.3 from {url} -> {cache / 'demo-1.2.3.tgz'}" in capsys.readouterr().out
    assert charts.main(["pull", "demo", "--repo", url, "--version", "1.2.3", "--cache", str(cache)]) == 0
    assert "cached demo 1.2.3" in capsys.readouterr().out
    assert json.loads((cache / "demo-1.2.3.source.json").read_text())["source"] == f"{url}/demo"
    path = cached_chart_path("demo", url, "1.2.3", cache_dir=cache)
    assert path.read_bytes() == (repository / "demo-1.2.3.tgz").read_bytes()
    assert one(render_release(path, "web", "apps", {"replicaCount": 7}), "Deployment", "web-demo")["spec"]["replicas"] == 7

    assert charts.main(["pull", "demo", "--repo", url, "--version", "9.9.9", "--cache", str(cache)]) == 1
    assert 'could not pull demo 9.9.9' in capsys.readouterr().err
    assert sorted(path.name for path in cache.iterdir()) == ["demo-1.2.3.source.json", "demo-1.2.3.tgz"]


def _registry(repository: str, tag: str, archive: bytes, config: bytes):
    """A read-only OCI distribution registry holding one Helm chart, enough for `helm pull`."""
    def descriptor(media_type: str, data: bytes) -> dict:
        return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}

    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor("application/vnd.cncf.helm.config.v1+json", config),
        "layers": [descriptor("application/vnd.cncf.helm.chart.content.v1.tar+gzip", archive)],
    }).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    blobs = {descriptor("", data)["digest"]: data for data in (config, archive)}
    routes = {
        "/v2/": (b"{}", "application/json"),
        f"/v2/{repository}/tags/list": (json.dumps({"name": repository, "tags": [tag]}).encode(), "application/json"),
        f"/v2/{repository}/manifests/{tag}": (manifest, "application/vnd.oci.image.manifest.v1+json"),
        f"/v2/{repository}/manifests/{manifest_digest}": (manifest, "application/vnd.oci.image.manifest.v1+json"),
        **{f"/v2/{repository}/blobs/{digest}": (data, "application/octet-stream") for digest, data in blobs.items()},
    }

    class Registry(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, with_body: bool) -> None:
            body, content_type = routes.get(self.path.split("?")[0], (b'{"errors":[{"code":"NOT_FOUND"}]}', None))
            self.send_response(200 if content_type else 404)
            self.send_header("Content-Type", content_type or "application/json")
            self.send_header("Content-Length", str(len(body)))
            if "/manifests/" in self.path:
                self.send_header("Docker-Content-Digest", manifest_digest)
            self.end_headers()
            if with_body:
                self.wfile.write(body)

        def do_GET(self):
            self._answer(True)

        def do_HEAD(self):
            self._answer(False)

    return Registry


def test_pull_from_an_oci_registry(serve, tmp_path: Path, capsys):
    archive = Path(helm.package(FIXTURES / "tiny", destination=tmp_path))
    with helm.Chart.load(archive) as chart:
        config = json.dumps(chart.metadata).encode()
    url = serve(_registry("charts/tiny", "v0.4.0", archive.read_bytes(), config))
    reference = "oci://" + url[len("http://"):] + "/charts/tiny"
    cache = tmp_path / "cache"
    assert charts.main(["pull", reference, "--version", "v0.4.0", "--plain-http", "--cache", str(cache)]) == 0
    assert f"pulled tiny v0.4.0 from {reference}" in capsys.readouterr().out
    path = cached_chart_path(reference, None, "v0.4.0", cache_dir=cache)
    assert path.read_bytes() == archive.read_bytes()
    assert charts.main(["pull", reference, "--version", "v0.9.0", "--plain-http", "--cache", str(cache)]) == 1
    assert "could not pull tiny v0.9.0" in capsys.readouterr().err


def test_pulling_a_sites_mirrored_chart_does_not_count_the_upstreams_copy_as_pulled(serve, monkeypatch, tmp_path: Path,
                                                                                       capsys):
    """``pull --stack SITE`` for a site with ``mirrors.charts``: renders take the upstream's cached copy in the
    mirror's place (find_cached), but the pull says that nothing came from the mirror; --force pulls the mirror's."""
    cache = tmp_path / "cache"
    chart = _git_tag_like_chart(tmp_path, "vcluster", "0.0.1")
    upstream = pinned_chart_key("vcluster", "0.36.1")
    cache_chart(chart, upstream.ref, upstream.repo, upstream.version, cache_dir=cache, stamp_version=True)
    mirror = tmp_path / "mirror"
    helm.package(chart, destination=mirror, version="0.36.1")
    url = serve(functools.partial(_Quiet, directory=str(mirror)))
    helm.repo_index_generate(mirror, base_url=url)
    mirrored = chart_key("vcluster", url, "0.36.1")
    monkeypatch.setattr(charts, "stack_chart_keys", lambda stack: [mirrored] if stack == "site" else [])

    assert charts.main(["pull", "--stack", "site", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert f"not pulled from the mirror: vcluster 0.36.1 from {url}: the cache holds the upstream's copy " \
           f"({upstream.source})" in out
    assert "cached vcluster" not in out
    assert "0 pulled, 0 already cached, 1 not pulled from the site's mirror (vcluster 0.36.1: " in out
    assert json.loads((cache / "vcluster-0.36.1.source.json").read_text())["source"] == upstream.source

    assert charts.main(["pull", "--stack", "site", "--force", "--cache", str(cache)]) == 0
    out = capsys.readouterr().out
    assert f"pulled vcluster 0.36.1 from {url}" in out and "1 pulled, 0 already cached\n" in out
    assert json.loads((cache / "vcluster-0.36.1.source.json").read_text())["source"] == mirrored.source
    assert charts.main(["pull", "--stack", "site", "--cache", str(cache)]) == 0
    assert "0 pulled, 1 already cached\n" in capsys.readouterr().out


def test_pull_command_line_checks_its_arguments(capsys):
    with pytest.raises(SystemExit):
        charts.main(["pull", "demo", "--stack", "dev"])
    with pytest.raises(SystemExit):
        charts.main(["pull", "--version", "1.0.0"])
    assert charts.main(["pull", "vcluster", "--version", "0.36.1"]) == 2
    assert "no repository" in capsys.readouterr().err


# --- filling the cache offline, and the charts' contracts -----------------------------------------


def _git_tag_like_chart(tmp_path: Path, name: str, placeholder: str) -> Path:
    """A copy of tiny renamed to ``name`` with a placeholder version, as a chart directory at a
    git tag looks before a release pipeline stamps it."""
    directory = tmp_path / "src" / name
    shutil.copytree(FIXTURES / "tiny", directory)
    metadata = yaml.safe_load((directory / "Chart.yaml").read_text())
    metadata.update(name=name, version=placeholder)
    (directory / "Chart.yaml").write_text(yaml.safe_dump(metadata))
    return directory


def test_add_stamps_the_version_and_takes_the_source_the_program_uses(tmp_path: Path, capsys):
    cache = tmp_path / "cache"
    directory = _git_tag_like_chart(tmp_path, "vcluster", "0.0.1")
    assert charts.main(["add", str(directory), "--version", "0.36.1", "--app-version", "0.36.1",
                        "--cache", str(cache)]) == 0
    assert "added vcluster 0.36.1 from https://charts.loft.sh" in capsys.readouterr().out
    path = cached_chart_path("vcluster", "https://charts.loft.sh", "0.36.1", cache_dir=cache)
    with helm.Chart.load(path) as loaded:
        assert (loaded.version, loaded.metadata["appVersion"]) == ("0.36.1", "0.36.1")
    assert json.loads((cache / "vcluster-0.36.1.source.json").read_text())["origin"] == "directory"
    # KAI's chart is an OCI artifact: the cache entry is keyed by that reference.
    kai = _git_tag_like_chart(tmp_path, "kai-scheduler", "0.0.0")
    assert charts.main(["add", str(kai), "--version", "v0.16.0", "--cache", str(cache)]) == 0
    cached_chart_path("oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler", None, "v0.16.0", cache_dir=cache)


def test_add_refuses_what_it_cannot_place(tmp_path: Path, capsys):
    cache = tmp_path / "cache"
    unknown = _git_tag_like_chart(tmp_path, "mystery", "0.0.0")
    assert charts.main(["add", str(unknown), "--version", "1.0.0", "--cache", str(cache)]) == 2
    assert "installs no chart named 'mystery'" in capsys.readouterr().err
    assert charts.main(["add", str(unknown), "--version", "1.0.0", "--chart", "mystery",
                        "--repo", DEMO_REPO, "--cache", str(cache)]) == 0
    # Without --version the directory's own version is kept and must be the one asked for.
    assert charts.main(["add", str(unknown), "--chart", "other", "--repo", DEMO_REPO, "--cache", str(cache)]) == 2
    assert "holds chart mystery" in capsys.readouterr().err
    assert charts.main(["add", str(tmp_path / "nowhere"), "--cache", str(cache)]) == 2
    with pytest.raises(SystemExit):
        charts.main(["add", str(unknown), "--app-version", "1"])


def test_chart_contracts_read_values_schema_and_crds(cache: Path):
    contracts = chart_contracts(chart_key("demo", DEMO_REPO, "1.2.3"), cache)
    assert contracts.values["replicaCount"] == 1
    assert contracts.schema["properties"]["replicaCount"]["type"] == "integer"
    widget = contracts.crd("demo.example.invalid", "Widget")
    assert widget["metadata"]["name"] == "widgets.demo.example.invalid"
    assert contracts.crd("demo.example.invalid", "Gadget") is None
    assert chart_contracts(chart_key("demo", DEMO_REPO, "9.9.9"), cache) is None


def test_bare_pull_asks_for_every_pinned_chart(monkeypatch, tmp_path: Path, capsys):
    asked = []

    def fake_pull(chart, repo, version, **options):
        asked.append(chart_key(chart, repo, version))
        return tmp_path / "x.tgz", PULLED

    monkeypatch.setattr(charts, "pull_chart", fake_pull)
    assert charts.main(["pull", "--cache", str(tmp_path)]) == 0
    from config import versions
    for name, version in (("vcluster", versions.VCLUSTER_VERSION), ("kai-scheduler", versions.KAI_VERSION),
                          ("gpu-operator", versions.GPU_OPERATOR_VERSION)):
        assert pinned_chart_key(name, version) in asked
    for stack in ("dev", "eks"):
        assert set(stack_chart_keys(stack)) <= set(asked)
    assert len(asked) == len(set(asked))


def test_reading_a_stacks_charts_leaves_no_event_loop_open():
    """The SDK never closes the loops it runs the program on; the CLI closes them (mockrun.owned_event_loops)."""
    code = "from tools.charts.pins import stack_chart_keys; assert stack_chart_keys('dev')"
    result = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_DIR, capture_output=True, text=True,
                            env={**os.environ, "PYTHONWARNINGS": "always::ResourceWarning"}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "unclosed" not in result.stderr and "Exception ignored" not in result.stderr, result.stderr
