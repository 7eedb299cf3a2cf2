"""Collect one period's figures and series from Prometheus (every query from ``tritonwatch.reports.queries``).

``collect()`` returns a ``Week``: per (model, version) the period's totals and ratios (``None`` where
the series behind them do not exist, e.g. no cache or no latency histogram), the cost of a request
(GPU-seconds, joules), the 5-minute request rate over the whole history the forecast fits (``history``
days, see ``history_days()``), the period's 5-minute latency SLI series where a threshold is given,
and hourly chart series; per GPU the 5-minute mean utilisation over the history. An empty period is an
error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import pandas as pd

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.fronthistogram import FrontHistogram
from tritonwatch.reports import queries as q
from tritonwatch.reports.promapi import Labels, PromClient, label
from tritonwatch.slo import FrontCounters

ModelKey = tuple[str, str]
PEAK_STEP = timedelta(minutes=5)
CHART_STEP = timedelta(hours=1)
PERCENTILES = (0.5, 0.9, 0.99)


@dataclass
class ModelWeek:
    model: str
    version: str
    requests_total: float | None = None
    peak_request_rate: float | None = None
    error_ratio: float | None = None
    # From the front's counters where the SLO file sets availability.from: what clients saw fail.
    front_error_ratio: float | None = None
    mean_batch_size: float | None = None
    max_batch_size: float | None = None
    batch_efficiency: float | None = None
    cache_hit_ratio: float | None = None
    queue_share: float | None = None
    mean_latency_seconds: float | None = None
    p99_latency_seconds: float | None = None
    gpus: tuple[str, ...] = ()
    gpu_seconds_per_request: float | None = None
    joules_per_request: float | None = None
    # The sidecars' SLO-bound capacity (--slo, docs/headroom.md), summed over replicas, at the end.
    sidecar_capacity: float | None = None
    # 5-minute request rate over the history (the period is its last ``days``).
    rate: pd.Series = field(default_factory=lambda: pd.Series(dtype="float64"))
    # The period's 5-minute sampled requests/s within the SLO threshold, and in all (latency objective only).
    latency_within: pd.Series | None = None
    latency_sampled: pd.Series | None = None
    latency: dict[str, pd.Series] = field(default_factory=dict)  # "p50", "p99" or "mean"
    batch_efficiency_series: pd.Series | None = None
    cache_hit_series: pd.Series | None = None
    # Reported catalog figures (``catalog.REPORTED``) without an attribute of their own, by field.
    figures: dict[str, float] = field(default_factory=dict)

    def figure(self, name: str) -> float | None:
        """A reported figure by its field (``View.field``): its attribute, else from ``figures``."""
        return getattr(self, name) if name in _ATTRIBUTES else self.figures.get(name)


_ATTRIBUTES = frozenset(ModelWeek.__dataclass_fields__)


@dataclass
class Week:
    start: datetime
    end: datetime
    days: int
    models: dict[ModelKey, ModelWeek]
    gpus: dict[str, pd.Series]  # gpu_uuid -> 5-minute mean utilisation (0-1) over the history
    recorded: bool  # the request rate came from the recording rule
    history: int = 0  # days of history the forecast fits (at least ``days``)
    history_note: str = ""  # how ``history`` was decided

    def period(self, s: pd.Series) -> pd.Series:
        """The part of a history series inside the report's period."""
        return s[s.index > pd.Timestamp(self.start)]


def model_name(model: str, version: str) -> str:
    """How the report names a model version: ``model:version``, or ``model`` without a version label."""
    return f"{model}:{version}" if version else model


def model_key(labels: Labels) -> ModelKey:
    """(model, version) of a query result's label set."""
    return (label(labels, catalog.MODEL), label(labels, catalog.VERSION))


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def by_model(result: dict[Labels, float]) -> dict[ModelKey, float]:
    """An instant query's finite values by (model, version)."""
    return {model_key(k): v for k, v in result.items() if math.isfinite(v)}


def series_by_model(result: dict[Labels, pd.Series]) -> dict[ModelKey, pd.Series]:
    """A range query's series by (model, version), without their NaN and infinite points."""
    return {model_key(k): s.where(s.map(math.isfinite)).dropna() for k, s in result.items()}


MAX_AUTO_HISTORY_DAYS = 90


