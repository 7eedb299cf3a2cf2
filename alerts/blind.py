"""No-data alerts: every SLI that can go blind says so, so that an SLO never reads as met for want of data.

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
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.alerts import build
from tritonwatch.alerts.build import Rule
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
from tritonwatch.fronthistogram import le_text
from tritonwatch.slo import Objective, SLOFile, format_duration
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
        return [build.alert(NO_DATA, expr, labels(obj, NO_SERIES), texts, NO_DATA_FRONT_SERIES)]
    counters = build.select(catalog.TRITON_SUCCESS, build.model(obj.model))
    expr = f"absent_over_time({counters}[{NO_DATA_ABSENT}])\nand on ()\n{_triton_up(spec)}"
    return [build.alert(NO_DATA, expr, labels(obj, NO_SERIES), texts, NO_DATA_SERIES)]


def latency_alerts(spec: SLOFile, obj: Objective) -> list[Rule]:
    lat = obj.latency
    assert lat is not None
    texts = nodata_texts(spec, obj)
    if lat.source is not None:
        # The front sees every request: no bucket at the threshold is what leaves this SLI blind.
        expr = f"absent_over_time({lat.source.under(lat.threshold)}[{NO_DATA_ABSENT}])"
        return [build.alert(NO_DATA, expr, labels(obj, NO_BUCKET), texts, NO_DATA_FRONT)]
    by = build.by(spec, catalog.MODEL)
    sel = (build.request_phase(), build.model(obj.model))
    count = build.select(f"{catalog.REQUEST_DURATION}_count", *sel)
    success = build.select(catalog.TRITON_SUCCESS, build.model(obj.model))
    w = NO_DATA_TRAFFIC_WINDOW
    unsampled = (
        f"absent_over_time({count}[{NO_DATA_ABSENT}])\nor\n(\n"
        f"  sum by ({by}) (increase({count}[{w}])) < 1\nand on ({by})\n"
        f"  sum by ({by}) (increase({success}[{w}])) > 0\n)"
    )
    # Per replica: one without the bucket drops out of the SLI's total (alerts/rules.py) unseen.
    replica = build.by(spec, catalog.MODEL, "instance")
    bucket = build.select(f"{catalog.REQUEST_DURATION}_bucket", *sel, le_matcher(lat.threshold))
    no_bucket = f"count by ({replica}) ({count})\nunless on ({replica})\ncount by ({replica}) ({bucket})"
    return [
        build.alert(NO_DATA, unsampled, labels(obj, NO_SAMPLES), texts),
        build.alert(NO_DATA, no_bucket, labels(obj, NO_BUCKET), texts, NO_DATA_BUCKET),
    ]


def nodata_alerts(spec: SLOFile, obj: Objective) -> list[Rule]:
    if obj.kind == "availability":
        return availability_alerts(spec, obj)
    if obj.kind == "latency":
        return latency_alerts(spec, obj)
    return []  # LLM SLIs: their histograms' own no-data is docs/llm.md's
