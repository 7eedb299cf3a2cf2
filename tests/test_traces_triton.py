"""The one OpenTelemetry end-to-end test: a real Triton tracing every 10th request over OTLP/HTTP.

Triton 2.51 crashed (signal 11, Triton issue #7795) with OpenTelemetry tracing at rate 1 under about
ten concurrent clients, and a fresh-clone run once lost this module's Triton mid-way under heavier
load than here. So OTel runs once, at rate 10, with four sleeper clients (the sleeper's instance
count: nothing queues) and 1,200 requests; the accuracy tests at rate 1 read trace files
(``test_traces_files.py``), and the batch distribution is held to the statistics API in
``test_sidecar_triton.py``. Should Triton still die, this test fails with its log tail.

The sidecar forwards every body to a capture server; the test computes the truth from the forwarded
bodies with plain JSON (each model span joined to its compute span): every traced request's phase
durations, their exact nearest-rank quantiles and bucket counts, which the sidecar must give exactly.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from conftest import MODEL_REPOSITORY, TEST_MODELS, need_pytriton
from support.otlp_capture import OtlpCapture
from support.sleeper import drive_sleeper, nearest_rank
from support.triton_guard import must_survive

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.procs import free_port, wait_until

pytestmark = pytest.mark.triton

TRACE_RATE = 10
SLEEPER = "sleeper"
CONCURRENCY = 4
PER_CLIENT = 300  # 1,200 requests -> 120 traced
MIX_MS = [10.0] * 85 + [25.0] * 13 + [100.0] * 2
PHASE_EVENTS = {  # Triton's span events around each phase (model span and compute span)
    "request": ("REQUEST_START", "REQUEST_END"),
    "queue": ("QUEUE_START", "COMPUTE_START"),
    "compute_infer": ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
}


@dataclass
class Request:
    request_id: str
    phases: dict[str, float]


def traced_requests(capture: OtlpCapture, model: str) -> dict[str, Request]:
    """spanId of each complete traced request of ``model`` -> its phases, from the forwarded bodies."""
    spans = [
        span
        for body in capture.bodies()
        for rs in json.loads(body).get("resourceSpans", [])
        for ss in rs.get("scopeSpans", [])
        for span in ss.get("spans", [])
    ]
    events = {s["spanId"]: {e["name"]: int(e["timeUnixNano"]) for e in s.get("events", [])} for s in spans}
    compute = {s["parentSpanId"]: events[s["spanId"]] for s in spans if s["name"] == "compute"}
    out = {}
    for s in spans:
        attrs = {a["key"]: a["value"] for a in s.get("attributes", [])}
        if attrs.get("triton.model_name", {}).get("stringValue") != model or s["spanId"] not in compute:
            continue
        ev = {**events[s["spanId"]], **compute[s["spanId"]]}
        phases = {p: (ev[b] - ev[a]) / 1e9 for p, (a, b) in PHASE_EVENTS.items()}
        out[s["spanId"]] = Request(attrs["triton.request_id"]["stringValue"], phases)
    return out


@dataclass
class Traced:
    triton: Any
    sidecar: Sidecar
    capture: OtlpCapture  # the operator's own tracing backend, as far as the sidecar knows

    def values(self) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
        text = requests.get(f"http://127.0.0.1:{self.sidecar.port}/metrics", timeout=5).text
        return {n: {frozenset(k): v for k, v in s.items()} for n, s in parse(text).items()}

    def trace_setting(self, **body: Any) -> dict[str, Any]:
        url = f"{self.triton.http_url}/v2/trace/setting"
        resp = requests.post(url, json=body, timeout=5) if body else requests.get(url, timeout=5)
        resp.raise_for_status()
        out: dict[str, Any] = resp.json()
        return out


def L(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


@pytest.fixture(scope="module")
def traced() -> Iterator[Traced]:
    need_pytriton()
    from tritonwatch.local.triton import LocalTriton

    capture = OtlpCapture().start()
    otlp = f"127.0.0.1:{free_port()}"
    triton = LocalTriton(
        [MODEL_REPOSITORY, TEST_MODELS], trace_to=f"http://{otlp}/v1/traces", trace_rate=TRACE_RATE
    )
    sidecar = Sidecar.local(
        triton.http_url,
        triton.metrics_url,
        otlp_listen=otlp,
        otlp_forward=capture.url,
        interval=1.0,
        window=10.0,
    ).start()
    try:
        triton.start()
        triton.wait_ready(120)
        yield Traced(triton, sidecar, capture)
    finally:
        try:
            triton.close()
        finally:
            sidecar.stop()
            capture.stop()


def test_otel_traces_give_the_exact_quantiles_of_the_traced_requests(
    traced: Traced, caplog: pytest.LogCaptureFixture
) -> None:
    base = traced.triton.http_url
    rng = random.Random(20260)
    delays = [[rng.choice(MIX_MS) for _ in range(PER_CLIENT)] for _ in range(CONCURRENCY)]
    sent = sum(len(d) for d in delays)
    infer = L(model=SLEEPER, version="1", phase="compute_infer")
    with must_survive(traced.triton):
        # Warm every instance up untraced: a python instance's first request takes tens of ms.
        traced.trace_setting(trace_level=["OFF"])
        drive_sleeper(base, [[1.0] * 5 for _ in range(CONCURRENCY)])
        traced.trace_setting(trace_level=["TIMESTAMPS"])
        drive_sleeper(base, delays)

        def settled() -> bool:
            # Triton exports in batches (every 5 s): wait until the capture and the sidecar agree on
            # the count and at least one in TRACE_RATE has come, every compute span joined.
            n = len(traced_requests(traced.capture, SLEEPER))
            count = traced.values().get(catalog.REQUEST_DURATION + "_count", {}).get(infer)
            return n >= sent // TRACE_RATE and count == n

        wait_until(settled, 30, "the traced requests to reach the sidecar and the capture", interval=0.5)
    values = traced.values()
    truth = traced_requests(traced.capture, SLEEPER)
    # Triton traces every TRACE_RATE-th request; the warm-ups (20) and the requests (1,200) are
    # multiples of it, so exactly one in TRACE_RATE of them is traced however warm-ups count.
    assert len(truth) == sent // TRACE_RATE, (len(truth), sent)
    assert values[catalog.LATENCY_SAMPLES][infer] == len(truth)
    for request in truth.values():  # never measured shorter than it slept
        asked = float(request.request_id.split("ms-")[0]) / 1000
        assert request.phases["compute_infer"] >= asked, request
    for phase in PHASE_EVENTS:
        key = L(model=SLEEPER, version="1", phase=phase)
        seconds = [r.phases[phase] for r in truth.values()]
        assert values[catalog.REQUEST_DURATION + "_count"][key] == len(truth)
        assert values[catalog.REQUEST_DURATION + "_sum"][key] == pytest.approx(sum(seconds), rel=1e-12)
        for le in catalog.DEFAULT_BUCKETS:
            got = values[catalog.REQUEST_DURATION + "_bucket"][key | L(le=repr(le))]
            assert got == sum(1 for s in seconds if s <= le), (phase, le)
        for q in catalog.QUANTILES:
            got = values[catalog.LATENCY_QUANTILE][key | L(quantile=q, source="trace")]
            assert got == nearest_rank(seconds, float(q)), (phase, q)
    assert values[catalog.TRACE_RATE][L()] == TRACE_RATE
    assert not values.get(catalog.SPANS_DROPPED), values.get(catalog.SPANS_DROPPED)

    # --set-trace-rate below 10 under OpenTelemetry is applied, exposed, and warned about. Set with
    # no request in flight (the crash needs load), and put back before anything else runs.
    other = Sidecar.local(
        base,
        traced.triton.metrics_url,
        otlp_listen="127.0.0.1:0",
        interval=1.0,
        window=10.0,
        set_trace_rate=5,
    )
    caplog.set_level(logging.INFO, logger="tritonwatch.exporters.traces")
    with must_survive(traced.triton, "while its trace rate was 5"):
        other.start()
        try:
            wait_until(lambda: traced.trace_setting()["trace_rate"] == "5", 10, "Triton's trace rate to be 5")

            def rate() -> float | None:
                text = requests.get(f"http://127.0.0.1:{other.port}/metrics", timeout=5).text
                return parse(text).get(catalog.TRACE_RATE, {}).get(())

            wait_until(lambda: rate() == 5.0, 15, "tritonwatch_trace_rate 5")
        finally:
            other.stop()
            traced.trace_setting(trace_rate=str(TRACE_RATE))
    assert "set Triton's trace rate to 5" in caplog.text
    assert "issue #7795" in caplog.text
