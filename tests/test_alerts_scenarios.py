"""Scenarios through promtool, on rules generated from an SLO file written here.

promtool evaluates the generated rules minute by minute over synthetic Triton and sidecar series; the
``ALERTS`` series the rules leave behind then say which alert fired when:

* a total outage after a healthy hour pages within 15 minutes;
* a steady 1.2% error rate against a 99.5% objective (burn 2.4x) opens a ticket within 8 hours and
  never pages;
* healthy traffic fires nothing but the Watchdog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from support import promtool_cases

from tritonwatch import catalog
from tritonwatch.alerts import promtests, rules

pytestmark = [pytest.mark.needs("promtool"), pytest.mark.usefixtures("platform")]

MODEL = "svc"
SLO_NAME = f"{MODEL}-availability"
LATENCY_SLO = f"{MODEL}-latency"
JOB = "triton"
TRITON = {"instance": "triton:8002", "job": JOB, "model": MODEL, "version": "1"}
SIDECAR = {"instance": "sidecar:9450", "job": "tritonwatch"}

SLO_FILE = {
    "apiVersion": "tritonwatch/v1",
    "kind": "ServiceLevelObjectives",
    "metadata": {"name": "scenarios"},
    "spec": {
        "window": "30d",
        "up_job": JOB,
        "slos": [
            {
                "model": MODEL,
                "availability": {"objective": 99.5},
                "latency": {"threshold": "100ms", "objective": 99},
                "queue_time_ratio": {"max": 0.5},
                "batch_efficiency": {"min": 0.1},
                "cache_hit_ratio": {"min": 0.1},
            }
        ],
    },
}


def series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return {"series": f"{name}{{{body}}}", "values": values}


def availability(healthy_minutes: int, then_bad_per_minute: float, then_minutes: int) -> list[dict[str, str]]:
    """1000 requests a minute: all good for ``healthy_minutes``, then ``then_bad_per_minute`` of them bad."""
    # Sample i is minute i; the bad requests start in the minute after sample ``healthy_minutes``.
    good, h, t = 1000 - then_bad_per_minute, healthy_minutes, then_minutes
    success = f"0+1000x{h} {h * 1000 + good:g}+{good:g}x{t - 1}"
    failure = f"0x{h - 1} 0+{then_bad_per_minute:g}x{t}"
    return [
        series(catalog.TRITON_SUCCESS, TRITON, success),
        series(catalog.TRITON_FAILURE, {**TRITON, "reason": "BACKEND"}, failure),
        series(catalog.TRITON_FAILURE, {**TRITON, "reason": "CANCELED"}, f"0x{h + t}"),
    ]


def healthy_everything(minutes: int) -> list[dict[str, str]]:
    """Every series the rules read, as a healthy single-replica deployment exposes them."""
    n = str(minutes)
    model = {"model": MODEL, "version": "1"}
    hist = {**SIDECAR, **model, "phase": "request"}
    return [
        *availability(minutes - 1, 0, 1),
        series("up", {"instance": "triton:8002", "job": JOB}, f"1x{n}"),
        series(catalog.triton_duration("request"), TRITON, f"0+5000000x{n}"),
        series(catalog.triton_duration("queue"), TRITON, f"0+500000x{n}"),
        series(catalog.TRITON_EXEC_COUNT, TRITON, f"0+100x{n}"),
        series(catalog.TRITON_INFERENCE_COUNT, TRITON, f"0+900x{n}"),
        series(catalog.TRITON_CACHE_HITS, TRITON, f"0+300x{n}"),
        series(catalog.TRITON_CACHE_MISSES, TRITON, f"0+700x{n}"),
        series(catalog.TRITON_PENDING, TRITON, f"2x{n}"),
        series(catalog.UP, {**SIDECAR, "target": "triton"}, f"1x{n}"),
        series(catalog.UP, {**SIDECAR, "target": "triton_api"}, f"1x{n}"),
        series(catalog.SCRAPE_DURATION, {**SIDECAR, "target": "triton"}, f"0.01+0.0001x{n}"),
        series(catalog.SCRAPE_DURATION, {**SIDECAR, "target": "triton_api"}, f"0.02+0.0001x{n}"),
        series(catalog.MODEL_READY, {**SIDECAR, **model}, f"1x{n}"),
        series(catalog.MAX_BATCH_SIZE, {**SIDECAR, **model}, f"64x{n}"),
        series(f"{catalog.REQUEST_DURATION}_bucket", {**hist, "le": "0.1"}, f"0+99.9x{n}"),
        series(f"{catalog.REQUEST_DURATION}_bucket", {**hist, "le": "+Inf"}, f"0+100x{n}"),
        series(f"{catalog.REQUEST_DURATION}_count", hist, f"0+100x{n}"),
        series(catalog.GPU_MEMORY_USED_RATIO, {**SIDECAR, "gpu_uuid": "GPU-1"}, f"0.6x{n}"),
        series(catalog.GPU_XID, {**SIDECAR, "gpu_uuid": "GPU-1"}, f"0x{n}"),
    ]


def firing(severity: str, slo: str = SLO_NAME) -> str:
    return f'ALERTS{{alertname="{rules.BURN}",alertstate="firing",severity="{severity}",slo="{slo}"}}'


def alert_labels(severity: str) -> str:
    return f'{{alertname="{rules.BURN}",alertstate="firing",model="{MODEL}",severity="{severity}",slo="{SLO_NAME}"}}'


def run_scenario(tmp_path: Path, case: dict[str, Any]) -> None:
    promtool_cases.run(tmp_path, SLO_FILE, "1m", [{"interval": "1m", **case}])


def test_total_outage_after_a_healthy_hour_pages_within_15_minutes(tmp_path: Path) -> None:
    # Burn over the first 15 minutes: 1h window 15/60 bad = 0.25 / 0.005 = 50x; 1d window 15/75 = 40x.
    # The same on Prometheus 2 and 3: the windows add 5m tiles that share their boundary samples.
    spec = promtests.expected
    page_value, ticket_value = "50.0", "40.0"
    from tritonwatch import slo as slo_mod

    s = slo_mod.parse(SLO_FILE)
    obj = s.objectives()[0]

    def burn(severity: str, value: str) -> dict[str, Any]:
        labels = {"severity": severity, "slo": SLO_NAME, "model": MODEL}
        return spec(
            s, rules.BURN, labels, {**rules.burn_texts(s, obj), "value_x": value, "budget_left": "0%"}
        )

    run_scenario(
        tmp_path,
        {
            "input_series": availability(60, 1000, 20),
            "alert_rule_test": [
                {"eval_time": "60m", "alertname": rules.BURN, "exp_alerts": []},
                {
                    "eval_time": "75m",
                    "alertname": rules.BURN,
                    "exp_alerts": [burn("page", page_value), burn("ticket", ticket_value)],
                },
            ],
            "promql_expr_test": [
                # Nothing during the healthy hour ...
                {"expr": f"max_over_time({firing('page')}[60m])", "eval_time": "60m", "exp_samples": []},
                # ... and a page within the first 15 minutes of the outage.
                {
                    "expr": f"max_over_time({firing('page')}[15m])",
                    "eval_time": "75m",
                    "exp_samples": [{"labels": alert_labels("page"), "value": 1}],
                },
            ],
        },
    )


def test_steady_slow_burn_opens_a_ticket_within_8h_and_never_pages(tmp_path: Path) -> None:
    # 12 of 1000 requests fail: error ratio 0.012 against a 0.005 budget, a burn rate of 2.4.
    run_scenario(
        tmp_path,
        {
            "input_series": availability(60, 12, 8 * 60),
            "promql_expr_test": [
                {
                    "expr": f"max_over_time({firing('ticket')}[8h])",
                    "eval_time": "9h",
                    "exp_samples": [{"labels": alert_labels("ticket"), "value": 1}],
                },
                {"expr": f"max_over_time({firing('page')}[9h])", "eval_time": "9h", "exp_samples": []},
                # The ticket is still open at the end: a 2.4x burn keeps spending the budget.
                {
                    "expr": firing("ticket"),
                    "eval_time": "9h",
                    "exp_samples": [
                        {"labels": '{__name__="ALERTS",' + alert_labels("ticket")[1:], "value": 1}
                    ],
                },
            ],
        },
    )


def test_healthy_traffic_fires_nothing_but_the_watchdog(tmp_path: Path) -> None:
    run_scenario(
        tmp_path,
        {
            "input_series": healthy_everything(180),
            "promql_expr_test": [
                {
                    "expr": 'count by (alertname) (max_over_time(ALERTS{alertstate="firing"}[3h]))',
                    "eval_time": "3h",
                    "exp_samples": [{"labels": f'{{alertname="{rules.WATCHDOG}"}}', "value": 1}],
                },
                # The healthy SLIs are really computed (not silently absent): 0.1% slow requests.
                {
                    "expr": f'round(slo:sli_error:ratio_rate1h{{slo="{LATENCY_SLO}"}}, 0.000001)',
                    "eval_time": "3h",
                    "exp_samples": [{"labels": f'{{model="{MODEL}",slo="{LATENCY_SLO}"}}', "value": 0.001}],
                },
                {
                    "expr": f'slo:sli_error:ratio_rate1h{{slo="{SLO_NAME}"}}',
                    "eval_time": "3h",
                    "exp_samples": [
                        {
                            "labels": f'slo:sli_error:ratio_rate1h{{model="{MODEL}",slo="{SLO_NAME}"}}',
                            "value": 0,
                        }
                    ],
                },
            ],
        },
    )
