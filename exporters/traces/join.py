"""Turn Triton's per-request trace timestamps into phase durations, from OTLP spans or trace files.

Triton 2.51 sends three spans per traced request, one ``traceId``: a root ``InferRequest``, a model
span (attributes ``triton.model_name``, ``triton.model_version``; events REQUEST_START, QUEUE_START,
REQUEST_END) and, unless the response came from the cache, a ``compute`` child of the model span
(COMPUTE_START, COMPUTE_INPUT_END, COMPUTE_OUTPUT_START, COMPUTE_END). Spans are exported when they
end and the compute span ends first, so a compute span can arrive a batch before its parent; it waits
in a bounded pending map until the parent comes or it expires. A model span completes its request:
every compute child has ended (and arrived) by then.

    joiner = SpanJoiner()
    timings = joiner.add(decode(body), now)   # [RequestTiming(model="sleeper", version="1",
                                              #   phases={"request": 0.0052, "queue": 1.1e-05, ...}), ...]
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonwatch.exporters.snapshot import Feed
from tritonwatch.exporters.source import Updates
from tritonwatch.exporters.traces.otlp import RESPONSE_EVENT, Span
from tritonwatch.exporters.traces.timing import RequestTiming, Timings, phase_durations, segments

MODEL_NAME_ATTR = "triton.model_name"
MODEL_VERSION_ATTR = "triton.model_version"
REQUEST_ID_ATTR = "triton.request_id"


@dataclass
class JoinStats:
    """Spans that could not be used, by reason (the ``reason`` label of the dropped counter)."""

    dropped: dict[str, int] = field(default_factory=dict)

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n


class SpanJoiner:
    """Joins compute spans to their model spans; bounded (``max_pending``) and expiring (``ttl`` s).

    Thread-safe: the receiver's handler threads call ``add`` concurrently.
    """

    def __init__(self, max_pending: int = 100_000, ttl: float = 60.0) -> None:
        self.max_pending = max_pending
        self.ttl = ttl
        self.stats = JoinStats()
        self._lock = threading.Lock()
        # parent span id -> (arrived at, compute span); insertion order = arrival order, for expiry.
        self._pending: OrderedDict[str, tuple[float, Span]] = OrderedDict()
        # Model span ids already counted: an exporter that retries a batch must not count a request twice.
        self._seen: OrderedDict[str, None] = OrderedDict()
        # The root InferRequest span holds a request's INFER_RESPONSE_COMPLETE events (one per response
        # of a streaming model) and ends after its model span: model spans wait here for their root
        # (root span id -> arrived at, model, version, request id, REQUEST_START ns), and a root that
        # comes first waits for its model span (root span id -> arrived at, response times).
        self._awaiting_root: OrderedDict[str, tuple[float, str, str, str, int]] = OrderedDict()
        self._roots: OrderedDict[str, tuple[float, tuple[int, ...]]] = OrderedDict()

    @property
    def pending(self) -> int:
        return len(self._pending)

    def expire(self, now: float) -> None:
        with self._lock:
            self._expire(now)

    def _expire(self, now: float) -> None:
        # A root that never came (or a model span): that request has no response times.
        while self._awaiting_root and now - next(iter(self._awaiting_root.values()))[0] > self.ttl:
            self._awaiting_root.popitem(last=False)
        while self._roots and now - next(iter(self._roots.values()))[0] > self.ttl:
            self._roots.popitem(last=False)
        while self._pending:
            key, (at, _span) = next(iter(self._pending.items()))
            if now - at <= self.ttl:
                break
            del self._pending[key]
            self.stats.drop("orphan")

    def add(self, spans: Iterable[Span], now: float) -> list[RequestTiming]:
        spans = list(spans)
        out: list[RequestTiming] = []
        with self._lock:
            self._expire(now)
            # Children first, so a parent later in the same batch finds them.
            for s in spans:
                if s.name == "compute" and s.parent_id:
                    if s.parent_id in self._pending:
                        self.stats.drop("duplicate")
                        continue
                    if len(self._pending) >= self.max_pending:
                        self._pending.popitem(last=False)
                        self.stats.drop("pending_full")
                    self._pending[s.parent_id] = (now, s)
            for s in spans:
                if not s.parent_id and s.responses:
                    out += self._root(s, now)
            for s in spans:
                model = s.attributes.get(MODEL_NAME_ATTR)
                if model is None:
                    continue  # InferRequest roots and compute spans carry no phase of their own
                if s.span_id in self._seen:
                    self.stats.drop("duplicate")
                    self._pending.pop(s.span_id, None)
                    continue
                self._seen[s.span_id] = None
                if len(self._seen) > self.max_pending:
                    self._seen.popitem(last=False)
                events = dict(s.events)
                child = self._pending.pop(s.span_id, None)
                if child is not None:
                    events.update(child[1].events)
                phases = phase_durations(events)
                if not phases:
                    self.stats.drop("incomplete")
                    continue
                version = s.attributes.get(MODEL_VERSION_ATTR, "")
                request_id = s.attributes.get(REQUEST_ID_ATTR, "")
                start = events.get("REQUEST_START")
                root = self._roots.pop(s.parent_id, None) if s.parent_id else None
                responses = _since(start, root[1]) if root and start is not None else ()
                if s.parent_id and start is not None and root is None:
                    if len(self._awaiting_root) >= self.max_pending:
                        self._awaiting_root.popitem(last=False)
                    self._awaiting_root[s.parent_id] = (now, model, version, request_id, start)
                out.append(RequestTiming(model, version, s.trace_id, request_id, phases, responses))
        return out

    def _root(self, root: Span, now: float) -> list[RequestTiming]:
        """A root span's responses: joined to its model span now, or kept until it comes."""
        waiting = self._awaiting_root.pop(root.span_id, None)
        if waiting is None:
            if len(self._roots) >= self.max_pending:
                self._roots.popitem(last=False)
            self._roots[root.span_id] = (now, root.responses)
            return []
        _at, model, version, request_id, start = waiting
        # The model span's timing went out already: this one carries only the responses.
        return [RequestTiming(model, version, root.trace_id, request_id, {}, _since(start, root.responses))]


