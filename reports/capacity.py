"""Headroom and time to saturation from a series of 5-minute values (request rate or GPU utilisation).

Method (stated in the report as ``METHOD``): take each day's peak (days counted back from the report's
end) and fit two trends to the peaks against the time they happened, by ordinary least squares
(statsmodels): a straight line (linear growth) and a straight line through the logarithm of the peaks
(compounding growth, a constant percentage a day). With two weeks of peaks or more, the peaks are first
scaled to the busiest weekday by each weekday's share of it (classical multiplicative decomposition), so
a quiet weekend is not read as a trend; the forecast is then the busiest weekday's. The better fit is
chosen by AIC on the scale of the peaks themselves (the log model's likelihood carries the Jacobian of
the log, so the two are comparable). Each model's saturation date is when its fitted peak reaches
capacity, with the 95 % confidence band of the fitted trend as its range. When the other model's date
lies outside the chosen one's range, the two disagree, and the report leads with the earlier date.
Growth that is not significantly above zero (the slope's 95 % interval reaches 0), or that reaches
capacity only beyond ``HORIZON_DAYS``, gives no date.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

LINEAR = "linear"
COMPOUND = "compound"
MODEL_NAMES = {LINEAR: "linear", COMPOUND: "compounding"}
WEEKLY_MIN_DAYS = 14  # two of each weekday: fewer, and a day-of-week effect is one point
HORIZON_DAYS = 3 * 365.0  # the interval's dates are searched this far ahead
ALPHA = 0.05

METHOD = (
    "Each day's peak of the 5-minute series (days counted back from the end of the period, over all the "
    "history Prometheus holds, up to its retention) is fitted by least squares (statsmodels OLS) with two "
    "trends against the time of the peak: linear growth (a straight line) and compounding growth (a "
    "straight line through the logarithm of the peaks, a constant percentage a day). With 14 days of "
    "peaks or more, the weekly cycle is taken out first: each weekday's share of the busiest weekday "
    "(classical multiplicative decomposition, ratio to the centred 7-day moving average) scales the peaks "
    "up to the busiest weekday, so the forecast is the busiest day's. With fewer, the cycle is not "
    "removed and a week ending on a quiet weekend would tilt the trend down: next week's peak is then "
    "forecast as at least the period's highest daily peak, and marked unreliable. The model with the "
    "lower AIC on the scale of the peaks is chosen (the log model's likelihood includes the Jacobian of the log, so the "
    "two are comparable). Weeks to saturation is when the fitted peak reaches capacity, counted from the "
    "end of the period; the range is where the 95 % confidence band of the fitted trend reaches it. When "
    "the other model's date lies outside the chosen model's range, the report leads with the earlier of "
    "the two dates and shows both. Growth whose 95 % interval reaches zero, or that reaches capacity only "
    "after three years, gives no date."
)


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
class Fit:
    """One trend fitted to (weekly-adjusted) daily peaks; ``t`` is in days from the end of the period."""

    kind: str  # LINEAR or COMPOUND
    result: object  # statsmodels RegressionResults
    aic: float  # on the scale of the peaks
    r2: float  # on the scale of the peaks
    slope: float  # per day: value units (linear) or log units (compound)
    slope_low: float  # lower end of the slope's 95 % interval
    n: int
    weekly: bool  # the peaks were adjusted for the day of the week

    @property
    def growth_per_day(self) -> float:
        """Linear: value units a day; compound: the daily growth ratio minus 1 (0.05 is 5 % a day)."""
        return self.slope if self.kind == LINEAR else math.expm1(self.slope)

    @property
    def significant(self) -> bool:
        return self.slope > 0 and self.slope_low > 0

    def predict(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fitted peak at ``t`` (days from end; the busiest weekday's) and its 95 % confidence band."""
        x = np.asarray(t, dtype=np.float64)
        exog = np.column_stack([np.ones_like(x), x])
        frame = self.result.get_prediction(exog).summary_frame(alpha=ALPHA)  # type: ignore[attr-defined]
        mean, lo, hi = (frame[c].to_numpy() for c in ("mean", "mean_ci_lower", "mean_ci_upper"))
        if self.kind == COMPOUND:
            return np.exp(mean), np.exp(lo), np.exp(hi)
        return mean, lo, hi

    def interval(self, t: float) -> tuple[float, float, float]:
        """Fitted peak at ``t`` and the 95 % prediction interval of one day's peak there (the band a
        single observed peak should fall in, wider than the trend's confidence band)."""
        exog = np.array([[1.0, float(t)]])
        frame = self.result.get_prediction(exog).summary_frame(alpha=ALPHA)  # type: ignore[attr-defined]
        mean, lo, hi = (float(frame[c].iloc[0]) for c in ("mean", "obs_ci_lower", "obs_ci_upper"))
        if self.kind == COMPOUND:
            return math.exp(mean), math.exp(lo), math.exp(hi)
        return mean, lo, hi

    def at(self, t: float) -> float:
        return float(self.predict(np.array([t]))[0][0])

    def days_to(self, capacity: float) -> float | None:
        """Days from the end until the fitted peak reaches ``capacity`` (0: already there)."""
        if self.at(0.0) >= capacity:
            return 0.0
        if not self.significant:
            return None
        intercept = float(np.asarray(self.result.params)[0])  # type: ignore[attr-defined]
        target = capacity if self.kind == LINEAR else math.log(capacity)
        days = (target - intercept) / self.slope
        # Years away is no forecast: the trend of a few weeks says nothing that far ahead.
        return days if days <= HORIZON_DAYS else None

    def band_days(self, capacity: float) -> tuple[float | None, float | None]:
        """Days until the upper and the lower edge of the 95 % band reach ``capacity`` (None: not
        within the horizon)."""
        t = np.arange(0.0, HORIZON_DAYS, 0.05)
        _, lo, hi = self.predict(t)
        return _first(t, hi, capacity), _first(t, lo, capacity)


