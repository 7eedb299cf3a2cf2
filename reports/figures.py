"""The period's figures per model and per GPU, with capacity, objectives and the CSV rows.

Capacity of a model comes from its declared ``capacity.max_request_rate`` in the SLO file (forecast
on the request rate's daily peaks), else from the GPUs it runs on (forecast on their utilisation's daily
peaks reaching 1; the model saturates with the first of its GPUs). A model whose GPUs are unknown
(no ``gpu_uuid`` on its counters) is judged on all GPUs seen. Not applicable is ``None``: an empty cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from alerts.slo import SLO, SLOFile
from reports.capacity import Forecast, forecast
from reports.week import ModelWeek, Week


@dataclass(frozen=True)
class GpuFigures:
    uuid: str
    utilization: pd.Series
    forecast: Forecast

    @property
    def mean_utilization(self) -> float | None:
        return float(self.utilization.mean()) if not self.utilization.empty else None


@dataclass(frozen=True)
class ModelFigures:
    week: ModelWeek
    slo: SLO | None
    forecast: Forecast | None  # on the request rate (declared capacity) or on the limiting GPU
    capacity_source: str  # "slo", "gpu" or "" (nothing to judge capacity by)

    @property
    def name(self) -> str:
        return f"{self.week.model}:{self.week.version}" if self.week.version else self.week.model

    @property
    def availability(self) -> float | None:
        e = self.week.error_ratio
        return None if e is None else 1.0 - e

    @property
    def availability_objective(self) -> float | None:
        if self.slo is None or self.slo.availability is None:
            return None
        return float(self.slo.availability.objective) / 100.0

    @property
    def availability_vs_objective(self) -> float | None:
        """Availability minus its objective: negative means the objective was missed over the period."""
        a, o = self.availability, self.availability_objective
        return None if a is None or o is None else a - o

    @property
    def latency_threshold(self) -> float | None:
        return self.slo.latency.threshold if self.slo and self.slo.latency else None

    @property
    def headroom(self) -> float | None:
        f = self.forecast
        return None if f is None or not math.isfinite(f.peak) else f.headroom


def _gpu_figures(week: Week) -> list[GpuFigures]:
    return [
        GpuFigures(uuid, s, forecast(s, week.end, week.days, 1.0, "gpu"))
        for uuid, s in week.gpus.items()
        if not s.empty
    ]


def _limiting(gpus: list[GpuFigures]) -> Forecast | None:
    """The GPU that saturates first (or, with no growth anywhere, the one with least headroom)."""
    if not gpus:
        return None

    def order(g: GpuFigures) -> tuple[float, float]:
        w = g.forecast.weeks
        return (w if w is not None else math.inf, g.forecast.headroom)

    return min(gpus, key=order).forecast


def build(week: Week, slos: SLOFile | None) -> tuple[list[ModelFigures], list[GpuFigures]]:
    gpus = _gpu_figures(week)
    by_uuid = {g.uuid: g for g in gpus}
    models: list[ModelFigures] = []
    for m in week.models.values():
        slo = next((s for s in slos.slos if s.model == m.model), None) if slos else None
        if slo and slo.capacity and not m.rate.empty:
            f = forecast(m.rate, week.end, week.days, slo.capacity.max_request_rate, "slo")
            models.append(ModelFigures(m, slo, f, "slo"))
            continue
        mine = [by_uuid[u] for u in m.gpus if u in by_uuid] or gpus
        limiting = _limiting(mine)
        models.append(ModelFigures(m, slo, limiting, "gpu" if limiting else ""))
    return models, gpus


# --- CSV rows -----------------------------------------------------------------------------------
MODEL_COLUMNS = (
    "model",
    "version",
    "requests_total",
    "peak_request_rate",
    "error_ratio",
    "availability",
    "availability_objective",
    "availability_vs_objective",
    "mean_batch_size",
    "max_batch_size",
    "batch_efficiency",
    "cache_hit_ratio",
    "queue_share",
    "mean_latency_seconds",
    "p99_latency_seconds",
    "latency_threshold_seconds",
    "gpus",
    "capacity_source",
    "capacity_request_rate",
    "headroom_ratio",
    "weeks_to_saturation",
    "weeks_to_saturation_low",
    "weeks_to_saturation_high",
)
GPU_COLUMNS = (
    "gpu_uuid",
    "peak_utilization",
    "mean_utilization",
    "headroom_ratio",
    "trend_slope_per_day",
    "weeks_to_saturation",
    "weeks_to_saturation_low",
    "weeks_to_saturation_high",
)

Cell = float | str | None


def model_row(f: ModelFigures) -> dict[str, Cell]:
    m, fc = f.week, f.forecast
    return {
        "model": m.model,
        "version": m.version,
        "requests_total": m.requests_total,
        "peak_request_rate": m.peak_request_rate,
        "error_ratio": m.error_ratio,
        "availability": f.availability,
        "availability_objective": f.availability_objective,
        "availability_vs_objective": f.availability_vs_objective,
        "mean_batch_size": m.mean_batch_size,
        "max_batch_size": m.max_batch_size,
        "batch_efficiency": m.batch_efficiency,
        "cache_hit_ratio": m.cache_hit_ratio,
        "queue_share": m.queue_share,
        "mean_latency_seconds": m.mean_latency_seconds,
        "p99_latency_seconds": m.p99_latency_seconds,
        "latency_threshold_seconds": f.latency_threshold,
        "gpus": " ".join(m.gpus),
        "capacity_source": f.capacity_source,
        "capacity_request_rate": fc.capacity if fc and f.capacity_source == "slo" else None,
        "headroom_ratio": f.headroom,
        "weeks_to_saturation": fc.weeks if fc else None,
        "weeks_to_saturation_low": fc.weeks_low if fc else None,
        "weeks_to_saturation_high": fc.weeks_high if fc else None,
    }


def gpu_row(g: GpuFigures) -> dict[str, Cell]:
    fc = g.forecast
    return {
        "gpu_uuid": g.uuid,
        "peak_utilization": fc.peak if math.isfinite(fc.peak) else None,
        "mean_utilization": g.mean_utilization,
        "headroom_ratio": fc.headroom if math.isfinite(fc.peak) else None,
        "trend_slope_per_day": fc.trend.slope_per_day if fc.trend else None,
        "weeks_to_saturation": fc.weeks,
        "weeks_to_saturation_low": fc.weeks_low,
        "weeks_to_saturation_high": fc.weeks_high,
    }
