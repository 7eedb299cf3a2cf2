"""Synthetic Triton counters for the SLO cost bench: what a model's replicas would have exposed, every scrape.

Per replica of a model, at every scrape (``step_s`` apart, aligned to the start):

* ``nv_inference_request_success`` and ``nv_inference_request_failure{reason="BACKEND"}`` (Triton's
  counters, ``job="triton"``, ``instance="<model>-<i>:8002"``) and ``up``;
* ``tritonwatch_request_duration_seconds_bucket{phase="request", le}`` for ``le`` in 0.025, 0.05, 0.1,
  0.25, +Inf and its ``_count`` (the sidecar's histogram, ``job="tritonwatch"``), counting every request.

Traffic is diurnal: the model's request rate is ``rate * (1 + swing * cos(2 pi (t - peak) / 1 day))``,
split evenly over its replicas. Night is where the traffic is below its mean (cos < 0): a request fails
there ``error_night_factor`` times as often as by day, and a request is slow (above 50 ms)
``slow_peak_factor`` times as often by day as at night. An outage makes every request of the affected
replicas fail and be slow from its start on.

Counts are deterministic: each step's count is the rounded running sum of its expectation minus the
previous one (no random draws), so a run is reproducible and the exact truth is a sum of counters.
``exact_ratio`` is that truth for any window; ``write_openmetrics`` streams the counters as the
OpenMetrics text ``promtool tsdb create-blocks-from openmetrics`` backfills, one series at a time (memory
holds one replica's arrays, whatever the days).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import IO

import numpy as np
import numpy.typing as npt

DAY_S = 86_400
THRESHOLD_LE = "0.05"  # the latency objective's threshold, 50 ms, a bucket bound
# (le, share of fast requests at or below it, share of slow requests at or below it)
BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("0.025", 0.7, 0.0),
    ("0.05", 1.0, 0.0),
    ("0.1", 1.0, 0.6),
    ("0.25", 1.0, 0.9),
    ("+Inf", 1.0, 1.0),
)

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Traffic:
    """A model's traffic, errors and slow requests over the day."""

    requests_per_s: float = 80.0  # the model's mean, all replicas together
    swing: float = 0.8  # +-80 % over the day
    peak_hour_utc: float = 15.0
    error_ratio_day: float = 0.0002  # failed share of requests while traffic is above its mean
    error_night_factor: float = 10.0
    slow_ratio_night: float = 0.001  # share of requests over the threshold while traffic is below its mean
    slow_peak_factor: float = 6.0


@dataclass(frozen=True)
class Outage:
    """From ``start`` (unix seconds) on, every request of the first ``replicas`` replicas (all when None)
    fails and is slow."""

    start: float
    replicas: int | None = None


@dataclass(frozen=True)
class ModelData:
    name: str
    replicas: int
    traffic: Traffic
    start: float  # unix seconds of the first scrape (all counters 0)
    end: float  # unix seconds of the last scrape
    step_s: int = 30
    outage: Outage | None = None

    def times(self) -> npt.NDArray[np.float64]:
        n = int(round((self.end - self.start) / self.step_s)) + 1
        return self.start + self.step_s * np.arange(n, dtype=np.float64)

    def instance(self, replica: int) -> str:
        return f"{self.name}-{replica}:8002"


@dataclass(frozen=True)
class Counters:
    """One replica's cumulative counters at every scrape."""

    requests: Ints
    errors: Ints
    slow: Ints  # requests above the threshold
    buckets: tuple[Ints, ...]  # cumulative histogram buckets, in BUCKETS' order


def _running(expected: npt.NDArray[np.float64]) -> Ints:
    """Cumulative integer counts whose steps follow ``expected`` (rounded running sum), starting at 0."""
    cum = np.concatenate(([0.0], np.cumsum(expected[1:])))
    return np.rint(cum).astype(np.int64)


def daylight(t: npt.NDArray[np.float64], traffic: Traffic) -> npt.NDArray[np.float64]:
    """cos of the day's phase: 1 at the peak, -1 at the trough."""
    return np.cos(2 * math.pi * (t - traffic.peak_hour_utc * 3600) / DAY_S)