def _first(t: np.ndarray, y: np.ndarray, capacity: float) -> float | None:
    over = np.nonzero(y >= capacity)[0]
    if over.size == 0:
        return None
    i = int(over[0])
    if i == 0:
        return 0.0
    # Linear interpolation between the grid points either side of the crossing.
    t0, t1, y0, y1 = t[i - 1], t[i], y[i - 1], y[i]
    return float(t0 + (capacity - y0) / (y1 - y0) * (t1 - t0))


def weekly_factors(peaks: pd.Series) -> dict[int, float] | None:
    """Each weekday's share of the busiest weekday's peak (0 Monday), by classical multiplicative
    decomposition (ratio to the centred 7-day moving average, statsmodels ``seasonal_decompose``);
    None with fewer than two whole weeks of consecutive daily peaks."""
    from statsmodels.tsa.seasonal import seasonal_decompose

    if len(peaks) < WEEKLY_MIN_DAYS or (peaks <= 0).any():
        return None
    days = np.array([t.normalize() for t in peaks.index])
    if len(set(days)) != len(days) or (days[-1] - days[0]).days != len(days) - 1:
        return None  # a missing day would shift the cycle
    seasonal = np.asarray(seasonal_decompose(peaks.to_numpy(), model="multiplicative", period=7).seasonal)
    factor = {int(t.weekday()): float(f) for t, f in zip(peaks.index[:7], seasonal[:7], strict=True)}
    top = max(factor.values())
    return {d: f / top for d, f in factor.items()}


def adjust(peaks: pd.Series) -> tuple[pd.Series, bool]:
    """The peaks scaled to the busiest weekday (when the weekly cycle can be estimated)."""
    factors = weekly_factors(peaks)
    if factors is None:
        return peaks, False
    return peaks / np.array([factors[t.weekday()] for t in peaks.index]), True


def fit(peaks: pd.Series, end: datetime, kind: str, weekly: bool = False) -> Fit | None:
    """Fit one trend to ``peaks`` (already adjusted); None with fewer than 3 peaks, or, compounding,
    a peak at or below 0."""
    import statsmodels.api as sm

    y = peaks.to_numpy(dtype="float64")
    if len(y) < 3 or (kind == COMPOUND and (y <= 0).any()):
        return None
    t = np.array([(x - pd.Timestamp(end)).total_seconds() / 86400.0 for x in peaks.index])
    if float(np.ptp(t)) == 0.0:
        return None
    res = sm.OLS(y if kind == LINEAR else np.log(y), np.column_stack([np.ones_like(t), t])).fit()
    aic = float(res.aic)
    fitted = np.asarray(res.fittedvalues)
    if kind == COMPOUND:
        aic += 2.0 * float(np.log(y).sum())  # the Jacobian of the log: the AIC of the peaks themselves
        fitted = np.exp(fitted)
    sst = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float(((y - fitted) ** 2).sum()) / sst if sst > 0 else math.nan
    return Fit(
        kind=kind,
        result=res,
        aic=aic,
        r2=r2,
        slope=float(np.asarray(res.params)[1]),
        slope_low=float(np.asarray(res.conf_int(alpha=ALPHA))[1][0]),
        n=len(y),
        weekly=weekly,
    )


