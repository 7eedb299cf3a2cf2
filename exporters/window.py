"""Reset-aware counter increases over a sliding window of scrapes, and the catalog's formulas on them.

Each successful scrape is turned, once, into per-(term, model, version) increases since the previous
scrape, the way Prometheus's ``increase()`` treats a counter: a value lower than the previous one is a
reset (Triton restart, model reload) and counts from 0, so a restart never yields a negative or absurd
value. The window keeps those small per-model deltas, not the raw samples, so evaluating a signal costs
O(models x scrapes in window) whatever the payload size.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tritonwatch import catalog
from tritonwatch.catalog import Signal, Term
from tritonwatch.expfmt import LabelSet, Samples

ModelKey = tuple[str, str]  # (model, version)


def model_key(labels: LabelSet) -> ModelKey | None:
    model = version = None
    for name, value in labels:
        if name == catalog.MODEL:
            model = value
        elif name == catalog.VERSION:
            version = value
    if model is None:
        return None
    return (model, version or "")


def _terms_by_family(signals: Iterable[Signal]) -> dict[str, tuple[Term, ...]]:
    out: dict[str, list[Term]] = {}
    for s in signals:
        for t in s.numerator + s.denominator + s.subtract:
            if t not in out.setdefault(t.family, []):
                out[t.family].append(t)
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True)
class _Entry:
    start: float  # time of the previous successful scrape
    end: float  # time of this scrape
    deltas: Mapping[tuple[Term, ModelKey], float]


class CounterWindow:
    """Keeps per-model counter increases for the scrapes of the last ``window`` seconds."""

    def __init__(self, window: float, signals: Iterable[Signal] = catalog.SIGNALS) -> None:
        self.window = window
        self.signals = tuple(signals)
        self._counter_terms = _terms_by_family(s for s in self.signals if s.kind != "gauge")
        self._gauge_families = {s.numerator[0].family for s in self.signals if s.kind == "gauge"}
        self._prev: dict[tuple[str, LabelSet], float] = {}
        self._prev_time: float | None = None
        self._entries: deque[_Entry] = deque()
        self._gauges: dict[tuple[str, ModelKey], float] = {}
        self.models: frozenset[ModelKey] = frozenset()

    def ingest(self, now: float, samples: Samples) -> None:
        """Add one successful scrape taken at ``now`` (seconds)."""
        deltas: dict[tuple[Term, ModelKey], float] = {}
        current: dict[tuple[str, LabelSet], float] = {}
        models: set[ModelKey] = set()
        prev = self._prev
        for family, terms in self._counter_terms.items():
            series = samples.get(family)
            if not series:
                continue
            for labels, value in series.items():
                key = model_key(labels)
                if key is None or math.isnan(value):
                    continue
                models.add(key)
                skey = (family, labels)
                current[skey] = value
                before = prev.get(skey)
                if before is None:
                    continue  # first sight: nothing to compare with, as Prometheus's increase()
                delta = value - before if value >= before else value  # reset: counts from 0
                if delta == 0.0:
                    continue
                label_map: dict[str, str] | None = None
                for term in terms:
                    if term.exclude:
                        label_map = label_map or dict(labels)
                        if not term.accepts(label_map):
                            continue
                    dk = (term, key)
                    deltas[dk] = deltas.get(dk, 0.0) + delta * term.scale
        gauges: dict[tuple[str, ModelKey], float] = {}
        for family in self._gauge_families:
            for labels, value in samples.get(family, {}).items():
                key = model_key(labels)
                if key is None or math.isnan(value):
                    continue
                models.add(key)
                gk = (family, key)
                gauges[gk] = gauges.get(gk, 0.0) + value  # summed over gpu_uuid splits
        if self._prev_time is not None:
            self._entries.append(_Entry(self._prev_time, now, deltas))
        self._prev = current  # series gone from the payload are forgotten (unloaded models)
        self._prev_time = now
        self._gauges = gauges
        self.models = frozenset(models)
        self._expire(now)

    def _expire(self, now: float) -> None:
        while self._entries and self._entries[0].end <= now - self.window:
            self._entries.popleft()

    def span(self) -> float:
        if not self._entries:
            return 0.0
        return self._entries[-1].end - self._entries[0].start

    def increase(self, term: Term, key: ModelKey) -> float:
        return sum(e.deltas.get((term, key), 0.0) for e in self._entries)

    def _sum(self, terms: Iterable[Term], key: ModelKey) -> float:
        return sum(self.increase(t, key) for t in terms)

    def evaluate(self, sig: Signal, key: ModelKey) -> float | None:
        """The signal's value for one model over the window; None when undefined (no traffic)."""
        if sig.kind == "gauge":
            return self._gauges.get((sig.numerator[0].family, key))
        span = self.span()
        if span <= 0:
            return None
        num = self._sum(sig.numerator, key)
        if sig.kind == "rate":
            return num / span
        den = self._sum(sig.denominator, key) - self._sum(sig.subtract, key)
        if den <= 0:
            return None
        return num / den

    def has_family(self, key: ModelKey, family: str) -> bool:
        return any(
            t.family == family and (t, key) in e.deltas
            for e in self._entries
            for t in self._counter_terms.get(family, ())
        )
