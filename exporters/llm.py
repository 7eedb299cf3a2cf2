"""The LLM part of the sidecar: streaming (decoupled) models served by vLLM, TensorRT-LLM or any backend.

Emits, labels ``model``, ``version`` (each family only for models that have its inputs)::

    tritonwatch_llm_time_to_first_token_seconds{le}   histogram: vLLM's (or Triton's first-response,
    tritonwatch_llm_inter_token_latency_seconds{le}   ms -> s) passed through, else sampled traces
    tritonwatch_llm_time_to_first_token_quantile_seconds{quantile,source}   0.5, 0.9, 0.99 over the
    tritonwatch_llm_inter_token_latency_quantile_seconds{quantile,source}   window: trace (exact) | histogram
    tritonwatch_llm_prompt_tokens_per_second        vllm:prompt_tokens_total | nv_llm_input_token_len_sum
    tritonwatch_llm_generation_tokens_per_second    vllm:generation_tokens_total | nv_llm_output_token_len_sum
                                                    | request rate x mean responses per traced request
    tritonwatch_llm_requests_running, _requests_waiting, _kv_cache_utilization_ratio, _preemptions_per_second
    (a gauge takes the first input a model has: vLLM 0.9-0.10 serves the KV cache under two names)

Formulas live in ``tritonwatch.catalog`` (``LLM_SIGNALS``, ``LLM_HISTOGRAMS``). Counter inputs go
through the same reset-aware increase as every other signal. Traces (OpenTelemetry root spans or
Triton trace files: one INFER_RESPONSE_COMPLETE per response) give each request's time to first
token (first response - REQUEST_START) and its gaps between responses, for models seen streaming (a
traced request with two responses or more). A backend that sends an empty final response counts one
response more than its tokens; vLLM and TensorRT-LLM send the last token with the final flag.

An ensemble clients call (TensorRT-LLM's ``ensemble``: preprocessing -> tensorrt_llm -> postprocessing)
has no LLM families of its own: where exactly one of its steps (model and version) has a latency
histogram, the ensemble serves that step's histogram and quantiles under its own model and version
(``llm_entries``), so TTFT and inter-token SLOs can be set on the entry model; the Prometheus rules
read these exported histograms, so both engines see the same buckets. Token rates, queue and KV cache
stay on the step (the rules compute them from the backend's own families, which only the step has).
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from tritonwatch import catalog
from tritonwatch.catalog import LlmSignal
from tritonwatch.expfmt import Samples
from tritonwatch.exporters.context import PartContext, RequestRates, no_request_rates
from tritonwatch.exporters.native_latency import bucket_quantile
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.snapshot import Snapshots
from tritonwatch.exporters.source import Source
from tritonwatch.exporters.traces.store import PER_SLICE, Histograms, SampleStore
from tritonwatch.exporters.traces.timing import RequestTiming
from tritonwatch.exporters.window import IncreaseWindow, ModelKey, model_key

HistKey = tuple[str, ModelKey]  # (exported histogram name, model)
Topology = tuple[Mapping[str, tuple[str, ...]], Mapping[ModelKey, bool]]  # ensembles' steps, readiness


def llm_entries(topology: Topology, have: Iterable[ModelKey]) -> dict[ModelKey, ModelKey]:
    """READY ensemble -> the one step (model, version) in ``have``, for ensembles without a value of
    their own; none where two steps (or two versions of one) have it: which would be ambiguous."""
    ensembles, ready = topology
    present = set(have)
    out = {}
    for key, ok in sorted(ready.items()):
        steps = ensembles.get(key[0])
        if not ok or steps is None or key in present:
            continue
        found = [k for k in present if k[0] in steps]
        if len(found) == 1:
            out[key] = found[0]
    return out


def _no_topology() -> Topology:
    return {}, {}


class BackendHistograms:
    """Per model: the cumulative buckets of the first backend source it has, and their window increases."""

    def __init__(self, window: float, accept: Callable[[str, ModelKey], bool] | None = None) -> None:
        self.window: IncreaseWindow[tuple[HistKey, float]] = IncreaseWindow(window)
        # (source family, model) -> whether that source feeds the model's LLM histogram: Triton's
        # first-response histogram only for decoupled models (else it is request latency,
        # exporters/native_latency.py)
        self.accept = accept
        # (name, model) -> (sorted (le seconds, cumulative count), sum seconds, count)
        self.cumulative: dict[HistKey, tuple[list[tuple[float, float]], float, float]] = {}

    def observe(self, now: float, samples: Samples) -> None:
        rows: list[tuple[object, tuple[HistKey, float], float]] = []
        cumulative: dict[HistKey, tuple[list[tuple[float, float]], float, float]] = {}
        for hist in catalog.LLM_HISTOGRAMS:
            for family, scale in hist.sources:
                buckets: dict[HistKey, dict[float, float]] = {}
                for labels, value in samples.get(f"{family}_bucket", {}).items():
                    key = model_key(labels)
                    le = dict(labels).get("le")
                    if key is None or le is None or (hist.name, key) in cumulative:
                        continue  # an earlier source of this histogram won for the model
                    if self.accept is not None and not self.accept(family, key):
                        continue
                    bound = float(le) * scale if le != "+Inf" else math.inf
                    per = buckets.setdefault((hist.name, key), {})
                    per[bound] = per.get(bound, 0.0) + value
                    rows.append(((family, labels), ((hist.name, key), bound), value))
                sums: dict[HistKey, float] = {}
                for labels, value in samples.get(f"{family}_sum", {}).items():
                    key = model_key(labels)
                    if key is not None and (hist.name, key) in buckets:
                        sums[(hist.name, key)] = sums.get((hist.name, key), 0.0) + value * scale
                for hk, per in buckets.items():
                    pairs = sorted(per.items())
                    if not pairs or not math.isinf(pairs[-1][0]):
                        continue  # no +Inf bucket: not a histogram Prometheus would accept either
                    cumulative[hk] = (pairs, sums.get(hk, 0.0), pairs[-1][1])
        self.window.ingest(now, rows)
        self.cumulative = cumulative

    def quantiles(self, qs: Sequence[str]) -> dict[HistKey, tuple[dict[str, float], float]]:
        """Per (histogram, model) with observations in the window: quantile -> seconds, and the count."""
        per: dict[HistKey, dict[float, float]] = {}
        for (hk, bound), inc in self.window.increases().items():
            d = per.setdefault(hk, {})
            d[bound] = d.get(bound, 0.0) + inc
        out: dict[HistKey, tuple[dict[str, float], float]] = {}
        for hk, d in per.items():
            pairs = sorted(d.items())
            values = {q: v for q in qs if (v := bucket_quantile(float(q), pairs)) is not None}
            if values:
                out[hk] = (values, pairs[-1][1])
        return out


class LlmWindow:
    """Fed every successful Triton scrape (a subscriber of its snapshots); read under ``lock``."""

    def __init__(self, window: float, accept: Callable[[str, ModelKey], bool] | None = None) -> None:
        self.lock = threading.Lock()
        self.rates: IncreaseWindow[tuple[str, ModelKey]] = IncreaseWindow(window)
        self.gauges: dict[tuple[str, ModelKey], list[float]] = {}
        self.histograms = BackendHistograms(window, accept)
        self._times: deque[float] = deque()  # scrape times in the window, for bounds()

    def bounds(self) -> tuple[float, float] | None:
        """First and last scrape time of the window's rates (None before two scrapes)."""
        return (self._times[0], self._times[-1]) if len(self._times) > 1 else None

    def observe(self, now: float, samples: Samples) -> None:
        with self.lock:
            self._observe(now, samples)

    def _observe(self, now: float, samples: Samples) -> None:
        rows: list[tuple[object, tuple[str, ModelKey], float]] = []
        gauges: dict[tuple[str, ModelKey], list[float]] = {}
        for sig in catalog.LLM_SIGNALS:
            filled: set[ModelKey] = set()  # gauges: the first input a model has wins, as PromQL's ``or``
            for inp in sig.inputs:
                mine: set[ModelKey] = set()
                for labels, value in samples.get(inp.sample, {}).items():
                    key = model_key(labels)
                    if key is None or key in filled or not inp.accepts(dict(labels)):
                        continue
                    if sig.kind == "rate":
                        rows.append(((inp.sample, labels), (sig.name, key), value * inp.scale))
                    elif not math.isnan(value):
                        gauges.setdefault((sig.name, key), []).append(value * inp.scale)
                        mine.add(key)
                filled |= mine
        self.rates.ingest(now, rows)
        self._times.append(now)
        while len(self._times) > 1 and self._times[1] <= now - self.rates.window:
            self._times.popleft()  # the same entries IncreaseWindow keeps: end > now - window
        self.gauges = gauges
        self.histograms.observe(now, samples)

    def value(self, sig: LlmSignal, key: ModelKey) -> float | None:
        """The signal's value for one model over the window; None when it has no inputs."""
        return self.values(sig).get(key)

    def values(
        self, sig: LlmSignal, increases: dict[tuple[str, ModelKey], float] | None = None
    ) -> dict[ModelKey, float]:
        """The signal's value per model that has its inputs (``increases``: the rates' window, summed)."""
        if sig.kind == "rate":
            span = self.rates.span()
            if span <= 0:
                return {}
            inc = self.rates.increases() if increases is None else increases
            return {k: v / span for (name, k), v in inc.items() if name == sig.name}
        out = {}
        for (name, key), values in self.gauges.items():
            if name == sig.name and values:
                out[key] = sum(values) / len(values) if sig.kind == "mean" else sum(values)
        return out


