"""``LatencyPart``: joined per-request phase durations -> histograms and windowed quantiles, with
Triton's summaries as the fallback at scrape time."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import compress

from prometheus_client.core import HistogramMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch.exporters.exposition import TextFamily, Texts
from tritonwatch.exporters.native_latency import NativeModel
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.snapshot import Snapshots
from tritonwatch.exporters.source import Updates
from tritonwatch.exporters.traces.store import PER_SLICE, Histograms, SampleStore, quantiles_of, settle
from tritonwatch.exporters.traces.summaries import Row, SummaryReader, SummaryRows
from tritonwatch.exporters.traces.timing import RequestTiming

SOURCE_TRACE = "trace"
SOURCE_SUMMARY = "summary"
SOURCE_HISTOGRAM = catalog.LLM_SOURCE_HISTOGRAM  # Triton's own histogram, interpolated as histogram_quantile
REQUEST = "request"


class LatencyPart(Part):
    """Per-request phase durations -> histograms and windowed quantiles; summary fallback at scrape time.

    A subscriber of the joiner's timings (``join.TimingPublisher``), as the step and LLM parts are;
    ``updates`` are told before and after a batch it records itself (a part tried alone); ``prepared`` as ``PartContext.prepared``; ``snapshots``: the
    Triton scrape's, for its summaries; ``served``: the (model, version) pairs Triton serves, where
    traces can arrive: their histograms start at zero and stay while the model is idle."""

    def __init__(
        self,
        quantile_window: float,
        buckets: Sequence[float] = catalog.DEFAULT_BUCKETS,
        snapshots: Snapshots | None = None,
        max_keys: int = 2000,
        clock: Callable[[], float] = time.time,
        per_slice: int = PER_SLICE,
        updates: Sequence[Updates] = (),
        prepared: bool = False,
        texts: Texts | None = None,
        served: Callable[[], Iterable[tuple[str, str]]] | None = None,
        native: Callable[[], Mapping[tuple[str, str], NativeModel]] | None = None,
    ) -> None:
        self.quantile_window = quantile_window
        self.store = SampleStore(quantile_window, per_slice=per_slice, max_keys=max_keys)
        self.histograms = Histograms(buckets, max_keys=max_keys)
        self.snapshots = snapshots
        self.clock = clock
        # One request lands in the store and the histograms together: a scrape never sees it in one only.
        self._lock = threading.Lock()
        self._summary_cache: tuple[int, SummaryRows] | None = None
        self._summary_reader = SummaryReader()
        self._labels_cache: tuple[list[Row], list[tuple[str, ...]]] | None = None
        self._recorded = 0  # batches recorded: with the Triton scrape and the time slice, the cache key
        self._families: tuple[tuple[object, ...], list[Metric]] | None = None
        self.updates = list(updates)
        self.prepared = prepared
        self.texts = texts
        self.served = served
        # Triton's own request-latency histogram per (model, version) (exporters/native_latency.py):
        # where a model has it, its request phase comes from it, not from traces or summaries.
        self.native = native
        # (the served pairs, their histogram keys): built and seeded again only when the pairs change
        self._served: tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str, str]]] | None = None

    def record(self, timings: Iterable[RequestTiming], now: float | None = None) -> int:
        now = self.clock() if now is None else now
        timings = list(timings)
        n = len(timings)
        for u in self.updates:
            u.begin()
        try:
            with self._lock:
                for t in timings:
                    for phase, seconds in t.phases.items():
                        key = (t.model, t.version, phase)
                        self.store.add(key, seconds, now)
                        if phase in catalog.HISTOGRAM_PHASES:
                            self.histograms.observe(key, seconds, now)
                if n:
                    self._recorded += 1
        finally:
            for u in self.updates:
                u.end()
        return n

    def _key(self, now: float) -> tuple[object, ...]:
        snapshot = None if self.snapshots is None else self.snapshots.latest
        return (
            self._recorded,
            None if snapshot is None else (snapshot.generation, snapshot.up),
            self.store.slice_of(now),
        )

    def prepare(self) -> bool:
        """Build the families if traces, Triton's summaries or the time slice moved; True if it did."""
        now = self.clock()
        key = self._key(now)
        if self._families is not None and self._families[0] == key:
            return False
        self._families = (key, self._build(now))
        return True

    def collect(self) -> Iterator[Metric]:
        """The families, built again only when traces, Triton's summaries or the time slice moved
        (with ``prepared``: as last prepared)."""
        cached = self._families
        # Spans recorded since are built now: a reader who sent them must see them. A new Triton
        # scrape or time slice may wait for the render thread (at most one update behind).
        if cached is None or not self.prepared or cached[0][0] != self._recorded:
            self.prepare()
            cached = self._families
        assert cached is not None
        yield from cached[1]

    def _build(self, now: float) -> list[Metric]:
        key_labels = [*catalog.MODEL_KEY, catalog.PHASE]
        hist = HistogramMetricFamily(
            catalog.REQUEST_DURATION,
            "Per-request latency by phase from sampled Triton traces (cumulative since sidecar start); the "
            "request phase of a non-decoupled model with Triton's first-response histogram is that histogram.",
            labels=key_labels,
        )
        served, changed = self._served_keys()
        with self._lock:  # copies only: the receiver waits on this lock
            self.histograms.expire(now - self.quantile_window, served)
            if changed:  # kept by expire, a seeded key needs no second seed
                self.histograms.seed(sorted(served))
            snapshot = self.histograms.snapshot()
            taken = {k: self.store.take(k, now) for k in self.store.keys(now)}
        native = {(*k, REQUEST): v for k, v in self.native().items()} if self.native else {}
        found = {k: quantiles_of(settle(t), catalog.QUANTILES) for k, t in taken.items() if k not in native}
        for key, buckets, total, _n in snapshot:
            if key not in native:
                hist.add_metric(list(key), buckets, total)
        for key, model in sorted(native.items()):
            hist.add_metric(list(key), model.buckets, model.total)
        quant = TextFamily(
            catalog.LATENCY_QUANTILE,
            "Latency quantile by phase: request phase from Triton's own first-response histogram for a "
            "non-decoupled model (source=histogram, as histogram_quantile over the window), else exact over "
            "sampled traces in the quantile window (source=trace), else Triton's own 60 s summary "
            "(source=summary).",
            [*key_labels, catalog.QUANTILE, catalog.SOURCE],
            texts=self.texts,
        )
        samples = TextFamily(
            catalog.LATENCY_SAMPLES,
            "Traced requests behind the source=trace latency quantiles (in the quantile window).",
            key_labels,
            texts=self.texts,
        )
        traced: set[tuple[str, ...]] = set()
        for key, q in found.items():
            if q is None:
                continue
            traced.add(key)
            for label, value in q.values.items():
                quant.add_metric([*key, label, SOURCE_TRACE], value)
            samples.add_metric(list(key), float(q.count))
        for key, model in sorted(native.items()):
            for label, value in model.quantiles.items():
                quant.add_metric([*key, label, SOURCE_HISTOGRAM], value)
        traced |= native.keys()  # one source per model and phase: Triton's histogram, then traces
        summary = self._summaries()  # in Triton's order: no sort of 10,000 keys
        labels = self._summary_labels(summary.rows)
        found_values = summary.seconds
        if traced:  # one source per model and phase: traces win
            keep = [row[:3] not in traced for row in summary.rows]
            labels, found_values = list(compress(labels, keep)), list(compress(found_values, keep))
        quant.add_many(labels, found_values)
        return [hist, quant, samples]

    def _served_keys(self) -> tuple[frozenset[tuple[str, str, str]], bool]:
        """The histogram keys of the served models, and whether they changed since the last build."""
        if self.served is None:
            return frozenset(), False
        pairs = frozenset(self.served())
        cached = self._served
        if cached is not None and cached[0] == pairs:
            return cached[1], False
        keys = frozenset((m, v, phase) for m, v in pairs for phase in catalog.HISTOGRAM_PHASES)
        self._served = (pairs, keys)
        return keys, True

    def _summary_labels(self, rows: list[Row]) -> list[tuple[str, ...]]:
        """The rows' label sets (source "summary"), the same tuples while the rows are the same."""
        cached = self._labels_cache
        if cached is not None and cached[0] == rows:
            return cached[1]
        labels: list[tuple[str, ...]] = [(*row, SOURCE_SUMMARY) for row in rows]
        self._labels_cache = (rows, labels)
        return labels

    def _summaries(self) -> SummaryRows:
        """Triton's summary quantiles (``exporters/traces/summaries.py``), read once per Triton scrape.

        A snapshot is replaced whole, never changed: the scrape loop and requests rendering /metrics
        never wait for the read.
        """
        snapshot = None if self.snapshots is None else self.snapshots.latest
        if snapshot is None or not snapshot.up:
            return SummaryRows()
        generation, samples = snapshot.generation, snapshot.samples
        cached = self._summary_cache
        if cached is not None and cached[0] == generation:
            return cached[1]  # read once per Triton scrape, not per Prometheus scrape
        rows = self._summary_reader.rows(samples)
        self._summary_cache = (generation, rows)
        return rows
