"""The period's figures per model and per GPU, with capacity, objectives, what to do, and the CSV rows.

Capacity of a model, in this order:

- ``latency``: where it has a latency objective and the period's data show the request rate at which
  that objective stops being met (``tritonwatch.reports.knee``); the lower of that and a declared
  capacity wins;
- ``headroom``: where the period's data give no latency-bound capacity, the sidecars' estimate
  (``tritonwatch_model_capacity_requests_per_second`` summed over replicas, docs/headroom.md); the
  lower of that and a declared capacity wins;
- ``slo``: its declared ``capacity.max_request_rate`` in the SLO file;
- ``gpu``: the GPUs it runs on reaching 100 % utilisation (the model saturates with the first of its
  GPUs); a model whose GPUs are unknown (no ``gpu_uuid`` on its counters) is judged on all GPUs seen.

The first two forecast the request rate's daily peaks, the last the GPUs' utilisation peaks
(``tritonwatch.reports.capacity``). GPUs needed at a horizon scale the GPUs a model runs on now by the
forecast peak over capacity. Not applicable is ``None``: an empty cell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from tritonwatch import catalog
from tritonwatch.reports.capacity import COMPOUND, LINEAR, Forecast, NextWeek, forecast, next_week
from tritonwatch.reports.knee import Knee, slo_capacity
from tritonwatch.reports.week import PEAK_STEP, ModelWeek, Week, model_name
from tritonwatch.slo import SLO, SLOFile

HORIZONS_WEEKS = (4, 12)
SOURCES = {"latency": "latency SLO", "headroom": "SLO-bound (sidecar)", "slo": "declared", "gpu": "GPU"}
BY_RATE = ("slo", "latency", "headroom")  # capacities in requests/s: the forecast is of the request rate


@dataclass(frozen=True)
class GpuFigures:
    uuid: str
    utilization: pd.Series  # over the history
    forecast: Forecast
    models: tuple[str, ...] = ()  # the model versions that ran on it (name:version)
    mean_utilization: float | None = None  # over the period


@dataclass(frozen=True)
class ModelFigures:
    week: ModelWeek
    slo: SLO | None
    forecast: Forecast | None  # on the request rate (latency/declared capacity) or on the limiting GPU
    capacity_source: str  # "latency", "headroom", "slo", "gpu" or "" (nothing to judge capacity by)
    knee: Knee | None = None  # the SLO-bound capacity estimate, where the model has a latency objective
    next_week: NextWeek | None = None  # the request rate's peak forecast for the 7 days after the end
    previous_peak: float | None = None  # the peak request rate of the archive's previous report

    @property
    def name(self) -> str:
        return model_name(self.week.model, self.week.version)

    @property
    def availability(self) -> float | None:
        """From the front's counters where the SLO says so (Triton does not count every error)."""
        front = self.slo is not None and self.slo.availability is not None and self.slo.availability.source
        e = self.week.front_error_ratio if front else self.week.error_ratio
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

    def gpus_needed(self, weeks: float) -> int | None:
        """GPUs to run it ``weeks`` after the period at the fitted growth: the GPUs it runs on now,
        scaled by the chosen growth model's forecast peak over capacity; at least 1."""
        n, f = len(self.week.gpus), self.forecast
        if not n or f is None or not math.isfinite(f.peak):
            return None
        projected = f.projected(weeks)
        load = (projected if projected is not None else f.peak) / f.capacity
        return max(1, math.ceil(n * load - 1e-9))


def _gpu_figures(week: Week, models: list[ModelWeek]) -> list[GpuFigures]:
    out = []
    for uuid, s in week.gpus.items():
        if s.empty:
            continue
        on = tuple(sorted(model_name(m.model, m.version) for m in models if uuid in m.gpus))
        period = week.period(s)
        mean = float(period.mean()) if not period.empty else None
        out.append(GpuFigures(uuid, s, forecast(s, week.end, week.history, 1.0, "gpu", week.days), on, mean))
    return out


