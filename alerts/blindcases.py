"""promtool cases for the no-data alerts (``alerts/blind.py``): each blind SLI raises ``TritonSLONoData``
naming what is missing, and a seeing one stays quiet.

``TritonSLONoData`` is one alert name for every SLI, so each case gives every OTHER objective of its
model (whose rules share its rule file) the series that keep its own no-data alert quiet (``sampled``):
else two objectives would fire in each other's cases.
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import blind, rules
from tritonwatch.alerts.promtests import (
    RPM,
    SIDECAR_INSTANCE,
    VERSION,
    Case,
    Check,
    _front_buckets,
    _front_traffic,
    _group,
    counter,
    expected,
    gauge,
    sidecar_labels,
    test_job,
    triton_labels,
)
from tritonwatch.slo import Objective, SLOFile

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
        if rules.front_counters(spec, obj) is not None:
            _front_traffic(spec, case, obj, Decimal(0), MINUTES)
        elif triton_up:
            case.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, MINUTES))
    elif obj.kind == "latency":
        if rules.front_histogram(spec, obj) is not None:
            _front_buckets(spec, case, obj, RPM, RPM, MINUTES)
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


def _alert(
    spec: SLOFile, obj: Objective, cause: str, extra: dict[str, str], key: str | None = None
) -> dict[str, dict[str, str]]:
    labels = {**blind.labels(obj, cause), **extra}
    return expected(spec, rules.NO_DATA, labels, blind.nodata_texts(spec, obj), key)


def availability_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    """Counters that vanish while Triton is up raise a ticket 25 minutes later; none before, none for an
    idle model whose counters stay, none while Triton itself is down (that pages on its own)."""
    front = rules.front_counters(spec, obj)
    up = {"instance": "triton:8002", "job": test_job(spec), **_group(spec)}

    def counters(case: Case, values: str) -> None:
        if front is not None:
            _front_traffic(spec, case, obj, Decimal(0), GONE_AFTER)
        else:
            case.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), values)

    gone = Case(f"{obj.name}: counters that vanish while Triton is up raise TritonSLONoData")
    gone.add("up", up, gauge(1, MINUTES))
    counters(gone, counter(RPM, GONE_AFTER))
    if front is not None:
        eq = {m.label: m.value for m in front.total.matchers if m.op == "="}
        fired = _alert(spec, obj, blind.NO_SERIES, eq, rules.NO_DATA_FRONT_SERIES)
    else:
        fired = _alert(spec, obj, blind.NO_SERIES, {}, rules.NO_DATA_SERIES)
    gone.checks += [Check("20m", rules.NO_DATA), Check("55m", rules.NO_DATA, (fired,))]
    cases = [gone]
    if front is None:
        down = Case(f"{obj.name}: counters gone with Triton down is TritonServerDown's, not TritonSLONoData")
        down.add("up", up, f"1x{GONE_AFTER} 0x{MINUTES - GONE_AFTER}")
        counters(down, counter(RPM, GONE_AFTER))
        down.checks.append(Check("55m", rules.NO_DATA))
        idle = Case(f"{obj.name}: an idle model's counters keep TritonSLONoData quiet")
        idle.add("up", up, gauge(1, MINUTES))
        counters(idle, gauge(500, MINUTES))
        idle.checks.append(Check("55m", rules.NO_DATA))
        cases += [down, idle]
    return _others(spec, obj, cases, triton_up=True)


def front_latency_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    front = rules.front_histogram(spec, obj)
    assert front is not None
    # No bucket at the threshold raises the no-data alert; absent() keeps the equality matchers.
    eq = {m.label: m.value for m in front.buckets.matchers if m.op == "="}
    missing = Case(f"{obj.name}: a front without a bucket at the threshold raises TritonSLONoData")
    _front_buckets(spec, missing, obj, Decimal(-1), RPM, 40)
    missing.checks.append(
        Check("30m", rules.NO_DATA, (_alert(spec, obj, blind.NO_BUCKET, eq, rules.NO_DATA_FRONT),))
    )
    quiet = Case(f"{obj.name}: the front's bucket at the threshold keeps TritonSLONoData quiet")
    _front_buckets(spec, quiet, obj, RPM, RPM, 40)
    quiet.checks.append(Check("30m", rules.NO_DATA))
    return _others(spec, obj, [missing, quiet], triton_up=False)


def latency_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    if rules.front_histogram(spec, obj) is not None:
        return front_latency_cases(spec, obj)
    hist = _hist(spec, obj)
    count, bucket = f"{catalog.REQUEST_DURATION}_count", f"{catalog.REQUEST_DURATION}_bucket"
    at_threshold = {**hist, "le": _threshold_le(spec, obj)}

    absent = Case(f"{obj.name}: no latency histogram at all raises TritonSLONoData")
    absent.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    absent.checks.append(
        Check("30m", rules.NO_DATA, (_alert(spec, obj, blind.NO_SAMPLES, {catalog.PHASE: "request"}),))
    )

    frozen = Case(f"{obj.name}: traffic without new samples raises TritonSLONoData")
    frozen.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    frozen.add(count, hist, gauge(50, 40)).add(bucket, at_threshold, gauge(50, 40))
    frozen.checks.append(Check("30m", rules.NO_DATA, (_alert(spec, obj, blind.NO_SAMPLES, _group(spec)),)))

    # Triton 2.65+'s default buckets (100, 500, 2000, 5000 ms) without the model_metrics stanza.
    no_bucket = Case(f"{obj.name}: a served histogram without the threshold's bucket raises TritonSLONoData")
    no_bucket.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    no_bucket.add(count, hist, counter(60, 40)).add(bucket, {**hist, "le": "+Inf"}, counter(60, 40))
    replica = {"instance": SIDECAR_INSTANCE, **_group(spec)}
    no_bucket.checks.append(
        Check("30m", rules.NO_DATA, (_alert(spec, obj, blind.NO_BUCKET, replica, rules.NO_DATA_BUCKET),))
    )

    quiet = Case(f"{obj.name}: sampled latencies keep TritonSLONoData quiet")
    quiet.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM, 40))
    quiet.add(count, hist, counter(60, 40)).add(bucket, at_threshold, counter(60, 40))
    quiet.checks.append(Check("30m", rules.NO_DATA))
    return _others(spec, obj, [absent, frozen, no_bucket, quiet], triton_up=False)


def nodata_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    if obj.kind == "availability":
        return availability_cases(spec, obj)
    if obj.kind == "latency":
        return latency_cases(spec, obj)
    return []
