"""Reset-aware counter increases over a sliding window of scrapes (their storage and ingest).

Each successful scrape is turned, once, into per-(term, model, version) increases since the previous
scrape, the way Prometheus's ``increase()`` treats a counter: a value lower than the previous one is a
reset (Triton restart, model reload) and counts from 0, so a restart never yields a negative or absurd
value. ``CounterWindow`` keeps those deltas per (counter, model) with running totals, so evaluating a
signal (``exporters/derive.py``) is O(1) whatever the payload size; ``IncreaseWindow`` applies the same rule to any keyed rows
(the GPU part's per-gpu_uuid counters).
"""

from __future__ import annotations

import math
from array import array
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from operator import mul, sub
from typing import Generic, TypeVar

from tritonwatch import catalog
from tritonwatch.catalog import Signal, Term
from tritonwatch.expfmt import LabelSet, Layout, Samples, picker

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


def counter_increase(before: float, value: float) -> float:
    """A counter's increase since ``before``; a lower value is a reset and counts from 0."""
    return value - before if value >= before else value


def _terms_by_family(signals: Iterable[Signal]) -> dict[str, tuple[Term, ...]]:
    out: dict[str, list[Term]] = {}
    for s in signals:
        for t in s.terms():
            if t not in out.setdefault(t.family, []):
                out[t.family].append(t)
    return {k: tuple(v) for k, v in out.items()}


class _Series:
    """One counter series: its model, the slots it feeds, its last good value."""

    __slots__ = ("key", "slots", "prev", "epoch")

    def __init__(self, key: ModelKey, slots: tuple[tuple[int, float], ...]) -> None:
        self.key = key
        self.slots = slots
        self.prev = math.nan
        self.epoch = 0


@dataclass(frozen=True)
class _Entry:
    start: float  # time of the previous successful scrape
    end: float  # time of this scrape
    slots: array[int]  # which (term, model) slots this scrape moved ...
    deltas: array[float]  # ... and by how much


class _Fast:
    """What ``CounterWindow`` derived from one parser layout: which flat values are tracked counters
    (``infos``, and their last values ``prev``), where each one's increase goes, and the gauges.

    While payloads keep that layout, a scrape is ingested as one difference of two value lists."""

    def __init__(self, layout: Layout, infos: list[_Series], positions: list[int]) -> None:
        self.layout = layout
        self.infos = infos
        self.pick = picker(positions)
        self.prev: Sequence[float] = [i.prev for i in infos]
        # (series index, slot, scale) in the order the slow path adds them, so sums are bit-equal.
        pairs = [(n, slot, scale) for n, info in enumerate(infos) for slot, scale in info.slots]
        self.pick_pairs = picker([n for n, _, _ in pairs])
        self.scales = [scale for _, _, scale in pairs]
        first: dict[int, int] = {}
        self.extra: list[tuple[int, int]] = []  # (pair index, slot) adding into a slot already fed
        for p, (_n, slot, _s) in enumerate(pairs):
            if slot in first:
                self.extra.append((p, slot))
            else:
                first[slot] = p
        self.first_slots = list(first)
        self.pick_first = picker(list(first.values()))
        self.gauge_pick: Callable[[Sequence[float]], tuple[float, ...]] = picker([])
        self.gauge_keys: list[tuple[str, ModelKey]] = []
        self.models: frozenset[ModelKey] = frozenset()

    def write_back(self) -> None:
        """Hand the last values back to the series objects (the slow path reads them there)."""
        for info, value in zip(self.infos, self.prev, strict=True):
            info.prev = value


# A signal's term numbers: numerator, denominator, subtracted from it, subtracted from the numerator.
_TermIds = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