class LlmTraces:
    """Streaming requests from traces: per-request time to first token, gaps, responses per request."""

    def __init__(
        self, window: float, buckets: Sequence[float], max_keys: int = 2000, per_slice: int = PER_SLICE
    ) -> None:
        self.window = window
        self.store = SampleStore(window, per_slice=per_slice, max_keys=max_keys)
        self.histograms = Histograms(buckets, max_keys=max_keys)
        self._lock = threading.Lock()
        self._tokens: dict[ModelKey, deque[tuple[float, int]]] = {}
        self._streaming: set[ModelKey] = set()

    def record(self, timings: list[RequestTiming], now: float) -> None:
        for t in timings:
            key = (t.model, t.version)
            # Every traced request has one response at least: a model counts as streaming from its
            # first request with two, so ordinary models never get a time to first token.
            if len(t.responses) >= 2:
                self._streaming.add(key)
            if not t.responses or key not in self._streaming:
                continue
            ttft = ("time_to_first_token", t.responses[0])
            gaps = [("inter_token", b - a) for a, b in zip(t.responses, t.responses[1:], strict=False)]
            with self._lock:
                for measure, seconds in (ttft, *gaps):
                    self.store.add((*key, measure), seconds, now)
                    self.histograms.observe((*key, measure), seconds)
                self._tokens.setdefault(key, deque()).append((now, len(t.responses)))

    def mean_tokens(self, now: float) -> dict[ModelKey, float]:
        out = {}
        with self._lock:
            for key, q in self._tokens.items():
                while q and q[0][0] <= now - self.window:
                    q.popleft()
                if q:
                    out[key] = sum(n for _t, n in q) / len(q)
        return out


