"""The weekly report's configuration section (reports/configuration.py): the forecast twice.

A model whose daily peak grows by exactly ``SLOPE`` requests/s a day (a 5-minute rate rising on a
straight line, with a ±0.01 alternating wobble so that the fit has a residual) is sized against a
capacity; the advice predicts a gain ``k``. As recommended, the same line meets ``k`` times the
capacity ``(k - 1) x capacity / SLOPE`` days later, and the GPUs needed scale by 1/k: both checked
in closed form. The live path (advise on Prometheus inside ``tritonwatch report``) is in
tests/test_advise_prometheus.py.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pandas as pd
import pytest

from tritonwatch.reports import configuration
from tritonwatch.reports.capacity import forecast
from tritonwatch.reports.figures import ModelFigures, lead_weeks
from tritonwatch.reports.week import ModelWeek

END = datetime(2026, 11, 30, tzinfo=timezone.utc)
DAYS, SLOPE, START_RATE, CAPACITY = 28, 2.0, 40.0, 120.0
GPUS = ("GPU-a", "GPU-b", "GPU-c", "GPU-d")


def figures(source: str = "slo") -> ModelFigures:
    index = pd.date_range(END - timedelta(days=DAYS), END, freq="5min", inclusive="right")
    days = (index - index[0]).total_seconds().to_numpy() / 86400
    wobble = 0.01 * (-1.0) ** np.arange(len(index))
    rate = pd.Series(START_RATE + SLOPE * days + wobble, index=index)
    cap = CAPACITY if source == "slo" else 1.0
    week = ModelWeek("m", "1", gpus=GPUS, rate=rate)
    return ModelFigures(week, None, forecast(rate, END, DAYS, cap, source, 7), source)


def entry(
    cur_cap: float, rec_cap: float, cur_compute: float = 200.0, rec_compute: float = 100.0
) -> dict[str, Any]:
    def side(cap: float, compute: float) -> dict[str, Any]:
        return {
            "config": {"dynamic_batching": {}, "instance_group": [{"count": 1}]},
            "p99_seconds": 0.1,
            "slo_capacity_rps": cap,
        }

    return {
        "model": "m",
        "version": "1",
        "refusal": None,
        "current": side(cur_cap, cur_compute),
        "recommended": side(rec_cap, rec_compute),
        "details": {
            "predicted": {
                "current": {"compute_seconds_per_1000_requests": cur_compute},
                "recommended": {"compute_seconds_per_1000_requests": rec_compute},
            }
        },
    }


def test_the_forecast_as_recommended_meets_k_times_the_capacity_later_on_the_same_line() -> None:
    m = figures()
    assert m.forecast is not None and m.forecast.chosen == "linear"
    assert m.forecast.best is not None and m.forecast.best.fit.slope == pytest.approx(SLOPE, rel=1e-3)
    (row,) = configuration.rows([entry(30.0, 45.0)], [m])
    assert row.factor == 1.5
    assert row.recommended is not None and row.recommended.forecast is not None
    # the chosen (linear) trend's dates; the section shows the report's lead date, which is the
    # compound trend's earlier one where the two disagree
    configured, recommended = m.forecast.weeks, row.recommended.forecast.weeks
    assert configured is not None and recommended is not None
    assert row.weeks(False) == lead_weeks(m.forecast) and row.weeks(True) == lead_weeks(
        row.recommended.forecast
    )
    assert row.weeks(True) > row.weeks(False)  # type: ignore[operator]
    # peaks reach 40 + 2 x 28 = 96 at the end; 120 in 12 days, 180 in 42
    assert configured * 7 == pytest.approx((CAPACITY - START_RATE - SLOPE * DAYS) / SLOPE, abs=0.05)
    assert (recommended - configured) * 7 == pytest.approx(0.5 * CAPACITY / SLOPE, rel=1e-3)
    projected = m.forecast.projected(12)
    assert projected is not None
    for w in configuration.HORIZONS_WEEKS:
        p = m.forecast.projected(w)
        assert p is not None
        assert row.gpus(w, False) == math.ceil(len(GPUS) * p / CAPACITY - 1e-9)
        assert row.gpus(w, True) == math.ceil(len(GPUS) * p / (1.5 * CAPACITY) - 1e-9)
    # 96 + 2 x 84 = 264 at week 12: 4 x 264/120 -> 9 GPUs, 4 x 264/180 -> 6
    assert configuration.sentences([row]) == [
        "m:1: 9 GPUs at week 12 as configured, 6 with the recommended settings."
    ]
    assert configuration.scaled(m.forecast, 1.0) == m.forecast


def test_a_model_sized_by_its_gpus_scales_by_gpu_time_per_request() -> None:
    m = figures("gpu")
    (row,) = configuration.rows([entry(30.0, 30.0, cur_compute=200.0, rec_compute=80.0)], [m])
    assert row.factor == 2.5
    assert row.recommended is not None and row.recommended.forecast is not None
    assert row.recommended.forecast.capacity == 2.5


def test_refused_and_unknown_models_have_no_recommended_forecast() -> None:
    refused = {
        **entry(30.0, 45.0),
        "refusal": "no latency objective for this model in the SLO file",
        "recommended": None,
    }
    other = {**entry(30.0, 45.0), "model": "not-in-the-period"}
    rows = configuration.rows([refused, other], [figures()])
    assert [(r.factor, r.recommended) for r in rows] == [(None, None), (1.5, None)]
    assert rows[0].gpus(12, True) is None and rows[0].gpus(12, False) is not None
    cells = configuration.csv_row(rows[0])
    assert cells[2] == "no latency objective for this model in the SLO file" and cells[4] == ""
    # Said once below the table, with the models it holds for, not in every row.
    assert configuration.TABLE[2][1](rows[0]) == "no advice (below)"
    twice = configuration.rows([refused, {**refused, "model": "other"}], [figures()])
    assert configuration.refusals(twice) == [
        f"No advice for {rows[0].model}:1, other:1: no latency objective for this model in the SLO file."
    ]
