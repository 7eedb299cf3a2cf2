"""A ``/metrics`` endpoint serving one fixed payload, that can go away and come back on the same port
(a dcgm-exporter pod being rescheduled, a node agent restarting)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def serve(handler: type[BaseHTTPRequestHandler], port: int = 0) -> ThreadingHTTPServer:
    """``handler`` served on 127.0.0.1:``port`` (0: a free port) from a daemon thread."""
    httpd = ThreadingHTTPServer(("127.0.0.1", port), handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def shutdown(httpd: ThreadingHTTPServer) -> None:
    httpd.shutdown()
    httpd.server_close()


class StaticEndpoint:
    def __init__(self, payload: bytes) -> None:
        self.payload = payload
        self.port = 0
        self.httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/metrics"

    def start(self) -> StaticEndpoint:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"  # one request per connection: gone means gone

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(endpoint.payload)))
                self.end_headers()
                self.wfile.write(endpoint.payload)

        self.httpd = serve(Handler, self.port)
        self.port = int(self.httpd.server_address[1])
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            shutdown(self.httpd)
            self.httpd = None
