"""A Triton stand-in on a loopback port that serves recorded real payloads, and misbehaves on request.

``/metrics`` serves ``tests/data/triton_metrics_load_{1,2}.txt`` (recorded from the real local Triton)
with every counter advanced by one recorded step per successful scrape:
``value = base + m * (load_2 - load_1)``, so over any stretch of good scrapes each counter rises by
exactly ``m`` steps and every derived value is known in advance. ``clock()`` counts good payloads
served; injected as the sidecar's clock it makes one step last one "second", so rates are exact too.

Faults (``metrics_mode``): ``html``, ``garbage`` (random bytes), ``bad_line`` (a valid payload with
one line that is not the format), ``bad_value`` (one kept counter's value not a number), ``hang`` (accept, never answer), ``trickle`` (headers, then a byte
now and then), ``flap`` (every other answer 503), ``status503``, ``gzip_bomb`` (small on the wire,
over the cap once inflated); ``padding`` makes good payloads oversized, ``clones`` adds models, ``pending``
sets fraud_detector's pending request count (a busy server), ``frozen`` holds every counter (a model
warming up with requests queued). ``restart()`` stops listening and,
on ``resume()``, counters start again from 0, as after a Triton restart. The API side
(``/v2/repository/index``, ``/v2/models/<m>/config``, ``/v2/models/stats``) serves the recorded JSON,
or hangs (``api_mode = "hang"``), or answers statistics of the wrong shape (``wrong_shape``) or with a
negative count (``negative``); ``fail_paths`` maps an API path to the HTTP status it answers instead,
and ``requests`` counts the API requests by path.
"""

from __future__ import annotations

import collections
import gzip
import json
import random
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tritonwatch import catalog
from tritonwatch.expfmt import parse

DATA = Path(__file__).resolve().parent.parent / "data"
HANG_LIMIT = 30.0  # a hanging handler gives up after this even if nobody releases it


class RecordedCounters:
    """Two recorded payloads of one Triton; renders the counters at any number of steps."""

    def __init__(
        self,
        first: Path = DATA / "triton_metrics_load_1.txt",
        second: Path = DATA / "triton_metrics_load_2.txt",
    ) -> None:
        one, two = first.read_text().splitlines(), second.read_text().splitlines()
        assert len(one) == len(two), "recorded payloads must list the same series in the same order"
        types: dict[str, str] = {}
        self.lines: list[tuple[str, str, float, float]] = []  # (kind, head or text, v1, v2)
        for a, b in zip(one, two, strict=True):
            if a.startswith("#"):
                parts = a.split()
                if len(parts) >= 4 and parts[1] == "TYPE":
                    types[parts[2]] = parts[3]
                self.lines.append(("meta", a, 0.0, 0.0))
                continue
            head, _, v1 = a.rpartition(" ")
            head2, _, v2 = b.rpartition(" ")
            assert head == head2, (head, head2)
            name = head.split("{", 1)[0]
            kind = "counter" if types.get(name) == "counter" else "other"
            self.lines.append((kind, head, float(v1), float(v2)))
        self.first = parse(first.read_text())
        self.second = parse(second.read_text())

    def render(self, steps: int, restarted: bool = False, clones: int = 0) -> str:
        """The payload after ``steps`` steps; ``clones`` extra models ``m000``... copy fraud_detector."""
        out = []
        for kind, head, v1, v2 in self.lines:
            if kind == "meta":
                out.append(head)
                continue
            v = (0.0 if restarted else v1) + steps * (v2 - v1) if kind == "counter" else v2
            out.append(f"{head} {v!r}")
            if clones and 'model="fraud_detector"' in head:
                out += [f"{head.replace('fraud_detector', f'm{i:03d}')} {v!r}" for i in range(clones)]
        return "\n".join(out) + "\n"

    def step(self, family: str, model: str, skip: tuple[tuple[str, str], ...] = ()) -> float:
        """One step's increase of ``family`` for ``model``, summed over its series."""
        total = 0.0
        for labels, v2 in self.second.get(family, {}).items():
            lm = dict(labels)
            if lm.get("model") != model or any(lm.get(k) == v for k, v in skip):
                continue
            total += v2 - self.first[family][labels]
        return total

    def gauge(self, family: str, model: str) -> float:
        return sum(
            v for labels, v in self.second.get(family, {}).items() if dict(labels).get("model") == model
        )


