"""Triton's own latency histogram as a non-decoupled model's request latency (no tracing needed).

Triton >= 2.65 with ``--metrics-config histogram_latencies=true`` observes
``nv_inference_first_response_histogram_ms`` (labels ``model``, ``version``) for every model: from the
request's creation (before the queue) to its first response, in whole milliseconds. For a model that is
not decoupled the first response is the whole response, so the histogram is the model's request latency
(queue + cache + compute, not the network). For a decoupled model it is time to first token, which the
LLM part (``exporters/llm.py``) serves instead; a model whose config is not read yet gets neither.

``NativeHistograms`` keeps, per model, the cumulative buckets of the Triton scrapes in the window;
``LatencyPart`` serves them as ``tritonwatch_request_duration_seconds{phase="request"}`` (bounds ms / 1000,
Triton's own bounds, so the SLO's ``le`` bucket is exact when the threshold is one of them) and the window's
quantiles as ``tritonwatch_model_latency_quantile_seconds{phase="request",source="histogram"}``: PromQL's
``histogram_quantile`` over the per-bucket reset-aware increases in the window. Where traces also come in,
they still give the other phases; the request phase is Triton's (every request, not a sample).

Buckets that change: a model whose bounds change (a reload with other ``model_metrics`` buckets) starts its
window again from that scrape (increases across two layouts would mix bounds); a model whose series (e.g.
two ``namespace`` label values) do not share one layout is left out rather than summed by ``le`` wrongly.
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from prometheus_client.utils import floatToGoString

from tritonwatch import catalog
from tritonwatch.expfmt import Samples
from tritonwatch.exporters.window import ModelKey, counter_increase, model_key

FAMILY = catalog.TRITON_FIRST_RESPONSE
Layout = tuple[float, ...]  # upper bounds in seconds, ascending, ending with +Inf


def bucket_quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """PromQL's ``histogram_quantile`` on cumulative ``(upper bound, count)`` pairs sorted by bound,
    the last one +Inf: linear within the bucket holding the rank; None without observations, and
    None without a +Inf bucket (PromQL gives no quantile then: the total is unknown)."""
    if not buckets or not math.isinf(buckets[-1][0]) or buckets[-1][1] <= 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    lower, below = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if math.isinf(bound):
                return buckets[i - 1][0] if i else None
            if i == 0 and bound <= 0:
                return bound
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return None


@dataclass(frozen=True)
class _Scrape:
    time: float
    layout: Layout
    counts: tuple[float, ...]  # cumulative, one per bound
    total: float  # the _sum, seconds


@dataclass(frozen=True)
class NativeModel:
    """One model's native request latency as served: cumulative ``(le, count)`` pairs ending with
    +Inf, the sum in seconds, and the window's quantiles (label -> seconds; empty without traffic)."""

    buckets: list[tuple[str, float]]
    total: float
    quantiles: dict[str, float]


def _layouts(samples: Samples) -> dict[ModelKey, tuple[Layout, tuple[float, ...], float] | None]:
    """Per model: (layout, cumulative counts summed over its series, sum in seconds); None where its
    series do not share one layout (a sum by ``le`` over them would be wrong)."""
    series: dict[ModelKey, dict[object, dict[float, float]]] = {}
    for labels, value in samples.get(f"{FAMILY}_bucket", {}).items():
        key = model_key(labels)
        le = dict(labels).get("le")
        if key is None or le is None:
            continue
        try:
            bound = math.inf if le == "+Inf" else float(le) / 1000.0  # ms -> s (division: 50 -> 0.05)
        except ValueError:
            continue
        rest = frozenset(kv for kv in labels if kv[0] != "le")
        series.setdefault(key, {}).setdefault(rest, {})[bound] = value
    sums: dict[ModelKey, float] = {}
    for labels, value in samples.get(f"{FAMILY}_sum", {}).items():
        key = model_key(labels)
        if key is not None:
            sums[key] = sums.get(key, 0.0) + value / 1000.0
    out: dict[ModelKey, tuple[Layout, tuple[float, ...], float] | None] = {}
    for key, per in series.items():
        layouts = {tuple(sorted(b)) for b in per.values()}
        if len(layouts) != 1:
            out[key] = None
            continue
        layout = layouts.pop()
        if not layout or not math.isinf(layout[-1]):
            continue  # no +Inf bucket: not a histogram PromQL would read either
        counts = tuple(math.fsum(b[bound] for b in per.values()) for bound in layout)
        out[key] = (layout, counts, sums.get(key, 0.0))
    return out


