"""What the traces room hands on: one traced request's timing (``RequestTiming``), its phases and, for an
ensemble, its steps. The joiner builds them; the latency, step and LLM parts read them. A module of its
own so that neither the joiner nor the step part imports the other.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class StepSegment:
    """One step's share of an ensemble request (ns)."""

    step: str
    queue_ns: int
    compute_ns: int


def segments(
    root: Mapping[str, int], children: Sequence[tuple[str, Mapping[str, int]]]
) -> tuple[StepSegment, ...]:
    """The ensemble request ``root``'s steps (``(model, events)``, any order) cut at each next step's
    REQUEST_START; () when the times do not line up (a step outside the request, an event missing)."""
    start, end = root.get("REQUEST_START"), root.get("REQUEST_END")
    chain = sorted((ev["REQUEST_START"], model, ev) for model, ev in children if "REQUEST_START" in ev)
    if start is None or end is None or not chain or len(chain) != len(children):
        return ()
    bounds = [start] + [s for s, _m, _e in chain[1:]] + [end]
    if chain[0][0] < start or any(b > a for a, b in zip(bounds[1:], bounds, strict=False)):
        return ()  # not in order within the request: not a chain we can cut
    out = []
    for (_s, model, ev), a, b in zip(chain, bounds, bounds[1:], strict=False):
        # No COMPUTE_START (a cache hit, or refused before running): the whole segment waited.
        compute_start = min(max(ev.get("COMPUTE_START", b), a), b)
        out.append(StepSegment(model, compute_start - a, b - compute_start))
    return tuple(out)


# phase -> (start event, end event); phases whose events are absent (cache hits) are left out.
PHASE_EVENTS: dict[str, tuple[str, str]] = {
    "request": ("REQUEST_START", "REQUEST_END"),
    "queue": ("QUEUE_START", "COMPUTE_START"),
    "compute_input": ("COMPUTE_START", "COMPUTE_INPUT_END"),
    "compute_infer": ("COMPUTE_INPUT_END", "COMPUTE_OUTPUT_START"),
    "compute_output": ("COMPUTE_OUTPUT_START", "COMPUTE_END"),
}


def phase_durations(events: Mapping[str, int]) -> dict[str, float]:
    """Seconds per phase from one request's event times (ns); a phase with an event missing or
    running backwards is left out rather than reported as 0 or negative."""
    out: dict[str, float] = {}
    for phase, (start, end) in PHASE_EVENTS.items():
        a, b = events.get(start), events.get(end)
        if a is not None and b is not None and b >= a:
            out[phase] = (b - a) / 1e9
    return out


@dataclass(frozen=True)
class RequestTiming:
    model: str
    version: str
    trace_id: str
    request_id: str
    phases: Mapping[str, float] = field(default_factory=dict)
    # Seconds from REQUEST_START to each INFER_RESPONSE_COMPLETE, in order: one per response of a
    # decoupled (streaming) model, read by the LLM part (exporters/llm.py). Trace files only.
    responses: tuple[float, ...] = ()
    # An ensemble request's steps (exporters/steps.py); the models a BLS request called. Trace files only.
    steps: tuple[StepSegment, ...] = ()
    calls: tuple[str, ...] = ()


Timings = tuple[list[RequestTiming], float]  # one recorded batch of traced requests, and when


class TimingSink(Protocol):
    """Where a trace source hands its joined requests: the publisher (``join.TimingPublisher``) in the
    sidecar, a ``LatencyPart`` alone in a test."""

    def record(self, timings: Iterable[RequestTiming], now: float | None = None) -> int: ...