def _limiting(gpus: list[GpuFigures]) -> Forecast | None:
    """The GPU that saturates first (or, with no growth anywhere, the one with least headroom)."""
    if not gpus:
        return None

    def order(g: GpuFigures) -> tuple[float, float]:
        w = lead_weeks(g.forecast)
        return (w if w is not None else math.inf, g.forecast.headroom)

    return min(gpus, key=order).forecast


def _knee(m: ModelWeek, slo: SLO | None, week: Week) -> Knee | None:
    if slo is None or slo.latency is None or m.latency_within is None or m.latency_sampled is None:
        return None
    return slo_capacity(
        week.period(m.rate),
        m.latency_within,
        m.latency_sampled,
        float(slo.latency.objective) / 100.0,
        slo.latency.min_samples,
        PEAK_STEP.total_seconds(),
    )


def build(week: Week, slos: SLOFile | None) -> tuple[list[ModelFigures], list[GpuFigures]]:
    gpus = _gpu_figures(week, list(week.models.values()))
    by_uuid = {g.uuid: g for g in gpus}
    models: list[ModelFigures] = []
    for m in week.models.values():
        slo = next((s for s in slos.slos if s.model == m.model), None) if slos else None
        knee = _knee(m, slo, week)
        ahead = next_week(m.rate, week.end, week.history) if not m.rate.empty else None
        bounds = []
        if knee is not None and knee.rate is not None:
            bounds.append((knee.rate, "latency"))
        elif m.sidecar_capacity is not None and m.sidecar_capacity > 0:
            bounds.append((m.sidecar_capacity, "headroom"))
        if slo and slo.capacity:
            bounds.append((slo.capacity.max_request_rate, "slo"))
        if bounds and not m.rate.empty:
            capacity, source = min(bounds)
            f = forecast(m.rate, week.end, week.history, capacity, source, week.days)
            models.append(ModelFigures(m, slo, f, source, knee, ahead))
            continue
        mine = [by_uuid[u] for u in m.gpus if u in by_uuid] or gpus
        limiting = _limiting(mine)
        models.append(ModelFigures(m, slo, limiting, "gpu" if limiting else "", knee, ahead))
    return models, gpus


def lead_weeks(f: Forecast | None) -> float | None:
    s = f.lead if f else None
    return s.weeks if s else None


def saturation_date(f: Forecast | None, end: datetime) -> str | None:
    """The date the report leads with (ISO, UTC), or None without a saturation date."""
    w = lead_weeks(f)
    return None if w is None else (end + timedelta(weeks=w)).strftime("%Y-%m-%d")


# --- CSV rows -----------------------------------------------------------------------------------
# The catalog's reported figures (batch efficiency, cache hit ratio, queue share, ...), by field.
REPORTED_FIELDS = tuple(catalog.view(e.name)[0].field for e in catalog.REPORTED)
MODEL_COLUMNS = (
    "model",
    "version",
    "requests_total",
    "peak_request_rate",
    "previous_peak_request_rate",
    "next_week_peak_request_rate",
    "next_week_peak_request_rate_low",
    "next_week_peak_request_rate_high",
    "next_week_reliable",
    "error_ratio",
    "availability",
    "availability_objective",
    "availability_vs_objective",
    "mean_batch_size",
    "max_batch_size",
    *REPORTED_FIELDS,
    "mean_latency_seconds",
    "p99_latency_seconds",
    "latency_threshold_seconds",
    "gpus",
    "capacity_source",
    "capacity_request_rate",
    "slo_capacity_request_rate",
    "headroom_ratio",
    "forecast_model",
    "weeks_to_saturation",
    "weeks_to_saturation_low",
    "weeks_to_saturation_high",
    "weeks_to_saturation_linear",
    "weeks_to_saturation_compound",
    "lead_weeks_to_saturation",
    "saturation_date",
    "gpus_now",
    "gpus_needed_4w",
    "gpus_needed_12w",
    "gpu_seconds_per_request",
    "joules_per_request",
)
GPU_COLUMNS = (
    "gpu_uuid",
    "peak_utilization",
    "mean_utilization",
    "headroom_ratio",
    "trend_slope_per_day",
    "forecast_model",
    "weeks_to_saturation",
    "weeks_to_saturation_low",
    "weeks_to_saturation_high",
    "weeks_to_saturation_linear",
    "weeks_to_saturation_compound",
    "lead_weeks_to_saturation",
    "saturation_date",
    "models",
)

