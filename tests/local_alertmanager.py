"""A real Alertmanager on 127.0.0.1 for the alert-routing specs, the endpoint it posts to, and ``amtool``.

Debian's ``prometheus-alertmanager`` package ships both (it names the server ``prometheus-alertmanager``);
``.ci/run`` installs it. Without them the tests that need them skip and say so.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import shutil
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.local_prometheus import answers_ready, free_port

AMTOOL = shutil.which("amtool")
ALERTMANAGER = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
needs_amtool = pytest.mark.skipif(AMTOOL is None, reason="amtool is not on $PATH (Debian package "
                                                         "prometheus-alertmanager; .ci/run installs it)")
needs_alertmanager = pytest.mark.skipif(ALERTMANAGER is None, reason="prometheus-alertmanager is not on $PATH (Debian "
                                                                     "package prometheus-alertmanager)")


@contextlib.contextmanager
def receiving_end() -> Iterator[tuple[str, list[dict]]]:
    """An HTTP server on 127.0.0.1 standing in for Slack's or PagerDuty's endpoint: its URL and what it got."""
    received: list[dict] = []

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's naming)
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(202)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/services/T000/B000/XXXX", received
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def running_alertmanager(config: dict, root: Path) -> Iterator[str]:
    """A real Alertmanager on 127.0.0.1 with ``config``; its URL once ready."""
    (root / "alertmanager.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    log = (root / "alertmanager.log").open("w")
    server = subprocess.Popen(
        [ALERTMANAGER, f"--config.file={root / 'alertmanager.yml'}", f"--storage.path={root / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address="],  # no peers: no gossip to settle
        stdout=subprocess.DEVNULL, stderr=log)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while not answers_ready(url):
            assert server.poll() is None and time.monotonic() < deadline, \
                (root / "alertmanager.log").read_text()[-2000:]
            time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)
        log.close()


def post_alerts(url: str, alerts: list[dict]) -> None:
    request = urllib.request.Request(f"{url}/api/v2/alerts", data=json.dumps(alerts).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200
