"""An SLO's SLI as recording rules: raw series read once, over 5 minutes; every longer window from records.

Per objective, in evaluation order (a rule reads the records above it at the same evaluation):

* ``slo:sli_bad:rate5m`` and ``slo:sli_total:rate5m``: the rates of the SLI's bad events and of all its
  events, ``sum by (model, <grouping>)`` across replicas (by the grouping alone for a front, whose
  series do not name the model). The only rules that read raw series, each once, over 5 minutes:
  availability on Triton's counters reads the failures once into ``slo:sli_failures:rate5m`` and takes
  the ensemble rule (each failed ensemble request counts twice in Triton, docs/pipelines.md) on that
  record's instant vector, so the rule costs two instant joins where no model is an ensemble instead
  of a second reading of every counter; a latency SLI reads ``_count`` and the bucket at the threshold
  once each (replicas without that bucket drop out of the total by an instant ``and`` on the bucket).
* Every longer window ``W``: ``slo:sli_total:rate<W>``, ``slo:sli_bad:rate<W>`` where a longer window is
  tiled from it, and ``slo:sli_error:ratio_rate<W>``, a ratio of sums, never a mean of ratios, so it
  stays traffic-weighted (a mean of 5-minute ratios reads diurnal traffic with night-time errors 71%
  off over 28 days).

Windows of 30m to 3d are tiled (``TILES``): the sum of a shorter window's recorded rate at offsets one
tile apart (1h = the 5m record at 0, 5m, ..., 55m), each tile missing counted as 0 so that a series
younger than the window still has a value and its increase is what it really counted. Tiles are exact at
the window's newest edge: ``avg_over_time`` of a 5m record over 1h would weigh the newest 5 minutes less
and less, and a total outage would page at 3 minutes instead of 1. The SLO window (28d) is
``avg_over_time`` of the 5m records, bad over total: a ratio of the same sums, with an edge effect under
5 minutes in the window; it is read by the budget record only, never by an alert, so its tail does not
matter there.

A tile is read at one instant (with Prometheus's 5-minute lookback): where Prometheus stopped for longer,
a window whose tile boundary falls in that gap counts that tile as 0 for as long as the gap lasted, bad and
total alike (the ratio then covers the rest of the window, the guard's count is lower, which pages later,
never sooner). The SLO window stays an ``avg_over_time`` for that reason: day tiles would read 28 instants
instead of every 5m sample, but a gap would make the budget jump every day for four weeks.

The cost of windows from 30m on does not grow with replicas: they read one recorded series per SLO (and
grouping value), at 6 to 12 instants for a tiled window, and over the SLO window once for bad and once for
total.
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.alerts import build, windows
from tritonwatch.alerts.build import Rule
from tritonwatch.alerts.texts import SLO_LABEL
from tritonwatch.catalog import le_matcher
from tritonwatch.fronthistogram import FrontHistogram
from tritonwatch.slo import FrontCounters, Objective, SLOFile, format_duration, parse_duration

SHORT = "5m"
# The raw series' range: 5 minutes and a millisecond, so that it holds the sample 5 minutes back on
# Prometheus 3 (left-open ranges) as on 2. Where samples fall on the evaluation times (promtool, aligned
# scrapes), consecutive tiles then share their boundary sample and split a counter's increase exactly:
# over a left-open [5m] the interval between two tiles is in neither, and one request in it is lost or
# counted 5/4 times (a step counter of 10 requests an hour read 12.5 where 14 had failed). Elsewhere the
# millisecond changes nothing.
RANGE = "5m1ms"
# window -> (the recorded window it is summed from, tiles)
TILES: dict[str, tuple[str, int]] = {
    "30m": ("5m", 6),
    "1h": ("5m", 12),
    "2h": ("1h", 2),
    "6h": ("1h", 6),
    "1d": ("6h", 4),
    "3d": ("6h", 12),
}
# The windows whose bad events are recorded: those others are tiled from.
BAD_RECORDED = frozenset(src for src, _n in TILES.values())


def latency_histogram(kind: str) -> tuple[str, tuple[str, ...]]:
    """The histogram (and its fixed matchers) a latency-shaped objective reads."""
    if kind == "time_to_first_token":
        return catalog.LLM_TTFT, ()
    if kind == "inter_token_latency":
        return catalog.LLM_ITL, ()
    return catalog.REQUEST_DURATION, (build.request_phase(),)


def front_counters(spec: SLOFile, obj: Objective) -> FrontCounters | None:
    """The front's counters an availability objective reads, None when it reads Triton's."""
    return obj.availability.source if obj.availability is not None else None


def front_histogram(spec: SLOFile, obj: Objective) -> FrontHistogram | None:
    """The front's histogram a latency objective reads (``latency.from``), None when it reads the sidecar's."""
    return obj.latency.source if obj.latency is not None else None


def _mine(obj: Objective, record: str) -> str:
    """``record``'s series of this objective."""
    return build.select(record, f'{SLO_LABEL}="{obj.name}"')