class LlmPart(Part):
    """Builds the LLM families at scrape time from the Triton window and the traces.

    ``request_rates``: successful requests/s per model (the counter window's), for streaming models
    without token counters."""

    def __init__(
        self,
        snapshots: Snapshots,
        window: LlmWindow,
        traces: LlmTraces,
        clock: Callable[[], float] = time.time,
        topology: Callable[[], Topology] = _no_topology,
        request_rates: RequestRates = no_request_rates,
    ) -> None:
        self.snapshots = snapshots
        self.request_rates = request_rates
        self.window = window
        self.traces = traces
        self.clock = clock
        self.topology = topology

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        labels = list(catalog.MODEL_KEY)
        fresh = self.snapshots.serving() is not None
        with self.window.lock:
            values: dict[str, dict[ModelKey, float]] = {}
            cumulative: dict[HistKey, tuple[list[tuple[float, float]], float, float]] = {}
            backend_q: dict[HistKey, tuple[dict[str, float], float]] = {}
            traced: dict[ModelKey, float] = {}
            if fresh:
                increases = self.window.rates.increases()  # once for every rate signal
                values = {sig.name: self.window.values(sig, increases) for sig in catalog.LLM_SIGNALS}
                cumulative = dict(self.window.histograms.cumulative)
                backend_q = self.window.histograms.quantiles(catalog.LLM_QUANTILES)
        if fresh:
            traced = self._traced_generation(now)
        for sig in catalog.LLM_SIGNALS:
            fam = GaugeMetricFamily(sig.name, sig.help, labels=labels)
            per = dict(values.get(sig.name, {}))
            if sig.name == catalog.LLM_GENERATION_TOKENS_RATE:
                per = {**traced, **per}  # the backend's own counter wins
            for key, value in sorted(per.items()):
                fam.add_metric(list(key), value)
            yield fam
        topology = self.topology()  # one API scrape for both families
        yield from self._histograms(cumulative, topology)
        yield from self._quantiles(now, backend_q, topology)

    def _traced_generation(self, now: float) -> dict[ModelKey, float]:
        """Streaming models without token counters: successful requests/s x mean responses per request."""
        tokens_of = self.traces.mean_tokens(now)
        rates = self.request_rates(list(tokens_of)) if tokens_of else {}
        return {key: rates[key] * tokens for key, tokens in tokens_of.items() if key in rates}

    def _histograms(
        self, cumulative: dict[HistKey, tuple[list[tuple[float, float]], float, float]], topology: Topology
    ) -> Iterator[Metric]:
        traced = {(m, v, measure): (b, s) for (m, v, measure), b, s, _n in self.traces.histograms.snapshot()}
        for hist in catalog.LLM_HISTOGRAMS:
            fam = HistogramMetricFamily(hist.name, hist.help, labels=list(catalog.MODEL_KEY))
            per: dict[ModelKey, tuple[list[tuple[str, float]], float]] = {}
            for (name, key), (pairs, total, _count) in cumulative.items():
                if name == hist.name:
                    per[key] = (
                        [("+Inf" if math.isinf(b) else floatToGoString(b), c) for b, c in pairs],
                        total,
                    )
            for (m, v, measure), (buckets_t, total_t) in traced.items():
                if measure == hist.trace_measure and (m, v) not in per:
                    per[(m, v)] = (buckets_t, total_t)
            for entry, step in llm_entries(topology, per).items():
                per[entry] = per[step]
            for key, (buckets, total) in sorted(per.items()):
                fam.add_metric(list(key), buckets, total)
            yield fam

    def _quantiles(
        self, now: float, backend_q: dict[HistKey, tuple[dict[str, float], float]], topology: Topology
    ) -> Iterator[Metric]:
        for hist in catalog.LLM_HISTOGRAMS:
            fam = GaugeMetricFamily(
                hist.quantile_name,
                f"Quantiles of {hist.name} over the window: exact over traced requests (source=trace), "
                "else interpolated in the backend histogram's buckets (source=histogram).",
                labels=[*catalog.MODEL_KEY, catalog.QUANTILE, catalog.SOURCE],
            )
            per: dict[ModelKey, tuple[dict[str, float], str]] = {}
            for m, v, measure in self.traces.store.keys(now):
                if measure != hist.trace_measure:
                    continue
                q = self.traces.store.quantiles((m, v, measure), now, catalog.LLM_QUANTILES)
                if q is not None:
                    per[(m, v)] = (q.values, catalog.LLM_SOURCE_TRACE)
            for (name, key), (values, _n) in backend_q.items():
                if name == hist.name and key not in per:
                    per[key] = (values, catalog.LLM_SOURCE_HISTOGRAM)
            for entry, step in llm_entries(topology, per).items():
                per[entry] = per[step]
            for key, (values, source) in sorted(per.items()):
                for label, value in values.items():
                    fam.add_metric([*key, label, source], value)
            yield fam


