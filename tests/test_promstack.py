"""The local Prometheus's configuration (local/promstack.py) as a real Prometheus reads it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

pytestmark = [pytest.mark.prometheus, pytest.mark.needs("prometheus"), pytest.mark.usefixtures("platform")]


@contextmanager
def serving_only(path: str) -> Iterator[int]:
    """A loopback server answering a metric on ``path`` and 404 on any other path; yields its port."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"served_path 1\n" if self.path == path else b"not here\n"
            self.send_response(200 if self.path == path else 404)
            # Prometheus 3 fails a scrape whose answer names no Content-Type (every exporter names one)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def test_targets_of_one_job_on_different_paths_are_each_scraped_on_their_own(tmp_path: Path) -> None:
    # The job's metrics_path was the first target's: the second target was scraped on the wrong path
    # (a 404, so down). Each target now carries its own path where it differs.
    with serving_only("/metrics") as first, serving_only("/other/metrics") as second:
        targets = [
            ScrapeTarget("mixed", f"127.0.0.1:{first}"),
            ScrapeTarget("mixed", f"127.0.0.1:{second}", metrics_path="/other/metrics"),
        ]
        prom = Prometheus(tmp_path / "prom", prometheus_config(targets))
        try:
            prom.wait_ready(60)

            def ups() -> dict[str, float]:
                resp = requests.get(
                    f"{prom.url}/api/v1/query", params={"query": 'up{job="mixed"}'}, timeout=5
                )
                resp.raise_for_status()
                return {r["metric"]["instance"]: float(r["value"][1]) for r in resp.json()["data"]["result"]}

            wait_until(lambda: len(ups()) == 2, 30, "both targets scraped once")
            assert ups() == {f"127.0.0.1:{first}": 1.0, f"127.0.0.1:{second}": 1.0}
        finally:
            prom.stop()