@dataclass(frozen=True)
class Saturation:
    """One model's answer: weeks from the end until the fitted peak reaches capacity, and its range."""

    fit: Fit
    weeks: float | None  # None: no significant growth
    weeks_low: float | None
    weeks_high: float | None  # None: the band's slow edge does not reach capacity within the horizon


def _saturation(f: Fit, capacity: float) -> Saturation:
    days = f.days_to(capacity)
    if days is None:
        return Saturation(f, None, None, None)
    low, high = f.band_days(capacity)
    if days == 0.0:
        low = high = 0.0
    return Saturation(
        f,
        days / 7.0,
        None if low is None else min(low, days) / 7.0,
        None if high is None else max(high, days) / 7.0,
    )


@dataclass(frozen=True)
class Forecast:
    capacity: float
    source: str  # "latency" (SLO-bound), "slo" (declared max request rate) or "gpu" (utilisation 1)
    peak: float
    peaks: pd.Series
    adjusted: pd.Series  # the peaks scaled to the busiest weekday (the same, without a weekly cycle)
    models: dict[str, Saturation]  # by kind; a kind that could not be fitted is absent
    chosen: str | None  # the kind with the lower AIC; None with fewer peaks than a fit needs

    @property
    def headroom(self) -> float:
        return 1.0 - self.peak / self.capacity

    @property
    def best(self) -> Saturation | None:
        return self.models[self.chosen] if self.chosen else None

    @property
    def other(self) -> Saturation | None:
        others = [s for k, s in self.models.items() if k != self.chosen]
        return others[0] if others else None

    @property
    def disagree(self) -> bool:
        """The other model's date lies outside the chosen model's 95 % range (or only one has a date)."""
        b, o = self.best, self.other
        if b is None or o is None:
            return False
        if (b.weeks is None) != (o.weeks is None):
            return True
        if b.weeks is None or o.weeks is None:
            return False
        lo = b.weeks_low if b.weeks_low is not None else b.weeks
        hi = b.weeks_high if b.weeks_high is not None else math.inf
        return not lo <= o.weeks <= hi

    @property
    def lead(self) -> Saturation | None:
        """What the report leads with: the chosen model, or the earlier date when the two disagree."""
        b, o = self.best, self.other
        if b is None or o is None or not self.disagree:
            return b
        bw = b.weeks if b.weeks is not None else math.inf
        ow = o.weeks if o.weeks is not None else math.inf
        return o if ow < bw else b

    # The chosen model's figures (CSV columns weeks_to_saturation, _low, _high).
    @property
    def weeks(self) -> float | None:
        return self.best.weeks if self.best else None

    @property
    def weeks_low(self) -> float | None:
        return self.best.weeks_low if self.best else None

    @property
    def weeks_high(self) -> float | None:
        return self.best.weeks_high if self.best else None

    def weeks_of(self, kind: str) -> float | None:
        s = self.models.get(kind)
        return s.weeks if s else None

    def projected(self, weeks_ahead: float) -> float | None:
        """The chosen model's fitted busiest-day peak ``weeks_ahead`` after the end (the fitted growth;
        never below today's fitted peak when growth is not significant)."""
        s = self.best
        if s is None:
            return None
        if not s.fit.significant:
            return max(s.fit.at(0.0), 0.0)
        return max(s.fit.at(7.0 * weeks_ahead), 0.0)

    def explain(self) -> str:
        """Which model was chosen and why, in a sentence."""
        if self.chosen is None:
            return "too few daily peaks for a trend"
        b = self.models[self.chosen].fit
        why = f"{MODEL_NAMES[self.chosen]} growth fits better (AIC {b.aic:.1f}, R² {b.r2:.3f}"
        o = self.other
        if o is not None:
            why += f"; {MODEL_NAMES[o.fit.kind]}: AIC {o.fit.aic:.1f}, R² {o.fit.r2:.3f}"
        why += f"; {b.n} days" + (", adjusted for the day of the week" if b.weekly else "") + ")"
        return why