Cell = float | str | None


def _forecast_cells(fc: Forecast | None, end: datetime) -> dict[str, Cell]:
    return {
        "forecast_model": fc.chosen if fc else None,
        "weeks_to_saturation": fc.weeks if fc else None,
        "weeks_to_saturation_low": fc.weeks_low if fc else None,
        "weeks_to_saturation_high": fc.weeks_high if fc else None,
        "weeks_to_saturation_linear": fc.weeks_of(LINEAR) if fc else None,
        "weeks_to_saturation_compound": fc.weeks_of(COMPOUND) if fc else None,
        "lead_weeks_to_saturation": lead_weeks(fc),
        "saturation_date": saturation_date(fc, end),
    }


def model_row(f: ModelFigures, end: datetime) -> dict[str, Cell]:
    m, fc = f.week, f.forecast
    return {
        "model": m.model,
        "version": m.version,
        "requests_total": m.requests_total,
        "peak_request_rate": m.peak_request_rate,
        "previous_peak_request_rate": f.previous_peak,
        "next_week_peak_request_rate": f.next_week.peak if f.next_week else None,
        "next_week_peak_request_rate_low": f.next_week.low if f.next_week else None,
        "next_week_peak_request_rate_high": f.next_week.high if f.next_week else None,
        # false: fewer than two weeks of peaks, the weekly cycle not removed (capacity.NextWeek)
        "next_week_reliable": str(f.next_week.reliable).lower() if f.next_week else None,
        "error_ratio": m.error_ratio,
        "availability": f.availability,
        "availability_objective": f.availability_objective,
        "availability_vs_objective": f.availability_vs_objective,
        "mean_batch_size": m.mean_batch_size,
        "max_batch_size": m.max_batch_size,
        **{name: m.figure(name) for name in REPORTED_FIELDS},
        "mean_latency_seconds": m.mean_latency_seconds,
        "p99_latency_seconds": m.p99_latency_seconds,
        "latency_threshold_seconds": f.latency_threshold,
        "gpus": " ".join(m.gpus),
        "capacity_source": f.capacity_source,
        "capacity_request_rate": fc.capacity if fc and f.capacity_source in BY_RATE else None,
        "slo_capacity_request_rate": f.knee.rate
        if f.knee and f.knee.rate is not None
        else m.sidecar_capacity,
        "headroom_ratio": f.headroom,
        **_forecast_cells(fc, end),
        "gpus_now": float(len(m.gpus)) if m.gpus else None,
        "gpus_needed_4w": _int(f.gpus_needed(4)),
        "gpus_needed_12w": _int(f.gpus_needed(12)),
        "gpu_seconds_per_request": m.gpu_seconds_per_request,
        "joules_per_request": m.joules_per_request,
    }


def _int(v: int | None) -> float | None:
    return None if v is None else float(v)


def gpu_row(g: GpuFigures, end: datetime) -> dict[str, Cell]:
    fc = g.forecast
    return {
        "gpu_uuid": g.uuid,
        "peak_utilization": fc.peak if math.isfinite(fc.peak) else None,
        "mean_utilization": g.mean_utilization,
        "headroom_ratio": fc.headroom if math.isfinite(fc.peak) else None,
        "trend_slope_per_day": _linear_slope(fc),
        **_forecast_cells(fc, end),
        "models": " ".join(g.models),
    }


def _linear_slope(fc: Forecast) -> float | None:
    """The linear fit's growth a day (utilisation points), whichever model was chosen."""
    s = fc.models.get(LINEAR)
    return s.fit.slope if s else None
