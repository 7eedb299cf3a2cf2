"""Per-request latencies kept two ways: a windowed sample store for quantiles and cumulative histograms.

``SampleStore`` keeps, per (model, version, phase), the latencies of the last ``window`` seconds in
``slices`` time slices, each a uniform reservoir of at most ``per_slice`` values (Algorithm R) plus the
count it has seen. Memory is bounded by ``max_keys * slices * per_slice`` doubles whatever the span
rate. While a slice holds every value it saw, the quantiles are exact; past that each kept value
stands for ``seen / kept`` values of its slice. The window covers between ``window`` and
``window * (1 + 1/slices)`` seconds.

``Histograms`` are cumulative bucket counts for Prometheus (never reset, never expire).
"""

from __future__ import annotations

import math
import random
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import cast

from prometheus_client.utils import floatToGoString

# Values a time slice keeps before it samples (--quantile-samples' default): quantiles exact up to it.
PER_SLICE = 1024

Key = tuple[str, ...]  # model, version, phase (an ensemble's steps: model, version, step, phase)


class _Slice:
    __slots__ = ("_sorted", "index", "seen", "values")

    def __init__(self, index: int) -> None:
        self.index = index
        self.seen = 0
        self.values = array("d")
        self._sorted: tuple[int, list[float]] | None = None  # (seen when sorted, the values sorted)

    def take(self) -> tuple[_Slice, int, Sequence[float], bool]:
        """(itself, requests seen, its values sorted if sorted since the last value came, else a copy
        of them, whether sorted): taken under the store's lock, sorted outside it (``settle``)."""
        cached = self._sorted
        if cached is not None and cached[0] == self.seen:
            return self, self.seen, cached[1], True
        return self, self.seen, array("d", self.values), False


Taken = tuple[_Slice, int, Sequence[float], bool]


def settle(taken: Sequence[Taken]) -> list[tuple[list[float], float, int]]:
    """Taken slices as (values sorted, weight of each, requests seen); a slice sorted here keeps its
    sorted list for the next scrape while no value comes (a closed slice is sorted once)."""
    out: list[tuple[list[float], float, int]] = []
    for s, seen, values, done in taken:
        if done:
            ordered = cast(list[float], values)  # the slice's own sorted list, never changed
        else:
            ordered = sorted(values)
            s._sorted = (seen, ordered)  # replaced whole, keyed by seen: a late writer is harmless
        out.append((ordered, seen / len(values), seen))
    return out


def weighted_quantile(pairs: Sequence[tuple[float, float]], q: float) -> float:
    """Nearest-rank quantile of ``(value, weight)`` pairs sorted by value (NaN when empty).

    With all weights 1 this is the textbook nearest rank: the smallest value with at least
    ``q * n`` values at or below it.
    """
    total = sum(w for _, w in pairs)
    if total <= 0:
        return math.nan
    target = q * total
    acc = 0.0
    for value, weight in pairs:
        acc += weight
        if acc >= target - 1e-9 * total:
            return value
    return pairs[-1][0]


@dataclass(frozen=True)
class Quantiles:
    count: int  # requests behind the values (all seen in the window, not only those kept)
    values: dict[str, float]  # quantile label ("0.99") -> seconds


def quantiles_of(held: Sequence[tuple[Sequence[float], float, int]], qs: Iterable[str]) -> Quantiles | None:
    """Weighted nearest-rank quantiles of ``SampleStore.held`` slices; None when they hold nothing.

    The same values as ``weighted_quantile`` over all ``(value, weight)`` pairs sorted, without
    making one pair per value (issue 24: that sort, once per update, was most of the trace path's
    CPU): the answer is the smallest value whose weight at or below it, ``sum(weight_i *
    count_i(<= value))``, reaches ``q * total``; found by bisecting the merged values, each probe a
    bisection of every slice's sorted values. Slices come sorted (``settle``); a sort of
    sorted list is not sorted again."""
    parts: list[tuple[Sequence[float], float]] = []
    count = 0
    for values, weight, seen in held:
        count += seen
        if len(values):
            parts.append((values, weight))
    if not parts:
        return None
    merged = sorted(chain.from_iterable(v for v, _w in parts))  # sorted runs: a merge
    total = math.fsum(w * len(v) for v, w in parts)
    out: dict[str, float] = {}
    for label in qs:
        q = float(label)
        threshold = q * total - 1e-9 * total  # weighted_quantile's tolerance for rounded weights
        lo, hi = 0, len(merged) - 1
        while lo < hi:  # the first index whose value's weight at or below reaches the threshold
            mid = (lo + hi) // 2
            if sum(w * bisect_right(v, merged[mid]) for v, w in parts) >= threshold:
                hi = mid
            else:
                lo = mid + 1
        out[label] = merged[lo]
    return Quantiles(count, out)