def make_part(context: PartContext) -> list[tuple[LlmPart, Source | None]]:
    """The LLM part: always (it costs a few dict lookups per scrape when no LLM family is served)."""
    cfg = context.config
    api_state = context.api_state

    def accept(family: str, key: ModelKey) -> bool:
        # Triton's first-response histogram is time to first token only where the config says
        # decoupled; a model whose config is not read yet gets neither meaning.
        return family != catalog.TRITON_FIRST_RESPONSE or api_state().decoupled.get(key[0]) is True

    window = LlmWindow(cfg.window, accept)
    context.snapshots.subscribe(lambda snapshot: window.observe(snapshot.time, snapshot.samples))
    buckets = cfg.latency_bucket_bounds or catalog.DEFAULT_BUCKETS
    traces = LlmTraces(
        cfg.quantile_window, buckets, max_keys=max(cfg.max_models * 2, 1), per_slice=cfg.quantile_samples
    )
    context.timings.subscribe(lambda batch: traces.record(*batch))  # streaming responses

    def topology() -> Topology:
        state = api_state()  # replaced whole by each API scrape: one read sees one scrape
        return state.ensembles, state.ready

    part = LlmPart(context.snapshots, window, traces, topology=topology, request_rates=context.request_rates)
    return [(part, None)]
