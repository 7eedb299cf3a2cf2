"""The report's charts as PNG bytes (matplotlib's object API on the Agg canvas: no display, no pyplot state).

One function per chart, each one subplot per model or GPU so scales never hide a small model:
``request_rate`` (5-minute rate, daily peaks, their fitted trend, declared capacity),
``latency`` (percentiles from the histogram, else the mean, against the SLO threshold),
``gpu_utilization`` (5-minute mean, daily peaks, trend, 100 %), ``efficiency`` (batch efficiency and
cache hit ratio, hourly). PNG metadata carries no software version, so a chart depends only on its data.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.dates as mdates
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from reports.capacity import daily_peaks, fit_trend
from reports.figures import GpuFigures, ModelFigures
from reports.week import Week

MAX_PANELS = 12  # beyond this, the busiest models only (the tables list them all)
_WIDTH = 11.0
_ROW = 2.3


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, metadata={"Software": None})
    return buf.getvalue()


def _figure(rows: int) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(_WIDTH, max(1, rows) * _ROW + 0.6), layout="constrained")
    axes = fig.subplots(max(1, rows), 1, squeeze=False, sharex=True)[:, 0]
    return fig, list(axes)


def _style(ax: Axes, title: str, ylabel: str) -> None:
    ax.set_title(title, loc="left", fontsize=10)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%a %d %b"))
    ax.tick_params(labelsize=8)


def _peaks_and_trend(ax: Axes, series: pd.Series, week: Week, scale: float = 1.0) -> str:
    """Daily peaks and their fitted line; returns the trend as text for the title."""
    peaks = daily_peaks(series, week.end, week.days)
    ax.plot(peaks.index, peaks.values * scale, "o", color="tab:red", markersize=5, label="daily peak")
    trend = fit_trend(peaks, week.end)
    if trend is None:
        return "no trend"
    ends = [pd.Timestamp(week.start), pd.Timestamp(week.end)]
    ax.plot(ends, [trend.at(t) * scale for t in ends], "--", color="black", linewidth=1.2, label="peak trend")
    first = trend.at(pd.Timestamp(week.start))
    growth = f", {trend.slope_per_day / first * 100:+.1f} % of the first day's" if first > 0 else ""
    return f"peak trend {trend.slope_per_day * scale:+.3g} a day{growth}"


def _top(models: Sequence[ModelFigures]) -> list[ModelFigures]:
    return sorted(models, key=lambda f: -(f.week.peak_request_rate or 0.0))[:MAX_PANELS]


def request_rate(models: Sequence[ModelFigures], week: Week) -> bytes:
    shown = [f for f in _top(models) if not f.week.rate.empty]
    fig, axes = _figure(len(shown))
    for ax, f in zip(axes, shown, strict=False):
        ax.plot(f.week.rate.index, f.week.rate.values, color="tab:blue", linewidth=0.8, label="5-minute rate")
        trend = _peaks_and_trend(ax, f.week.rate, week)
        top = float(f.week.rate.max())
        if f.capacity_source == "slo" and f.forecast is not None:
            ax.axhline(f.forecast.capacity, color="tab:orange", linewidth=1.5, label="declared capacity")
            top = max(top, f.forecast.capacity)
        _style(ax, f"{f.name}: successful requests/s; {trend}", "req/s")
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
        ax.plot(
            g.utilization.index,
            g.utilization.values * 100.0,
            color="tab:green",
            linewidth=0.8,
            label="5-minute mean",
        )
        _peaks_and_trend(ax, g.utilization, week, 100.0)
        ax.axhline(100.0, color="tab:orange", linewidth=1.5, label="saturation")
        ax.fill_between(
            g.utilization.index, g.utilization.values * 100.0, 100.0, color="tab:green", alpha=0.08
        )
        weeks = g.forecast.weeks
        note = f"saturates in ~{weeks:.1f} weeks" if weeks is not None else "no upward trend"
        _style(ax, f"{g.uuid}: utilisation and headroom ({note})", "%")
        ax.set_ylim(0, 125)
        ax.legend(fontsize=7, loc="upper left", ncol=4)
    return _png(fig)


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


def all_charts(models: Sequence[ModelFigures], gpus: Sequence[GpuFigures], week: Week) -> dict[str, bytes]:
    """Chart file stem -> PNG; a chart with nothing to show is left out."""
    out = {"request_rate": request_rate(models, week)}
    if any(f.week.latency for f in models):
        out["latency"] = latency(models)
    if gpus:
        out["gpu_utilization"] = gpu_utilization(gpus, week)
    out["efficiency"] = efficiency(models)
    return out
