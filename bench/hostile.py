"""Hostile inputs against a real ``tritonwatch sidecar`` (issue 23): memory and /metrics GETs throughout.

A server of the bench's own plays Triton: ``/metrics`` is the 50-model payload of ``bench.payloads``
(values moving every second) plus, in each phase, what an attacker or a broken exporter adds; the HTTP
API lists the 50 models. The sidecar scrapes it every second with the default caps (64 MiB payload,
5,000 models) and its OTLP receiver on. Phases, ``--seconds`` each (default 10: about a minute in all):

* ``normal``: the payload alone (the sidecar's normal RSS at this configuration);
* ``label_50mb``: one more line whose label value is 50 MB (skipped as it arrives: ``line_too_long``);
* ``models_1m``: 1,000,000 one-line models, 61 MB, under the payload cap (refused: ``too_many_models``);
* ``otlp_6x31mb``: 6 clients each POSTing 31 MB OTLP bodies at once, over and over (over the 4 MiB
  ``--otlp-max-body-bytes``: 413 and ``too_large`` before the body is read; one read at a time, the
  rest answered 503 as ``busy``);
* ``otlp_6x4mb``: the same with bodies just under the cap: each read and decoded, one at a time (spans
  of a model Triton does not list dropped as ``unknown_model``);
* ``churn_6000``: 6,000 new model names every scrape, each one line (over the cap: capped and counted).

A client GETs the sidecar's /metrics every 0.1 s throughout. Reported per phase: GET median and max,
the sidecar's RSS at the end and its peak (VmHWM), and the error counters. The bound, stated once the
normal phase has run and checked after every phase: peak RSS at most 2 x normal RSS + the payload cap
(64 MiB), GET median under 0.1 s. Writes bench/results/hostile.json; exits 1 when a phase breaks it.
Run: ``python -m bench.hostile [--seconds 10]``.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from bench.payloads import payload
from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.config import SidecarConfig
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = 50
PAYLOAD_CAP = 64 * 2**20
MAX_MEDIAN_S = 0.1
OTLP_CAP = SidecarConfig.otlp_max_body_bytes  # 4 MiB


class HostileTriton:
    """``/metrics`` = the normal payload + ``extra()``; ``/v2/repository/index`` lists the 50 models."""

    def __init__(self) -> None:
        self.extra: Callable[[], bytes] = lambda: b""
        self._tick = 1
        self._body = payload(MODELS, 1)
        index = [{"name": f"model_{i:04d}", "state": "READY", "version": "1"} for i in range(MODELS)]
        self._index = json.dumps(index).encode()
        bench = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.startswith("/metrics"):
                    self._send(200, bench._body + bench.extra())
                elif self.path.endswith("/config"):
                    self._send(200, b'{"max_batch_size": 8}')
                else:
                    self._send(200, b'{"model_stats": []}')

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self._send(200, bench._index)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._stop = threading.Event()

    def start(self) -> HostileTriton:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        threading.Thread(target=self._advance, daemon=True).start()
        return self

    def _advance(self) -> None:
        while not self._stop.wait(1.0):
            self._tick += 1
            self._body = payload(MODELS, self._tick)

    def stop(self) -> None:
        self._stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def label_50mb() -> bytes:
    return b'nv_inference_request_success{model="' + b"x" * 50_000_000 + b'",version="1"} 1\n'


def models_1m() -> bytes:
    return "".join(
        f'nv_inference_request_success{{model="m{i:07d}",version="1"}} 1\n' for i in range(1_000_000)
    ).encode()


def churn() -> Callable[[], bytes]:
    counter = [0]

    def extra() -> bytes:
        counter[0] += 1
        n = counter[0]
        return "".join(
            f'nv_inference_request_success{{model="c{n}-{i}",version="1"}} 1\n' for i in range(6000)
        ).encode()

    return extra


def otlp_body(size: int) -> bytes:
    """An OTLP JSON export of ~``size`` bytes: model spans of a model Triton does not list."""
    span = {
        "traceId": "",
        "spanId": "",
        "name": "flood",
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "5000",
        "attributes": [{"key": "triton.model_name", "value": {"stringValue": "flood"}}],
        "events": [
            {"name": "REQUEST_START", "timeUnixNano": "1000"},
            {"name": "REQUEST_END", "timeUnixNano": "5000"},
        ],
    }
    one = len(json.dumps({**span, "traceId": "0" * 32, "spanId": "0" * 16})) + 2  # and ", "
    spans = []
    for i in range(size // one):
        spans.append({**span, "traceId": f"{i:032x}", "spanId": f"{i + 1:016x}"})
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


def post_once(host: str, port: int, body: bytes) -> int:
    """POST ``body`` to /v1/traces over a raw socket; the answer's status (0: none came back).

    A receiver that refuses the body by its length answers before reading it and closes: the sender's
    rest of the body then meets a reset, but the answer is already there to read."""
    head = (
        f"POST /v1/traces HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, port), timeout=30) as conn:
        try:
            conn.sendall(head)
            conn.sendall(body)
        except OSError:
            pass  # refused mid-body: read the answer sent before the close
        try:
            answer = conn.recv(64)
        except OSError:
            return 0
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def post_loop(host: str, port: int, body: bytes, until: float, codes: list[int]) -> None:
    while time.monotonic() < until:
        try:
            codes.append(post_once(host, port, body))
        except OSError:
            codes.append(0)


def run(seconds: float) -> dict[str, Any]:
    triton = HostileTriton().start()
    port, otlp_port = free_port(), free_port()
    workdir = Path(tempfile.mkdtemp(prefix="tritonwatch-hostile-"))
    argv = [sys.executable, "-m", "tritonwatch", "sidecar", "--triton", triton.base]
    argv += ["--triton-metrics", f"{triton.base}/metrics", "--listen", f"127.0.0.1:{port}"]
    argv += ["--otlp-listen", f"127.0.0.1:{otlp_port}", "--interval", "1", "--timeout", "0.9"]
    sidecar = Managed("sidecar", argv, log_path=workdir / "sidecar.log")
    url = f"http://127.0.0.1:{port}/metrics"
    gets: list[float] = []
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            start = time.monotonic()
            try:
                with urllib.request.urlopen(url, timeout=10) as resp:
                    resp.read()
                gets.append(time.monotonic() - start)
            except OSError:
                gets.append(float("inf"))
            stop.wait(0.1)

    phases: list[dict[str, Any]] = []
    try:
        wait_until(lambda: http_ok(url), 60, "the sidecar")
        wait_until(
            lambda: b'tritonwatch_up{target="triton"} 1' in urllib.request.urlopen(url).read(), 30, "a scrape"
        )
        threading.Thread(target=client, daemon=True).start()
        extras: list[tuple[str, Callable[[], bytes] | None]] = [
            ("normal", None),
            ("label_50mb", None),
            ("models_1m", None),
            ("otlp_6x31mb", None),
            ("otlp_6x4mb", None),
            ("churn_6000", churn()),
        ]
        built = {"label_50mb": label_50mb(), "models_1m": models_1m()}
        bodies = {"otlp_6x31mb": otlp_body(31 * 2**20), "otlp_6x4mb": otlp_body(OTLP_CAP - 2**16)}
        assert len(bodies["otlp_6x4mb"]) <= OTLP_CAP < len(bodies["otlp_6x31mb"])
        for name, extra in extras:
            if name in built:
                data = built[name]
                triton.extra = lambda data=data: data  # type: ignore[misc]
            else:
                triton.extra = extra or (lambda: b"")
            first = len(gets)
            codes: list[int] = []
            end = time.monotonic() + seconds
            posters = []
            if name in bodies:
                args = ("127.0.0.1", otlp_port, bodies[name], end, codes)
                posters = [threading.Thread(target=post_loop, args=args) for _ in range(6)]
                for t in posters:
                    t.start()
            while time.monotonic() < end:
                time.sleep(0.5)
            for t in posters:
                t.join()
            triton.extra = lambda: b""
            took = gets[first:]
            with urllib.request.urlopen(url, timeout=10) as resp:
                samples = parse(resp.read())
            errors = {
                f"{dict(ls)['target']}/{dict(ls)['reason']}": v
                for ls, v in samples.get(catalog.SCRAPE_ERRORS, {}).items()
            }
            dropped = {dict(ls)["reason"]: v for ls, v in samples.get(catalog.SPANS_DROPPED, {}).items()}
            if not phases:
                bound = 2 * status_kib(sidecar.pid, "VmRSS") / 1024 + PAYLOAD_CAP / 2**20
                print(f"bound: peak RSS <= {bound:.1f} MiB, GET median < {MAX_MEDIAN_S} s", flush=True)
            peak = status_kib(sidecar.pid, "VmHWM") / 1024
            median = statistics.median(took) if took else None
            phases.append(
                {
                    "phase": name,
                    "gets": len(took),
                    "get_median_s": median,
                    "get_max_s": max(took) if took else None,
                    "rss_mib": status_kib(sidecar.pid, "VmRSS") / 1024,
                    "peak_rss_mib": peak,
                    "within_bound": peak <= bound and median is not None and median < MAX_MEDIAN_S,
                    "scrape_errors": errors,
                    "spans_dropped": dropped,
                    "otlp_answers": {str(c): codes.count(c) for c in sorted(set(codes))},
                }
            )
            print(json.dumps(phases[-1]), flush=True)
    finally:
        stop.set()
        sidecar.stop()
        triton.stop()
    normal = phases[0]["rss_mib"]
    peak = max(p["peak_rss_mib"] for p in phases)
    medians = [p["get_median_s"] for p in phases if p["get_median_s"] is not None]
    return {
        "seconds_per_phase": seconds,
        "normal_rss_mib": normal,
        "bound_mib": bound,
        "peak_rss_mib": peak,
        "peak_within_bound": peak <= bound,
        "worst_get_median_s": max(medians),
        "get_median_under_0_1s": max(medians) < MAX_MEDIAN_S,
        "every_phase_within_bound": all(p["within_bound"] for p in phases),
        "phases": phases,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hostile", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0, help="seconds per phase")
    args = ap.parse_args(argv)
    result = run(args.seconds)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "hostile.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"normal RSS {result['normal_rss_mib']:.0f} MiB; peak {result['peak_rss_mib']:.0f} MiB "
        f"(bound {result['bound_mib']:.0f}); worst GET median {result['worst_get_median_s']:.4f} s; "
        f"every phase within bound: {result['every_phase_within_bound']}"
    )
    return 0 if result["every_phase_within_bound"] else 1


if __name__ == "__main__":
    sys.exit(main())
