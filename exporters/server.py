"""The sidecar's HTTP endpoint: ``/metrics`` from a private registry, ``/-/healthy``, a landing page.

``/metrics`` serves the bytes ``CachedExposition`` rendered at the last update (gzip when the client's
Accept-Encoding admits it): a request is a lookup, or during an update a render of the cheap families
beside the costly ones the render thread prepared.

TLS and basic auth (exporter-toolkit web config) are applied here when ``--web-config`` is given. The
TLS handshake runs in each connection's own thread with a deadline, never in the accept loop: a client
that connects and never speaks must not stall the endpoint Prometheus scrapes.
"""

from __future__ import annotations

import logging
import socket
import ssl
import struct
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client.exposition import CONTENT_TYPE_LATEST

from tritonwatch.exporters.exposition import CachedExposition, accepts_gzip

log = logging.getLogger(__name__)

LANDING = b"""<html><head><title>tritonwatch sidecar</title></head>
<body><h1>tritonwatch sidecar</h1><p><a href="/metrics">/metrics</a></p></body></html>
"""

# An idle or stalled client (no request line, no TLS hello, a keep-alive nobody reuses) holds one
# thread; these bound how long.
HANDSHAKE_TIMEOUT = 5.0
IDLE_TIMEOUT = 30.0

Authorizer = Callable[[str | None], bool]


def _write(conn: Any, wfile: Any, body: bytes) -> None:
    """Write ``body`` in one blocking ``send``, the stall bound kept by ``SO_SNDTIMEO``.

    On a socket with a timeout, ``sendall`` waits in ``poll`` and sends a socket buffer at a time,
    taking the GIL back between the two and after each chunk; while the scrape or render thread
    runs Python, each take waits up to the switch interval (5 ms), and the 7 MB body at 2,000
    models took tens of such turns (the slow GETs of identity clients while the render thread
    prepared). A blocking ``send`` of the whole body leaves the GIL once until the kernel has it
    all. A client that stops reading still frees the thread: the send fails after the timeout.
    """
    timeout = conn.gettimeout() if type(conn) is socket.socket else None
    if timeout is None:  # TLS (records, one at a time) or already blocking: as it is
        wfile.write(body)
        return
    seconds = int(timeout)
    conn.setsockopt(
        socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, int((timeout - seconds) * 1e6))
    )
    conn.settimeout(None)
    try:
        conn.sendall(body)  # what the handler's unbuffered wfile does, on the now blocking socket
    finally:
        conn.settimeout(timeout)


def make_handler(
    metrics: CachedExposition, authorize: Authorizer | None = None
) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "tritonwatch"
        protocol_version = "HTTP/1.1"
        timeout = IDLE_TIMEOUT

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
                _write(self.connection, self.wfile, body)

        def do_GET(self) -> None:
            if authorize is not None and not authorize(self.headers.get("Authorization")):
                self._send(
                    401, b"Unauthorized\n", "text/plain", {"WWW-Authenticate": 'Basic realm="tritonwatch"'}
                )
                return
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                headers = {"Vary": "Accept-Encoding"}
                if accepts_gzip(self.headers.get("Accept-Encoding")):
                    body = metrics.body(gzipped=True)
                    headers["Content-Encoding"] = "gzip"
                else:
                    body = metrics.body()
                self._send(200, body, CONTENT_TYPE_LATEST, headers)
            elif path in ("/-/healthy", "/-/ready"):
                self._send(200, b"OK\n", "text/plain")
            elif path == "/":
                self._send(200, LANDING, "text/html")
            else:
                self._send(404, b"Not Found\n", "text/plain")

        do_HEAD = do_GET

    return Handler


class MetricsHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that, given a TLS context, handshakes inside each connection's thread."""

    daemon_threads = True
    tls_context: ssl.SSLContext | None = None
    handshake_timeout = HANDSHAKE_TIMEOUT

    def use_tls(self, context: ssl.SSLContext) -> None:
        self.tls_context = context

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls_context is None:
            super().finish_request(request, client_address)
            return
        try:
            request.settimeout(self.handshake_timeout)
            tls = self.tls_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        except OSError:
            return
        try:
            tls.do_handshake()
        except (OSError, ssl.SSLError) as exc:  # a port scan, plain HTTP, a stalled client
            log.debug("TLS handshake with %s failed: %s", client_address, exc)
            tls.close()
            return
        try:
            super().finish_request(tls, client_address)
        finally:
            try:
                tls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that vanished mid-response is routine for a metrics endpoint, not a traceback.
        log.debug("error serving %s", client_address, exc_info=True)


class _IPv6Server(MetricsHTTPServer):
    address_family = socket.AF_INET6


class MetricsServer:
    def __init__(
        self,
        host: str,
        port: int,
        metrics: CachedExposition,
        authorize: Authorizer | None = None,
        wrap: Callable[[MetricsHTTPServer], None] | None = None,
    ) -> None:
        cls = _IPv6Server if ":" in host else MetricsHTTPServer
        self.metrics = metrics
        self.httpd = cls((host, port), make_handler(metrics, authorize))
        if wrap:
            wrap(self.httpd)  # e.g. TLS
        self.port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="metrics-http", daemon=True)

    def start(self) -> None:
        self.metrics.start()
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.metrics.stop()
