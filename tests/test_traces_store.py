"""The windowed sample store (exact quantiles, bounded memory) and the cumulative histograms."""

from __future__ import annotations

import math
import random

import pytest
from support.sleeper import nearest_rank

from tritonwatch import catalog
from tritonwatch.exporters.traces.store import Histograms, SampleStore, weighted_quantile

KEY = ("sleeper", "1", "compute_infer")
QS = ("0.5", "0.9", "0.99")


def test_quantiles_are_exact_below_the_reservoir_size() -> None:
    rng = random.Random(1)
    values = [rng.lognormvariate(-4, 1) for _ in range(3000)]
    store = SampleStore(window=300, slices=10, per_slice=1024)
    for i, v in enumerate(values):
        store.add(KEY, v, now=1000.0 + i * 0.05)  # 150 s: 5 slices of < 1024 values
    got = store.quantiles(KEY, 1150.0, QS)
    assert got is not None and got.count == 3000
    for q in QS:
        assert got.values[q] == nearest_rank(values, float(q))


def test_sampled_quantiles_stay_close_and_memory_stays_bounded() -> None:
    rng = random.Random(2)
    store = SampleStore(window=60, slices=6, per_slice=256, seed=3)
    values = [rng.expovariate(100) for _ in range(60_000)]
    for i, v in enumerate(values):
        store.add(KEY, v, now=i * 1e-6)  # all within 60 ms: one slice
    assert store.kept() == 256
    got = store.quantiles(KEY, 0.06, QS)
    assert store.kept() <= 6 * 256
    assert got is not None and got.count == 60_000
    assert got.values["0.5"] == pytest.approx(nearest_rank(values, 0.5), rel=0.15)
    assert got.values["0.9"] == pytest.approx(nearest_rank(values, 0.9), rel=0.15)


def test_old_slices_leave_the_window() -> None:
    store = SampleStore(window=10, slices=5)
    store.add(KEY, 1.0, now=0.0)
    store.add(KEY, 3.0, now=9.0)
    both = store.quantiles(KEY, 9.0, ("0.5",))
    assert both is not None and both.count == 2
    later = store.quantiles(KEY, 13.0, ("0.5",))
    assert later is not None and later.count == 1 and later.values["0.5"] == 3.0
    assert store.quantiles(KEY, 25.0, ("0.5",)) is None
    assert store.keys(25.0) == []


def test_key_count_is_capped() -> None:
    store = SampleStore(window=10, max_keys=2)
    assert store.add(("a", "1", "request"), 1.0, 0.0)
    assert store.add(("b", "1", "request"), 1.0, 0.0)
    assert not store.add(("c", "1", "request"), 1.0, 0.0)
    assert store.rejected == 1


def test_weighted_quantile_uses_the_weights() -> None:
    assert weighted_quantile([(1.0, 1.0), (2.0, 1.0), (3.0, 1.0), (4.0, 1.0)], 0.5) == 2.0
    assert weighted_quantile([(1.0, 1.0), (2.0, 9.0)], 0.5) == 2.0
    assert math.isnan(weighted_quantile([], 0.5))


def test_default_buckets_hold_the_slo_thresholds() -> None:
    b = catalog.DEFAULT_BUCKETS
    assert len(b) <= 30 and b[0] == 0.0001 and b[-1] == 60.0
    assert list(b) == sorted(b)
    for t in (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0):
        assert t in b


def test_histogram_buckets_are_cumulative_and_le_inclusive() -> None:
    h = Histograms((0.005, 0.025, 0.1))
    for v in (0.001, 0.005, 0.006, 0.025, 0.2):
        h.observe(KEY, v)
    [(key, buckets, total, n)] = h.snapshot()
    assert key == KEY
    assert buckets == [("0.005", 2.0), ("0.025", 4.0), ("0.1", 4.0), ("+Inf", 5.0)]
    assert total == pytest.approx(0.237) and n == 5
    with pytest.raises(ValueError):
        Histograms((0.0, 1.0))
