"""``TritonSLONoData``, its rules and the promtool cases that prove them: every SLI that can go blind says
so, so that an SLO never reads as met for want of data.

``nodata_alerts(spec, obj)`` emits ``TritonSLONoData`` (ticket, labels ``slo``, ``model``) for:

* an availability SLI on Triton's counters whose series are gone (``absent_over_time`` over
  ``NO_DATA_ABSENT``) while Triton's targets are up: the model unloaded or renamed, a relabelling or a
  selector that drops it (a Triton that is down pages as ``TritonServerDown`` instead); an idle model
  keeps its counters and stays quiet;
* an availability SLI on a front's counters whose total series are gone;
* a latency SLI on the sidecar's histogram with no series or no new samples while Triton serves
  (the first rule), or whose served histogram has ``_count`` but no bucket at the threshold, per
  replica (``instance``): Triton 2.65+'s own histogram without the ``model_metrics`` stanza applied,
  or a threshold that is no trace bucket;
* a latency SLI on a front's histogram without a bucket at the threshold.

``nodata_cases(spec, obj)``: each blind SLI raises ``TritonSLONoData`` naming what is missing, and a
seeing one stays quiet. ``TritonSLONoData`` is one alert name for every SLI, so each case gives every
OTHER objective of its model (whose rules share its rule file) the series that keep its own no-data
alert quiet (``sampled``): else two objectives would fire in each other's cases.
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import build
from tritonwatch.alerts.model import Rule
from tritonwatch.alerts.promcase import (
    RPM,
    SIDECAR_INSTANCE,
    VERSION,
    Case,
    Check,
    counter,
    expected,
    front_buckets,
    front_traffic,
    gauge,
    group_labels,
    sidecar_labels,
    test_job,
    triton_labels,
)
from tritonwatch.alerts.texts import (
    CAUSE,
    NO_DATA,
    NO_DATA_ABSENT,
    NO_DATA_BUCKET,
    NO_DATA_FRONT,
    NO_DATA_FRONT_SERIES,
    NO_DATA_SERIES,
    NO_DATA_TRAFFIC_WINDOW,
    SEVERITY,
    SLO_LABEL,
)
from tritonwatch.catalog import le_matcher
from tritonwatch.fronthistogram import FrontHistogram, le_text
from tritonwatch.slo import FrontCounters, Objective, SLOFile, format_duration, parse_duration
from tritonwatch.validators import promql_string


def nodata_texts(spec: SLOFile, obj: Objective) -> dict[str, str]:
    """Placeholders fixed at generation time (static rule labels are not in $labels at template time:
    the SLO and model are spelled out)."""
    out = {
        "slo": obj.name,
        "model": obj.model,
        "absent": NO_DATA_ABSENT,
        "traffic_window": NO_DATA_TRAFFIC_WINDOW,
    }
    if (a := obj.availability) is not None:
        out["series"] = catalog.TRITON_SUCCESS if a.source is None else a.source.total.promql()
        return out
    lat = obj.latency
    assert lat is not None
    front = lat.source
    out["histogram"] = catalog.REQUEST_DURATION if front is None else front.buckets.promql()
    if front is not None:
        out["bound"] = le_text(front.bound(lat.threshold))
    else:
        out["bound"] = f"{lat.threshold:g}"
        out["threshold"] = format_duration(lat.threshold)
        out["buckets"] = ", ".join(format_duration(b) for b in catalog.DEFAULT_BUCKETS)
    return out


# What left the SLI blind (the ``cause`` label): two no-data rules of one SLO never share a label set.
NO_SERIES, NO_SAMPLES, NO_BUCKET = "no_series", "no_samples", "no_bucket"


def labels(obj: Objective, cause: str) -> dict[str, str]:
    return {SEVERITY: "ticket", SLO_LABEL: obj.name, catalog.MODEL: obj.model, CAUSE: cause}


def _triton_up(spec: SLOFile) -> str:
    return f"count({catalog.TARGET_UP}{{job=~{promql_string(spec.up_job)}}} == 1) > 0"


def availability_alerts(spec: SLOFile, obj: Objective) -> list[Rule]:
    a = obj.availability
    assert a is not None
    texts = nodata_texts(spec, obj)
    if a.source is not None:
        expr = f"absent_over_time({a.source.total.promql()}[{NO_DATA_ABSENT}])"
        return [
            build.alert(NO_DATA, expr, labels(obj, NO_SERIES), texts, NO_DATA_FRONT_SERIES, grouped=False)
        ]
    counters = build.select(catalog.TRITON_SUCCESS, build.model(obj.model))
    expr = f"absent_over_time({counters}[{NO_DATA_ABSENT}])\nand on ()\n{_triton_up(spec)}"
    return [build.alert(NO_DATA, expr, labels(obj, NO_SERIES), texts, NO_DATA_SERIES, grouped=False)]


def latency_alerts(spec: SLOFile, obj: Objective) -> list[Rule]:
    lat = obj.latency
    assert lat is not None
    texts = nodata_texts(spec, obj)
    if lat.source is not None:
        # The front sees every request: no bucket at the threshold is what leaves this SLI blind.
        expr = f"absent_over_time({lat.source.under(lat.threshold)}[{NO_DATA_ABSENT}])"
        return [build.alert(NO_DATA, expr, labels(obj, NO_BUCKET), texts, NO_DATA_FRONT, grouped=False)]
    by = build.by(spec, catalog.MODEL)
    sel = (build.request_phase(), build.model(obj.model))
    count = build.select(f"{catalog.REQUEST_DURATION}_count", *sel)
    success = build.select(catalog.TRITON_SUCCESS, build.model(obj.model))
    # The samples of the last hour from the SLI's own recorded total (its 5m tiles), not the raw counts
    # of every replica over an hour: the cost of this rule does not grow with replicas past 5m.
    w = NO_DATA_TRAFFIC_WINDOW
    total = build.select(catalog.slo_sli_total_record(w), f'{SLO_LABEL}="{obj.name}"')
    unsampled = (
        f"absent_over_time({count}[{NO_DATA_ABSENT}])\nor\n(\n"
        f"  {total} * {parse_duration(w, 'window'):g} < 1\nand on ({by})\n"
        f"  sum by ({by}) (increase({success}[5m])) > 0\n)"
    )
    # Per replica: one without the bucket drops out of the SLI's total (alerts/rules.py) unseen.
    replica = build.by(spec, catalog.MODEL, "instance")
    bucket = build.select(f"{catalog.REQUEST_DURATION}_bucket", *sel, le_matcher(lat.threshold))
    no_bucket = f"count by ({replica}) ({count})\nunless on ({replica})\ncount by ({replica}) ({bucket})"
    return [
        build.alert(NO_DATA, unsampled, labels(obj, NO_SAMPLES), texts, grouped=False),
        build.alert(NO_DATA, no_bucket, labels(obj, NO_BUCKET), texts, NO_DATA_BUCKET),
    ]


def nodata_alerts(spec: SLOFile, obj: Objective) -> list[Rule]:
    if obj.kind == "availability":
        return availability_alerts(spec, obj)
    if obj.kind == "latency":
        return latency_alerts(spec, obj)
    return []  # LLM SLIs: their histograms' own no-data is docs/llm.md's


# --- the promtool cases -------------------------------------------------------------------------
def _front_counters(obj: Objective) -> FrontCounters | None:
    return obj.availability.source if obj.availability is not None else None


def _front_histogram(obj: Objective) -> FrontHistogram | None:
    return obj.latency.source if obj.latency is not None else None


MINUTES = 60
GONE_AFTER = 25  # minutes of counters before they vanish


def _threshold_le(spec: SLOFile, obj: Objective) -> str:
    lat = obj.latency
    assert lat is not None
    return repr(lat.threshold)


def _hist(spec: SLOFile, obj: Objective) -> dict[str, str]:
    labels = {catalog.MODEL: obj.model, catalog.VERSION: VERSION, catalog.PHASE: "request"}
    return sidecar_labels(spec, **labels)


def sampled(spec: SLOFile, case: Case, obj: Objective, triton_up: bool) -> None:
    """Series that keep ``obj``'s own no-data alerts quiet in another objective's case (an availability
    SLI on Triton's counters is quiet anyway while no Triton target is up)."""
    if obj.kind == "availability":
        if _front_counters(obj) is not None:
            front_traffic(spec, case, obj, Decimal(0), MINUTES)
        elif triton_up:
            case.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, MINUTES))
    elif obj.kind == "latency":
        if _front_histogram(obj) is not None:
            front_buckets(spec, case, obj, RPM, RPM, MINUTES)
        else:
            case.add(f"{catalog.REQUEST_DURATION}_count", _hist(spec, obj), counter(60, MINUTES))
            le = {**_hist(spec, obj), "le": _threshold_le(spec, obj)}
            case.add(f"{catalog.REQUEST_DURATION}_bucket", le, counter(60, MINUTES))


