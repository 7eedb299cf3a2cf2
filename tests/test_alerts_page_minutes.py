"""The minute each page fires, and the long windows' exactness, through promtool on generated rules.

At a 28d SLO (99.9% available, 99% within 50 ms), two replicas scraped and evaluated every 30 s after six
healthy hours (the 6h window full, as in production), the pages fire as early as Sloth 0.16's:

* every request failing: the availability page at 1 minute (the 1h window's ratio 1/60 passes 2% of the
  budget an hour, 13.44 x 0.1% = 1.344%);
* every request slow: the latency page at 9 minutes (8/60 = 13.33% is under 13.44% of a 1% budget,
  8.5/60 = 14.17% over it: it fires at 8.5 and is firing at 9);
* one replica of two failing: availability at 2 minutes (1.5/120 = 1.25%, 2/120 = 1.67%);
* one replica of two slow: latency at 17 minutes (16/120 = 13.33%, 16.5/120 = 13.75%); the fixed 14.4
  factor paged at 18.

Each case asserts "not yet a minute before" and "firing at the minute". The newest 5 minutes weigh in
full because the page windows are tiled from the recorded 5m rates (alerts/sli.py): an
``avg_over_time`` of them over 1h would page the outage at 3 minutes and the slow replica at 19.

On diurnal traffic (+-80%) whose errors are ten times likelier at night, four days at one sample a
minute: the tiled 1d and 3d windows and the SLO window's ``avg_over_time`` (a 7d SLO: the 28d rule's
shape, at a cost promtool can evaluate) read the true error ratio within 0.1%, where the mean of 5m
ratios Sloth records reads it 71% too high.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from support import promtool_cases

from tritonwatch import catalog
from tritonwatch.alerts import rules

pytestmark = [pytest.mark.needs("promtool"), pytest.mark.usefixtures("platform")]

MODEL = "svc"
AVAILABILITY, LATENCY = f"{MODEL}-availability", f"{MODEL}-latency"
HEALTHY = 720  # 30 s samples: six hours
AFTER = 40  # 30 s samples after the onset: twenty minutes
PER_SAMPLE = 300  # requests a replica serves between two samples (10 a second)


def slo_file(window: str, latency: bool) -> dict[str, Any]:
    slo: dict[str, Any] = {"model": MODEL, "availability": {"objective": 99.9}}
    if latency:
        slo["latency"] = {"threshold": "50ms", "objective": 99}
    return {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "pages"},
        "spec": {"window": window, "up_job": "triton", "slos": [slo]},
    }


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


def replica(i: int, failing: bool, slow: bool) -> list[dict[str, str]]:
    """A replica's counters: healthy for ``HEALTHY`` samples, then every request failing or slow."""
    triton = {"instance": f"triton-{i}:8002", "job": "triton", "model": MODEL, "version": "1"}
    sidecar = {"instance": f"sidecar-{i}:9450", "job": "tritonwatch", "model": MODEL, "version": "1"}
    sidecar["phase"] = "request"
    growing = f"0+{PER_SAMPLE}x{HEALTHY + AFTER}"
    stopped = f"0+{PER_SAMPLE}x{HEALTHY} {PER_SAMPLE * HEALTHY}x{AFTER}"
    failures = f"0x{HEALTHY} {PER_SAMPLE}+{PER_SAMPLE}x{AFTER - 1}" if failing else f"0x{HEALTHY + AFTER}"
    return [
        series(catalog.TRITON_SUCCESS, triton, stopped if failing else growing),
        series(catalog.TRITON_FAILURE, {**triton, "reason": "BACKEND"}, failures),
        series(f"{catalog.REQUEST_DURATION}_bucket", {**sidecar, "le": "0.05"}, stopped if slow else growing),
        series(f"{catalog.REQUEST_DURATION}_count", sidecar, growing),
    ]


def paging(slo: str) -> str:
    return f'count(ALERTS{{alertname="{rules.BURN}",alertstate="firing",severity="page",slo="{slo}"}})'


def page_case(
    name: str, slo: str, minute: int, failing: tuple[bool, bool], slow: tuple[bool, bool]
) -> dict[str, Any]:
    onset = HEALTHY * 30  # seconds
    return {
        "name": f"{name}: pages at minute {minute}",
        "interval": "30s",
        "input_series": replica(0, failing[0], slow[0]) + replica(1, failing[1], slow[1]),
        "promql_expr_test": [
            {"expr": paging(slo), "eval_time": f"{onset + (minute - 1) * 60}s", "exp_samples": []},
            {
                "expr": paging(slo),
                "eval_time": f"{onset + minute * 60}s",
                "exp_samples": [{"labels": "{}", "value": 1}],
            },
        ],
    }


