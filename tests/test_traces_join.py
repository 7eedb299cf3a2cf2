"""Joining Triton's real spans into per-request phase durations, across batches, once per request."""

from __future__ import annotations

import json
from typing import Any

from conftest import DATA

from tritonwatch.exporters.traces.join import SpanJoiner, trace_file_timings
from tritonwatch.exporters.traces.otlp import Span, decode_request
from tritonwatch.exporters.traces.timing import PHASE_EVENTS, phase_durations


def recorded_spans() -> list[Span]:
    bodies: list[Any] = json.loads((DATA / "otlp_sleeper.json").read_text())
    return [s for b in bodies for s in decode_request(b)]


def test_phases_follow_the_event_pairs() -> None:
    events = {
        "REQUEST_START": 100,
        "QUEUE_START": 110,
        "COMPUTE_START": 150,
        "COMPUTE_INPUT_END": 160,
        "COMPUTE_OUTPUT_START": 5160,
        "COMPUTE_END": 5170,
        "REQUEST_END": 5200,
    }
    assert phase_durations(events) == {
        "request": 5100e-9,
        "queue": 40e-9,
        "compute_input": 10e-9,
        "compute_infer": 5000e-9,
        "compute_output": 10e-9,
    }
    assert set(PHASE_EVENTS) == {"request", "queue", "compute_input", "compute_infer", "compute_output"}
    # A cache hit has no compute events; a clock running backwards gives no phase, not a negative one.
    assert phase_durations({"REQUEST_START": 10, "QUEUE_START": 11, "REQUEST_END": 30}) == {"request": 20e-9}
    assert phase_durations({"REQUEST_START": 30, "REQUEST_END": 10}) == {}


def test_one_timing_per_traced_request_with_the_slept_time() -> None:
    timings = SpanJoiner().add(recorded_spans(), now=0.0)
    assert len(timings) == 17
    assert len({t.trace_id for t in timings}) == 17
    by_request = {t.request_id: t for t in timings}
    slept = by_request["sleep-50-10"]
    assert (slept.model, slept.version) == ("sleeper", "1")
    assert set(slept.phases) == set(PHASE_EVENTS)
    assert 0.050 <= slept.phases["compute_infer"] < 0.055
    assert slept.phases["request"] >= slept.phases["compute_infer"]
    hit = by_request["fraud-0-1"]  # the cache hit: request only
    assert set(hit.phases) == {"request"}


def test_a_compute_span_waits_for_a_parent_in_a_later_batch() -> None:
    spans = recorded_spans()
    children = [s for s in spans if s.name == "compute"]
    others = [s for s in spans if s.name != "compute"]
    joiner = SpanJoiner()
    assert joiner.add(children, now=0.0) == []
    assert joiner.pending == len(children) == 14
    timings = joiner.add(others, now=1.0)
    assert joiner.pending == 0
    assert sum(1 for t in timings if "compute_infer" in t.phases) == 14
    assert joiner.stats.dropped == {}


def test_a_resent_batch_counts_nothing_twice() -> None:
    spans = recorded_spans()
    joiner = SpanJoiner()
    assert len(joiner.add(spans, now=0.0)) == 17
    assert joiner.add(spans, now=1.0) == []
    assert joiner.stats.dropped["duplicate"] == 17
    assert joiner.pending == 0


def test_orphans_expire_and_the_pending_map_is_bounded() -> None:
    children = [s for s in recorded_spans() if s.name == "compute"]
    joiner = SpanJoiner(max_pending=5, ttl=10.0)
    joiner.add(children, now=0.0)
    assert joiner.pending == 5
    assert joiner.stats.dropped == {"pending_full": 9}
    joiner.expire(now=5.0)
    assert joiner.pending == 5
    joiner.expire(now=10.5)
    assert joiner.pending == 0
    assert joiner.stats.dropped == {"pending_full": 9, "orphan": 5}


def test_trace_files_give_the_same_requests() -> None:
    files: list[Any] = json.loads((DATA / "trace_file_sleeper.json").read_text())
    timings = [t for f in files for t in trace_file_timings(f)]
    # The same 17 requests; Triton writes a rotation once it holds 4 traces, so the 17th is not in a file.
    otlp = [t.request_id for t in SpanJoiner().add(recorded_spans(), now=0.0)]
    assert [t.request_id for t in timings] == otlp[:16]
    slept = next(t for t in timings if t.request_id == "sleep-50-10")
    assert 0.050 <= slept.phases["compute_infer"] < 0.055
