"""The sidecar's HTTP endpoint: ``/metrics`` from a private registry, ``/-/healthy``, a landing page.

TLS and basic auth (exporter-toolkit web config) wrap this server when ``--web-config`` is given.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

LANDING = b"""<html><head><title>tritonwatch sidecar</title></head>
<body><h1>tritonwatch sidecar</h1><p><a href="/metrics">/metrics</a></p></body></html>
"""

Authorizer = Callable[[str | None], bool]


def make_handler(
    registry: CollectorRegistry, authorize: Authorizer | None = None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tritonwatch"
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            pass  # Prometheus scrapes every few seconds: access logs would drown real warnings

        def _send(self, code: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self) -> None:
            if authorize is not None and not authorize(self.headers.get("Authorization")):
                self._send(
                    401, b"Unauthorized\n", "text/plain", {"WWW-Authenticate": 'Basic realm="tritonwatch"'}
                )
                return
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                body = generate_latest(registry)
                headers = {}
                if "gzip" in (self.headers.get("Accept-Encoding") or ""):
                    body = gzip.compress(body, compresslevel=1)
                    headers["Content-Encoding"] = "gzip"
                self._send(200, body, CONTENT_TYPE_LATEST, headers)
            elif path in ("/-/healthy", "/-/ready"):
                self._send(200, b"OK\n", "text/plain")
            elif path == "/":
                self._send(200, LANDING, "text/html")
            else:
                self._send(404, b"Not Found\n", "text/plain")

        do_HEAD = do_GET

    return Handler


class MetricsServer:
    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        authorize: Authorizer | None = None,
        wrap: Callable[[ThreadingHTTPServer], None] | None = None,
    ) -> None:
        self.httpd = ThreadingHTTPServer((host, port), make_handler(registry, authorize))
        self.httpd.daemon_threads = True
        if wrap:
            wrap(self.httpd)  # e.g. TLS
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