def counters(model: ModelData, replica: int) -> Counters:
    """The counters of one replica; the count of a scrape is what happened in the step before it."""
    t = model.times()
    tr = model.traffic
    # The rate at each step's middle: what a steady source emits over that step.
    c = daylight(t - model.step_s / 2, tr)
    per_step = tr.requests_per_s * (1 + tr.swing * c) * model.step_s / model.replicas
    night = c < 0
    p_error = np.where(night, tr.error_ratio_day * tr.error_night_factor, tr.error_ratio_day)
    p_slow = np.where(night, tr.slow_ratio_night, tr.slow_ratio_night * tr.slow_peak_factor)
    if model.outage is not None and (model.outage.replicas is None or replica < model.outage.replicas):
        down = t > model.outage.start
        p_error = np.where(down, 1.0, p_error)
        p_slow = np.where(down, 1.0, p_slow)
    requests = _running(per_step)
    step_requests = np.diff(requests, prepend=0).astype(np.float64)
    # A rounded running sum of a share never passes the running sum itself: errors <= requests, and a
    # lower bucket never holds more than a higher one.
    errors = _running(step_requests * p_error)
    slow = _running(step_requests * p_slow)
    fast = requests - slow
    step_fast = np.diff(fast, prepend=0).astype(np.float64)
    step_slow = np.diff(slow, prepend=0).astype(np.float64)
    buckets = []
    for _, fast_share, slow_share in BUCKETS:
        bucket = fast if fast_share == 1.0 else _running(step_fast * fast_share)
        if slow_share == 1.0:
            bucket = bucket + slow
        elif slow_share:
            bucket = bucket + _running(step_slow * slow_share)
        buckets.append(bucket)
    return Counters(requests=requests, errors=errors, slow=slow, buckets=tuple(buckets))


@dataclass(frozen=True)
class Truth:
    """Events in a window, summed over replicas, and their ratios."""

    requests: int
    errors: int
    slow: int

    @property
    def error_ratio(self) -> float:
        return self.errors / self.requests

    @property
    def slow_ratio(self) -> float:
        return self.slow / self.requests


def exact(model: ModelData, start: float, end: float) -> Truth:
    """What happened in the window (start, end] of scrape times, from the counters themselves."""
    t = model.times()
    i = int(np.searchsorted(t, start, side="left"))
    j = int(np.searchsorted(t, end, side="right")) - 1
    if i >= t.size or t[i] != start or j < 0 or t[j] != end:
        raise ValueError(f"{model.name}: window ({start}, {end}] is not on its scrape grid")
    req = err = slow = 0
    for r in range(model.replicas):
        c = counters(model, r)
        req += int(c.requests[j] - c.requests[i])
        err += int(c.errors[j] - c.errors[i])
        slow += int(c.slow[j] - c.slow[i])
    return Truth(requests=req, errors=err, slow=slow)


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in pairs) + "}"


def series(model: ModelData, replica: int) -> Iterator[tuple[str, str, Ints]]:
    """(metric name, label text, cumulative values) of one replica, every series it exposes."""
    c = counters(model, replica)
    triton = [
        ("job", "triton"),
        ("instance", model.instance(replica)),
        ("model", model.name),
        ("version", "1"),
    ]
    sidecar = [("job", "tritonwatch"), ("instance", f"{model.name}-{replica}:9450"), ("model", model.name)]
    sidecar += [("version", "1"), ("phase", "request")]
    yield "nv_inference_request_success", _labels(triton), c.requests - c.errors
    yield "nv_inference_request_failure", _labels([*triton, ("reason", "BACKEND")]), c.errors
    yield "up", _labels(triton[:2]), np.ones_like(c.requests)
    hist = "tritonwatch_request_duration_seconds"
    for (le, _, _), values in zip(BUCKETS, c.buckets, strict=True):
        yield f"{hist}_bucket", _labels([*sidecar, ("le", le)]), values
    yield f"{hist}_count", _labels(sidecar), c.requests


FAMILIES = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "up",
    "tritonwatch_request_duration_seconds_bucket",
    "tritonwatch_request_duration_seconds_count",
)


def write_openmetrics(models: Sequence[ModelData], out: IO[str]) -> int:
    """Every model's series as OpenMetrics text, each family's series together; returns the samples
    written. The families are untyped, so ``le`` stays as written (the canonical form Prometheus 3 would
    normalise a histogram's bounds to)."""
    samples = 0
    for family in FAMILIES:
        for model in models:
            stamps = [f"{x:.0f}" for x in model.times()]
            for replica in range(model.replicas):
                for name, labels, values in series(model, replica):
                    if name != family:
                        continue
                    prefix = f"{name}{labels} "
                    out.write(
                        "".join(f"{prefix}{v} {s}\n" for v, s in zip(values.tolist(), stamps, strict=True))
                    )
                    samples += values.size
    out.write("# EOF\n")
    return samples
