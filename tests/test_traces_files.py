"""Rate 1 through Triton's JSON trace files (mode=triton): the sidecar's quantiles are the exact ones.

OpenTelemetry at rate 1 crashed Triton 2.51 under load (Triton issue #7795); trace files never did
with this (non-decoupled) model, so the accuracy test runs here, at rate 1. The truth is computed from the rotated files themselves with
plain JSON: every traced request's phase durations from Triton's timestamps, and their nearest-rank
quantiles and bucket counts, which the sidecar must give exactly. Each request id names the delay
it asked for, and no request may have been measured shorter than it slept.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import TEST_MODELS, need_pytriton
from support.sleeper import drive_sleeper, nearest_rank
from support.triton_guard import must_survive

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.procs import wait_until

pytestmark = pytest.mark.triton

MIX_MS = [10.0] * 85 + [25.0] * 13 + [100.0] * 2
LOG_FREQUENCY = 50
PHASE_EVENTS = {  # Triton's documented timestamps around each phase
    "request": ("REQUEST_START", "REQUEST_END"),
    "queue": ("QUEUE_START", "COMPUTE_START"),
    "compute_infer": ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
}


@dataclass
class Traced:
    request_id: str
    asked: float  # seconds the request asked the sleeper to sleep
    phases: dict[str, float]  # seconds


def file_requests(folder: Path) -> list[Traced]:
    """Every sleeper request in the complete rotated files ``trace.json.N``, read with plain JSON."""
    out = []
    for path in sorted(folder.glob("trace.json.*")):
        by_id: dict[Any, dict[str, Any]] = {}
        for entry in json.loads(path.read_text()):
            t = by_id.setdefault(entry["id"], {"events": {}})
            if "model_name" in entry:
                t["model"], t["request_id"] = entry["model_name"], entry["request_id"]
            for ts in entry.get("timestamps", []):
                t["events"].setdefault(ts["name"], ts["ns"])
        for t in by_id.values():
            if t.get("model") != "sleeper":
                continue
            ev = t["events"]
            phases = {p: (ev[b] - ev[a]) / 1e9 for p, (a, b) in PHASE_EVENTS.items()}
            out.append(Traced(t["request_id"], float(t["request_id"].split("ms-")[0]) / 1000, phases))
    return out


@dataclass
class FileTraced:
    triton: Any
    path: Path  # Triton writes PATH.0, PATH.1, ... (log-frequency rotation)


@pytest.fixture(scope="module")
def file_traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FileTraced]:
    need_pytriton()
    from tritonwatch.local.triton import LocalTriton

    folder = tmp_path_factory.mktemp("traces")
    path = folder / "trace.json"
    with LocalTriton([TEST_MODELS], trace_file=path, trace_rate=1) as triton:
        yield FileTraced(triton, path)


def scrape(port: int) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {n: {frozenset(k): v for k, v in s.items()} for n, s in parse(text).items()}


def test_rate_1_trace_files_give_the_exact_quantiles(file_traced: FileTraced) -> None:
    triton, path = file_traced.triton, file_traced.path
    base = triton.http_url
    setting = f"{base}/v2/trace/setting"
    with must_survive(triton):
        requests.post(setting, json={"trace_level": ["OFF"]}, timeout=5).raise_for_status()
        drive_sleeper(base, [[1.0] * 4 for _ in range(4)], timeout=120)  # warm the instances up, untraced
        requests.post(
            setting, json={"trace_level": ["TIMESTAMPS"], "log_frequency": str(LOG_FREQUENCY)}, timeout=5
        ).raise_for_status()
        sidecar = Sidecar.local(
            base, triton.metrics_url, interval=1.0, window=10.0, trace_file=str(path)
        ).start()
        try:
            rng = random.Random(7)
            drive_sleeper(base, [[rng.choice(MIX_MS) for _ in range(100)] for _ in range(4)], timeout=120)
            # 400 traces at log-frequency 50: eight complete files.
            wait_until(lambda: len(file_requests(path.parent)) == 400, 30, "Triton to write 8 trace files")
            key = frozenset({("model", "sleeper"), ("version", "1"), ("phase", "compute_infer")})
            wait_until(
                lambda: scrape(sidecar.port).get(catalog.LATENCY_SAMPLES, {}).get(key) == 400,
                15,
                "the sidecar to read them all",
            )
            values = scrape(sidecar.port)
        finally:
            sidecar.stop()
    traced = file_requests(path.parent)
    assert sorted(t.request_id for t in traced) == sorted(f"{ms:g}ms-{k}-{i}" for k, i, ms in _sent())
    for t in traced:  # a request is never measured shorter than it slept
        assert t.phases["compute_infer"] >= t.asked, t
    for phase in PHASE_EVENTS:
        key = frozenset({("model", "sleeper"), ("version", "1"), ("phase", phase)})
        seconds = [t.phases[phase] for t in traced]
        assert values[catalog.REQUEST_DURATION + "_count"][key] == 400
        assert values[catalog.REQUEST_DURATION + "_sum"][key] == pytest.approx(sum(seconds), rel=1e-12)
        for le in catalog.DEFAULT_BUCKETS:
            got = values[catalog.REQUEST_DURATION + "_bucket"][key | {("le", repr(le))}]
            assert got == sum(1 for s in seconds if s <= le), (phase, le)
        for q in catalog.QUANTILES:
            got = values[catalog.LATENCY_QUANTILE][key | {("quantile", q), ("source", "trace")}]
            assert got == nearest_rank(seconds, float(q)), (phase, q)


def _sent() -> list[tuple[int, int, float]]:
    rng = random.Random(7)
    delays = [[rng.choice(MIX_MS) for _ in range(100)] for _ in range(4)]
    return [(k, i, ms) for k, row in enumerate(delays) for i, ms in enumerate(row)]


def test_set_trace_rate_is_applied_logged_and_exposed(
    file_traced: FileTraced, caplog: pytest.LogCaptureFixture
) -> None:
    triton = file_traced.triton
    url = f"{triton.http_url}/v2/trace/setting"
    sidecar = Sidecar.local(triton.http_url, triton.metrics_url, interval=1.0, window=10.0, set_trace_rate=5)
    caplog.set_level(logging.INFO, logger="tritonwatch.exporters.traces")
    with must_survive(triton):
        sidecar.start()
        try:
            wait_until(
                lambda: requests.get(url, timeout=5).json()["trace_rate"] == "5", 10, "Triton's trace rate 5"
            )
            wait_until(
                lambda: scrape(sidecar.port).get(catalog.TRACE_RATE, {}).get(frozenset()) == 5.0,
                15,
                "tritonwatch_trace_rate 5",
            )
        finally:
            sidecar.stop()
            requests.post(url, json={"trace_rate": "1"}, timeout=5).raise_for_status()
    assert "set Triton's trace rate to 5 (one request in 5 traced; mode triton)" in caplog.text
    assert "issue #7795" not in caplog.text  # the warning is OTel's (#7795): none for trace files