class SampleStore:
    def __init__(
        self,
        window: float,
        slices: int = 10,
        per_slice: int = PER_SLICE,
        max_keys: int = 2000,
        seed: int | None = None,
    ) -> None:
        if window <= 0 or slices < 1 or per_slice < 1:
            raise ValueError("window, slices and per_slice must be positive")
        self.window = window
        self.slices = slices
        self.slice_len = window / slices
        self.per_slice = per_slice
        self.max_keys = max_keys
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._data: dict[Key, list[_Slice]] = {}
        self.rejected = 0  # values for keys beyond max_keys

    def _index(self, now: float) -> int:
        return int(now // self.slice_len)

    def slice_of(self, now: float) -> int:
        """The time slice ``now`` falls in: what the window holds changes when it does."""
        return self._index(now)

    def add(self, key: Key, value: float, now: float) -> bool:
        idx = self._index(now)
        with self._lock:
            slices = self._data.get(key)
            if slices is None:
                if len(self._data) >= self.max_keys:
                    self._expire(idx)
                    if len(self._data) >= self.max_keys:
                        self.rejected += 1
                        return False
                slices = self._data[key] = []
            if not slices or slices[-1].index != idx:
                slices.append(_Slice(idx))
                oldest = idx - self.slices
                while slices and slices[0].index < oldest:
                    slices.pop(0)
            current = slices[-1]
            current.seen += 1
            if len(current.values) < self.per_slice:
                current.values.append(value)
            else:
                j = self._rng.randrange(current.seen)
                if j < self.per_slice:
                    current.values[j] = value
        return True

    def _expire(self, idx: int) -> None:
        oldest = idx - self.slices
        for key in list(self._data):
            live = [s for s in self._data[key] if s.index >= oldest]
            if live:
                self._data[key] = live
            else:
                del self._data[key]

    def keys(self, now: float) -> list[Key]:
        with self._lock:
            self._expire(self._index(now))
            return sorted(self._data)

    def quantiles(self, key: Key, now: float, qs: Iterable[str]) -> Quantiles | None:
        """Quantiles of the key's latencies in the window; None when it has none."""
        return quantiles_of(self.held(key, now), qs)

    def held(self, key: Key, now: float) -> list[tuple[list[float], float, int]]:
        """The key's slices in the window: (values sorted, weight of each, requests seen)."""
        return settle(self.take(key, now))

    def take(self, key: Key, now: float) -> list[Taken]:
        """The key's slices in the window as taken under the lock (``_Slice.take``), for ``settle``:
        the sorting happens outside this lock and whatever lock makes a request land in the store
        and the histograms together."""
        oldest = self._index(now) - self.slices
        with self._lock:
            return [s.take() for s in self._data.get(key, []) if s.index >= oldest and s.values]

    def kept(self) -> int:
        """Values held now (for tests of the memory bound)."""
        with self._lock:
            return sum(len(s.values) for slices in self._data.values() for s in slices)


@dataclass
class _Hist:
    counts: list[int]  # per bucket, not cumulative; last one is +Inf
    total: float = 0.0
    n: int = 0
    last: float = 0.0  # when it last had an observation (``expire``)


class Histograms:
    """Cumulative latency histograms per key with fixed upper bounds (seconds)."""

    def __init__(self, buckets: Sequence[float], max_keys: int = 2000) -> None:
        bounds = sorted(set(float(b) for b in buckets))
        if not bounds or any(b <= 0 or math.isinf(b) for b in bounds):
            raise ValueError("histogram buckets must be positive finite numbers")
        self.bounds = tuple(bounds)
        self.max_keys = max_keys
        self._lock = threading.Lock()
        self._data: dict[Key, _Hist] = {}
        self.rejected = 0

    def observe(self, key: Key, value: float, now: float = 0.0) -> bool:
        with self._lock:
            h = self._data.get(key)
            if h is None:
                if len(self._data) >= self.max_keys:
                    self.rejected += 1
                    return False
                h = self._data[key] = _Hist([0] * (len(self.bounds) + 1))
            h.last = now
            # le is inclusive: a value equal to a bound belongs to that bucket.
            h.counts[bisect_left(self.bounds, value)] += 1
            h.total += value
            h.n += 1
        return True

    def seed(self, keys: Iterable[Key]) -> int:
        """Start ``keys`` at zero where they have no histogram yet (within ``max_keys``); returns how many.

        A series whose first sample already counts requests loses them: Prometheus' ``rate()`` needs
        a sample before the increase, and VictoriaMetrics guesses from the first value's size. A model
        known before its first traced request is exposed at zero, so its first requests count.
        """
        added = 0
        with self._lock:
            for key in keys:
                if key not in self._data and len(self._data) < self.max_keys:
                    self._data[key] = _Hist([0] * (len(self.bounds) + 1))
                    added += 1
        return added

    def expire(self, before: float, keep: Container[Key] = ()) -> int:
        """Forget keys with no observation since ``before``, except ``keep``; returns how many.

        A model that stopped being traced (unloaded, renamed, or a name an attacker made up) would
        otherwise hold its series until restart. Prometheus reads a series that comes back as a reset.
        A model Triton still serves is kept (``keep``): its series stays continuous while idle.
        """
        with self._lock:
            old = [k for k, h in self._data.items() if h.last < before and k not in keep]
            for k in old:
                del self._data[k]
        return len(old)

    def snapshot(self) -> list[tuple[Key, list[tuple[str, float]], float, int]]:
        """Per key: cumulative ``(le, count)`` pairs ending with ``+Inf``, the sum and the count."""
        out = []
        with self._lock:
            for key, h in sorted(self._data.items()):
                acc = 0
                buckets: list[tuple[str, float]] = []
                for bound, c in zip((*self.bounds, math.inf), h.counts, strict=True):
                    acc += c
                    buckets.append((floatToGoString(bound), float(acc)))
                out.append((key, buckets, h.total, h.n))
        return out
