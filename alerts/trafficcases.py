"""promtool cases for the burn alerts' meaning at every traffic and SLO window.

* ``low_traffic_cases`` (availability, ``alerts/traffic.py``): at 10 requests an hour one failed request
  pages nobody (it reads as a 2x burn: the 1x ticket alone), and a total outage at the same traffic
  pages within 45 minutes.
* ``steady_burn_cases``: a steady 2x burn opens a ticket (the budget runs out before the SLO window
  ends), whatever the SLO window; the 0.5x quiet case is ``promtests.burn_cases``'.

Expected values are worked out here from the inputs: the guard counts failures against
``min_requests`` when a window saw fewer requests.
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import rules, traffic
from tritonwatch.alerts.promtests import (
    RPM,
    Case,
    Check,
    _burn_alert,
    _traffic,
    front_series,
    triton_labels,
)
from tritonwatch.slo import Objective, SLOFile

# 10 requests an hour: one every 6 one-minute samples.
STEP = 6
LOW_MINUTES = 48  # past the checks: promtool evaluates every rule each minute up to the last
FAILED_AT = 30  # the one failed request of the quiet case, in minutes


def stepped(minutes: int, value_at: dict[int, int] | None = None, every: int = STEP) -> str:
    """A counter going up by one every ``every`` minutes from 0, as promtool's expanding notation;
    ``value_at``: minute -> what to subtract from there on (a request counted elsewhere)."""
    parts = []
    less = 0
    for k in range(minutes // every):
        for start, minus in (value_at or {}).items():
            if start == k * every:
                less = minus
        parts.append(f"{k - less}x{every - 1}")
    return " ".join(parts)


def _series(spec: SLOFile, case: Case, obj: Objective, good: str, bad: str, total: str) -> None:
    """Counters of ``good`` and ``bad`` requests (``total`` = both) on the SLI's own source."""
    if rules.front_counters(spec, obj) is not None:
        errors, bad_labels, total_metric, other, included = front_series(spec, obj)
        case.add(errors, bad_labels, bad)
        case.add(total_metric, other, good if included else total)
        return
    case.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), good)
    case.add(catalog.TRITON_FAILURE, triton_labels(spec, obj.model, reason="BACKEND"), bad)
    case.add(catalog.TRITON_FAILURE, triton_labels(spec, obj.model, reason="CANCELED"), f"0x{LOW_MINUTES}")


def _x(failures: int, spec: SLOFile, obj: Objective) -> str:
    """The guarded burn rate of ``failures`` in a window that saw fewer than ``min_requests``."""
    return f"{float(Decimal(failures) / traffic.min_requests(spec, obj) / obj.budget):.1f}"


def low_traffic_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    if not traffic.guarded(spec, obj):
        return []
    windows_requests = LOW_MINUTES // STEP  # fewer than min_requests in any window: the guard counts
    if windows_requests >= traffic.min_requests(spec, obj):
        return []
    one = Case(f"{obj.name}: one failed request at 10 requests an hour pages nobody")
    failed_at = {FAILED_AT: 1}
    _series(
        spec,
        one,
        obj,
        good=stepped(LOW_MINUTES, failed_at),
        bad=f"0x{FAILED_AT - 1} 1x{LOW_MINUTES - FAILED_AT}",
        total=stepped(LOW_MINUTES),
    )
    one_ticket = _burn_alert(spec, obj, "ticket", _x(1, spec, obj))
    one.checks += [Check("20m", rules.BURN), Check("40m", rules.BURN, (one_ticket,))]

    outage = Case(f"{obj.name}: a total outage at 10 requests an hour pages within 45 minutes")
    _series(spec, outage, obj, good=f"0x{LOW_MINUTES}", bad=stepped(LOW_MINUTES), total=stepped(LOW_MINUTES))
    # 10m: one failure (2x): the slow ticket only. 45m: 7 failures in every window from 6h up, more than
    # 3 in the last 30 minutes: the 6h/30m page (and the 1d/2h ticket), both read on their long window.
    at_45 = _x(45 // STEP, spec, obj)
    outage.checks += [
        Check("10m", rules.BURN, (_burn_alert(spec, obj, "ticket", _x(1, spec, obj)),)),
        Check(
            "45m",
            rules.BURN,
            (_burn_alert(spec, obj, "page", at_45), _burn_alert(spec, obj, "ticket", at_45)),
        ),
    ]
    return [one, outage]


def steady_burn_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    """A steady 2x burn tickets (on the 3d/6h pair, 1x) and never pages, for every SLO window."""
    burn = Decimal(2)
    case = Case(f"{obj.name}: steady {burn}x burn opens a ticket and never pages")
    _traffic(spec, case, obj, RPM * obj.budget * burn, 65)
    for t in ("30m", "65m"):  # past the 1h page window
        case.checks.append(Check(t, rules.BURN, (_burn_alert(spec, obj, "ticket", f"{burn:.1f}"),)))
    return [case]
