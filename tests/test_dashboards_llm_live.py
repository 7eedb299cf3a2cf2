"""Every query of the LLM dashboard on live LLM data in a real Prometheus.

Three sources, each through a real ``tritonwatch sidecar`` process that Prometheus scrapes with its
Triton: the real local Triton streaming ``tests/models/streamer`` (TTFT and inter-token histograms
from rate-1 trace files, tokens/s from traced responses), and a /metrics endpoint serving the vLLM
and TensorRT-LLM backends' published samples (tests/support/llm_payloads.py) advanced once a second
(token counters, vLLM's own histograms, KV cache, running and waiting requests, preemptions). A
Prometheus of each stack (side by side, scraping the same sources) answers every panel query: each
must parse and return series there, and the values shown must be the sources' values.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from conftest import TEST_MODELS
from support import stacks
from support.llm_payloads import TRT_LLM_KEY, VLLM_KEY, trt_llm_scrape, vllm_scrape
from support.sidecar import sidecar_argv
from support.static_endpoint import StaticEndpoint
from support.streaming import open_stream
from support.triton_guard import again_after_a_crash, crash_is_named

from tritonwatch.dashboards import promcheck
from tritonwatch.dashboards.generate import render_all
from tritonwatch.errors import TritonwatchError
from tritonwatch.local.procs import Managed, free_port, wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

pytestmark = [
    pytest.mark.triton,
    pytest.mark.prometheus,
    pytest.mark.needs("prometheus"),
]

DASHBOARD = "tritonwatch-llm.json"
STREAMER = ("streamer", "1")
BUILTINS = {
    "__rate_interval": "15s",
    "__interval": "2s",
    "__interval_ms": "2000",
    "__range": "2m",
    "__range_s": "120",
    "__range_ms": "120000",
}


class Ticker(threading.Thread):
    """Advances the backends' payload once a second, as a serving vLLM/TensorRT-LLM would."""

    def __init__(self, endpoint: StaticEndpoint) -> None:
        super().__init__(daemon=True)
        self.endpoint = endpoint
        self.stop = threading.Event()

    def run(self) -> None:
        step = 1
        while not self.stop.wait(1.0):
            step += 1
            self.endpoint.payload = (vllm_scrape(step) + trt_llm_scrape(step)).encode()


class Streamer(threading.Thread):
    """One client streaming requests (4 tokens, 100 ms to the first, 40 ms apart) until stopped.

    A failed request is recorded, not fatal: the test reports it instead of finding the streamer's
    values gone without a word.
    """

    def __init__(self, base: str) -> None:
        super().__init__(daemon=True)
        self.url = f"{base}/v2/models/streamer/generate_stream"
        self.stop = threading.Event()
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                with open_stream(self.url, {"tokens": 4, "ttft_ms": 100, "gap_ms": 40}) as r:
                    for _line in r.iter_lines():
                        pass
            except requests.RequestException as exc:
                self.errors.append(repr(exc)[:300])
                self.stop.wait(0.5)


@dataclass
class Stack:
    prometheus: dict[str, Prometheus]  # one per stack, by its name
    triton: Any
    streamer: Streamer


@contextlib.contextmanager
def live_stack(tmp: Path, every_stack: dict[str, stacks.Stack]) -> Iterator[Stack]:
    from tritonwatch.local.triton import LocalTriton

    traces = tmp / "traces"
    traces.mkdir(parents=True)
    with contextlib.ExitStack() as stack:
        triton = LocalTriton([TEST_MODELS], trace_file=traces / "trace.json", trace_rate=1)
        stack.callback(triton.close)
        triton.start()
        triton.wait_ready(120)
        requests.post(f"{triton.http_url}/v2/trace/setting", json={"log_frequency": "5"}, timeout=5)
        backends = StaticEndpoint((vllm_scrape(1) + trt_llm_scrape(1)).encode()).start()
        stack.callback(backends.stop)
        ticker = Ticker(backends)
        ticker.start()
        stack.callback(ticker.stop.set)
        ports = free_port(), free_port()
        window = ("--window", "15", "--quantile-window", "60")
        streaming = Managed(
            "sidecar-streaming",
            sidecar_argv(
                triton.http_url,
                triton.metrics_url,
                ports[0],
                *window,
                "--trace-file",
                str(traces / "trace.json"),
            ),
            log_path=tmp / "sidecar-streaming.log",
        )
        stack.callback(streaming.stop)
        # The backends' endpoint stands for a Triton with no HTTP API: only its /metrics is scraped.
        backend = Managed(
            "sidecar-backends",
            sidecar_argv(f"http://127.0.0.1:{free_port()}", backends.url, ports[1], *window),
            log_path=tmp / "sidecar-backends.log",
        )
        stack.callback(backend.stop)
        triton_addr = urlsplit(triton.metrics_url).netloc
        config = prometheus_config(
            [
                ScrapeTarget("triton-streaming", triton_addr),
                ScrapeTarget("triton-llm-backends", f"127.0.0.1:{backends.port}"),
                ScrapeTarget("tritonwatch-streaming", f"127.0.0.1:{ports[0]}"),
                ScrapeTarget("tritonwatch-backends", f"127.0.0.1:{ports[1]}"),
            ]
        )
        proms = stacks.prometheus_each(every_stack, tmp, config, stack)
        streamer = Streamer(triton.http_url)
        streamer.start()
        stack.callback(streamer.stop.set)
        yield Stack(proms, triton, streamer)


