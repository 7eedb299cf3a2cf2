"""A replayed GPU node: recorded dcgm-exporter and Triton ``/metrics`` payloads served on loopback.

No GPU is needed: each endpoint serves the second of two recorded snapshots, with every counter
advanced from it at the rate the two snapshots show (``# replay-interval-seconds N`` apart), so a
scraper sees a live-looking node whose rates are exactly the recorded ones. Gauges stay as recorded.
Every payload starts with a ``# replay: ...`` comment: whatever shows it is labelled a replay.

    with GpuReplay() as node:          # replay/{dcgm,triton_gpu}_node2gpu_{1,2}.txt (package data)
        node.dcgm_url                  # http://127.0.0.1:<port>/metrics  (dcgm-exporter)
        node.triton_metrics_url        # http://127.0.0.1:<port>/metrics  (Triton with GPUs)
        node.triton_url                # http://127.0.0.1:<port>  (its HTTP API: index, config, stats)
        node.dcgm.fail = "http_500"    # or "garbage"; None serves again

The HTTP API is worked out of the replayed metrics (every model READY, with the reason "replay:
..."; statistics summed over gpu_uuid), so a sidecar on the replayed node has every target up.
``python -m tritonwatch.local.gpureplay`` serves the node until interrupted and prints the URLs.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.expfmt import Samples, family_of, parse

REPLAY_MARK = "# replay: recorded dcgm-exporter format, not a live GPU"
TRITON_REPLAY_MARK = "# replay: recorded Triton GPU metrics format, not a live GPU"
_INTERVAL = re.compile(r"^#\s*replay-interval-seconds\s+([0-9.]+)\s*$")
_TYPE = re.compile(r"^#\s+TYPE\s+(\S+)\s+(\S+)")
FAILURES = ("http_500", "garbage")


@dataclass(frozen=True)
class _Sample:
    prefix: str  # "name{labels}"
    value: float
    rate: float  # per second, 0 for gauges
    decimals: int  # as recorded: 0 for an integer


def _sample(line: str, where: str, lineno: int) -> tuple[str, str, float]:
    """A sample line's ``name{labels}``, its value as written and as a number."""
    prefix, _, text = line.rpartition(" ")
    try:
        return prefix, text, float(text)
    except ValueError:
        raise TritonwatchError(f"{where}: line {lineno}: not a sample line: {line[:80]!r}") from None


class Recording:
    """Two snapshots of one payload; ``render(t)`` is the payload ``t`` seconds after the second."""

    def __init__(
        self, first: str, second: str, mark: str, names: tuple[str, str], drop: Iterable[str] = ()
    ) -> None:
        """``names``: where ``first`` and ``second`` come from, for errors."""
        interval = next((float(m.group(1)) for ln in second.splitlines() if (m := _INTERVAL.match(ln))), 0.0)
        if interval <= 0:
            raise TritonwatchError(f"{names[1]}: no '# replay-interval-seconds N' line (N > 0)")
        self.interval = interval
        dropped = frozenset(drop)
        types: dict[str, str] = {}
        before: dict[str, float] = {}
        for lineno, line in enumerate(first.splitlines(), 1):
            if line.strip() and not line.startswith("#"):
                prefix, _, value = _sample(line, names[0], lineno)
                before[prefix] = value
        self.lines: list[str | _Sample] = [] if second.startswith(mark) else [mark]
        for lineno, line in enumerate(second.splitlines(), 1):
            if line.startswith("#") or not line.strip():
                t = _TYPE.match(line)
                if t:
                    types[t.group(1)] = t.group(2)
                    if t.group(1) in dropped:
                        continue
                if line.startswith("# HELP") and line.split()[2] in dropped:
                    continue
                self.lines.append(line)
                continue
            prefix, text, value = _sample(line, names[1], lineno)
            name = prefix.split("{", 1)[0]
            if family_of(name, types) in dropped:
                continue
            rate = 0.0
            if types.get(family_of(name, types)) == "counter" and prefix in before:
                rate = max(0.0, (value - before[prefix]) / interval)
            decimals = len(text.split(".", 1)[1]) if "." in text else 0
            self.lines.append(_Sample(prefix, value, rate, decimals))

    def render(self, elapsed: float) -> bytes:
        out = []
        for item in self.lines:
            if isinstance(item, str):
                out.append(item)
                continue
            v = item.value + item.rate * elapsed
            out.append(f"{item.prefix} {round(v) if item.decimals == 0 else f'{v:.{item.decimals}f}'}")
        return ("\n".join(out) + "\n").encode()

    @classmethod
    def load(cls, first: Path, second: Path, mark: str, drop: Iterable[str] = ()) -> Recording:
        try:
            return cls(first.read_text(), second.read_text(), mark, (str(first), str(second)), drop)
        except OSError as exc:
            raise TritonwatchError(f"{exc.filename}: cannot read replay payload ({exc.strerror})") from None


