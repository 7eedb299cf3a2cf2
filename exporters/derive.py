"""The catalog's formulas on a ``CounterWindow``'s increases: the sidecar's one evaluator.

A signal's value for a model over the window: a rate is the numerator's increase (less ``minus``) over
the window's span; a ratio is that over the denominator's increase (less ``subtract``); a gauge is its
last value. None where it is undefined: no traffic, or an input family absent (Triton with
``counter_latencies=false`` has no duration counters: its latencies are unknown, not 0). A model
counts as having the signal when a numerator series was in the last scrape or moved in the window.

``evaluate_many`` does it for many models at once with the per-model work in C where it can be (the
collector evaluates every signal for every model once per update); ``evaluate`` is its one-model case.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import add, or_, sub

from tritonwatch.catalog import Signal
from tritonwatch.exporters.window import CounterWindow, ModelKey

# Fewer models than this are looked up without the window's column cache: a one-model read (the
# LLM part's) must not evict the columns of every model the collector reads each update.
_CACHED_FROM = 16


def evaluate_many(window: CounterWindow, sig: Signal, keys: Sequence[ModelKey]) -> list[float | None]:
    """The signal's value for each of ``keys`` over the window, in order; None where undefined."""
    if sig.kind == "gauge":
        family, gauges = sig.numerator[0].family, window.gauges
        return [gauges.get((family, k)) for k in keys]
    span = window.span()
    if span <= 0:
        return [None] * len(keys)
    num_ids, den_ids, sub_ids, minus_ids = window.term_ids(sig)
    frozen = tuple(keys)
    missing = len(window.totals)
    extended = [*window.totals, 0.0]  # a missing slot reads 0.0
    live, refs = window.live, window.refs
    cached = len(frozen) >= _CACHED_FROM

    def column(term_id: int) -> list[int]:
        return window.column(term_id, frozen, cached)

    def total(term_ids: tuple[int, ...]) -> list[float]:
        acc: list[float] | None = None
        for i in term_ids:
            values = list(map(extended.__getitem__, column(i)))
            acc = values if acc is None else list(map(add, acc, values))
        return acc if acc is not None else [0.0] * len(frozen)

    present = [False] * len(frozen)
    for i in num_ids:
        here = [s != missing and (s in live or refs[s] > 0) for s in column(i)]
        present = list(map(or_, present, here))
    num = total(num_ids)
    if minus_ids:
        num = list(map(sub, num, total(minus_ids)))
    if sig.kind == "rate":
        return [n / span if p else None for n, p in zip(num, present, strict=True)]
    den = total(den_ids)
    if sub_ids:
        den = list(map(sub, den, total(sub_ids)))
    return [max(n, 0.0) / d if p and not d <= 0 else None for n, d, p in zip(num, den, present, strict=True)]


def evaluate(window: CounterWindow, sig: Signal, key: ModelKey) -> float | None:
    """The signal's value for one model over the window; None where undefined."""
    return evaluate_many(window, sig, (key,))[0]