def history_days(client: PromClient, end: datetime, days: int, requested: int | None) -> tuple[int, str]:
    """How many days the forecast fits: ``requested``, else every day with Triton request data back to
    the server's retention (at most ``MAX_AUTO_HISTORY_DAYS``); never fewer than ``days``."""
    retention = client.retention()
    limit = int(retention / timedelta(days=1)) if retention else None
    if requested is not None:
        if limit is not None and requested > limit:
            return max(days, limit), f"{limit} days (--history-days {requested} is past the retention)"
        return max(days, requested), f"{max(days, requested)} days (--history-days)"
    span = min(limit or MAX_AUTO_HISTORY_DAYS, MAX_AUTO_HISTORY_DAYS)
    if span <= days:
        return days, f"{days} days (the period; retention {limit} days)"
    # One point a day back to the retention: the oldest day holding request samples.
    probe = client.range(
        q.history_probe(), end - timedelta(days=span - 1), end, timedelta(days=1), "oldest data"
    )
    oldest = min((s.dropna().index.min() for s in probe.values() if not s.dropna().empty), default=None)
    held = days
    if oldest is not None:
        held = max(days, round((pd.Timestamp(end) - oldest) / pd.Timedelta(days=1)) + 1)
    where = f"retention {limit} days" if limit else f"at most {MAX_AUTO_HISTORY_DAYS} days"
    return held, f"{held} days (all the request data Prometheus holds; {where})"