def run_promtool(tmp_path: Path, doc: dict[str, Any], interval: str, cases: list[dict[str, Any]]) -> None:
    """Only the model's own rule file (its SLO groups): what the pages read, nothing the fleet adds."""
    promtool_cases.run(tmp_path, doc, interval, cases, files="model-*.rules.yml", timeout=900)


def test_pages_fire_at_sloths_minutes_at_28d(tmp_path: Path) -> None:
    both, one, none = (True, True), (True, False), (False, False)
    run_promtool(
        tmp_path,
        slo_file("28d", latency=True),
        "30s",
        [
            page_case("every request failing", AVAILABILITY, 1, both, none),
            page_case("every request slow", LATENCY, 9, none, both),
            page_case("one replica of two failing", AVAILABILITY, 2, one, none),
            page_case("one replica of two slow", LATENCY, 17, none, one),
        ],
    )


DAYS = 4
DAY_MINUTES = 1440


def diurnal(minutes: int) -> tuple[list[float], list[float]]:
    """Good and failed request counters a minute apart: 1000 a minute +-80% over the day, 0.1% failing
    by day and 1% by night (the low-traffic half)."""
    good, bad = [0.0], [0.0]
    for m in range(1, minutes + 1):
        phase = math.sin(2 * math.pi * m / DAY_MINUTES)
        requests = 1000 * (1 + 0.8 * phase)
        failing = 0.001 if phase >= 0 else 0.01
        bad.append(bad[-1] + requests * failing)
        good.append(good[-1] + requests * (1 - failing))
    return good, bad


def within(expr: str, truth: float, tolerance: float) -> dict[str, Any]:
    """``expr`` reads ``truth`` within ``tolerance`` (relative): 1, else 0."""
    return {
        "expr": f"abs({expr} / {truth!r} - 1) < bool {tolerance}",
        "eval_time": f"{DAYS * DAY_MINUTES}m",
        "exp_samples": [{"labels": f'{{model="{MODEL}",slo="{AVAILABILITY}"}}', "value": 1}],
    }


def test_long_windows_are_traffic_weighted_on_diurnal_traffic(tmp_path: Path) -> None:
    minutes = DAYS * DAY_MINUTES
    good, bad = diurnal(minutes)

    def truth(window_minutes: int) -> float:
        start = minutes - window_minutes
        failed = bad[minutes] - bad[start]
        return failed / (failed + good[minutes] - good[start])

    triton = {"instance": "triton:8002", "job": "triton", "model": MODEL, "version": "1"}
    values = {name: " ".join(f"{v:.6f}" for v in counter) for name, counter in (("good", good), ("bad", bad))}
    mine = f'{{slo="{AVAILABILITY}"}}'
    checks = [
        # The SLO window (7d) holds all four days: the ratio of everything counted.
        within(f"slo:sli_error:ratio_rate7d{mine}", truth(minutes), 0.001),
        within(f"slo:sli_error:ratio_rate3d{mine}", truth(3 * DAY_MINUTES), 0.001),
        within(f"slo:sli_error:ratio_rate1d{mine}", truth(DAY_MINUTES), 0.001),
        # The mean of 5m ratios (Sloth's long window) is more than 50% too high on the same data.
        {
            "expr": f"avg_over_time(slo:sli_error:ratio_rate5m{mine}[7d]) / {truth(minutes)!r} > bool 1.5",
            "eval_time": f"{minutes}m",
            "exp_samples": [{"labels": f'{{model="{MODEL}",slo="{AVAILABILITY}"}}', "value": 1}],
        },
    ]
    case = {
        "name": "diurnal traffic, errors ten times likelier at night",
        "interval": "1m",
        "input_series": [
            series(catalog.TRITON_SUCCESS, triton, values["good"]),
            series(catalog.TRITON_FAILURE, {**triton, "reason": "BACKEND"}, values["bad"]),
        ],
        "promql_expr_test": checks,
    }
    run_promtool(tmp_path, slo_file("7d", latency=False), "1m", [case])
