"""A loopback OTLP/HTTP receiver for the recorders: keeps every JSON body POSTed to it, in arrival order."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver(BaseHTTPRequestHandler):
    bodies: list[object] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.bodies.append(json.loads(body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def start_receiver() -> tuple[HTTPServer, str]:
    """Serve on a free loopback port from a daemon thread; returns the server and its /v1/traces URL."""
    server = HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}/v1/traces"