def _since(start: int, responses: tuple[int, ...]) -> tuple[float, ...]:
    return tuple((ns - start) / 1e9 for ns in responses if ns >= start)


def _responses(trace: dict[str, Any]) -> tuple[float, ...]:
    start = trace["events"].get("REQUEST_START")
    if start is None:
        return ()
    return tuple((ns - start) / 1e9 for ns in sorted(trace["responses"]) if ns >= start)


class TraceFileError(ValueError):
    """A Triton trace file (mode=triton) that is not the expected JSON list of trace entries."""


def trace_file_timings(entries: Any) -> list[RequestTiming]:
    """Request timings from one Triton JSON trace file (a list of ``{"id": N, ...}`` entries).

    Entries of one trace id hold its model (``model_name``, ``model_version``, ``request_id``) or a
    list of ``timestamps`` (``{"name": ..., "ns": ...}``). Traces without a model (the HTTP-level
    parent of an ensemble) give nothing.
    """
    if not isinstance(entries, list):
        raise TraceFileError("expected a JSON list of trace entries")
    by_id: dict[Any, dict[str, Any]] = {}
    for entry in entries:
        if not isinstance(entry, dict) or "id" not in entry:
            raise TraceFileError("a trace entry is not an object with an id")
        tid = entry["id"]
        if not isinstance(tid, int | str):
            raise TraceFileError("a trace id is not a number")
        t = by_id.setdefault(tid, {"events": {}, "responses": []})
        if "parent_id" in entry:
            t["parent"] = entry["parent_id"]
        if "model_name" in entry:
            t["model"] = str(entry["model_name"])
            t["version"] = str(entry.get("model_version", ""))
            t["request_id"] = str(entry.get("request_id", ""))
        for ts in entry.get("timestamps", []) or []:
            if not isinstance(ts, dict) or not isinstance(ts.get("ns"), int):
                raise TraceFileError(f"trace {tid}: a timestamp is not {{name, ns}}")
            t["events"].setdefault(str(ts.get("name")), ts["ns"])
            if ts.get("name") == RESPONSE_EVENT:
                t["responses"].append(ts["ns"])
    children: dict[Any, list[tuple[str, dict[str, int]]]] = {}
    for t in by_id.values():
        if "model" in t and t.get("parent") in by_id:
            children.setdefault(t["parent"], []).append((t["model"], t["events"]))
    out = []
    for tid, t in by_id.items():
        if "model" not in t:
            continue
        phases = phase_durations(t["events"])
        if phases:
            calls = children.get(tid, [])
            # An ensemble runs nothing itself (no COMPUTE_START): its children are its steps. A model
            # that computes and has children called them from its own code (BLS).
            ensemble = bool(calls) and "COMPUTE_START" not in t["events"]
            out.append(
                RequestTiming(
                    t["model"],
                    t["version"],
                    str(tid),
                    t["request_id"],
                    phases,
                    _responses(t),
                    segments(t["events"], calls) if ensemble else (),
                    tuple(sorted({m for m, _e in calls})) if calls and not ensemble else (),
                )
            )
    return out


class TimingPublisher:
    """The joiner's output: every batch of joined requests, handed to the parts that subscribe to
    ``feed`` (latency, steps, LLM) in the source's thread. ``updates`` are told before and after, so
    /metrics is rendered once all of them have the batch."""

    def __init__(
        self,
        feed: Feed[Timings],
        updates: Sequence[Updates] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.feed = feed
        self.updates = list(updates)
        self.clock = clock

    def record(self, timings: Iterable[RequestTiming], now: float | None = None) -> int:
        now = self.clock() if now is None else now
        batch = list(timings)
        for u in self.updates:
            u.begin()
        try:
            self.feed.publish((batch, now))
        finally:
            for u in self.updates:
                u.end()
        return len(batch)