def _others(spec: SLOFile, obj: Objective, cases: list[Case], triton_up: bool) -> list[Case]:
    quiet = Case("the other objectives' series")
    for other in spec.objectives():
        if other.model == obj.model and other.name != obj.name:
            sampled(spec, quiet, other, triton_up)
    for case in cases:
        case.series += quiet.series
    return cases


def _expected(
    spec: SLOFile, obj: Objective, cause: str, extra: dict[str, str], key: str | None = None
) -> dict[str, dict[str, str]]:
    return expected(spec, NO_DATA, {**labels(obj, cause), **extra}, nodata_texts(spec, obj), key)


def availability_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    """Counters that vanish while Triton is up raise a ticket 25 minutes later; none before, none for an
    idle model whose counters stay, none while Triton itself is down (that pages on its own)."""
    front = _front_counters(obj)
    up = {"instance": "triton:8002", "job": test_job(spec), **group_labels(spec)}

    def counters(case: Case, values: str) -> None:
        if front is not None:
            front_traffic(spec, case, obj, Decimal(0), GONE_AFTER)
        else:
            case.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), values)

    gone = Case(f"{obj.name}: counters that vanish while Triton is up raise TritonSLONoData")
    gone.add("up", up, gauge(1, MINUTES))
    counters(gone, counter(RPM, GONE_AFTER))
    if front is not None:
        eq = {m.label: m.value for m in front.total.matchers if m.op == "="}
        fired = _expected(spec, obj, NO_SERIES, eq, NO_DATA_FRONT_SERIES)
    else:
        fired = _expected(spec, obj, NO_SERIES, {}, NO_DATA_SERIES)
    gone.checks += [Check("20m", NO_DATA), Check("55m", NO_DATA, (fired,))]
    cases = [gone]
    if front is None:
        down = Case(f"{obj.name}: counters gone with Triton down is TritonServerDown's, not TritonSLONoData")
        down.add("up", up, f"1x{GONE_AFTER} 0x{MINUTES - GONE_AFTER}")
        counters(down, counter(RPM, GONE_AFTER))
        down.checks.append(Check("55m", NO_DATA))
        idle = Case(f"{obj.name}: an idle model's counters keep TritonSLONoData quiet")
        idle.add("up", up, gauge(1, MINUTES))
        counters(idle, gauge(500, MINUTES))
        idle.checks.append(Check("55m", NO_DATA))
        cases += [down, idle]
    return _others(spec, obj, cases, triton_up=True)


