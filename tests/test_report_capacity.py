"""The forecast's arithmetic and the query plumbing, without a Prometheus (fast, exact values)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from tritonwatch import catalog
from tritonwatch.reports import capacity, knee, queries
from tritonwatch.reports.formats import csv_cell, percent
from tritonwatch.reports.promapi import _chunks
from tritonwatch.reports.render import MODEL_TABLE

END = datetime(2026, 11, 9, tzinfo=timezone.utc)


def _series(days: int, peak: float, slope_per_day: float, noise: float = 0.0) -> pd.Series:
    """5-minute values with a daily cycle whose peaks (14:00) lie on ``peak + slope * (t - end)``."""
    idx = pd.date_range(END - timedelta(days=days) + timedelta(minutes=5), END, freq="5min")
    t = np.array([(x - pd.Timestamp(END)).total_seconds() / 86400 for x in idx])
    hour = np.array([x.hour + x.minute / 60 for x in idx])
    daily = 0.6 + 0.4 * np.cos(2 * math.pi * (hour - 14) / 24)
    rng = np.random.default_rng(1)
    return pd.Series(
        (peak + slope_per_day * t) * daily * (1 + noise * rng.standard_normal(t.size)), index=idx
    )


def test_daily_peaks_one_per_day_at_the_daily_maximum() -> None:
    peaks = capacity.daily_peaks(_series(7, 100.0, 2.0), END, 7)
    assert len(peaks) == 7
    assert all(t.hour == 14 and t.minute == 0 for t in peaks.index)
    assert peaks.iloc[-1] == pytest.approx(100.0 + 2.0 * (-10 / 24))


def _peaks(values: list[float] | np.ndarray, start_days_ago: int | None = None) -> pd.Series:
    """Daily peaks at 14:00 on consecutive days ending the day before END."""
    n = len(values)
    first = END - timedelta(days=start_days_ago or n) + timedelta(hours=14)
    return pd.Series(list(values), index=[pd.Timestamp(first + timedelta(days=k)) for k in range(n)])


def test_exact_line_gives_exact_weeks_and_the_linear_model() -> None:
    fc = capacity.forecast(_series(7, 100.0, 2.0), END, 7, 170.0, "slo")
    assert fc.chosen == capacity.LINEAR and fc.best is not None
    assert fc.best.fit.slope == pytest.approx(2.0)
    assert fc.weeks == pytest.approx(70.0 / 2.0 / 7.0)  # 35 days
    assert fc.weeks_low == pytest.approx(fc.weeks) and fc.weeks_high == pytest.approx(fc.weeks)
    assert fc.headroom == pytest.approx(1 - fc.peak / 170.0)
    # A straight line through the logarithm bends upwards: compounding says sooner, outside the
    # linear fit's (zero-width) range, so the report leads with it and shows both.
    compound = fc.weeks_of(capacity.COMPOUND)
    assert compound is not None and compound < fc.weeks
    assert fc.disagree and fc.lead is fc.models[capacity.COMPOUND]


def test_compounding_growth_is_chosen_and_exact() -> None:
    t = np.arange(-7, 0) + 14 / 24  # days from END of each 14:00 peak
    fc = capacity.forecast(_peaks(100.0 * 1.05**t), END, 7, 170.0, "gpu")
    assert fc.chosen == capacity.COMPOUND and fc.best is not None
    assert fc.best.fit.growth_per_day == pytest.approx(0.05)
    assert fc.weeks == pytest.approx(math.log(1.7) / math.log(1.05) / 7.0)
    linear = fc.weeks_of(capacity.LINEAR)
    assert linear is not None and linear > fc.weeks  # a line through compounding peaks is late
    assert fc.lead is fc.best
    assert "compounding growth fits better" in fc.explain()


def test_weekly_cycle_is_taken_out_with_two_weeks() -> None:
    # 21 days, weekends at 70 %: the busiest-weekday envelope grows 1 a day from 100.
    t = np.arange(-21, 0) + 14 / 24
    days = _peaks(np.zeros(21)).index
    weekend = np.array([0.7 if d.weekday() >= 5 else 1.0 for d in days])
    fc = capacity.forecast(_peaks((100.0 + 1.0 * t) * weekend), END, 21, 130.0, "slo")
    factors = capacity.weekly_factors(fc.peaks)
    assert factors is not None
    assert {d: round(f, 3) for d, f in factors.items() if d >= 5} == pytest.approx({5: 0.7, 6: 0.7}, abs=0.02)
    assert fc.best is not None and fc.best.fit.weekly
    assert fc.chosen == capacity.LINEAR
    assert fc.weeks == pytest.approx(30.0 / 7.0, rel=0.03)
    # Fewer than 14 days: no weekly adjustment.
    assert capacity.weekly_factors(fc.peaks.iloc[-13:]) is None


def test_noise_widens_the_range_around_the_estimate() -> None:
    fc = capacity.forecast(_series(7, 100.0, 2.0, noise=0.03), END, 7, 170.0, "gpu")
    assert fc.weeks is not None and fc.weeks_low is not None
    assert fc.weeks_low < fc.weeks
    assert fc.weeks_high is None or fc.weeks_high > fc.weeks
    assert fc.weeks == pytest.approx(5.0, rel=0.3)


def test_flat_or_falling_trend_has_no_saturation_date() -> None:
    for slope in (0.0, -3.0):
        fc = capacity.forecast(_series(7, 100.0, slope), END, 7, 170.0, "slo")
        assert fc.weeks is None and fc.weeks_low is None and fc.weeks_high is None
        assert fc.lead is not None and fc.lead.weeks is None
    # Growth so slow it saturates only after years: no date either.
    assert capacity.forecast(_series(7, 100.0, 0.01), END, 7, 170.0, "slo").weeks is None
    # Already over capacity: saturated now.
    assert capacity.forecast(_series(7, 200.0, 1.0), END, 7, 170.0, "slo").weeks == 0.0


def test_one_day_has_no_trend() -> None:
    fc = capacity.forecast(_series(1, 100.0, 2.0), END, 1, 170.0, "slo")
    assert fc.chosen is None and fc.weeks is None and fc.lead is None
    assert fc.peak == pytest.approx(100.0, rel=0.01)


def test_knee_is_where_the_good_ratio_falls_below_the_objective() -> None:
    idx = pd.date_range(END - timedelta(days=1), END, freq="5min")
    rate = pd.Series(np.linspace(10.0, 110.0, idx.size), index=idx)
    # 99.9 % good up to 60 req/s, then the good share falls 1 point per req/s.
    ratio = np.where(rate < 60.0, 0.999, 0.999 - (rate - 60.0) * 0.01)
    k = knee.slo_capacity(rate, rate * ratio, rate, 0.99, 20, 300.0)
    assert k.rate is not None
    assert k.rate == pytest.approx(60.9, abs=2.5)  # one 5-req/s bin
    assert len(k.bins) == knee.BINS
    met = knee.slo_capacity(rate, rate * 0.999, rate, 0.99, 20, 300.0)
    assert met.rate is None and "met at every load" in met.reason
    missed = knee.slo_capacity(rate, rate * 0.9, rate, 0.99, 20, 300.0)
    assert missed.rate is None and "missed even at the lowest load" in missed.reason
    thin = knee.slo_capacity(rate, rate * ratio * 1e-5, rate * 1e-5, 0.99, 20, 300.0)
    assert thin.rate is None and "sampled requests" in thin.reason


def test_chunks_cover_the_range_once_on_the_step_grid() -> None:
    step = timedelta(minutes=5)
    start = END - timedelta(days=7) + step  # as the report asks: every window inside the period
    pieces = list(_chunks(start, END, step))
    assert len(pieces) == 7
    points = [p for a, b in pieces for p in pd.date_range(a, b, freq="5min")]
    assert len(points) == len(set(points)) == 7 * 288
    assert pieces[0][0] == start and pieces[-1][1] == END


def test_queries_come_from_the_catalog() -> None:
    assert queries.error_ratio("7d") == catalog.promql(catalog.signal(catalog.ERROR_RATIO), "7d")
    assert 'reason!~"CANCELED"' in queries.server_failures("7d")
    assert queries.request_rate(True) == f"sum by (model, version) ({catalog.REQUEST_RATE_RECORD})"
    assert queries.request_rate(False) == catalog.promql(catalog.signal(catalog.REQUEST_RATE), "5m")
    gpu = queries.gpu_utilization()
    assert gpu.index(catalog.GPU_UTILIZATION) < gpu.index(" or ") < gpu.index(catalog.TRITON_GPU_UTILIZATION)


def test_not_applicable_is_an_empty_csv_cell() -> None:
    assert csv_cell(None) == "" and csv_cell(math.nan) == ""
    assert csv_cell(0.0) == "0"
    assert csv_cell(0.25) == "0.25"


def test_one_percent_format() -> None:
    assert [percent(0.1234), percent(0.99951, 2), percent(-0.0312, signed=True), percent(None)] == [
        "12.3 %",
        "99.95 %",
        "-3.1 %",
        "—",
    ]


def _weekend_dip(days: int, level: float, weekend: float, noise: float = 0.01) -> pd.Series:
    """5-minute values with a daily cycle peaking at ``level`` at 14:00, ``weekend`` of it on Saturdays
    and Sundays, flat: the days end at END, a Monday 00:00, so the last two are a quiet weekend."""
    idx = pd.date_range(END - timedelta(days=days) + timedelta(minutes=5), END, freq="5min")
    hour = np.array([x.hour + x.minute / 60 for x in idx])
    daily = 0.6 + 0.4 * np.cos(2 * math.pi * (hour - 14) / 24)
    quiet = np.array([weekend if x.weekday() >= 5 else 1.0 for x in idx])
    rng = np.random.default_rng(1)
    return pd.Series(level * daily * quiet * (1 + noise * rng.standard_normal(idx.size)), index=idx)


def test_a_week_ending_on_a_quiet_weekend_is_not_forecast_into_the_trough() -> None:
    # A flat model at 50 req/s on weekdays, 80 % at weekends: next week peaks at 50 again.
    series = _weekend_dip(7, 50.0, 0.8)
    seen = float(capacity.daily_peaks(series, END, 7).max())
    assert seen == pytest.approx(50.0, rel=0.03)
    # The cause: a trend through one week reads the weekend as a fall (-1.8 req/s a day); carried to
    # next week's days it says 40.6, 20 % under the 51 already seen (the first reports' bias).
    peaks = capacity.daily_peaks(series, END, 7)
    trend = capacity.fit(peaks, END, capacity.LINEAR)
    assert trend is not None and trend.slope == pytest.approx(-1.83, abs=0.01)
    said = max(trend.at((t - pd.Timestamp(END)).total_seconds() / 86400 + 7) for t in peaks.index)
    assert said == pytest.approx(40.6, abs=0.1) and said < 0.8 * seen
    ahead = capacity.next_week(series, END, 7)
    assert ahead is not None
    assert ahead.peak == seen and ahead.observed  # within 10 % of next week's peak of 50
    assert abs(ahead.peak / 50.0 - 1) < 0.10
    assert ahead.low < ahead.peak < ahead.high
    assert not ahead.weekly and not ahead.reliable and ahead.days == 7
    assert ahead.basis() == (
        "this week's highest peak (the trend said less); weekly cycle not removed (7 days, 14 needed): unreliable"
    )
    # Two weeks: the weekly cycle is taken out, the forecast is the busiest weekday's, and reliable.
    two = capacity.next_week(_weekend_dip(14, 50.0, 0.8), END, 14)
    assert two is not None and two.weekly and two.reliable and not two.observed
    assert two.peak == pytest.approx(50.0, rel=0.03)
    assert two.basis().endswith("trend, weekly cycle removed (14 days)")
    # Growth a trend sees is kept: a week growing 2 req/s a day is forecast past this week's peak.
    growing = capacity.next_week(_series(7, 100.0, 2.0), END, 7)
    assert growing is not None and not growing.observed and not growing.reliable
    assert growing.peak == pytest.approx(100.0 + 2.0 * (7 - 10 / 24), rel=1e-6)


@pytest.mark.parametrize(
    ("body", "days"),
    [
        (b'{"status":"success","data":{"storageRetention":"30d"}}', 30.0),
        (b'{"status":"success","data":{"storageRetention":"15d or 10GiB"}}', 15.0),
        (b'{"status":"success","data":{"storageRetention":"1w2d12h"}}', 9.5),
        (b'{"status":"success","data":{"storageRetention":"10GiB"}}', None),  # size only: no time bound
        (b'{"status":"success","data":{}}', None),
        (b"404 page not found", None),  # Thanos, Mimir: no such API
    ],
)
def test_retention_from_runtimeinfo(body: bytes, days: float | None) -> None:
    from support.static_endpoint import StaticEndpoint

    from tritonwatch.reports.promapi import PromClient

    server = StaticEndpoint(body).start()
    try:
        got = PromClient(f"http://127.0.0.1:{server.port}", timeout=5).retention()
    finally:
        server.stop()
    assert (None if got is None else got / timedelta(days=1)) == days


def test_the_model_table_heads_signal_columns_from_the_catalog() -> None:
    headers = [name for name, _ in MODEL_TABLE]
    assert headers == [
        "model",
        "requests",
        "peak req/s",
        "error ratio",
        "availability vs objective",
        "mean batch",
        "batch efficiency",
        "cache hits",
        "queue share",
        "p99 ms",
    ]
    shown = (catalog.ERROR_RATIO, catalog.BATCH_SIZE_MEAN, catalog.BATCH_EFFICIENCY, catalog.CACHE_HIT_RATIO)
    assert [catalog.view(s)[0].column for s in (*shown, catalog.QUEUE_TIME_RATIO)] == headers[3:4] + headers[
        5:9
    ]