def _front_by(spec: SLOFile) -> tuple[str, str]:
    """``sum by (<grouping>) `` (or ``sum``) and the ``on (<grouping>)`` a front's series match on."""
    g = ", ".join(spec.grouping)
    return (f"sum by ({g}) " if g else "sum", f"on ({g})")


def min_samples(spec: SLOFile, obj: Objective) -> int | None:
    """A latency SLI's minimum samples a window (None for availability: its guard is the burn alerts')."""
    if obj.kind == "availability":
        return None
    lat = obj.latency
    assert lat is not None
    return lat.min_samples


def source_rules(spec: SLOFile, obj: Objective, labels: dict[str, str]) -> list[Rule]:
    """The 5m records of bad and total events: the only SLI rules that read raw series."""
    bad, total = catalog.slo_sli_bad_record(SHORT), catalog.slo_sli_total_record(SHORT)
    counters, histogram = front_counters(spec, obj), front_histogram(spec, obj)
    if counters is not None:
        by, on = _front_by(spec)
        # A front that creates its error series with the first error (Envoy, NGINX) reads 0 until then.
        errors = f"{by}(rate({counters.errors.promql()}[{RANGE}]))\nor {on}\n0 * {_mine(obj, total)}"
        return [
            build.record(total, f"{by}(rate({counters.total.promql()}[{RANGE}]))", labels),
            build.record(bad, errors, labels),
        ]
    if histogram is not None:
        lat = obj.latency
        assert lat is not None
        by, _on = _front_by(spec)
        under = f"{by}(rate({histogram.under(lat.threshold)}[{RANGE}]))"
        return [
            build.record(total, f"{by}(rate({histogram.total()}[{RANGE}]))", labels),
            build.record(bad, f"{_mine(obj, total)}\n- ignoring ({', '.join(labels)})\n{under}", labels),
        ]
    by = build.by(spec, catalog.MODEL)
    model = build.model(obj.model)
    if obj.kind == "availability":
        plain = catalog.signal(catalog.ERROR_RATIO)
        ensemble = catalog.ensemble_variant(plain)
        assert ensemble is not None
        successes = tuple(t for t in plain.denominator if t not in plain.numerator)
        failures = _mine(obj, catalog.SLO_SLI_FAILURES_RECORD)
        scale = ensemble.numerator[0].scale
        return [
            build.record(
                catalog.SLO_SLI_FAILURES_RECORD, catalog.sum_rate(plain.numerator, RANGE, by, model), labels
            ),
            build.record(
                bad, catalog.ensemble_aware(failures, f"{failures} * {scale:g}", on=(catalog.MODEL,)), labels
            ),
            build.record(
                total,
                f"{catalog.sum_rate(successes, RANGE, by, model)}\n+ ignoring ({SLO_LABEL})\n{_mine(obj, bad)}",
                labels,
            ),
        ]
    lat = obj.latency
    assert lat is not None
    name, fixed = latency_histogram(obj.kind)
    sel = (*fixed, model)
    under = build.select(f"{name}_bucket", *sel, le_matcher(lat.threshold))
    count = build.select(f"{name}_count", *sel)
    # Only the replicas with a bucket at the threshold count in the total: one serving Triton's own
    # histogram with other bounds (model_metrics not applied there) would otherwise count all its
    # requests as slow. ``rules --triton`` warns about such a model (alerts/model_metrics.py).
    return [
        build.record(total, f"sum by ({by}) (rate({count}[{RANGE}]) and ignoring (le) {under})", labels),
        build.record(
            bad,
            f"{_mine(obj, total)}\n- ignoring ({SLO_LABEL})\nsum by ({by}) (rate({under}[{RANGE}]))",
            labels,
        ),
    ]


