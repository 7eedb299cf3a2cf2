"""Streaming requests from real Triton 2.51 traces of tests/models/streamer (tests/data/record_llm_traces.py).

Per request, Triton records an INFER_RESPONSE_COMPLETE per response: on the root InferRequest span
over OpenTelemetry, among the request's timestamps in trace files. The sidecar's time to first token
is the first of them less REQUEST_START, its inter-token gaps the differences between them; both are
held here to an independent reading of the recorded JSON, exactly.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from support.fake_triton import FakeTriton

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.llm import LlmTraces
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.exporters.traces.join import SpanJoiner, trace_file_timings
from tritonwatch.exporters.traces.otlp import decode_request
from tritonwatch.exporters.traces.timing import RequestTiming
from tritonwatch.local.procs import wait_until

DATA = Path(__file__).resolve().parent / "data"
# (tokens, time to first token ms, gap ms) the recorder asked, in order (record_llm_traces.STREAMS).
STREAMS = ((3, 50.0, 20.0), (4, 80.0, 30.0), (2, 120.0, 10.0), (5, 30.0, 40.0))


def otlp_truth() -> list[tuple[float, ...]]:
    """Per request, in trace order: seconds from REQUEST_START to each response, read from the raw JSON."""
    starts: dict[str, int] = {}  # root span id -> REQUEST_START of its model span
    responses: dict[str, list[int]] = {}
    order: list[str] = []
    for body in json.loads((DATA / "otlp_streamer.json").read_text()):
        for rs in body["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    events = span.get("events", [])
                    if span["name"] == "streamer":
                        starts[span["parentSpanId"]] = next(
                            int(e["timeUnixNano"]) for e in events if e["name"] == "REQUEST_START"
                        )
                    if span["name"] == "InferRequest":
                        order.append(span["spanId"])
                        responses[span["spanId"]] = [
                            int(e["timeUnixNano"]) for e in events if e["name"] == "INFER_RESPONSE_COMPLETE"
                        ]
    return [tuple((ns - starts[r]) / 1e9 for ns in responses[r]) for r in order]


def file_truth() -> list[tuple[float, ...]]:
    out = []
    for entries in json.loads((DATA / "trace_file_streamer.json").read_text()):
        by_id: dict[int, list[tuple[str, int]]] = {}
        for e in entries:
            for ts in e.get("timestamps", []):
                by_id.setdefault(e["id"], []).append((ts["name"], ts["ns"]))
        for _tid, stamps in sorted(by_id.items()):
            start = next(ns for name, ns in stamps if name == "REQUEST_START")
            out.append(tuple((ns - start) / 1e9 for name, ns in stamps if name == "INFER_RESPONSE_COMPLETE"))
    return out


def otlp_spans() -> list[list]:  # type: ignore[type-arg]
    return [decode_request(b) for b in json.loads((DATA / "otlp_streamer.json").read_text())]


def test_recordings_have_one_response_per_token_and_the_asked_timing() -> None:
    for truth in (otlp_truth(), file_truth()):
        assert [len(r) for r in truth] == [n for n, _, _ in STREAMS]
        for responses, (_n, ttft, gap) in zip(truth, STREAMS, strict=True):
            assert ttft / 1000 <= responses[0] < ttft / 1000 + 0.01
            for a, b in zip(responses, responses[1:], strict=False):
                assert gap / 1000 <= b - a < gap / 1000 + 0.01


def test_otlp_root_spans_join_their_model_spans_in_either_order() -> None:
    truth = otlp_truth()
    spans = [s for batch in otlp_spans() for s in batch]
    roots = [s for s in spans if s.name == "InferRequest"]
    others = [s for s in spans if s.name != "InferRequest"]
    for batches in ([spans], [others, roots], [roots, others]):
        joiner = SpanJoiner()
        timings: list[RequestTiming] = []
        for i, batch in enumerate(batches):
            timings += joiner.add(batch, now=1000.0 + i)
        got = [t.responses for t in timings if t.responses]
        assert got == truth
        assert all(t.model == "streamer" and t.version == "1" for t in timings)
        assert sum(1 for t in timings if t.phases) == len(STREAMS)  # latency phases counted once


def test_trace_files_give_every_response() -> None:
    got = [
        t.responses
        for entries in json.loads((DATA / "trace_file_streamer.json").read_text())
        for t in trace_file_timings(entries)
    ]
    assert got == file_truth()


def nearest(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = 0
    while k + 1 < q * len(ordered) - 1e-9:
        k += 1
    return ordered[k]


def test_quantiles_are_nearest_rank_over_the_traced_requests() -> None:
    truth = file_truth()
    traces = LlmTraces(window=600.0, buckets=catalog.DEFAULT_BUCKETS)
    one_response = RequestTiming("classifier", "1", "t", "", {"request": 0.01}, (0.01,))
    traces.record([one_response], now=1000.0)
    traces.record(
        [RequestTiming("streamer", "1", str(i), "", {}, r) for i, r in enumerate(truth)], now=1000.0
    )
    keys = traces.store.keys(1000.0)
    assert {k[0] for k in keys} == {"streamer"}  # a model never seen streaming has no LLM latency
    ttfts = [r[0] for r in truth]
    gaps = [b - a for r in truth for a, b in zip(r, r[1:], strict=False)]
    for measure, values in (("time_to_first_token", ttfts), ("inter_token", gaps)):
        q = traces.store.quantiles(("streamer", "1", measure), 1000.0, catalog.LLM_QUANTILES)
        assert q is not None and q.count == len(values)
        assert q.values == {x: nearest(values, float(x)) for x in catalog.LLM_QUANTILES}
    assert traces.mean_tokens(1000.0) == {("streamer", "1"): sum(len(r) for r in truth) / len(truth)}


def test_sidecar_receives_otlp_and_serves_ttft_and_itl() -> None:
    truth = otlp_truth()
    # Triton's API lists the model (the receiver takes spans of Triton's models only); no /metrics:
    # the OTLP receiver alone feeds the LLM part.
    fake = FakeTriton()
    fake.index = [{"name": "streamer", "state": "READY", "version": "1"}]
    fake.start()
    sidecar = Sidecar.local(fake.base_url, "http://127.0.0.1:9/metrics", otlp_listen="127.0.0.1:0").start()
    try:
        wait_until(lambda: bool(sidecar.api.state.ready), 10, "the repository index read")
        receiver = next(s for s in sidecar.sources if type(s).__name__ == "OtlpReceiver")
        for body in json.loads((DATA / "otlp_streamer.json").read_text()):
            req = urllib.request.Request(
                receiver.url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            urllib.request.urlopen(req, timeout=5).close()
        with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as r:
            got = parse(r.read())
    finally:
        sidecar.stop()
        fake.stop()
    key = (("model", "streamer"), ("version", "1"))
    assert got[f"{catalog.LLM_TTFT}_count"][key] == len(truth)
    assert got[f"{catalog.LLM_ITL}_count"][key] == sum(len(r) - 1 for r in truth)
    ttfts = [r[0] for r in truth]
    p50 = got[catalog.LLM_TTFT_QUANTILE][(*key, ("quantile", "0.5"), ("source", "trace"))]
    assert p50 == nearest(ttfts, 0.5)
