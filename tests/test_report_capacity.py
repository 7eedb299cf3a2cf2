"""The forecast's arithmetic and the query plumbing, without a Prometheus (fast, exact values)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from reports import capacity, queries
from reports.promapi import _chunks
from reports.render import _csv_cell
from tritonwatch import catalog

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


def test_exact_line_gives_exact_weeks_and_a_zero_width_range() -> None:
    fc = capacity.forecast(_series(7, 100.0, 2.0), END, 7, 170.0, "slo")
    assert fc.trend is not None
    assert fc.trend.slope_per_day == pytest.approx(2.0)
    assert fc.trend.level == pytest.approx(100.0)
    assert fc.weeks == pytest.approx(70.0 / 2.0 / 7.0)  # 35 days
    assert fc.weeks_low == pytest.approx(fc.weeks) and fc.weeks_high == pytest.approx(fc.weeks)
    assert fc.headroom == pytest.approx(1 - fc.peak / 170.0)


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
    # Already over capacity: saturated now.
    assert capacity.forecast(_series(7, 200.0, 1.0), END, 7, 170.0, "slo").weeks == 0.0


def test_one_day_has_no_trend() -> None:
    fc = capacity.forecast(_series(1, 100.0, 2.0), END, 1, 170.0, "slo")
    assert fc.trend is None and fc.weeks is None
    assert fc.peak == pytest.approx(100.0, rel=0.01)


def test_student_t() -> None:
    assert capacity.t95(5) == 2.571
    assert capacity.t95(11) == 2.228  # the next smaller tabulated: conservative
    assert capacity.t95(100) == 1.96
    assert math.isinf(capacity.t95(0))


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
    assert _csv_cell(None) == ""
    assert _csv_cell(0.0) == "0"
    assert _csv_cell(0.25) == "0.25"