class ReplayEndpoint:
    """Serves one recording at ``/metrics`` on 127.0.0.1; ``fail`` breaks it on purpose."""

    def __init__(self, recording: Recording, clock: Callable[[], float] = time.monotonic) -> None:
        self.recording = recording
        self.clock = clock
        self.fail: str | None = None
        self._t0 = clock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="gpu-replay", daemon=True)

    def payload(self) -> bytes:
        return self.recording.render(self.clock() - self._t0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    code, body = 404, b"Not Found\n"
                elif endpoint.fail == "http_500":
                    code, body = 500, b"replay: failing on purpose\n"
                elif endpoint.fail == "garbage":
                    code, body = 200, b"this is { not the exposition format\n"
                else:
                    code, body = 200, endpoint.payload()
                self.send_response(code)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        return Handler

    def start(self) -> ReplayEndpoint:
        self._t0 = self.clock()
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


# max_batch_size of the replayed node's models (their config.pbtxt); anything else: 0 (no batching)
REPLAY_MAX_BATCH = {"resnet50": 16, "bert_base": 8, "tokenizer": 4}
REPLAY_REASON = "replay: recorded Triton GPU metrics format, not a live GPU"


def _counts(samples: Samples, family: str) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for labels, value in samples.get(family, {}).items():
        lm = dict(labels)
        if catalog.MODEL in lm:
            key = (lm[catalog.MODEL], lm.get(catalog.VERSION, ""))
            out[key] = out.get(key, 0.0) + value
    return out


def model_stats(samples: Samples) -> dict[str, object]:
    """Triton's ``/v2/models/stats`` answer, worked out of a (replayed) ``/metrics`` payload.

    Sums over ``gpu_uuid``; one ``batch_stats`` entry per model at its mean batch size, whose compute
    time is the duration counters / batch size (they add a batch's time once per request).
    """
    success = _counts(samples, catalog.TRITON_SUCCESS)
    inferences = _counts(samples, catalog.TRITON_INFERENCE_COUNT)
    executions = _counts(samples, catalog.TRITON_EXEC_COUNT)
    us = {p: _counts(samples, catalog.triton_duration(p)) for p in catalog.PHASES}
    stats = []
    for key in sorted(inferences):
        n_inf, n_exec, n_ok = inferences[key], executions.get(key, 0.0), success.get(key, 0.0)
        batch = max(1, round(n_inf / n_exec)) if n_exec else 1

        def pair(phase: str, count: float, per: float = 1.0, k: tuple[str, str] = key) -> dict[str, int]:
            return {"count": int(count), "ns": int(us[phase].get(k, 0.0) * 1000 * per)}

        compute = ("compute_input", "compute_infer", "compute_output")
        stats.append(
            {
                "name": key[0],
                "version": key[1],
                "inference_count": int(n_inf),
                "execution_count": int(n_exec),
                "inference_stats": {
                    "success": pair("request", n_ok),
                    "fail": {"count": 0, "ns": 0},
                    "queue": pair("queue", n_ok),
                    **{p: pair(p, n_inf) for p in compute},
                    "cache_hit": {"count": 0, "ns": 0},
                    "cache_miss": {"count": 0, "ns": 0},
                },
                "batch_stats": [
                    {
                        "batch_size": batch,
                        **{p: pair(p, n_exec, n_exec / n_inf if n_inf else 0.0) for p in compute},
                    }
                ],
            }
        )
    return {"model_stats": stats}


class ReplayTritonApi:
    """The replayed Triton's HTTP API (readiness, config, statistics) on 127.0.0.1, from its metrics."""

    def __init__(self, metrics: ReplayEndpoint) -> None:
        self.metrics = metrics
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="gpu-replay-api", daemon=True)

    def models(self) -> list[tuple[str, str]]:
        return sorted(_counts(parse(self.metrics.payload()), catalog.TRITON_INFERENCE_COUNT))

    def answer(self, method: str, path: str) -> tuple[int, object]:
        if method == "POST" and path == "/v2/repository/index":
            return 200, [
                {"name": m, "version": v, "state": "READY", "reason": REPLAY_REASON} for m, v in self.models()
            ]
        if method == "GET" and path in ("/v2/health/ready", "/v2/health/live"):
            return 200, {}
        if method == "GET" and path == "/v2/models/stats":
            return 200, model_stats(parse(self.metrics.payload()))
        parts = path.strip("/").split("/")
        if method == "GET" and len(parts) == 4 and parts[:2] == ["v2", "models"] and parts[3] == "config":
            name = unquote(parts[2])
            if name in {m for m, _ in self.models()}:
                return 200, {
                    "name": name,
                    "max_batch_size": REPLAY_MAX_BATCH.get(name, 0),
                    "dynamic_batching": {},
                }
        return 404, {"error": f"replay: no {path}"}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _reply(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                code, obj = api.answer(method, self.path.split("?", 1)[0])
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._reply("GET")

            def do_POST(self) -> None:
                self._reply("POST")

        return Handler

    def start(self) -> ReplayTritonApi:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class GpuReplay:
    """The replayed node: a dcgm-exporter and a Triton with GPU metrics (labelled replays)."""

    def __init__(
        self,
        scenario: str = "node2gpu",
        data_dir: Path | None = None,
        triton_gpu_metrics: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if data_dir is None:
            from tritonwatch.local.bundled import replay_dir

            data_dir = replay_dir()
        dcgm = Recording.load(
            data_dir / f"dcgm_{scenario}_1.txt", data_dir / f"dcgm_{scenario}_2.txt", REPLAY_MARK
        )
        # Without GPU metrics (tritonserver --allow-gpu-metrics=false) Triton keeps the gpu_uuid
        # labels of its model counters but serves no nv_gpu_* / nv_energy_consumption.
        drop = () if triton_gpu_metrics else _triton_gpu_families()
        triton = Recording.load(
            data_dir / f"triton_gpu_{scenario}_1.txt",
            data_dir / f"triton_gpu_{scenario}_2.txt",
            TRITON_REPLAY_MARK,
            drop,
        )
        self.dcgm = ReplayEndpoint(dcgm, clock)
        self.triton = ReplayEndpoint(triton, clock)
        self.api = ReplayTritonApi(self.triton)

    @property
    def dcgm_url(self) -> str:
        return self.dcgm.url

    @property
    def triton_metrics_url(self) -> str:
        return self.triton.url

    @property
    def triton_url(self) -> str:
        """The replayed Triton's HTTP API base (the sidecar's ``--triton``)."""
        return self.api.url

    def start(self) -> GpuReplay:
        self.dcgm.start()
        self.triton.start()
        self.api.start()
        return self

    def stop(self) -> None:
        self.api.stop()
        self.dcgm.stop()
        self.triton.stop()

    def __enter__(self) -> GpuReplay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_replay(scenario: str = "node2gpu", triton_gpu_metrics: bool = True) -> GpuReplay:
    """A started replayed node (``dcgm_url``, ``triton_metrics_url``, ``triton_url``, ``stop()``).

    The sidecar re-exports only GPUs its Triton uses: give a sidecar all three URLs (``--dcgm``,
    ``--triton-metrics``, ``--triton``); against another Triton the replayed GPUs are (rightly) left out.
    """
    return GpuReplay(scenario, triton_gpu_metrics=triton_gpu_metrics).start()


def _triton_gpu_families() -> tuple[str, ...]:
    return (
        catalog.TRITON_GPU_UTILIZATION,
        catalog.TRITON_GPU_MEMORY_USED,
        catalog.TRITON_GPU_MEMORY_TOTAL,
        catalog.TRITON_GPU_POWER,
        catalog.TRITON_ENERGY,
        catalog.TRITON_GPU_POWER_LIMIT,
    )


def main(argv: list[str] | None = None) -> int:
    node = start_replay()
    print(f"replayed dcgm-exporter (not a live GPU): {node.dcgm_url}", flush=True)
    print(f"replayed Triton metrics (not a live GPU): {node.triton_metrics_url}", flush=True)
    print(f"replayed Triton HTTP API (not a live GPU): {node.triton_url}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
