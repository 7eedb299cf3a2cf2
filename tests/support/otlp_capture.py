"""A stand-in tracing backend on loopback: keeps the raw body of every OTLP/HTTP POST, in arrival order.

The sidecar forwards spans here (``--otlp-forward``) in the trace bench and tests, which then count
the forwarded requests with plain JSON, independently of the sidecar's own span code.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class OtlpCapture:
    def __init__(self) -> None:
        self._bodies: list[bytes] = []
        self._lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with capture._lock:
                    capture._bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        """Where to forward spans to (``--otlp-forward``)."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1/traces"

    def start(self) -> OtlpCapture:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def bodies(self) -> list[bytes]:
        """A copy of the bodies received so far."""
        with self._lock:
            return list(self._bodies)

    def clear(self) -> None:
        with self._lock:
            self._bodies.clear()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
