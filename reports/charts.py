"""The report's charts as PNG bytes (matplotlib's object API on the Agg canvas: no display, no pyplot state).

One function per chart, each one subplot per model or GPU so scales never hide a small model:
``request_rate`` (the period's 5-minute rate, daily peaks, capacity), ``latency`` (percentiles from the
histogram, else the mean, against the SLO threshold), ``gpu_utilization`` (5-minute mean, daily peaks,
100 %), ``efficiency`` (batch efficiency and cache hit ratio, hourly); and one ``forecast`` chart per
forecast (model or GPU): the history's daily peaks, both fitted trends carried forward, the 95 % band
of the one the report leads with, the capacity line and the saturation date. PNG metadata carries no
software version, so a chart depends only on its data.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tritonwatch.reports.capacity import COMPOUND, LINEAR, MODEL_NAMES, Forecast, daily_peaks
from tritonwatch.reports.figures import (
    BY_RATE,
    SOURCES,
    GpuFigures,
    ModelFigures,
    lead_weeks,
    saturation_date,
)
from tritonwatch.reports.week import Week


@dataclass(frozen=True)
class Chart:
    key: str  # file stem under charts/
    title: str
    png: bytes


MAX_PANELS = 12  # beyond this, the busiest models only (the tables list them all)
_WIDTH = 11.0
_ROW = 2.3


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, metadata={"Software": None})
    return buf.getvalue()


def _figure(rows: int, sharex: bool = True) -> tuple[Figure, list[Axes]]:
    """One panel per row, stacked; over time (``sharex``) they share the time axis."""
    fig = Figure(figsize=(_WIDTH, max(1, rows) * _ROW + 0.6), layout="constrained")
    axes = fig.subplots(max(1, rows), 1, squeeze=False, sharex=sharex)[:, 0]
    return fig, list(axes)


def _style(ax: Axes, title: str, ylabel: str) -> None:
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%a %d %b"))
    ax.tick_params(labelsize=8)


def _peaks(ax: Axes, series: pd.Series, week: Week, scale: float = 1.0) -> None:
    peaks = daily_peaks(series, week.end, week.days)
    ax.plot(peaks.index, peaks.values * scale, "o", color="tab:red", markersize=5, label="daily peak")


def _top(models: Sequence[ModelFigures]) -> list[ModelFigures]:
    return sorted(models, key=lambda f: -(f.week.peak_request_rate or 0.0))[:MAX_PANELS]


def request_rate(models: Sequence[ModelFigures], week: Week) -> bytes:
    shown = [f for f in _top(models) if not week.period(f.week.rate).empty]
    fig, axes = _figure(len(shown))
    for ax, f in zip(axes, shown, strict=False):
        rate = week.period(f.week.rate)
        ax.plot(rate.index, rate.values, color="tab:blue", linewidth=0.8, label="5-minute rate")
        _peaks(ax, rate, week)
        top = float(rate.max())
        if f.capacity_source in BY_RATE and f.forecast is not None:
            label = f"capacity ({SOURCES[f.capacity_source]})"
            ax.axhline(f.forecast.capacity, color="tab:orange", linewidth=1.5, label=label)
            top = max(top, f.forecast.capacity)
        _style(ax, f"{f.name}: successful requests/s", "req/s")
        ax.set_ylim(0, 1.3 * top if top > 0 else 1.0)
        ax.legend(fontsize=7, loc="upper left", ncol=4)
    return _png(fig)


def latency(models: Sequence[ModelFigures]) -> bytes:
    shown = [f for f in _top(models) if f.week.latency]
    fig, axes = _figure(len(shown))
    for ax, f in zip(axes, shown, strict=False):
        for name, s in f.week.latency.items():
            ax.plot(s.index, s.values * 1000.0, linewidth=1.0, label=name)
        if f.latency_threshold is not None:
            ax.axhline(f.latency_threshold * 1000.0, color="tab:red", linewidth=1.5, label="SLO threshold")
        source = "histogram" if "mean" not in f.week.latency else "mean from Triton counters, no histogram"
        _style(ax, f"{f.name}: request latency, hourly ({source})", "ms")
        top = max([float(s.max()) * 1000.0 for s in f.week.latency.values() if not s.empty] + [1e-3])
        ax.set_ylim(0, 1.25 * max(top, (f.latency_threshold or 0.0) * 1000.0))
        ax.legend(fontsize=7, loc="upper left", ncol=4)
    return _png(fig)


def gpu_utilization(gpus: Sequence[GpuFigures], week: Week) -> bytes:
    shown = list(gpus)[:MAX_PANELS]
    fig, axes = _figure(len(shown))
    for ax, g in zip(axes, shown, strict=False):
        util = week.period(g.utilization)
        ax.plot(util.index, util.values * 100.0, color="tab:green", linewidth=0.8, label="5-minute mean")
        _peaks(ax, util, week, 100.0)
        ax.axhline(100.0, color="tab:orange", linewidth=1.5, label="saturation")
        ax.fill_between(util.index, util.values * 100.0, 100.0, color="tab:green", alpha=0.08)
        weeks = lead_weeks(g.forecast)
        note = f"saturates in ~{weeks:.1f} weeks" if weeks is not None else "no upward trend"
        _style(ax, f"{g.uuid}: utilisation and headroom ({note})", "%")
        ax.set_ylim(0, 125)
        ax.legend(fontsize=7, loc="upper left", ncol=4)
    return _png(fig)


_FIT_STYLE = {LINEAR: ("tab:purple", "--"), COMPOUND: ("tab:brown", "-.")}


def forecast(title: str, fc: Forecast, week: Week, unit: str, scale: float = 1.0) -> bytes:
    """One forecast: daily peaks over the history, both fits carried forward, the lead fit's 95 %
    band, the capacity line and the saturation date the report leads with."""
    fig = Figure(figsize=(_WIDTH, 3.4), layout="constrained")
    ax = fig.subplots()
    end = pd.Timestamp(week.end)
    ax.plot(fc.peaks.index, fc.peaks.values * scale, "o", color="tab:red", markersize=4, label="daily peak")
    if not fc.adjusted.equals(fc.peaks):
        ax.plot(
            fc.adjusted.index, fc.adjusted.values * scale, "o", mfc="none", color="tab:red", markersize=6,
            label="peak, busiest-weekday scale",
        )  # fmt: skip
    lead = fc.lead
    weeks = lead_weeks(fc)
    ahead = max(4.0, min(26.0, 1.25 * weeks)) if weeks is not None else 4.0
    first = (fc.peaks.index.min() - end) / pd.Timedelta(days=1) if not fc.peaks.empty else -7.0
    t = np.linspace(first, 7.0 * ahead, 400)
    when = [end + pd.Timedelta(days=float(x)) for x in t]
    for kind, sat in fc.models.items():
        mean, lo, hi = sat.fit.predict(t)
        colour, style = _FIT_STYLE[kind]
        chosen = " (chosen by fit)" if kind == fc.chosen else ""
        ax.plot(when, mean * scale, style, color=colour, linewidth=1.4, label=f"{MODEL_NAMES[kind]}{chosen}")
        if lead is not None and kind == lead.fit.kind:
            ax.fill_between(when, lo * scale, hi * scale, color=colour, alpha=0.15, label="95 % band")
    ax.axhline(
        fc.capacity * scale, color="tab:orange", linewidth=1.5, label=f"capacity ({SOURCES[fc.source]})"
    )
    ax.axvline(end, color="gray", linewidth=0.8)
    date = saturation_date(fc, week.end)
    best = fc.best
    if best is not None and lead is not None and best is not lead and best.weeks is not None:
        # The fit's own date, where the report leads with the other model's earlier one.
        at = end + pd.Timedelta(days=7.0 * best.weeks)
        other = (week.end + timedelta(weeks=best.weeks)).strftime("%Y-%m-%d")
        ax.axvline(at, color=_FIT_STYLE[best.fit.kind][0], linewidth=1.0, linestyle=":")
        ax.annotate(other, (at, fc.capacity * scale), textcoords="offset points", xytext=(4, -14), fontsize=8)
    if weeks == 0.0:
        note = "already at or past capacity"
    elif weeks is not None and date is not None:
        at = end + pd.Timedelta(days=7.0 * weeks)
        ax.axvline(at, color="tab:red", linewidth=1.2, linestyle=":", label=f"saturation {date}")
        ax.annotate(date, (at, fc.capacity * scale), textcoords="offset points", xytext=(4, 6), fontsize=8)
        note = f"saturates {date} (in {weeks:.1f} weeks, {MODEL_NAMES[lead.fit.kind] if lead else ''} growth)"
    else:
        note = "no saturation date (no significant growth)"
    _style(ax, f"{title}: {note}", unit)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%d %b"))
    top = max([float(fc.peaks.max()) if not fc.peaks.empty else 0.0, fc.capacity]) * scale
    ax.set_ylim(0, 1.3 * top if top > 0 and math.isfinite(top) else 1.0)
    ax.set_xlim(when[0] - timedelta(days=0.5), when[-1])
    ax.legend(fontsize=7, loc="lower right", ncol=4)
    return _png(fig)


def slo_capacity(models: Sequence[ModelFigures]) -> bytes:
    """Per model with a latency objective: the share of requests within the threshold by load bin,
    the objective, and the capacity found where the share falls below it."""
    shown = [f for f in _top(models) if f.knee is not None and not f.knee.bins.empty]
    fig, axes = _figure(len(shown), sharex=False)  # each model's own request-rate range
    for ax, f in zip(axes, shown, strict=False):
        assert f.knee is not None and f.slo is not None and f.slo.latency is not None
        bins = f.knee.bins
        ax.plot(
            bins["rate"], bins["good_ratio"] * 100.0, "o-", color="tab:blue", markersize=4, label="load bin"
        )
        objective = float(f.slo.latency.objective)
        ax.axhline(objective, color="tab:red", linewidth=1.2, label=f"objective {objective:g} %")
        if f.knee.rate is not None:
            ax.axvline(
                f.knee.rate, color="tab:orange", linewidth=1.5, label=f"capacity {f.knee.rate:.3g} req/s"
            )
        ax.set_title(
            f"{f.name}: requests within {f.slo.latency.threshold * 1000:g} ms by request rate",
            loc="left",
            fontsize=10,
        )
        ax.set_xlabel("request rate (req/s, 5-minute)", fontsize=9)
        ax.set_ylabel("%", fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7, loc="lower left")
    return _png(fig)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def forecasts(models: Sequence[ModelFigures], gpus: Sequence[GpuFigures], week: Week) -> list[Chart]:
    """A chart per forecast: each model judged on its request rate, then each GPU (shown once)."""
    out = []
    for f in _top(models):
        if f.forecast is not None and f.capacity_source in BY_RATE:
            png = forecast(f"{f.name} daily peak req/s", f.forecast, week, "req/s")
            out.append(Chart(f"forecast_model_{_slug(f.name)}", f"Forecast: model {f.name}", png))
    for g in list(gpus)[:MAX_PANELS]:
        png = forecast(f"{g.uuid} peak utilisation", g.forecast, week, "%", 100.0)
        out.append(Chart(f"forecast_gpu_{_slug(g.uuid)}", f"Forecast: GPU {g.uuid}", png))
    return out


def efficiency(models: Sequence[ModelFigures]) -> bytes:
    fig, (eff, hits) = _figure(2)
    for f in _top(models):
        if f.week.batch_efficiency_series is not None and not f.week.batch_efficiency_series.empty:
            s = f.week.batch_efficiency_series
            eff.plot(s.index, s.values * 100.0, linewidth=1.0, label=f.name)
        if f.week.cache_hit_series is not None and not f.week.cache_hit_series.empty:
            s = f.week.cache_hit_series
            hits.plot(s.index, s.values * 100.0, linewidth=1.0, label=f.name)
    _style(eff, "Batch efficiency (mean batch / max_batch_size), hourly", "%")
    _style(hits, "Response cache hit ratio, hourly", "%")
    for ax in (eff, hits):
        ax.set_ylim(0, 105)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper left")
        else:
            ax.text(0.5, 0.5, "no series (not applicable)", transform=ax.transAxes, ha="center", color="gray")
    return _png(fig)


TITLES = {
    "request_rate": "Request rate per model, daily peaks and capacity",
    "latency": "Latency percentiles against the SLO threshold",
    "gpu_utilization": "GPU utilisation and headroom",
    "efficiency": "Batch efficiency and cache hit ratio",
    "slo_capacity": "SLO-bound capacity: the latency objective against load",
}


def all_charts(models: Sequence[ModelFigures], gpus: Sequence[GpuFigures], week: Week) -> list[Chart]:
    """Every chart, in the report's order; a chart with nothing to show is left out."""
    out = [Chart("request_rate", TITLES["request_rate"], request_rate(models, week))]
    if any(f.week.latency for f in models):
        out.append(Chart("latency", TITLES["latency"], latency(models)))
    if gpus:
        out.append(Chart("gpu_utilization", TITLES["gpu_utilization"], gpu_utilization(gpus, week)))
    out.append(Chart("efficiency", TITLES["efficiency"], efficiency(models)))
    if any(f.knee is not None and not f.knee.bins.empty for f in models):
        out.append(Chart("slo_capacity", TITLES["slo_capacity"], slo_capacity(models)))
    return out + forecasts(models, gpus, week)