def tiled(selector: str, step: str, tiles: int) -> str:
    """The mean of ``selector`` (a rate over ``step``) at offsets 0, ``step``, ... : the rate over the
    whole window. A tile the series does not reach yet counts as 0, so that a young series reads its
    real increase, not its rate spread over the window."""
    seconds = parse_duration(step, "step")
    terms = [selector] + [
        f"({selector} offset {format_duration(k * seconds)} or {selector} * 0)" for k in range(1, tiles)
    ]
    return "(\n  " + "\n+ ".join(terms) + f"\n) / {tiles}"


def _gated(ratio: str, obj: Objective, spec: SLOFile, window: str) -> str:
    """A latency SLI has no value over a window with fewer than ``min_samples`` samples."""
    least = min_samples(spec, obj)
    if least is None:
        return ratio
    seconds = build.num(parse_duration(window, "window"))
    return f"{ratio}\nand\n{_mine(obj, catalog.slo_sli_total_record(window))} * {seconds} >= {least}"


def window_rules(spec: SLOFile, obj: Objective, window: str, labels: dict[str, str]) -> list[Rule]:
    """``window``'s total rate, its bad rate where a longer window is tiled from it, and its error ratio."""
    total = catalog.slo_sli_total_record(window)
    error = catalog.slo_sli_error_record(window)
    if window == SHORT:
        ratio = f"{_mine(obj, catalog.slo_sli_bad_record(SHORT))}\n/\n{_mine(obj, catalog.slo_sli_total_record(SHORT))}"
        return [build.record(error, _gated(ratio, obj, spec, window), labels)]
    if window in TILES:
        step, n = TILES[window]
        total_expr = tiled(_mine(obj, catalog.slo_sli_total_record(step)), step, n)
        bad_expr = tiled(_mine(obj, catalog.slo_sli_bad_record(step)), step, n)
    else:  # the SLO window
        total_expr = f"avg_over_time({_mine(obj, catalog.slo_sli_total_record(SHORT))}[{window}])"
        bad_expr = f"avg_over_time({_mine(obj, catalog.slo_sli_bad_record(SHORT))}[{window}])"
    out = [build.record(total, total_expr, labels)]
    if window in BAD_RECORDED:
        out.append(build.record(catalog.slo_sli_bad_record(window), bad_expr, labels))
        bad_expr = _mine(obj, catalog.slo_sli_bad_record(window))
    ratio = f"{bad_expr}\n/\n{_mine(obj, total)}"
    return [*out, build.record(error, _gated(ratio, obj, spec, window), labels)]


def sli_labels(spec: SLOFile, obj: Objective) -> dict[str, str]:
    """The SLI records' static labels: the SLO, and the model where the series do not name it (a front)."""
    labels = {SLO_LABEL: obj.name}
    if front_counters(spec, obj) is not None or front_histogram(spec, obj) is not None:
        labels[catalog.MODEL] = obj.model
    return dict(sorted(labels.items()))


def sli_rules(spec: SLOFile, obj: Objective) -> list[Rule]:
    """The SLI's records for every window, shortest first (each window reads only shorter ones)."""
    labels = sli_labels(spec, obj)
    out = source_rules(spec, obj, labels)
    for window in windows.sli_windows(spec.window):
        out += window_rules(spec, obj, window, labels)
    return out
