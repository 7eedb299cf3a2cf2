"""Headroom and time to saturation from a series of 5-minute values (request rate or GPU utilisation).

Method (stated in the report as ``METHOD``): take each day's peak (days counted back from the report's
end), fit a straight line to the peaks against the time they happened (ordinary least squares), and
extrapolate it to the capacity. The uncertainty is the range given by the slope plus or minus its
standard error times Student's t (95 %, n - 2 degrees of freedom); a flat or falling trend has no
saturation date (an empty cell, not infinity or 0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

METHOD = (
    "Each day's peak of the 5-minute series (days counted back from the report's end) is fitted with a "
    "straight line by least squares against the time of the peak; weeks to saturation is when that line "
    "reaches capacity, counted from the end of the period. The range is the 95 % interval of the slope "
    "(slope ± t(n-2) × its standard error). With fewer than 3 days no range is given; a flat or falling "
    "trend gives no saturation date. Linear growth is assumed: compounding growth saturates sooner."
)

# Student's t, two-sided 95 %, by degrees of freedom (no scipy in the report's dependencies).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
_T95.update({12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042})


def t95(dof: int) -> float:
    if dof <= 0:
        return math.inf
    if dof in _T95:
        return _T95[dof]
    smaller = [d for d in _T95 if d < dof]
    return _T95[max(smaller)] if dof <= 30 else 1.96


def daily_peaks(series: pd.Series, end: datetime, days: int) -> pd.Series:
    """Each day's highest value, indexed by the time it happened (days end at ``end``, ``end - 1d``...)."""
    s = series.dropna()
    peaks: dict[pd.Timestamp, float] = {}
    for k in range(days):
        hi = pd.Timestamp(end - timedelta(days=k))
        lo = pd.Timestamp(end - timedelta(days=k + 1))
        day = s[(s.index > lo) & (s.index <= hi)]
        if not day.empty:
            peaks[day.idxmax()] = float(day.max())
    return pd.Series(peaks, dtype="float64").sort_index()


@dataclass(frozen=True)
class Trend:
    """``value(t) = level + slope_per_day * (t - end)`` in days, fitted to daily peaks."""

    end: datetime
    level: float  # the line's value at the end of the period
    slope_per_day: float
    slope_stderr: float  # nan with fewer than 3 points
    n: int

    def at(self, t: pd.Timestamp) -> float:
        return self.level + self.slope_per_day * (t - pd.Timestamp(self.end)).total_seconds() / 86400.0


def fit_trend(peaks: pd.Series, end: datetime) -> Trend | None:
    if len(peaks) < 2:
        return None
    x = np.array([(t - pd.Timestamp(end)).total_seconds() / 86400.0 for t in peaks.index])
    y = peaks.to_numpy(dtype="float64")
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    if sxx == 0.0:
        return None
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    level = float(ym - slope * xm)
    stderr = math.nan
    if len(y) > 2:
        resid = y - (level + slope * x)
        stderr = math.sqrt(float((resid**2).sum()) / (len(y) - 2) / sxx)
    return Trend(end=end, level=level, slope_per_day=slope, slope_stderr=stderr, n=len(y))


@dataclass(frozen=True)
class Forecast:
    capacity: float
    source: str  # "slo" (declared max request rate) or "gpu" (utilisation reaching 1)
    peak: float
    trend: Trend | None
    weeks: float | None  # None: no growth, no saturation date
    weeks_low: float | None
    weeks_high: float | None  # None: the slow end of the range never saturates

    @property
    def headroom(self) -> float:
        return 1.0 - self.peak / self.capacity


def _weeks(level: float, slope: float, capacity: float) -> float | None:
    if level >= capacity:
        return 0.0
    if slope <= 0 or not math.isfinite(slope):
        return None
    return (capacity - level) / slope / 7.0


def forecast(series: pd.Series, end: datetime, days: int, capacity: float, source: str) -> Forecast:
    peaks = daily_peaks(series, end, days)
    peak = float(peaks.max()) if not peaks.empty else math.nan
    trend = fit_trend(peaks, end)
    if trend is None:
        return Forecast(capacity, source, peak, None, None, None, None)
    weeks = _weeks(trend.level, trend.slope_per_day, capacity)
    low = high = None
    if weeks is not None and math.isfinite(trend.slope_stderr):
        spread = t95(trend.n - 2) * trend.slope_stderr
        low = _weeks(trend.level, trend.slope_per_day + spread, capacity)
        high = _weeks(trend.level, trend.slope_per_day - spread, capacity)
    return Forecast(capacity, source, peak, trend, weeks, low, high)
