"""A front for the real local (CPU) Triton that makes it look like a GPU server, for the sidecar only.

* ``/metrics``: Triton's own payload, plus one GPU's ``nv_gpu_*`` and ``nv_energy_consumption``
  lines taken from a real capture (the H200 one), gauges as recorded and the energy counter advanced
  at the recorded power from when the front started. Every payload is marked a replay.
* ``/v2/models/<m>/config`` for the models named: Triton's answer with the instance groups turned
  into ``KIND_GPU`` on GPU 0 (same counts), as the config of a python model on a GPU reads.
* anything else: passed to Triton's HTTP API as is.

``served`` lists the energy value each ``/metrics`` answer carried, in order: the GPU's truth.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from support.static_endpoint import serve, shutdown
from tritonwatch import catalog

REPLAY_MARK = "# replay: nv_gpu_* and nv_energy_consumption from a recorded H200 capture, not a live GPU\n"


def h200_gpu_lines(payload: Path) -> list[str]:
    """The GPU families' lines (HELP/TYPE and samples) of a recorded Triton payload."""
    gpu = (
        "nv_gpu_",
        catalog.TRITON_ENERGY,
    )
    return [
        ln
        for ln in payload.read_text().splitlines()
        if any(ln.startswith(p) or ln.startswith(f"# HELP {p}") or ln.startswith(f"# TYPE {p}") for p in gpu)
    ]


class GpuFront:
    def __init__(
        self, triton_url: str, metrics_url: str, gpu_lines: list[str], gpu_models: Sequence[str]
    ) -> None:
        self.triton = triton_url.rstrip("/")
        self.triton_metrics = metrics_url
        self.gpu_models = set(gpu_models)
        self.power = next(
            float(ln.rpartition(" ")[2]) for ln in gpu_lines if ln.startswith(catalog.TRITON_GPU_POWER + "{")
        )
        self._energy_line = next(ln for ln in gpu_lines if ln.startswith(catalog.TRITON_ENERGY + "{"))
        self._static = [ln for ln in gpu_lines if ln is not self._energy_line]
        self.start_energy = float(self._energy_line.rpartition(" ")[2])
        self.started = time.monotonic()
        self.lock = threading.Lock()
        self.served: list[float] = []
        self.httpd: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.url}/metrics"

    def metrics(self) -> bytes:
        body = requests.get(self.triton_metrics, timeout=5).text
        with self.lock:
            energy = self.start_energy + self.power * (time.monotonic() - self.started)
            self.served.append(energy)
        head = self._energy_line.rpartition(" ")[0]
        return (REPLAY_MARK + body + "\n".join([*self._static, f"{head} {energy:.3f}"]) + "\n").encode()

    def config(self, path: str) -> bytes:
        cfg = requests.get(self.triton + path, timeout=5).json()
        if cfg.get("name") in self.gpu_models:
            cfg["instance_group"] = [
                {**g, "kind": "KIND_GPU", "gpus": [0]} for g in cfg.get("instance_group", [])
            ]
        return json.dumps(cfg).encode()

    def start(self) -> GpuFront:
        front = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path == "/metrics":
                    self._send(200, front.metrics())
                elif self.path.startswith("/v2/models/") and self.path.endswith("/config"):
                    self._send(200, front.config(self.path))
                else:
                    resp = requests.get(front.triton + self.path, timeout=5)
                    self._send(resp.status_code, resp.content)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                resp = requests.post(front.triton + self.path, data=body, timeout=5)
                self._send(resp.status_code, resp.content)

        self.httpd = serve(Handler)
        self.port = int(self.httpd.server_address[1])
        return self

    def stop(self) -> None:
        if self.httpd is not None:
            shutdown(self.httpd)
            self.httpd = None

    def __enter__(self) -> GpuFront:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
