"""An ensemble's request time broken down by step, from Triton's traces (trace files, ``mode=triton``).

In a trace file each step of an ensemble (and each model a BLS model calls with ``trace=request.trace()``)
is a trace of its own whose ``parent_id`` is the client's request. The ensemble's request has
REQUEST_START and REQUEST_END and no COMPUTE_* of its own; a BLS model's has its COMPUTE_*, and its
children run inside them. Triton starts a step 0.03-0.6 ms before the previous one's COMPUTE_END, so
the steps are cut at the next step's REQUEST_START (``segments``): step 1 runs from the ensemble's
REQUEST_START, the last one to its REQUEST_END, and the segments add up to the request's duration to
the nanosecond. Each segment is ``queue`` up to the step's COMPUTE_START (hand-over and waiting in the
step's queue) and ``compute`` from there. A trace carries no status: a failed request is a chain that
stops early, its last segment running to the end of the request.

``StepPart`` (fed every batch of traced requests) emits, over ``--quantile-window``:

    tritonwatch_ensemble_step_latency_seconds{model,version,step,phase}
        mean per traced request of the ensemble (steps it did not reach count 0): the steps'
        values add up to the ensemble's mean traced request duration
    tritonwatch_ensemble_step_latency_quantile_seconds{model,version,step,phase,quantile}
        exact nearest rank of the step's segments (over requests that reached the step)
    tritonwatch_ensemble_step_seconds_total{model,version,step,phase}, tritonwatch_ensemble_traced_requests_total
        the same cumulative since the sidecar started: their rates, summed across replicas and
        divided, are the mean per traced request for a fleet (``catalog.ensemble_step_promql``)
    tritonwatch_ensemble_chain_ends_total{model,version,step}
        traced requests by the last step their chain reached: where it is not the ensemble's last
        step, the request failed there

and tells the collector which models called others from their own code (role ``bls``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import Metric

from tritonwatch import catalog
from tritonwatch.exporters.exposition import TextFamily, Texts
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.traces.store import PER_SLICE, SampleStore
from tritonwatch.exporters.traces.timing import RequestTiming

StepKey = tuple[str, str, str, str]  # ensemble, version, step, phase


class StepPart(Part):
    """Windowed step breakdown of traced ensemble requests; thread-safe."""

    def __init__(
        self,
        window: float,
        slices: int = 10,
        per_slice: int = PER_SLICE,
        max_keys: int = 20_000,
        clock: Callable[[], float] = time.time,
        texts: Texts | None = None,
    ) -> None:
        self.texts = texts
        self.store = SampleStore(window, slices=slices, per_slice=per_slice, max_keys=max_keys)
        self.clock = clock
        self._lock = threading.Lock()
        # Exact sums for the means, per time slice as the store keeps its values: slice -> key -> ns.
        self._sums: dict[int, dict[StepKey, int]] = {}
        self._requests: dict[int, dict[tuple[str, str], int]] = {}
        self._bls: dict[str, float] = {}  # model seen calling others -> last seen (time)
        self._total_ns: dict[StepKey, int] = {}  # cumulative, never expire
        self._total_requests: dict[tuple[str, str], int] = {}
        self._ends: dict[tuple[str, str, str], int] = {}  # (ensemble, version, last step) -> requests
        self.window = window

    def record(self, timings: Iterable[RequestTiming], now: float | None = None) -> None:
        """Every batch of traced requests (a subscriber of ``PartContext.timings``)."""
        now = self.clock() if now is None else now
        idx = self.store.slice_of(now)
        with self._lock:
            sums = self._sums.setdefault(idx, {})
            counts = self._requests.setdefault(idx, {})
            for t in timings:
                if t.calls:
                    self._bls[t.model] = now
                if not t.steps:
                    continue
                ensemble = (t.model, t.version)
                counts[ensemble] = counts.get(ensemble, 0) + 1
                self._total_requests[ensemble] = self._total_requests.get(ensemble, 0) + 1
                end = (*ensemble, t.steps[-1].step)
                self._ends[end] = self._ends.get(end, 0) + 1
                for seg in t.steps:
                    for phase, ns in zip(catalog.STEP_PHASES, (seg.queue_ns, seg.compute_ns), strict=True):
                        key = (t.model, t.version, seg.step, phase)
                        sums[key] = sums.get(key, 0) + ns
                        self._total_ns[key] = self._total_ns.get(key, 0) + ns
                        self.store.add(key, ns / 1e9, now)
            oldest = idx - self.store.slices
            for old in [i for i in self._sums if i < oldest]:
                del self._sums[old], self._requests[old]

    def bls_models(self) -> frozenset[str]:
        """Models seen in the window calling other models from their own code."""
        now = self.clock()
        with self._lock:
            return frozenset(m for m, at in self._bls.items() if now - at <= self.window)

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        oldest = self.store.slice_of(now) - self.store.slices
        with self._lock:
            sums: dict[StepKey, int] = {}
            requests: dict[tuple[str, str], int] = {}
            for idx, per in self._sums.items():
                if idx >= oldest:
                    for k, ns in per.items():
                        sums[k] = sums.get(k, 0) + ns
                    for e, n in self._requests[idx].items():
                        requests[e] = requests.get(e, 0) + n
            totals = sorted(self._total_ns.items())
            traced = sorted(self._total_requests.items())
            ends = sorted(self._ends.items())
        labels = [*catalog.MODEL_KEY, catalog.STEP, catalog.PHASE]
        mean = TextFamily(
            catalog.ENSEMBLE_STEP_LATENCY, catalog.ENSEMBLE_STEP_LATENCY_HELP, labels, texts=self.texts
        )
        quant = TextFamily(
            catalog.ENSEMBLE_STEP_QUANTILE,
            catalog.ENSEMBLE_STEP_QUANTILE_HELP,
            [*labels, catalog.QUANTILE],
            texts=self.texts,
        )
        for key in sorted(sums):
            n = requests.get((key[0], key[1]), 0)
            if n:
                mean.add_metric(list(key), sums[key] / n / 1e9)
            q = self.store.quantiles(key, now, catalog.QUANTILES)
            if q is not None:
                for label, value in q.values.items():
                    quant.add_metric([*key, label], value)
        seconds = TextFamily(
            catalog.ENSEMBLE_STEP_SECONDS.removesuffix("_total"),
            "Time traced requests of the ensemble spent in each step, by phase (cumulative).",
            labels,
            "counter",
            self.texts,
        )
        for key, ns in totals:
            seconds.add_metric(list(key), ns / 1e9)
        requests_total = TextFamily(
            catalog.ENSEMBLE_TRACED_REQUESTS.removesuffix("_total"),
            "Traced requests of the ensemble whose steps were cut (cumulative).",
            list(catalog.MODEL_KEY),
            "counter",
            self.texts,
        )
        for ensemble, n in traced:
            requests_total.add_metric(list(ensemble), float(n))
        chain_ends = TextFamily(
            catalog.ENSEMBLE_CHAIN_ENDS.removesuffix("_total"),
            "Traced requests of the ensemble by the last step their chain reached (cumulative); a chain "
            "that ends before the ensemble's last step failed there.",
            [*catalog.MODEL_KEY, catalog.STEP],
            "counter",
            self.texts,
        )
        for end, n in ends:
            chain_ends.add_metric(list(end), float(n))
        yield from (mean, quant, seconds, requests_total, chain_ends)
