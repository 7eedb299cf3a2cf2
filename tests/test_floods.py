"""Floods and size: payload cap (plain and gzip-inflated), model cardinality cap, each counted."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.fake_triton import FakeTriton, fake_triton
from support.harness import models_served, poll, running_sidecar, value

from tritonwatch import catalog
from tritonwatch.expfmt import Samples

FAST = ["--interval", "0.05", "--timeout", "0.5", "--window", "30"]


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        yield server


def too_large(s: Samples) -> float:
    return value(s, catalog.SCRAPE_ERRORS, target="triton", reason="too_large") or 0.0


@pytest.mark.parametrize("mode", ["padding", "gzip_bomb"])
def test_payload_over_the_cap_is_refused_and_counted(fake: FakeTriton, mode: str) -> None:
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, *FAST]
    with running_sidecar([*argv, "--max-payload-bytes", "100000"], clock=fake.clock) as sc:
        poll(
            sc.port, lambda s: models_served(s) == {"fail_always", "fraud_detector"}, "normal payloads served"
        )
        if mode == "padding":
            fake.padding = 150_000  # a valid payload, only too big
        else:
            fake.metrics_mode = "gzip_bomb"
        down = poll(
            sc.port,
            lambda s: value(s, catalog.UP, target="triton") == 0.0 and too_large(s) >= 3,
            "oversized payloads refused",
        )
        assert not down.get(catalog.REQUEST_RATE)
        fake.padding = 0
        fake.metrics_mode = "ok"
        poll(sc.port, lambda s: models_served(s) == {"fail_always", "fraud_detector"}, "back under the cap")


def test_models_over_the_cap_are_dropped_and_counted() -> None:
    fake = FakeTriton(clones=30).start()  # 32 models
    try:
        argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, *FAST, "--max-models", "5"]
        with running_sidecar(argv, clock=fake.clock) as sc:
            s = poll(
                sc.port,
                lambda s: len(models_served(s)) == 5 and (value(s, catalog.MODELS_DROPPED) or 0) >= 27 * 3,
                "5 models served, the other 27 counted as dropped",
            )
            # the first five by name, and the same five on every scrape (no churn between them)
            assert models_served(s) == {"fail_always", "fraud_detector", "m000", "m001", "m002"}
            dropped = value(s, catalog.MODELS_DROPPED) or 0
            assert dropped % 27 == 0
            for name in (catalog.LATENCY, catalog.ERROR_RATIO, catalog.PENDING_REQUESTS):
                assert {dict(ls)["model"] for ls in s.get(name, {})} <= models_served(s)
            again = poll(
                sc.port, lambda s2: (value(s2, catalog.MODELS_DROPPED) or 0) > dropped, "more scrapes"
            )
            assert models_served(again) == models_served(s)
    finally:
        fake.stop()


def test_under_the_cap_nothing_is_dropped(fake: FakeTriton) -> None:
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, *FAST, "--max-models", "2"]
    with running_sidecar(argv, clock=fake.clock) as sc:
        s = poll(sc.port, lambda s: len(models_served(s)) == 2, "both models")
        assert value(s, catalog.MODELS_DROPPED) == 0.0


# --- span flood against the OTLP receiver (exporters/traces.py) ------------------------------------
def _compute_span(i: int) -> dict[str, object]:
    """A compute span whose model span never comes: it waits in the joiner until pushed out."""
    return {
        "traceId": f"{i:032x}",
        "spanId": f"{i + 1:016x}",
        "parentSpanId": f"{i + 2**40:016x}",
        "name": "compute",
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "5000",
        "events": [
            {"name": n, "timeUnixNano": str(t)}
            for n, t in (
                ("COMPUTE_START", 1000),
                ("COMPUTE_INPUT_END", 2000),
                ("COMPUTE_OUTPUT_START", 4000),
                ("COMPUTE_END", 5000),
            )
        ],
        "attributes": [{"key": "padding", "value": {"stringValue": "x" * 200}}],
    }


def _export(spans: list[dict[str, object]]) -> bytes:
    import json

    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}).encode()


@pytest.mark.slow  # a flood big enough to show the bound: over 4 s
def test_span_flood_keeps_memory_bounded_and_counts_the_dropped() -> None:
    import gc
    import tracemalloc

    import requests

    import tritonwatch.exporters.traces as traces
    from tritonwatch.exporters.traces.join import SpanJoiner

    cap, batch, batches = 500, 250, 40  # 10 000 orphan spans against room for 500
    receiver = traces.OtlpReceiver(
        "127.0.0.1:0", traces.LatencyPart(300.0), joiner=SpanJoiner(max_pending=cap, ttl=3600.0)
    )
    receiver.start()
    tracemalloc.start()
    try:
        session = requests.Session()
        sizes = []
        for b in range(batches):
            body = _export([_compute_span(b * batch + i) for i in range(batch)])
            resp = session.post(
                receiver.url, data=body, headers={"Content-Type": "application/json"}, timeout=10
            )
            assert resp.status_code == 200
            if b in (4, batches - 1):  # once the cap is reached, and at the end
                gc.collect()
                sizes.append(tracemalloc.get_traced_memory()[0])
        assert receiver.joiner.pending == cap
        dropped = {dict(ls).get("reason"): v for fam in receiver.collect() for ls, v in _family_samples(fam)}
        assert dropped.get("pending_full") == batch * batches - cap
        growth = sizes[1] - sizes[0]
        # 8 750 more spans of ~1 KiB each went through: unbounded, that would be ~9 MiB more
        assert growth < 1.5 * 2**20, f"memory grew {growth / 2**20:.1f} MiB under the flood"
    finally:
        tracemalloc.stop()
        receiver.stop()


def _family_samples(fam: object) -> list[tuple[tuple[tuple[str, str], ...], float]]:
    return [
        (tuple(s.labels.items()), s.value)
        for s in getattr(fam, "samples", [])
        if s.name.endswith("dropped_total")
    ]


def test_span_body_over_the_cap_is_refused() -> None:
    import requests

    import tritonwatch.exporters.traces as traces

    receiver = traces.OtlpReceiver("127.0.0.1:0", traces.LatencyPart(300.0), max_body=10_000)
    receiver.start()
    try:
        body = _export([_compute_span(i) for i in range(50)])  # ~25 KB
        assert len(body) > 10_000
        resp = requests.post(
            receiver.url, data=body, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert resp.status_code == 413
        assert receiver.joiner.pending == 0
        received, dropped = receiver.counters.snapshot()
        assert received == 0 and dropped == {"too_large": 1}
    finally:
        receiver.stop()