def forecast(
    series: pd.Series, end: datetime, days: int, capacity: float, source: str, period_days: int | None = None
) -> Forecast:
    """Fit both trends to the daily peaks of ``series`` over ``days`` before ``end``; saturation at
    ``capacity``. ``peak`` is the highest peak of the report's period (``period_days``, default all)."""
    peaks = daily_peaks(series, end, days)
    recent = peaks[peaks.index > pd.Timestamp(end - timedelta(days=min(days, period_days or days)))]
    peak = float(recent.max()) if not recent.empty else math.nan
    adjusted, weekly = adjust(peaks)
    fits = {kind: f for kind in (LINEAR, COMPOUND) if (f := fit(adjusted, end, kind, weekly)) is not None}
    chosen = min(fits, key=lambda k: fits[k].aic) if fits else None
    return Forecast(capacity, source, peak, peaks, adjusted, saturations(fits, peak, capacity), chosen)


def saturations(fits: Mapping[str, Fit], peak: float, capacity: float) -> dict[str, Saturation]:
    """Each trend's saturation at ``capacity``; already over it (``peak``), saturated now whatever
    the trend says."""
    if math.isfinite(peak) and peak >= capacity:
        return {k: Saturation(f, 0.0, 0.0, 0.0) for k, f in fits.items()}
    return {k: _saturation(f, capacity) for k, f in fits.items()}


@dataclass(frozen=True)
class NextWeek:
    """The forecast of the highest daily peak in the 7 days after the end."""

    kind: str  # LINEAR or COMPOUND: the trend chosen by fit
    peak: float
    low: float  # the 95 % prediction interval of that day's peak
    high: float
    weekly: bool  # the weekly cycle was taken out (WEEKLY_MIN_DAYS of peaks or more)
    days: int  # daily peaks fitted
    observed: bool = False  # the forecast is this week's highest peak: the trend said less

    @property
    def reliable(self) -> bool:
        """With fewer than two weeks each weekday is seen once: a trend cannot be told from the weekly
        cycle (a quiet weekend at the end reads as a fall), so the forecast is rough."""
        return self.weekly

    def basis(self) -> str:
        """How it was made, in a few words (the report's table and the forecast's note)."""
        if self.weekly:
            return f"{MODEL_NAMES[self.kind]} trend, weekly cycle removed ({self.days} days)"
        said = (
            "this week's highest peak (the trend said less)"
            if self.observed
            else f"{MODEL_NAMES[self.kind]} trend"
        )
        return f"{said}; weekly cycle not removed ({self.days} days, {WEEKLY_MIN_DAYS} needed): unreliable"


def next_week(series: pd.Series, end: datetime, days: int) -> NextWeek | None:
    """Fit both trends to the daily peaks of ``series`` over ``days`` before ``end`` (as ``forecast``)
    and take the chosen one's highest fitted peak over the 7 days after ``end`` (at the times of day the
    last 7 peaks came, a week later), whatever the trend (a flat or falling one included: next week's
    peak is forecast, not a saturation date); None with fewer peaks than a fit needs.

    Without the weekly cycle taken out (fewer than ``WEEKLY_MIN_DAYS`` of peaks) a week ending on a
    quiet weekend tilts the trend down and its forecast under the busy days already seen: the forecast
    is then at least this week's highest peak, with the trend's interval around it, and is marked
    unreliable."""
    peaks = daily_peaks(series, end, days)
    adjusted, weekly = adjust(peaks)
    fits = {kind: f for kind in (LINEAR, COMPOUND) if (f := fit(adjusted, end, kind, weekly)) is not None}
    if not fits:
        return None
    best = fits[min(fits, key=lambda k: fits[k].aic)]
    # Next week's days peak at the hours this week's did: each of the last 7 peaks, a week later.
    ahead = [(x - pd.Timestamp(end)).total_seconds() / 86400.0 + 7.0 for x in peaks.index[-7:]]
    mean, lo, hi = max((best.interval(t) for t in ahead), key=lambda x: x[0])
    seen = float(peaks.iloc[-7:].max())
    observed = not weekly and seen > mean
    if observed:
        # The same uncertainty as the trend's, around the busiest day already seen.
        mean, lo, hi = seen, seen - (mean - lo), seen + (hi - mean)
    return NextWeek(best.kind, max(mean, 0.0), max(lo, 0.0), max(hi, 0.0), weekly, len(peaks), observed)