class CounterWindow:
    """Keeps per-model counter increases for the scrapes of the last ``window`` seconds.

    Increases live in slots, one per (term, model); the window keeps a running total per slot, so
    evaluating a signal is O(1) and memory is one (slot, delta) pair per moved counter per scrape.
    Given ``Parsed`` samples whose layout it has seen, it reads the tracked counters' values in bulk
    (``_Fast``); a NaN or a reset takes the general path, which gives the same result.
    """

    def __init__(
        self,
        window: float,
        signals: Iterable[Signal] = catalog.SIGNALS,
        variants: Iterable[Signal] = catalog.ENSEMBLE_SIGNALS,
    ) -> None:
        self.window = window
        self.signals = tuple(signals)
        # Evaluated for some models instead of a signal (an ensemble's), never listed in ``signals``.
        tracked = self.signals + tuple(variants)
        self._counter_terms = _terms_by_family(s for s in tracked if s.kind != "gauge")
        self._gauge_families = {s.numerator[0].family for s in tracked if s.kind == "gauge"}
        self._series: dict[tuple[str, LabelSet], _Series] = {}
        self._epoch = 0
        self._prev_time: float | None = None
        self._entries: deque[_Entry] = deque()
        # Slots by (term number, model): a Term (a frozen dataclass) hashes slowly, an int does not.
        self._term_ids: dict[Term, int] = {}
        for s in tracked:
            for t in s.terms():
                self._term_ids.setdefault(t, len(self._term_ids))
        self._signal_terms: dict[int, _TermIds] = {id(s): self._ids(s) for s in tracked}
        self._slot_of: dict[tuple[int, ModelKey], int] = {}
        self._slot_version = 0  # changes when a slot is added or slots are renumbered
        # derive.evaluate_many's slot columns: (slot version, models) -> term number -> slot per model
        self._columns: tuple[tuple[int, tuple[ModelKey, ...]], dict[int, list[int]]] | None = None
        self._totals: list[float] = []
        self._refs: list[int] = []  # entries in the window that moved each slot
        self._live: set[int] = set()  # slots fed by a series of the last scrape
        self._gauges: dict[tuple[str, ModelKey], float] = {}
        self._fast: _Fast | None = None
        self.models: frozenset[ModelKey] = frozenset()

    def _ids(self, sig: Signal) -> _TermIds:
        tid = self._term_ids
        return (
            tuple(tid.get(t, -1) for t in sig.numerator),
            tuple(tid.get(t, -1) for t in sig.denominator),
            tuple(tid.get(t, -1) for t in sig.subtract),
            tuple(tid.get(t, -1) for t in sig.minus),
        )

    def _slot(self, term: Term, key: ModelKey) -> int:
        tk = (self._term_ids[term], key)
        slot = self._slot_of.get(tk)
        if slot is None:
            self._slot_version += 1
            slot = self._slot_of[tk] = len(self._totals)
            self._totals.append(0.0)
            self._refs.append(0)
        return slot

    def _series_info(self, family: str, labels: LabelSet, terms: tuple[Term, ...]) -> _Series | None:
        key = model_key(labels)
        if key is None:
            return None
        label_map = dict(labels)
        slots = tuple((self._slot(t, key), t.scale) for t in terms if t.accepts(label_map))
        return _Series(key, slots)

    def ingest(self, now: float, samples: Samples) -> None:
        """Add one successful scrape taken at ``now`` (seconds)."""
        self._epoch += 1
        layout = getattr(samples, "layout", None)
        fast = self._fast
        moved = None
        if fast is not None and layout is fast.layout:
            moved = self._ingest_fast(fast, getattr(samples, "flat", ()))
        if moved is None:
            if fast is not None:
                fast.write_back()
                self._fast = None
            moved = self._ingest_slow(samples)
            if isinstance(layout, Layout):
                self._fast = self._derive_fast(layout, samples)
        if self._prev_time is not None:
            self._entries.append(_Entry(self._prev_time, now, array("q", moved), array("d", moved.values())))
            totals, refs = self._totals, self._refs
            for slot, delta in moved.items():
                totals[slot] += delta
                refs[slot] += 1
        self._prev_time = now
        self._expire(now)

    def _ingest_slow(self, samples: Samples) -> dict[int, float]:
        moved: dict[int, float] = {}
        models: set[ModelKey] = set()
        known = self._series
        epoch = self._epoch
        seen = 0
        grew = False
        for family, terms in self._counter_terms.items():
            series = samples.get(family)
            if not series:
                continue
            for labels, value in series.items():
                skey = (family, labels)
                info = known.get(skey)
                if info is None:
                    info = self._series_info(family, labels, terms)
                    if info is None:
                        continue
                    known[skey] = info
                    grew = True
                seen += 1
                info.epoch = epoch
                if value != value:
                    # NaN: the series is still there; its last good value stays, so the next good
                    # one is compared with it (not taken as first sight, losing an interval).
                    continue
                models.add(info.key)
                before = info.prev
                info.prev = value
                if before != before:
                    continue  # first sight: nothing to compare with, as Prometheus's increase()
                delta = counter_increase(before, value)
                if delta == 0.0:
                    continue
                for slot, scale in info.slots:
                    moved[slot] = moved.get(slot, 0.0) + delta * scale
        if seen != len(known):  # series gone from the payload are forgotten (unloaded models)
            self._series = {k: v for k, v in known.items() if v.epoch == epoch}
            grew = True
        if grew:
            self._live = {slot for info in self._series.values() for slot, _ in info.slots}
        gauges: dict[tuple[str, ModelKey], float] = {}
        for family in self._gauge_families:
            for labels, value in samples.get(family, {}).items():
                key = model_key(labels)
                if key is None or math.isnan(value):
                    continue
                models.add(key)
                gk = (family, key)
                gauges[gk] = gauges.get(gk, 0.0) + value  # summed over gpu_uuid splits
        self._gauges = gauges
        self.models = frozenset(models)
        return moved

    def _derive_fast(self, layout: Layout, samples: Samples) -> _Fast | None:
        """Map a layout's flat values to the series the slow path just ingested (same walk order)."""
        where = {name: (labelsets, start) for name, labelsets, start, _end in layout.series}
        infos: list[_Series] = []
        positions: list[int] = []
        for family, terms in self._counter_terms.items():
            if family not in where:
                continue
            labelsets, start = where[family]
            if any(t.scale <= 0 for t in terms):
                return None  # the fast path's sums assume increases only grow
            for k, labels in enumerate(labelsets):
                info = self._series.get((family, labels))
                if info is not None:
                    infos.append(info)
                    positions.append(start + k)
        fast = _Fast(layout, infos, positions)
        gauge_positions: list[int] = []
        for family in self._gauge_families:
            if family not in where:
                continue
            labelsets, start = where[family]
            for k, labels in enumerate(labelsets):
                key = model_key(labels)
                if key is not None:
                    gauge_positions.append(start + k)
                    fast.gauge_keys.append((family, key))
        fast.gauge_pick = picker(gauge_positions)
        fast.models = self.models
        return fast

    def _ingest_fast(self, fast: _Fast, flat: Sequence[float]) -> dict[int, float] | None:
        """The same increases as ``_ingest_slow`` for an unchanged layout, or None for the slow path
        (a NaN, a reset: rare, and handled there)."""
        current = fast.pick(flat)
        deltas = list(map(sub, current, fast.prev))
        if deltas and (min(deltas) < 0.0 or any(map(math.isnan, deltas))):
            return None  # (min() of a list with a NaN can miss it: both are checked)
        gauge_values = fast.gauge_pick(flat)
        if any(map(math.isnan, gauge_values)):
            return None
        gauges: dict[tuple[str, ModelKey], float] = {}
        for gk, value in zip(fast.gauge_keys, gauge_values, strict=True):
            gauges[gk] = gauges.get(gk, 0.0) + value
        contributions = list(map(mul, fast.pick_pairs(deltas), fast.scales))
        moved = dict(zip(fast.first_slots, fast.pick_first(contributions), strict=True))
        for p, slot in fast.extra:
            moved[slot] += contributions[p]
        fast.prev = current
        self._gauges = gauges
        self.models = fast.models
        return {slot: delta for slot, delta in moved.items() if delta}

    def _expire(self, now: float) -> None:
        totals, refs = self._totals, self._refs
        while self._entries and self._entries[0].end <= now - self.window:
            e = self._entries.popleft()
            for slot, delta in zip(e.slots, e.deltas, strict=True):
                refs[slot] -= 1
                # Exactly 0 once nothing in the window moved it: no float residue posing as traffic.
                totals[slot] = totals[slot] - delta if refs[slot] else 0.0
        # (count(0) in C: a generator over every slot cost more than the expiry itself)
        if len(self._slot_of) > 1024 and len(self._slot_of) > 4 * (len(refs) - refs.count(0)):
            self._compact()

    def _compact(self) -> None:
        """Forget slots of models that left the window (model churn), renumbering the rest."""
        if self._fast is not None:
            self._fast.write_back()
            self._fast = None  # it holds slot numbers
        keep = {k: s for k, s in self._slot_of.items() if self._refs[s] or k[1] in self.models}
        renumber = {old: new for new, old in enumerate(sorted(keep.values()))}
        self._slot_version += 1
        self._slot_of = {k: renumber[s] for k, s in keep.items()}
        self._totals = [self._totals[old] for old in sorted(renumber)]
        self._refs = [self._refs[old] for old in sorted(renumber)]
        self._entries = deque(
            _Entry(e.start, e.end, array("q", (renumber[s] for s in e.slots)), e.deltas)
            for e in self._entries
        )
        for info in self._series.values():  # every known series belongs to a current model: kept
            info.slots = tuple((renumber[s], scale) for s, scale in info.slots)
        self._live = {slot for info in self._series.values() for slot, _ in info.slots}

    @property
    def generation(self) -> int:
        """Changes with every ingested scrape."""
        return self._epoch

    def span(self) -> float:
        if not self._entries:
            return 0.0
        return self._entries[-1].end - self._entries[0].start

    def increase(self, term: Term, key: ModelKey) -> float:
        """The term's increase for the model over the window (0 where it has none)."""
        slot = self._slot_of.get((self._term_ids.get(term, -1), key))
        return 0.0 if slot is None else self._totals[slot]

    def term_ids(self, sig: Signal) -> _TermIds:
        """The signal's term numbers: numerator, denominator, subtracted from it, from the numerator."""
        return self._signal_terms.get(id(sig)) or self._ids(sig)

    @property
    def totals(self) -> list[float]:
        """Each slot's increase over the window (read only, under the owner's lock)."""
        return self._totals

    @property
    def refs(self) -> list[int]:
        """Each slot's entries in the window (a slot moved in the window has some)."""
        return self._refs

    @property
    def live(self) -> set[int]:
        """Slots fed by a series of the last scrape."""
        return self._live

    @property
    def gauges(self) -> dict[tuple[str, ModelKey], float]:
        """(family, model) -> the gauge's value in the last scrape, summed over gpu_uuid splits."""
        return self._gauges

    def column(self, term_id: int, keys: tuple[ModelKey, ...], cached: bool = True) -> list[int]:
        """Each model's slot for one term (``len(self.totals)`` where it has none); ``cached``: kept
        for the next call with the same models (one set of models at a time)."""
        if not cached:
            missing, slot_of = len(self._totals), self._slot_of
            return [slot_of.get((term_id, k), missing) for k in keys]
        ident = (self._slot_version, keys)
        if self._columns is None or self._columns[0] != ident:
            self._columns = (ident, {})
        columns = self._columns[1]
        column = columns.get(term_id)
        if column is None:
            missing, slot_of = len(self._totals), self._slot_of
            column = columns[term_id] = [slot_of.get((term_id, k), missing) for k in keys]
        return column


