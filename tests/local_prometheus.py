"""A real Prometheus on 127.0.0.1 for the usage and team-view specs, and the synthetic series it serves.

``OpenMetrics`` writes the gauge families that promtool backfills (one sample a minute) for ops.usage's
specs; ``running_prometheus`` starts the server (backfilled, or scraping an exporter) and stops it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

import pytest

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")
needs_prometheus_and_promtool = pytest.mark.skipif(
    PROMETHEUS is None or PROMTOOL is None,
    reason="prometheus/promtool are not on $PATH (Debian package prometheus; .ci/run installs it)")
MINUTE = 60


class OpenMetrics:
    """Gauge families sampled once a minute, at minutes ``timeline`` after the Unix time ``first``."""

    def __init__(self, first: int, timeline: Iterable[int]):
        self.first = first
        self.timeline = tuple(timeline)
        self.lines: list[str] = []

    def family(self, name: str, series: Iterable[tuple[str, Callable[[int], Optional[float]]]]) -> None:
        """One gauge: per series its labels and its value at a minute (None: no sample then)."""
        self.lines.append(f"# TYPE {name} gauge")
        for labels, value in series:
            for minute in self.timeline:
                sample = value(minute)
                if sample is not None:
                    self.lines.append(f"{name}{{{labels}}} {sample:g} {self.first + minute * MINUTE}")

    def text(self) -> str:
        return "\n".join(self.lines) + "\n# EOF\n"


def queue_labels(name: str) -> str:
    """The labels KAI's queue controller puts on a queue's series."""
    return f'queue_name="{name}",queue_metadata_name="{name}",queue_display_name="{name}",job="queue-controller"'


def team_info_labels(team: str) -> str:
    """The labels of a team's ``gpu_tenancy_team_info`` series, its queue, namespace and policy named after it."""
    return f'team="{team}",queue_name="{team}",namespace="vcluster-{team}",policy="gpu-tenancy-{team}"'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers_ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


@contextlib.contextmanager
def running_prometheus(root: Path, config: str, *, ready: Callable[[str], bool] = answers_ready,
                       timeout: float = 60, not_ready: str = "prometheus did not start",
                       flags: Sequence[str] = ()) -> Iterator[str]:
    """A real Prometheus on 127.0.0.1 with ``config`` (prometheus.yml text) and its data under ``root``; its URL
    once ``ready(url)``. A server that exits or is not ready within ``timeout`` seconds fails the test."""
    (root / "prometheus.yml").write_text(config)
    port = free_port()
    log = (root / "prometheus.log").open("w")
    server = subprocess.Popen(
        [PROMETHEUS, f"--config.file={root / 'prometheus.yml'}", f"--storage.tsdb.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", *flags],
        stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not ready(url):
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{not_ready}: {(root / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)
        log.close()


@contextlib.contextmanager
def backfilled_prometheus(root: Path, series: str) -> Iterator[str]:
    """A real Prometheus on 127.0.0.1 serving ``series`` (OpenMetrics text) backfilled with promtool; its URL."""
    (root / "series.om").write_text(series)
    subprocess.run([PROMTOOL, "tsdb", "create-blocks-from", "openmetrics", str(root / "series.om"), str(root / "data")],
                   check=True, capture_output=True, timeout=120)
    with running_prometheus(root, "global:\n  scrape_interval: 1m\nscrape_configs: []\n",
                            flags=("--storage.tsdb.retention.time=100y",)) as url:
        yield url


@contextlib.contextmanager
def serving_exporter(exposition: Callable[[int], str]) -> Iterator[str]:
    """An exporter on 127.0.0.1 answering the n-th scrape with ``exposition(n)`` (Prometheus text format); its
    host:port, until the block ends."""
    scrapes = 0

    class Exporter(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the handler's API)
            nonlocal scrapes
            scrapes += 1
            body = exposition(scrapes).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def query(url: str, expr: str) -> list[dict]:
    """An instant query's result from the Prometheus at ``url``."""
    with urllib.request.urlopen(f"{url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}", timeout=10) as answer:
        return json.load(answer)["data"]["result"]