class FakeTriton:
    """Serves ``/metrics`` and the HTTP API of a recorded Triton on one loopback port."""

    def __init__(self, recorded: RecordedCounters | None = None, port: int = 0, clones: int = 0) -> None:
        self.recorded = recorded or RecordedCounters()
        self.clones = clones
        self.padding = 0  # bytes of comment lines appended (mode "ok"): an oversized but valid payload
        self.metrics_mode = "ok"
        self.api_mode = "ok"
        self.steps = 0  # counter steps since (re)start
        self.good = 0  # good payloads served: the sidecar's clock
        self.restarted = False
        self.flap_count = 0
        self.release = threading.Event()  # frees hanging handlers
        self.fail_paths: dict[str, int] = {}  # API path -> status answered instead of the payload
        self.hang_configs = False  # every model config request hangs (the rest of the API answers)
        self.extra_lines = b""  # appended to every good /metrics payload (hostile lines)
        self.pending: float | None = None  # fraud_detector's pending requests, when not the recorded gauge
        self.frozen = False  # counters do not advance while set
        self.requests: collections.Counter[str] = collections.Counter()  # API requests by path
        self.lock = threading.Lock()
        self.index = json.loads((DATA / "triton_repository_index.json").read_text())
        self.version = "2.51.0"  # the server metadata's (GET /v2): the recorded Triton's
        self.configs = {
            "fraud_detector": json.loads((DATA / "triton_config_fraud_detector.json").read_text())
        }
        stats: list[Any] = []
        for f in ("triton_stats_fail_always.json", "triton_stats_fraud_detector.json"):
            stats += json.loads((DATA / f).read_text())["model_stats"]
        self.stats = {"model_stats": stats}
        self._port = port
        self.httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> FakeTriton:
        self.release.clear()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self._port), _handler(self))
        self.httpd.daemon_threads = True
        self._port = int(self.httpd.server_address[1])
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def restart(self) -> None:
        """Go away (connections refused) until ``resume()``; counters then start again from 0."""
        self.stop()
        with self.lock:
            self.steps = 0
            self.restarted = True

    def resume(self) -> None:
        self.start()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def metrics_url(self) -> str:
        return f"{self.base_url}/metrics"

    def clock(self) -> float:
        return float(self.good)

    # --- payloads ----------------------------------------------------------------------------
    def good_payload(self) -> bytes:
        with self.lock:
            self.steps += 0 if self.frozen else 1
            self.good += 1
            text = self.recorded.render(self.steps, self.restarted, self.clones)
        if self.pending is not None:
            text = _PENDING.sub(lambda m: f"{m.group(1)}{self.pending!r}", text)
        pad = ("# padding " + "x" * 90 + "\n") * (self.padding // 100)
        return (text + pad).encode() + self.extra_lines

    def bad_value_payload(self) -> bytes:
        """The next good payload with one kept counter's value spoiled (same series, same layout)."""
        lines = self.recorded.render(self.steps + 1, self.restarted).splitlines()
        at = next(i for i, ln in enumerate(lines) if ln.startswith(catalog.TRITON_SUCCESS + "{"))
        lines[at] = lines[at].rpartition(" ")[0] + " 12O45"
        return ("\n".join(lines) + "\n").encode()

    def bad_line_payload(self) -> bytes:
        text = self.recorded.render(self.steps + 1, self.restarted)
        lines = text.splitlines()
        lines.insert(len(lines) // 2, "this line is not the exposition format")
        return ("\n".join(lines) + "\n").encode()


_PENDING = re.compile(rf'^({catalog.TRITON_PENDING}{{model="fraud_detector",version="1"}} ).*$', re.M)


def _handler(fake: FakeTriton) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.0: one request per connection, so that a restart really refuses the next scrape
        # instead of a kept-alive connection still being served by an old handler thread.
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; version=0.0.4") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _hang(self) -> None:
            fake.release.wait(HANG_LIMIT)
            self.close_connection = True

        def _metrics(self) -> None:
            mode = fake.metrics_mode
            if mode == "ok":
                self._send(200, fake.good_payload())
            elif mode == "html":
                self._send(200, b"<html><body><h1>502 Bad Gateway</h1></body></html>\n", "text/html")
            elif mode == "garbage":
                self._send(200, random.Random(fake.flap_count).randbytes(4096), "application/octet-stream")
                fake.flap_count += 1
            elif mode == "bad_line":
                self._send(200, fake.bad_line_payload())
            elif mode == "bad_value":
                self._send(200, fake.bad_value_payload())
            elif mode == "hang":
                self._hang()
            elif mode == "trickle":
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", "100000")
                self.end_headers()
                for _ in range(int(HANG_LIMIT * 10)):
                    if fake.release.wait(0.05):
                        break
                    try:
                        self.wfile.write(b"#")
                        self.wfile.flush()
                    except OSError:
                        break
                self.close_connection = True
            elif mode == "flap":
                fake.flap_count += 1
                if fake.flap_count % 2:
                    self._send(503, b"Service Unavailable\n")
                else:
                    self._send(200, fake.good_payload())
            elif mode == "gzip_bomb":
                # 200 KiB of zeros compress to a few hundred bytes: the cap must count inflated bytes
                body = gzip.compress(b"#" + b"0" * (200 * 1024) + b"\n")
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif mode == "status503":
                self._send(503, b"Service Unavailable\n")
            else:
                raise AssertionError(f"unknown metrics_mode {mode}")

        def _api(self) -> None:
            if fake.api_mode == "hang":
                self._hang()
                return
            path = self.path.split("?", 1)[0]
            with fake.lock:
                fake.requests[path] += 1
            if path in fake.fail_paths:
                self._send(fake.fail_paths[path], b'{"error":"injected"}', "application/json")
                return
            if path == "/v2/repository/index":
                body: Any = fake.index
            elif path == "/v2":
                body = {"name": "triton", "version": fake.version, "extensions": ["statistics", "trace"]}
            elif path == "/v2/models/stats":
                body = fake.stats
                if fake.api_mode == "wrong_shape":
                    body = [body]  # valid JSON, not the statistics API's shape
                elif fake.api_mode == "negative":
                    body = json.loads(json.dumps(body))
                    body["model_stats"][0]["batch_stats"][0]["compute_infer"]["count"] = -5
            elif path.startswith("/v2/models/") and path.endswith("/config"):
                if fake.hang_configs:
                    self._hang()
                    return
                name = path[len("/v2/models/") : -len("/config")]
                if name not in fake.configs:
                    self._send(400, b'{"error":"unknown model"}', "application/json")
                    return
                body = fake.configs[name]
            else:
                self._send(404, b"{}", "application/json")
                return
            self._send(200, json.dumps(body).encode(), "application/json")

        def do_GET(self) -> None:
            if self.path.startswith("/metrics"):
                self._metrics()
            else:
                self._api()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            self._api()

    return Handler


@contextmanager
def fake_triton() -> Iterator[FakeTriton]:
    fake = FakeTriton().start()
    try:
        yield fake
    finally:
        fake.stop()


def wait_port_free(port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
                return
            except OSError:
                time.sleep(0.05)
    raise AssertionError(f"port {port} still busy")
