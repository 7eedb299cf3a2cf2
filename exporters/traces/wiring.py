"""The trace parts put together for the sidecar (``make_part``), each source behind a view of its families."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric

from tritonwatch import catalog
from tritonwatch.exporters.context import PartContext, RequestRates
from tritonwatch.exporters.native_latency import NativeHistograms, not_decoupled
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.source import Source
from tritonwatch.exporters.steps import StepPart
from tritonwatch.exporters.traces.files import TraceFileReader
from tritonwatch.exporters.traces.join import TimingPublisher
from tritonwatch.exporters.traces.part import LatencyPart
from tritonwatch.exporters.traces.receiver import OtlpReceiver
from tritonwatch.exporters.traces.settings import TraceSettings
from tritonwatch.exporters.traces.timing import Timings


class _View(Part):
    """What the collector sees of a source: its families only. Its health is not a scrape target
    (``tritonwatch_up`` has a fixed set of targets); failures show in the logs and the counters."""

    def __init__(self, source: OtlpReceiver | TraceSettings | TraceFileReader) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        return self.source.collect()


def total_request_rate(rates: RequestRates) -> float | None:
    """Successful requests/s over the sidecar's window, every model together; None while unknown."""
    known = list(rates().values())
    return sum(known) if known else None


def make_part(context: PartContext) -> list[tuple[Part, Source | None]]:
    """The latency part always (Triton's summaries as fallback); receiver, settings, file reader by flag."""
    cfg = context.config
    buckets = cfg.latency_bucket_bounds or catalog.DEFAULT_BUCKETS
    max_keys = max(cfg.max_models * len(catalog.PHASES), 1)
    api_state, snapshots = context.api_state, context.snapshots

    def served() -> frozenset[tuple[str, str]]:
        # Triton's ready models, and the models its /metrics names (while the index is unread).
        ready = frozenset(key for key, ok in api_state().ready.items() if ok)
        return ready | snapshots.latest.tracked

    def known_models() -> frozenset[str]:
        return frozenset(m for m, _v in api_state().ready) | frozenset(
            m for m, _v in snapshots.latest.tracked
        )

    native = NativeHistograms(cfg.quantile_window)
    snapshots.subscribe(lambda snapshot: native.observe(snapshot.time, snapshot.samples))
    accept = not_decoupled(lambda: api_state().decoupled)

    latency = LatencyPart(
        cfg.quantile_window,
        buckets,
        context.snapshots,
        per_slice=cfg.quantile_samples,
        max_keys=max_keys,
        prepared=context.prepared,
        texts=context.texts,
        # Only where traces come in: a sidecar without a trace source has no histograms to start.
        served=served if cfg.otlp_listen or cfg.trace_file else None,
        native=lambda: native.view(accept, catalog.QUANTILES),
    )
    # The joiner publishes; the latency part subscribes first, the step and LLM parts after it.
    joined = TimingPublisher(context.timings, context.updates)

    def record(batch: Timings) -> None:
        latency.record(*batch)

    context.timings.subscribe(record)
    out: list[tuple[Part, Source | None]] = [(latency, None)]
    if cfg.otlp_listen:
        authorize, wrap = context.web
        receiver = OtlpReceiver(
            cfg.otlp_listen,
            joined,
            cfg.otlp_forward,
            interval=cfg.interval,
            max_body=cfg.otlp_max_body_bytes,
            known_models=known_models,
            authorize=authorize,
            wrap=wrap,
        )
        out.append((_View(receiver), receiver))
    if cfg.trace_file:
        reader = TraceFileReader(cfg.trace_file, joined, min(cfg.interval, 1.0), cfg.quantile_window)
        out.append((_View(reader), reader))
        # Trace files link an ensemble's steps (and a BLS model's calls) to the client's request.
        steps = StepPart(
            cfg.quantile_window, per_slice=cfg.quantile_samples, max_keys=max_keys, texts=context.texts
        )
        context.timings.subscribe(lambda batch: steps.record(*batch))
        context.bls.provide(steps.bls_models)
        out.append((steps, None))
    if cfg.otlp_listen or cfg.trace_file or cfg.set_trace_rate or cfg.trace_budget:
        settings = TraceSettings(
            cfg.triton,
            # With a budget the rate follows the load: settings are read (and moved) every interval.
            cfg.interval if cfg.trace_budget else max(cfg.interval, 5.0),
            cfg.scrape_timeout,
            cfg.set_trace_rate,
            cfg.trace_budget,
            lambda: total_request_rate(context.request_rates),
        )
        out.append((_View(settings), settings))
    return out