class NativeHistograms:
    """Fed every good Triton scrape (a subscriber of its snapshots); read with ``view``."""

    def __init__(self, window: float) -> None:
        self.window = window
        self._lock = threading.Lock()
        self._scrapes: dict[ModelKey, deque[_Scrape]] = {}
        self.mixed: frozenset[ModelKey] = frozenset()  # models left out: series with different layouts
        self.relayouts = 0  # windows started again because a model's bounds changed
        self._generation = 0  # scrapes observed: the view changes only with one
        # (generation, the models accepted, the view): the latency part builds on every traced batch,
        # the view changes once per Triton scrape
        self._view: tuple[int, frozenset[ModelKey], tuple[str, ...], dict[ModelKey, NativeModel]] | None = (
            None
        )

    def observe(self, now: float, samples: Samples) -> None:
        found = _layouts(samples)
        with self._lock:
            kept: dict[ModelKey, deque[_Scrape]] = {}
            for key, entry in found.items():
                if entry is None:
                    continue
                layout, counts, total = entry
                q = self._scrapes.get(key, deque())
                if q and q[-1].layout != layout:
                    q = deque()  # a reload with other buckets: increases across layouts would mix bounds
                    self.relayouts += 1
                q.append(_Scrape(now, layout, counts, total))
                # Keep the newest scrape at or before the window's start as the base of the first increase.
                while len(q) > 1 and q[1].time <= now - self.window:
                    q.popleft()
                kept[key] = q
            self._scrapes = kept  # a model gone from /metrics is forgotten
            self.mixed = frozenset(k for k, e in found.items() if e is None)
            self._generation += 1

    def view(self, accept: Callable[[ModelKey], bool], qs: Sequence[str]) -> dict[ModelKey, NativeModel]:
        """The models ``accept`` takes (not decoupled): their buckets, sum and the window's quantiles."""
        with self._lock:
            generation = self._generation
            accepted = frozenset(k for k in self._scrapes if accept(k))
            cached = self._view
            if cached is not None and cached[:3] == (generation, accepted, tuple(qs)):
                return cached[3]
            copies = {k: tuple(self._scrapes[k]) for k in accepted}
        out: dict[ModelKey, NativeModel] = {}
        for key, scrapes in copies.items():
            last = scrapes[-1]
            buckets = [
                ("+Inf" if math.isinf(b) else floatToGoString(b), c)
                for b, c in zip(last.layout, last.counts, strict=True)
            ]
            out[key] = NativeModel(buckets, last.total, _quantiles(scrapes, qs))
        with self._lock:
            if self._generation == generation:  # not replaced meanwhile by a newer scrape's
                self._view = (generation, accepted, tuple(qs), out)
        return out


def _quantiles(scrapes: Sequence[_Scrape], qs: Sequence[str]) -> dict[str, float]:
    """histogram_quantile over each bucket's reset-aware increase between the window's scrapes (one
    layout: ``observe`` keeps no other). Each bucket is a counter of its own, as PromQL's rate() reads it."""
    if len(scrapes) < 2:
        return {}
    layout = scrapes[-1].layout
    inc = [0.0] * len(layout)
    for a, b in zip(scrapes, scrapes[1:], strict=False):
        for i, (before, value) in enumerate(zip(a.counts, b.counts, strict=True)):
            inc[i] += counter_increase(before, value)
    pairs = list(zip(layout, inc, strict=True))
    return {q: v for q in qs if (v := bucket_quantile(float(q), pairs)) is not None}


def not_decoupled(decoupled: Callable[[], Mapping[str, bool]]) -> Callable[[ModelKey], bool]:
    """Models whose config was read and says not decoupled: their first response is the whole one."""

    def accept(key: ModelKey) -> bool:
        return decoupled().get(key[0]) is False

    return accept
