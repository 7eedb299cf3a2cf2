"""Alert names and texts of the generated rules, and how the rules fill the texts' placeholders.

The operational alerts' texts come from the catalog (``catalog.OPERATIONAL_ALERTS``), the SLO alerts'
are here; ``render`` fills a text with Go template snippets (``_go_vars``) in the rules and with the
values the promtool cases expect in ``alerts/promtests.py``. ``alerts/rules.py`` re-exports every name.
"""

from __future__ import annotations

from collections.abc import Mapping

from tritonwatch import catalog

# --- names: all from the catalog ---------------------------------------------------------------
SLO_LABEL = catalog.SLO
SEVERITY = "severity"
OBJECTIVE_RECORD = catalog.SLO_OBJECTIVE_RECORD
BUDGET_REMAINING_RECORD = catalog.SLO_ERROR_BUDGET_REMAINING_RECORD

BURN = catalog.SLO_BURN_ALERT
NO_DATA = catalog.SLO_NO_DATA_ALERT
SERVER_DOWN = catalog.SERVER_DOWN_ALERT
SERVER_STALLED = catalog.SERVER_STALLED_ALERT
MODEL_STALLED = catalog.MODEL_STALLED_ALERT
MODEL_NOT_READY = catalog.MODEL_NOT_READY_ALERT
QUEUE_TIME_HIGH = catalog.QUEUE_TIME_HIGH_ALERT
GPU_MEMORY_NEAR_FULL = catalog.GPU_MEMORY_NEAR_FULL_ALERT
GPU_XID = catalog.GPU_XID_ALERT
SIDECAR_DOWN = catalog.SIDECAR_DOWN_ALERT
SIDECAR_STALE = catalog.SIDECAR_STALE_ALERT
WATCHDOG = catalog.WATCHDOG_ALERT
ERRORS_UNCOUNTED = catalog.SLO_ERRORS_UNCOUNTED_ALERT
# The per-model operational objectives (queue time, batch efficiency, cache hit ratio), by alert name.
OPERATIONAL = {o.alert.name: o for o in catalog.OPERATIONAL_OBJECTIVES}
# TritonServerDown has two rules (a target down, no target at all) with texts of their own.
SERVER_ABSENT_TEXTS = "TritonServerDown/absent"
CAUSE = "cause"  # tells those two rules (and their alerts) apart

# Every alert the rules write, in generation order: the SLO alerts, then the catalog's operational ones.
ALERTS = (BURN, NO_DATA, *(a.name for a in catalog.OPERATIONAL_ALERTS))

# Windows of the operational alerts (the SLO alerts take theirs from alerts/windows.py).
NO_DATA_ABSENT = "15m"
NO_DATA_TRAFFIC_WINDOW = "1h"
STALE_WINDOW = "5m"
XID_WINDOW = "1h"

# Go template snippets for the value placeholders; label placeholders become {{ $labels.<name> }}.
GO_VALUES = {
    "value": "{{ $value }}",
    "value_pct": "{{ $value | humanizePercentage }}",
    "value_x": '{{ $value | printf "%.1f" }}',
}


# --- alert texts: the SLO alerts' here, the operational ones from the catalog --------------------
SLO_ALERTS = (
    catalog.Alert(
        BURN,
        watches="",  # the SLO's own SLI records, not a catalog signal
        hold="",
        summary="{model} is burning its {slo} error budget {value_x}x too fast",
        description="{model} is spending the error budget of SLO {slo} ({objective}% of requests {good} over "
        "{window}) {value_x} times as fast as the objective allows; {budget_left} of the budget is left.{split}",
    ),
    catalog.Alert(
        NO_DATA,
        watches=catalog.REQUEST_DURATION,
        hold="10m",
        summary="No latency samples for {model}: the {slo} SLI is blind",
        description="The latency SLI {slo} has no sampled requests for {model}: no {histogram} series for "
        "{absent}, or none added over {traffic_window} while Triton serves requests. Check that "
        "Triton's own histogram (2.65+: --metrics-config histogram_latencies=true) or its traces "
        "(--otlp-listen, --trace-rate) reach the sidecar.",
    ),
)
# The no-data alert of a latency SLI read from a front's histogram (``latency.from``).
NO_DATA_FRONT = "TritonSLONoDataFront"
# The no-data alerts of an availability SLI whose counters are gone, and of a latency SLI whose
# histogram lacks the threshold's bucket (alerts/nodata.py).
NO_DATA_SERIES = "TritonSLONoData/series"
NO_DATA_FRONT_SERIES = "TritonSLONoData/front-series"
NO_DATA_BUCKET = "TritonSLONoData/bucket"
TEXTS: dict[str, catalog.Alert] = {
    **{a.name: a for a in (*SLO_ALERTS, *catalog.OPERATIONAL_ALERTS)},
    SERVER_ABSENT_TEXTS: catalog.SERVER_ABSENT,
    NO_DATA_FRONT: catalog.Alert(
        NO_DATA,
        watches="",
        hold="10m",
        summary="No latency samples for {model}: the {slo} SLI is blind",
        description="The latency SLI {slo} of {model} reads the front's histogram {histogram}, which has "
        "had no bucket at the threshold (le={bound}) for {absent}: the front is not scraped, or its "
        "buckets do not include the threshold (docs/latency-sources.md).",
    ),
    NO_DATA_SERIES: catalog.Alert(
        NO_DATA,
        watches="",
        hold="10m",
        summary="No request counters for {model}: the {slo} SLI is blind",
        description="The availability SLI {slo} reads Triton's counters of {model} ({series}), which have "
        "had no series for {absent} while Triton's targets are up: the model was unloaded or renamed, "
        "or a relabelling or selector drops it. Until they are back the SLO cannot burn: check the "
        "model's state in Triton's repository index and the scrape configuration.",
    ),
    NO_DATA_FRONT_SERIES: catalog.Alert(
        NO_DATA,
        watches="",
        hold="10m",
        summary="No request counters for {model}: the {slo} SLI is blind",
        description="The availability SLI {slo} of {model} reads the front's counters {series}, which "
        "have had no series for {absent}: the front is not scraped, or the selector matches nothing "
        "(availability.from in the SLO file). Until they are back the SLO cannot burn.",
    ),
    NO_DATA_BUCKET: catalog.Alert(
        NO_DATA,
        watches="",
        hold="10m",
        summary="No bucket at {threshold} for {model}: the {slo} SLI is blind",
        description="The latency SLI {slo} reads {histogram}, and the histogram {instance} serves for "
        "{model} has no bucket at the threshold (le={bound}): its requests are left out of the SLI, "
        "and where no replica has the bucket the SLO cannot burn. On Triton 2.65+ (Triton's own "
        "histogram) merge triton/{model}.model_metrics.pbtxt, which tritonwatch rules writes, into the "
        "model's config.pbtxt and reload the model; from sampled traces choose a threshold among the "
        "sidecar's buckets ({buckets}).",
    ),
}
FOR = {name: a.hold for name, a in TEXTS.items() if a.hold and name in ALERTS}


class _GoVars(dict[str, str]):
    """Placeholder values for rules: unknown names are label references."""

    def __missing__(self, key: str) -> str:
        return "{{ $labels.%s }}" % key  # noqa: UP031 -- braces would need escaping in an f-string


def render(text: str, values: Mapping[str, str]) -> str:
    return text.format_map(values)


def _go_vars(fixed: Mapping[str, str]) -> _GoVars:
    out = _GoVars(GO_VALUES)
    out.update(fixed)
    return out
