"""Triton-shaped /metrics payloads of N models (with latency summaries), values moving every second.

The shape follows the real payloads recorded from the local Triton (tests/data/triton_metrics_*.txt):
per model the request/failure/count/duration counters, cache counters, the pending gauge and, as
with ``--metrics-config summary_latencies=true``, five summaries with quantiles 0.5 ... 0.999. About
48 samples a model: 2,000 models give about 96,000 samples.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
    "nv_cache_num_hits_per_model",
    "nv_cache_num_misses_per_model",
)
REASONS = ("REJECTED", "CANCELED", "BACKEND", "OTHER")
PHASES = ("request", "queue", "compute_input", "compute_infer", "compute_output")
QUANTILES = ("0.5", "0.9", "0.95", "0.99", "0.999")


def payload(models: int, tick: int, seed: int = 1) -> bytes:
    """The payload at second ``tick``: counters grow with the tick, summaries wander."""
    rng = random.Random(seed * 1_000_003 + tick)
    out: list[str] = []
    names = [f"model_{i:04d}" for i in range(models)]
    for family in COUNTERS:
        out.append(f"# HELP {family} Cumulative {family}.")
        out.append(f"# TYPE {family} counter")
        for i, m in enumerate(names):
            out.append(f'{family}{{model="{m}",version="1"}} {(i + 1) * tick * 10 + rng.randrange(10)}')
    out.append("# HELP nv_inference_request_failure Number of failed inference requests.")
    out.append("# TYPE nv_inference_request_failure counter")
    for m in names:
        for reason in REASONS:
            out.append(
                f'nv_inference_request_failure{{model="{m}",reason="{reason}",version="1"}} {tick // 7}'
            )
    out.append("# HELP nv_inference_pending_request_count Instantaneous number of pending requests.")
    out.append("# TYPE nv_inference_pending_request_count gauge")
    for m in names:
        out.append(f'nv_inference_pending_request_count{{model="{m}",version="1"}} {rng.randrange(4)}')
    for phase in PHASES:
        family = f"nv_inference_{phase}_summary_us"
        out.append(f"# HELP {family} Summary of {phase} durations.")
        out.append(f"# TYPE {family} summary")
        for i, m in enumerate(names):
            base = 100 + i % 50
            for q in QUANTILES:
                out.append(
                    f'{family}{{model="{m}",version="1",quantile="{q}"}} {base * (1 + float(q)) + rng.random():.3f}'
                )
            out.append(f'{family}_sum{{model="{m}",version="1"}} {base * tick * 10}')
            out.append(f'{family}_count{{model="{m}",version="1"}} {tick * 10}')
    return ("\n".join(out) + "\n").encode()


def sample_count(models: int) -> int:
    return sum(1 for line in payload(models, 1).split(b"\n") if line and not line.startswith(b"#"))


class PayloadServer:
    """Serves ``payload(models, tick)`` on 127.0.0.1, the tick advancing every second (built ahead)."""

    def __init__(self, models: int, port: int = 0) -> None:
        self.models = models
        self._tick = 1
        self._body = payload(models, 1)
        self._stop = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                body = server._body
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self._threads = [
            threading.Thread(target=self.httpd.serve_forever, daemon=True),
            threading.Thread(target=self._advance, daemon=True),
        ]

    def _advance(self) -> None:
        while not self._stop.wait(1.0):
            self._tick += 1
            self._body = payload(self.models, self._tick)

    def start(self) -> PayloadServer:
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def main(argv: list[str] | None = None) -> int:
    """Serve the payload of ``--models`` models on 127.0.0.1:``--port`` until killed (a process of its
    own in ``bench.scrape``: building each second's payload is CPU the measured clients must not share
    a GIL with)."""
    ap = argparse.ArgumentParser(prog="python -m bench.payloads")
    ap.add_argument("--models", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args(argv)
    server = PayloadServer(args.models, args.port).start()
    try:
        threading.Event().wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
