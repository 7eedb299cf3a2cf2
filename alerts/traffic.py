"""The minimum-traffic guard of the availability burn alerts.

At 10 requests an hour one failed request is 10% of the 1h window: a 100x burn of a 99.9% objective's
budget for a model that is fine. So the burn alerts read each window's error ratio scaled by
``min(1, requests / min_requests)``, which is failures over ``max(requests, min_requests)``: exact
from ``min_requests`` requests a window on, and below it a window's failures count against
``min_requests``, so a page needs a number of failures rather than a share. With the default
(``slo.default_min_requests``, one failure reads 2x) the slowest page (6x over 6h and 30m) needs more
than 3 failures in each of its windows, the fastest (14.4x) more than 7.2: a total outage keeps
failing and still pages, at 10 requests an hour within about 25 minutes. The SLI records, the budget
and the dashboards stay exact: only the burn alerts are guarded.

Emits per availability SLO, beside its SLI records: ``slo:sli_requests:increase<w>`` (labels as the
SLI's) for every burn-rate window, from the SLI's recorded ``slo:sli_total:rate<w>``: no raw series read.
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.alerts import build, windows
from tritonwatch.alerts.model import Rule
from tritonwatch.slo import Objective, SLOFile, parse_duration


def guarded(spec: SLOFile, obj: Objective) -> bool:
    """Availability objectives are guarded; latency ones have ``min_samples`` (an SLI with fewer
    samples has no value), and Triton's own counters are not sampled."""
    return obj.kind == "availability"


def min_requests(spec: SLOFile, obj: Objective) -> int:
    a = obj.availability
    assert a is not None
    return a.min_requests


def burn_windows() -> tuple[str, ...]:
    """The windows the burn alerts read, in table order, each once."""
    return tuple(dict.fromkeys(w for b in windows.SRE_WORKBOOK for w in (b.long, b.short)))


def requests_expr(obj: Objective, window: str) -> str:
    """The requests the SLI's denominator counted over ``window``: its recorded total rate times the
    window (each ensemble request once, as the SLI counts it; a young series its real count, alerts/sli.py)."""
    total = f'{catalog.slo_sli_total_record(window)}{{{catalog.SLO}="{obj.name}"}}'
    return f"{total} * {build.num(parse_duration(window, 'window'))}"


def requests_rules(spec: SLOFile, obj: Objective, labels: dict[str, str]) -> list[Rule]:
    """``slo:sli_requests:increase<w>`` per burn window, with the SLI records' static ``labels``."""
    if not guarded(spec, obj):
        return []
    return [
        build.record(catalog.slo_sli_requests_record(w), requests_expr(obj, w), labels)
        for w in burn_windows()
    ]


def guarded_ratio(spec: SLOFile, obj: Objective, window: str, slo_selector: str) -> str:
    """The error ratio a burn alert compares: the SLI record, guarded where the objective is."""
    sli = f"{catalog.slo_sli_error_record(window)}{{{slo_selector}}}"
    if not guarded(spec, obj):
        return sli
    requests = f"{catalog.slo_sli_requests_record(window)}{{{slo_selector}}}"
    return f"{sli} * clamp_max({requests} / {min_requests(spec, obj)}, 1)"