def test_every_llm_panel_query_parses_and_shows_the_sources_values(
    tmp_path: Path, every_stack: dict[str, stacks.Stack]
) -> None:
    def panels_run(tmp: Path) -> None:
        with (
            live_stack(tmp, every_stack) as live,
            crash_is_named(live.triton, "while the LLM panels were queried"),
        ):
            for name, prom in live.prometheus.items():
                try:
                    check_panels(live, prom)
                except AssertionError as e:
                    raise AssertionError(f"on {name}'s Prometheus: {e}") from e

    again_after_a_crash(panels_run, tmp_path)


def check_panels(live: Stack, prom: Prometheus) -> None:
    dash = json.loads(render_all()[DASHBOARD])
    queries = promcheck.collect({DASHBOARD: dash})
    variables = {**promcheck.dashboard_variables([dash]), **BUILTINS}
    results: list[promcheck.Result] = []

    def value(key: str, model: tuple[str, str]) -> float | None:
        r = next(r for r in results if r.query.key == f"{DASHBOARD} / {key}")
        return r.value(model=model[0], version=model[1])

    def check() -> None:
        """The sources' own values: gauges as published, rates from the advance per second."""
        assert value("KV cache in use / A", VLLM_KEY) == 0.25
        assert value("KV cache in use / A", TRT_LLM_KEY) == 0.5
        assert value("Requests running and waiting / A", VLLM_KEY) == 2
        assert value("Requests running and waiting / B", TRT_LLM_KEY) == 2
        # 48 generated tokens a second for vLLM, 400 for TensorRT-LLM (one advance a second, give or
        # take the ticker's and the scrapes' jitter); the streamer's 4 tokens per ~230 ms.
        vllm, trt = (
            value("Generated tokens / s / A", VLLM_KEY),
            value("Generated tokens / s / A", TRT_LLM_KEY),
        )
        assert vllm is not None and 0.8 * 48 < vllm < 1.2 * 48, vllm
        assert trt is not None and 0.8 * 400 < trt < 1.2 * 400, trt
        streamed = value("Generated tokens / s / A", STREAMER)
        assert streamed is not None and 10 < streamed < 20, streamed
        # The streamer's first tokens take 100 ms, its later ones 40 ms apart: the p99s fall in the
        # 100-250 ms and 25-50 ms buckets of the trace histogram.
        ttft, itl = (
            value("p99 time to first token / A", STREAMER),
            value("p99 inter-token latency / A", STREAMER),
        )
        assert ttft is not None and 0.1 < ttft <= 0.25, ttft
        assert itl is not None and 0.025 < itl <= 0.05, itl

    def ready() -> bool:
        results[:] = promcheck.run(prom.url, queries, variables)
        if any(r.status != 200 for r in results):
            return True  # a parse error does not heal
        if not all(r.has_data for r in results):
            return False
        try:
            check()
        except AssertionError:
            return False  # rate windows still filling
        return True

    with contextlib.suppress(TritonwatchError):
        wait_until(ready, 120, "every LLM panel query to return the sources' values", interval=3)
    failures = [f"{r.query.key}: {r.status} {r.error}" for r in results if r.status != 200]
    assert not failures, "\n".join(failures)
    empty = [f"{r.query.key}: {r.promql}" for r in results if not r.has_data]
    assert not empty, "\n".join(empty)
    assert len(results) >= 16
    assert not live.streamer.errors, live.streamer.errors[:3]
    check()
