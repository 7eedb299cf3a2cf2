"""Findings from figures: each rule fires on its condition, stays quiet without data, and the SLO file's
operational objectives replace the default thresholds."""

from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

from tritonwatch.reports.figures import ModelFigures
from tritonwatch.reports.findings import findings
from tritonwatch.reports.week import ModelWeek
from tritonwatch.slo import SLO, Availability

END = datetime(2026, 11, 9, tzinfo=timezone.utc)


def _figures(slo: SLO | None = None, **values: float | None) -> ModelFigures:
    week = ModelWeek(model="m", version="1", **values)  # type: ignore[arg-type]
    return ModelFigures(week=week, slo=slo, forecast=None, capacity_source="")


def _codes(f: ModelFigures) -> list[str]:
    return [x.code for x in findings([f], [], END)]


def test_nothing_known_nothing_found() -> None:
    assert _codes(_figures()) == []


def test_cache_that_rarely_hits() -> None:
    assert _codes(_figures(cache_hit_ratio=0.05)) == ["cache_ineffective"]
    assert _codes(_figures(cache_hit_ratio=0.5)) == []


def test_half_empty_batches_only_when_little_is_queued() -> None:
    low = {"mean_batch_size": 2.0, "max_batch_size": 16.0, "batch_efficiency": 0.125}
    assert _codes(_figures(queue_share=0.02, **low)) == ["batching_delay"]
    # Long queues with small batches: batching is not what is missing; instances are.
    assert _codes(_figures(queue_share=0.5, **low)) == ["queueing"]
    assert _codes(_figures(**low)) == []  # no duration counters: no queue share, no advice


def test_slo_thresholds_replace_the_defaults() -> None:
    slo = SLO(model="m", batch_efficiency_min=0.1, queue_time_ratio_max=0.6, cache_hit_ratio_min=0.01)
    f = _figures(
        slo,
        mean_batch_size=2.0,
        max_batch_size=16.0,
        batch_efficiency=0.125,
        queue_share=0.5,
        cache_hit_ratio=0.05,
    )
    assert _codes(f) == []


def test_availability_against_its_objective_with_the_budget_multiple() -> None:
    slo = SLO(model="m", availability=Availability(objective=Decimal("99")))
    assert _codes(_figures(slo, error_ratio=0.005)) == []
    [missed] = findings([_figures(slo, error_ratio=0.03)], [], END)
    assert missed.code == "availability_missed" and missed.severity == "action"
    assert "97.000 %" in missed.text and "3.0× the error budget" in missed.text