K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class _KeyedEntry(Generic[K]):
    start: float
    end: float
    deltas: Mapping[K, float]


class IncreaseWindow(Generic[K]):
    """Reset-aware increases of counters over the scrapes of the last ``window`` seconds.

    ``ingest(now, rows)`` takes ``(series, key, value)`` rows: the increase of each series since the
    previous scrape (``counter_increase``) is added to its ``key``, so many series (e.g. the three
    compute phases) can sum into one key. For a few keys (GPUs); the per-model hot path is
    ``CounterWindow``.
    """

    def __init__(self, window: float) -> None:
        self.window = window
        self._prev: dict[Hashable, float] = {}
        self._prev_time: float | None = None
        self._entries: deque[_KeyedEntry[K]] = deque()
        self.last: dict[K, float] = {}  # the increases of the latest ingest alone

    def ingest(self, now: float, rows: Iterable[tuple[Hashable, K, float]]) -> None:
        deltas: dict[K, float] = {}
        current: dict[Hashable, float] = {}
        for series, key, value in rows:
            if math.isnan(value):
                # Still there: keep its last good value, or the next good one reads as first sight.
                if series in self._prev:
                    current[series] = self._prev[series]
                continue
            current[series] = value
            before = self._prev.get(series)
            if before is None:
                continue
            deltas[key] = deltas.get(key, 0.0) + counter_increase(before, value)
        if self._prev_time is not None:
            self._entries.append(_KeyedEntry(self._prev_time, now, deltas))
        self.last = deltas
        self._prev = current
        self._prev_time = now
        while self._entries and self._entries[0].end <= now - self.window:
            self._entries.popleft()

    def clear(self) -> None:
        self._prev = {}
        self._prev_time = None
        self._entries.clear()
        self.last = {}

    def span(self) -> float:
        if not self._entries:
            return 0.0
        return self._entries[-1].end - self._entries[0].start

    def increases(self) -> dict[K, float]:
        out: dict[K, float] = {}
        for e in self._entries:
            for k, v in e.deltas.items():
                out[k] = out.get(k, 0.0) + v
        return out
