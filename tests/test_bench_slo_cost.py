"""The SLO cost bench's pure parts: the synthetic counters' exact truth and text, the backfill plan, the tables.

The bench itself (``python -m bench.slo_cost``) runs Prometheus and Sloth and measures; these hold what its
numbers are computed from.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

# The bench runs from a checkout (it is not in the wheel): its package is the repository's bench/.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import slo_data, slo_plan
from bench.slo_data import DAY_S, ModelData, Outage, Traffic, Truth
from bench.slo_plan import Rule, Selector

END = 1_764_460_800.0  # 2026-11-30T00:00:00Z
FLAT = Traffic(
    requests_per_s=10,
    swing=0.0,
    error_ratio_day=0.0001,
    error_night_factor=1.0,
    slow_ratio_night=0.001,
    slow_peak_factor=1.0,
)


def test_flat_traffic_counts_exactly_what_was_asked_for() -> None:
    # 10 req/s for a day is 864,000 requests; 0.01 % of them fail, 0.1 % are slow. Counts are rounded
    # running sums per replica: one replica's errors are 86.4 on the first day (86) and 172.8 after two (173,
    # so 87 on the second); four replicas' are 21.6 each (22) and 43.2 (43, so 21 each on the second day).
    for replicas, errors in ((1, (86, 87)), (4, (88, 84))):
        model = ModelData("m", replicas, FLAT, END - 2 * DAY_S, END)
        days = [slo_data.exact(model, END - 2 * DAY_S, END - DAY_S), slo_data.exact(model, END - DAY_S, END)]
        assert days == [Truth(requests=864_000, errors=e, slow=864) for e in errors]


def test_one_replica_of_two_down_fails_half_the_requests() -> None:
    quiet = Traffic(requests_per_s=10, swing=0.0, error_ratio_day=0.0, slow_ratio_night=0.0)
    model = ModelData("m", 2, quiet, END - DAY_S, END, outage=Outage(END - 600, replicas=1))
    assert slo_data.exact(model, END - 600, END) == Truth(requests=6000, errors=3000, slow=3000)
    assert slo_data.exact(model, END - 1200, END - 600) == Truth(requests=6000, errors=0, slow=0)
    down = slo_data.counters(model, 0)
    assert (
        int(down.errors[-1] - down.errors[-21]) == 3000
    )  # every request of replica 0 in the last 10 minutes


def test_diurnal_truth_weights_errors_by_traffic() -> None:
    # Errors 10x likelier where traffic is below its mean: the traffic-weighted error ratio is
    # p * (1.5093 + 10 * 0.4907) / 2 = 3.2082 p (the mean of (1 + 0.8 cos) over each half day is
    # 1 +- 1.6 / pi); slow requests 6x likelier above it: q * (6 * 1.5093 + 0.4907) / 2 = 4.7732 q.
    model = ModelData("m", 4, Traffic(), END - 28 * DAY_S, END)
    truth = slo_data.exact(model, END - 28 * DAY_S, END)
    assert truth.requests == 193_536_000  # 80 req/s for 28 days
    assert truth.error_ratio / 0.0002 == pytest.approx(3.2082, rel=2e-4)
    assert truth.slow_ratio / 0.001 == pytest.approx(4.7732, rel=2e-4)


def test_counters_are_monotonic_and_buckets_cumulative() -> None:
    model = ModelData("m", 3, Traffic(), END - 2 * DAY_S, END, outage=Outage(END - 3600))
    for replica in range(3):
        c = slo_data.counters(model, replica)
        for values in (c.requests, c.errors, c.slow, c.requests - c.errors, *c.buckets):
            assert (values[1:] >= values[:-1]).all() and values[0] == 0
        for lower, upper in zip(c.buckets, c.buckets[1:], strict=False):
            assert (lower <= upper).all()
        assert (c.buckets[-1] == c.requests).all()
        assert (c.buckets[1] == c.requests - c.slow).all()  # le=0.05, the threshold


def test_a_window_off_the_scrape_grid_is_refused() -> None:
    model = ModelData("m", 1, FLAT, END - DAY_S, END)
    with pytest.raises(ValueError, match="not on its scrape grid"):
        slo_data.exact(model, END - 45, END)


def test_openmetrics_text() -> None:
    model = ModelData("m", 1, FLAT, END - 30, END)
    out = io.StringIO()
    assert slo_data.write_openmetrics([model], out) == 18  # 9 series, 2 scrapes
    lines = out.getvalue().splitlines()
    inst = 'job="triton",instance="m-0:8002",model="m",version="1"'
    side = 'job="tritonwatch",instance="m-0:9450",model="m",version="1",phase="request"'
    assert lines[:6] == [
        f"nv_inference_request_success{{{inst}}} 0 1764460770",
        f"nv_inference_request_success{{{inst}}} 300 1764460800",
        f'nv_inference_request_failure{{{inst},reason="BACKEND"}} 0 1764460770',
        f'nv_inference_request_failure{{{inst},reason="BACKEND"}} 0 1764460800',
        'up{job="triton",instance="m-0:8002"} 1 1764460770',
        'up{job="triton",instance="m-0:8002"} 1 1764460800',
    ]
    assert f'tritonwatch_request_duration_seconds_bucket{{{side},le="0.025"}} 210 1764460800' in lines
    assert f'tritonwatch_request_duration_seconds_bucket{{{side},le="0.05"}} 300 1764460800' in lines
    assert f"tritonwatch_request_duration_seconds_count{{{side}}} 300 1764460800" in lines
    assert lines[-1] == "# EOF"


def _sel(name: str, range_ms: int = 0) -> dict[str, object]:
    if range_ms:
        return {"type": "matrixSelector", "name": name, "range": range_ms, "offset": 0, "matchers": []}
    return {"type": "vectorSelector", "name": name, "offset": 0, "matchers": []}


def test_selectors_from_prometheus_ast() -> None:
    # sum_over_time(r5m[28d]) / ignoring (w) count_over_time(r5m[28d]) and max_over_time(rate(x[5m])[1h:1m]) > on() up
    ast = {
        "type": "binaryExpr",
        "lhs": {
            "type": "binaryExpr",
            "lhs": {
                "type": "call",
                "func": {"name": "sum_over_time"},
                "args": [_sel("r5m", 28 * 86_400_000)],
            },
            "rhs": {
                "type": "call",
                "func": {"name": "count_over_time"},
                "args": [_sel("r5m", 28 * 86_400_000)],
            },
        },
        "rhs": {
            "type": "call",
            "args": [
                {
                    "type": "subquery",
                    "range": 3_600_000,
                    "offset": 0,
                    "step": 60_000,
                    "expr": {"type": "call", "args": [_sel("x", 300_000)]},
                },
            ],
        },
    }
    ast["rhs"]["args"].append(  # type: ignore[index]
        {
            "type": "vectorSelector",
            "name": "",
            "offset": 60_000,
            "matchers": [{"type": "=", "name": "__name__", "value": "up"}],
        }
    )
    assert slo_plan.selectors(ast) == [
        Selector("r5m", 28 * 86_400),
        Selector("r5m", 28 * 86_400),
        Selector("x", 3900),
        Selector("up", 0, 60),
    ]


def _rule(name: str, reads: tuple[Selector, ...], slo: str | None = None, record: bool = True) -> Rule:
    return Rule("s", "g", name, record, f"expr of {name}", {"slo": slo} if slo else {}, reads)


# Sloth's shape: 5m ratios from raw counters, the 28d window their mean, a meta record and an alert on top.
SLOTHLIKE = [
    _rule("ratio5m", (Selector("raw", 300),), "a"),
    _rule("ratio1h", (Selector("raw", 3600),), "a"),
    _rule("ratio28d", (Selector("ratio5m", 28 * DAY_S),), "a"),
    _rule("budget", (Selector("ratio28d", 0),), "a"),
    _rule("Page", (Selector("ratio5m", 0), Selector("ratio1h", 0)), "a", record=False),
]


def test_backfill_plan_orders_stages_and_needs_only_what_is_read() -> None:
    demands = dict.fromkeys(range(5), END) | {
        4: END - 2400
    }  # every rule at the end, the page from the outage
    plan = slo_plan.backfill_plan(SLOTHLIKE, demands, END, 30)
    assert [(j.stage, j.start, [r.name for r in j.rules]) for j in plan] == [
        # ratio28d, evaluated from 5 minutes before the end (budget reads it as an instant), reads 28d of ratio5m
        (0, END - 28 * DAY_S - 300, ["ratio5m"]),
        (0, END - 2400 - 300, ["ratio1h"]),  # the page reads it as an instant from the outage on
        (1, END - 300, ["ratio28d"]),
        # budget is read by nothing: never backfilled
    ]


def test_backfill_plan_puts_starts_on_the_step_grid_and_refuses_loops() -> None:
    rules = [_rule("r", (Selector("raw", 100),)), _rule("q", (Selector("r", 45),))]
    (job,) = slo_plan.backfill_plan(rules, {1: END}, END, 30)
    assert job.start == END - 60  # 45 s back, on the 30 s grid at or before it
    with pytest.raises(ValueError, match="reads itself"):
        slo_plan.backfill_plan(
            [_rule("a", (Selector("b", 0),)), _rule("b", (Selector("a", 0),))], {0: END}, END, 30
        )


def test_cost_table_per_slo_and_window() -> None:
    rules = [
        _rule("shared5m", (Selector("raw", 300),)),  # no SLO of its own: counted for each SLO that reads it
        _rule("ratio28d", (Selector("shared5m", 28 * DAY_S),), "a"),
        _rule("ratio28d", (Selector("shared5m", 28 * DAY_S),), "b"),
        _rule("Page", (Selector("ratio28d", 0),), "b", record=False),
    ]
    table = slo_plan.cost_table(rules, {0: 80, 1: 80_640, 2: 80_640, 3: 1})
    assert table["a"].total == 80_720 and table["a"].by_window == {300: 80, 28 * DAY_S: 80_640}
    assert table["b"].total == 80_721 and table["b"].by_window == {300: 80, 28 * DAY_S: 80_640, 0: 1}
    assert [slo_plan.window_label(w) for w in (0, 300, 1800, 3600, 28 * DAY_S, 90)] == [
        "instant",
        "5m",
        "30m",
        "1h",
        "28d",
        "90s",
    ]


def test_first_true_counts_minutes_from_the_outage() -> None:
    assert slo_plan.first_true([(END + 90, 1.0), (END + 60, 1.0), (END - 30, 1.0)], END) == 1.0
    assert slo_plan.first_true([], END) is None


def test_records_of_one_name_are_told_apart_by_their_labels() -> None:
    # Per SLO, availability's total reads its bad, latency's bad reads its total: a loop by name alone.
    def rule(name: str, slo: str, reads: str) -> Rule:
        return Rule("s", "g", name, True, "", {"slo": slo}, (Selector(reads, 0, 0, (("slo", slo),)),))

    rules = [
        rule("total", "a", "bad"),
        rule("bad", "a", "raw"),
        rule("bad", "l", "total"),
        rule("total", "l", "raw"),
    ]
    plan = slo_plan.backfill_plan(rules, {0: END, 2: END}, END, 30)
    assert [(j.stage, [(r.name, r.slo) for r in j.rules]) for j in plan] == [
        (0, [("bad", "a"), ("total", "l")])
    ]


def test_a_records_window_is_the_one_its_name_states() -> None:
    tiled = _rule(
        "slo:sli_total:rate30m", tuple(Selector("slo:sli_total:rate5m", 0, 300 * k) for k in range(6))
    )
    assert tiled.window_s == 1800
    assert _rule("slo:sli_error:ratio_rate4w", (Selector("x", 28 * DAY_S),)).window_s == 28 * DAY_S
    assert _rule("slo:error_budget_remaining:ratio", (Selector("x", 0, 60),)).window_s == 60
    assert [slo_plan.duration_s(t) for t in ("5m", "1h30m", "4w", "ratio", "5", "")] == [
        300,
        5400,
        28 * DAY_S,
        None,
        None,
        None,
    ]


def test_an_alert_belongs_to_the_slo_its_selectors_select() -> None:
    def sel(name: str, slo: str) -> Selector:
        return Selector(name, 0, 0, (("sloth_id", f"triton-{slo}"), ("sloth_slo", slo)))

    page = Rule(
        "sloth",
        "g",
        "Page",
        False,
        "",
        {"severity": "page"},
        (sel("r5m", "m-latency"), sel("r1h", "m-latency")),
    )
    assert page.slo == "m-latency"
    assert Rule("s", "g", "Both", False, "", {}, (sel("r5m", "a"), sel("r5m", "b"))).slo is None


def test_promtool_files_are_grouped_by_family() -> None:
    from bench.fleet_gen import family

    names = [
        "slo-model-0000-availability.test.yml",
        "operational-model-0001.test.yml",
        "operational.test.yml",
        "slo.test.yml",
    ]
    assert [family(n) for n in names] == ["slo-*", "operational-*", "operational", "slo"]