def front_latency_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    front = _front_histogram(obj)
    assert front is not None
    # No bucket at the threshold raises the no-data alert; absent() keeps the equality matchers.
    eq = {m.label: m.value for m in front.buckets.matchers if m.op == "="}
    missing = Case(f"{obj.name}: a front without a bucket at the threshold raises TritonSLONoData")
    front_buckets(spec, missing, obj, Decimal(-1), RPM, 40)
    missing.checks.append(Check("30m", NO_DATA, (_expected(spec, obj, NO_BUCKET, eq, NO_DATA_FRONT),)))
    quiet = Case(f"{obj.name}: the front's bucket at the threshold keeps TritonSLONoData quiet")
    front_buckets(spec, quiet, obj, RPM, RPM, 40)
    quiet.checks.append(Check("30m", NO_DATA))
    return _others(spec, obj, [missing, quiet], triton_up=False)


def latency_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    if _front_histogram(obj) is not None:
        return front_latency_cases(spec, obj)
    hist = _hist(spec, obj)
    count, bucket = f"{catalog.REQUEST_DURATION}_count", f"{catalog.REQUEST_DURATION}_bucket"
    at_threshold = {**hist, "le": _threshold_le(spec, obj)}

    absent = Case(f"{obj.name}: no latency histogram at all raises TritonSLONoData")
    absent.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    absent.checks.append(
        Check("30m", NO_DATA, (_expected(spec, obj, NO_SAMPLES, {catalog.PHASE: "request"}),))
    )

    frozen = Case(f"{obj.name}: traffic without new samples raises TritonSLONoData")
    frozen.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    frozen.add(count, hist, gauge(50, 40)).add(bucket, at_threshold, gauge(50, 40))
    frozen.checks.append(Check("30m", NO_DATA, (_expected(spec, obj, NO_SAMPLES, group_labels(spec)),)))

    # Triton 2.65+'s default buckets (100, 500, 2000, 5000 ms) without the model_metrics stanza.
    no_bucket = Case(f"{obj.name}: a served histogram without the threshold's bucket raises TritonSLONoData")
    no_bucket.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    no_bucket.add(count, hist, counter(60, 40)).add(bucket, {**hist, "le": "+Inf"}, counter(60, 40))
    replica = {"instance": SIDECAR_INSTANCE, **group_labels(spec)}
    no_bucket.checks.append(
        Check("30m", NO_DATA, (_expected(spec, obj, NO_BUCKET, replica, NO_DATA_BUCKET),))
    )

    quiet = Case(f"{obj.name}: sampled latencies keep TritonSLONoData quiet")
    quiet.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    quiet.add(count, hist, counter(60, 40)).add(bucket, at_threshold, counter(60, 40))
    quiet.checks.append(Check("30m", NO_DATA))
    return _others(spec, obj, [absent, frozen, no_bucket, quiet], triton_up=False)


def nodata_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    if obj.kind == "availability":
        return availability_cases(spec, obj)
    if obj.kind == "latency":
        return latency_cases(spec, obj)
    return []