def collect(
    client: PromClient,
    end: datetime,
    days: int,
    history: int | None = None,
    thresholds: dict[str, float] | None = None,
    history_note: str = "",
    fronts: Mapping[str, FrontCounters] | None = None,
    front_latency: Mapping[str, tuple[FrontHistogram, float]] | None = None,
) -> Week:
    """``history``: days of request rate and GPU utilisation to fetch (default ``days``);
    ``thresholds``: model -> latency threshold (s) whose SLI series to fetch for the period;
    ``front_latency``: model -> the front's histogram and threshold where the SLO reads latency there."""
    start = end - timedelta(days=days)
    history = max(days, history or days)
    window = f"{days}d"
    hist_start = end - timedelta(days=history)
    client.discover_models(hist_start, end)  # per-model queries go --models-per-query models at a time
    ok = by_model(client.instant(q.successes(window), end, "requests over the period", per_model=True))
    if not ok:
        raise TritonwatchError(
            f"no Triton request series ({catalog.TRITON_SUCCESS}) in Prometheus at {client.url} "
            f"between {start:%Y-%m-%dT%H:%MZ} and {end:%Y-%m-%dT%H:%MZ} (--end, --days)"
        )
    failed = by_model(client.instant(q.server_failures(window), end, "failures", per_model=True))
    models = {k: ModelWeek(model=k[0], version=k[1]) for k in sorted(ok)}
    for k, m in models.items():
        m.requests_total = ok[k] + failed.get(k, 0.0)

    def fill(attr: str, expr: str, what: str) -> None:
        for k, v in by_model(client.instant(expr, end, what, per_model=True)).items():
            if k in models and attr in _ATTRIBUTES:
                setattr(models[k], attr, v)
            elif k in models:
                models[k].figures[attr] = v

    fill("error_ratio", q.error_ratio(window), "error ratio")
    for model, front in sorted((fronts or {}).items()):
        # The front cannot tell versions apart: its ratio is every version's.
        ratio = client.instant(q.front_error_ratio(front, window), end, f"{model}: errors the front saw")
        value = next((v for v in ratio.values() if math.isfinite(v)), None)
        for k, m in models.items():
            if k[0] == model:
                m.front_error_ratio = value
    fill("mean_batch_size", q.mean_batch_size(window), "batch size")
    fill("max_batch_size", q.max_batch_size(window), "max batch size")
    for entry in catalog.REPORTED:  # batch efficiency, over the config, is worked out below
        if isinstance(entry, catalog.Signal) and entry.view is not None:
            fill(entry.view.field, q.figure(entry, window), entry.view.title.lower())
    fill("mean_latency_seconds", q.mean_latency(window), "mean latency")
    fill("p99_latency_seconds", q.latency_quantile(0.99, window), "p99 latency")
    fill("sidecar_capacity", q.sidecar_capacity(), "SLO-bound capacity (sidecar)")
    for m in models.values():
        m.batch_efficiency = catalog.BATCH_EFFICIENCY_SIGNAL.value(m.mean_batch_size, m.max_batch_size)
    gpus_of: dict[ModelKey, set[str]] = {}
    for labels in client.instant(q.model_gpus(window), end, "models' GPUs", per_model=True):
        uuid = label(labels, catalog.GPU_UUID)
        if uuid:
            gpus_of.setdefault(model_key(labels), set()).add(uuid)
    for k, m in models.items():
        m.gpus = tuple(sorted(gpus_of.get(k, ())))
    # The cost of a request: busy GPU-seconds and attributed energy over the period, per success.
    seconds = days * 86400.0
    # Not the energy split by model: each GPU's power is shared by its total busy time over every model
    # on it, which a batch of models does not see.
    for attr, expr, what, split in (
        ("gpu_seconds_per_request", q.gpu_busy_seconds(window), "GPU busy time", True),
        ("joules_per_request", q.attributed_watts(window), "GPU energy", False),
    ):
        for k, v in by_model(client.instant(expr, end, what, per_model=split)).items():
            if k in models and ok.get(k):
                setattr(models[k], attr, v * seconds / ok[k])

    # Range queries start one step after `start` so that every point's window lies inside the period.
    first = start + PEAK_STEP
    # The recording rule is cheaper on long periods, but only if it ran over the whole period.
    record = q.request_rate_record()
    edge = PEAK_STEP * 3
    recorded = client.has_series(record, start, start + edge) and client.has_series(record, end - edge, end)
    hist_first = hist_start + PEAK_STEP
    if history > days:
        # The recording rule may be younger than the history: the raw counters reach as far back as data.
        recorded_hist = recorded and client.has_series(record, hist_start, hist_start + edge)
    else:
        recorded_hist = recorded
    rates = series_by_model(
        client.range(q.request_rate(recorded_hist), hist_first, end, PEAK_STEP, "request rate", True)
    )
    for k, s in rates.items():
        if k in models:
            models[k].rate = s
            inside = s[s.index > pd.Timestamp(start)]
            models[k].peak_request_rate = _finite(float(inside.max())) if not inside.empty else None
    for threshold in sorted(set((thresholds or {}).values())):
        names = {m for m, t in (thresholds or {}).items() if t == threshold}
        within = series_by_model(
            client.range(
                q.latency_within(threshold),
                first,
                end,
                PEAK_STEP,
                f"requests within {threshold * 1000:g} ms",
                per_model=True,
            )
        )
        for k, s in within.items():
            if k in models and k[0] in names:
                models[k].latency_within = s
    if thresholds:
        sampled = series_by_model(
            client.range(q.latency_sampled(), first, end, PEAK_STEP, "sampled requests", per_model=True)
        )
        for k, s in sampled.items():
            if k in models and k[0] in thresholds:
                models[k].latency_sampled = s
    for model, (hist, threshold) in sorted((front_latency or {}).items()):
        # What the clients lived through, as the SLO reads it; the front cannot tell versions apart.
        for attr, limit in (("latency_within", threshold), ("latency_sampled", None)):
            got = client.range(q.front_latency(hist, limit), first, end, PEAK_STEP, f"{model}: front latency")
            for s in got.values():
                for k, m in models.items():
                    if k[0] == model:
                        setattr(m, attr, s.where(s.map(math.isfinite)).dropna())

    hour = start + CHART_STEP
    w = q.CHART_WINDOW
    has_hist = any(m.p99_latency_seconds is not None for m in models.values())
    if has_hist:
        for p in PERCENTILES:
            name = f"p{p * 100:g}"
            got = client.range(q.latency_quantile(p, w), hour, end, CHART_STEP, f"{name} latency", True)
            for k, s in series_by_model(got).items():
                if k in models and models[k].p99_latency_seconds is not None:
                    models[k].latency[name] = s
    means = series_by_model(client.range(q.mean_latency(w), hour, end, CHART_STEP, "mean latency", True))
    for k, s in means.items():
        if k in models and not models[k].latency:
            models[k].latency["mean"] = s
    for k, s in series_by_model(
        client.range(q.batch_efficiency(w), hour, end, CHART_STEP, "batch efficiency", True)
    ).items():
        if k in models:
            models[k].batch_efficiency_series = s
    for k, s in series_by_model(
        client.range(q.cache_hit_ratio(w), hour, end, CHART_STEP, "cache hits", True)
    ).items():
        if k in models:
            models[k].cache_hit_series = s

    gpus: dict[str, pd.Series] = {}
    for labels, s in client.range(q.gpu_utilization(), hist_first, end, PEAK_STEP, "GPU utilisation").items():
        uuid = label(labels, catalog.GPU_UUID)
        if uuid:
            gpus[uuid] = s.dropna()
    return Week(
        start=start,
        end=end,
        days=days,
        models=models,
        gpus=dict(sorted(gpus.items())),
        recorded=recorded,
        history=history,
        history_note=history_note or f"{history} days",
    )
