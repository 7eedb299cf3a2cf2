"""Multiwindow multi-burn-rate windows as data (Google SRE Workbook, chapter "Alerting on SLOs").

A burn rate is the error ratio over the error budget: at 1x the budget runs out exactly when the SLO
window ends. The pages are defined as a share of the budget spent within their long window: 2% of it in
an hour, 5% in six hours, which is the workbook's 14.4x and 6x at a 30d SLO window and 13.44x and 5.6x at
28d (``page_factor``; the fixed 14.4 paged a 28d SLO a minute later than "2% in an hour" does, 18 minutes
instead of 17 for one slow replica of two). The tickets stay fixed burn rates, 3x and 1x: "the budget runs
out before the window ends at this pace" means the same whatever the window (scaling them, as this module
once did, made a 7d SLO ticket at 0.2333x, a burn that ends the window with three quarters left).

A page never needs a slower burn than the fastest ticket: under about 15 days (6h page) and 6.25 days (1h
page) the share would fall below 3x, and the page's factor is held at 3x there (a 7d SLO pages at 3.36x
and 3x). A page then still means "faster than any ticket", over its shorter windows.

The windows stay the workbook's for every SLO window (Pyrra scales them with the SLO window instead):
a 7d SLO would get a 1m10s short window, a rate over two or three scrapes, and record names would
change with the SLO window.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from tritonwatch.errors import UsageError
from tritonwatch.slo import SLOFile, format_duration, parse_duration


@dataclass(frozen=True)
class BurnWindow:
    severity: str  # "page" | "ticket"
    long: str  # Prometheus duration
    short: str
    factor: float  # burn rate (ticket); share of the budget spent within ``long`` (page)


# (severity, long window, short window, burn factor)
SRE_WORKBOOK: tuple[BurnWindow, ...] = (
    BurnWindow("page", "1h", "5m", 0.02),
    BurnWindow("page", "6h", "30m", 0.05),
    BurnWindow("ticket", "1d", "2h", 3.0),
    BurnWindow("ticket", "3d", "6h", 1.0),
)

SEVERITIES = ("page", "ticket")


def for_severity(severity: str) -> tuple[BurnWindow, ...]:
    return tuple(w for w in SRE_WORKBOOK if w.severity == severity)


def fastest_ticket_factor() -> Decimal:
    return max(Decimal(str(w.factor)) for w in for_severity("ticket"))


def burn_factor(w: BurnWindow, slo_window: float) -> Decimal:
    """The burn rate above which ``w`` fires for an SLO window of ``slo_window`` seconds: a ticket's own
    factor; a page's share of the budget over its long window's share of the SLO window, never below the
    fastest ticket (13.44 and 5.6 at 28d, 14.4 and 6 at 30d, 3.36 and 3 at 7d)."""
    if w.severity != "page":
        return Decimal(str(w.factor))
    share = Decimal(str(w.factor)) * Decimal(str(slo_window)) / Decimal(str(parse_duration(w.long, "window")))
    return max(share, fastest_ticket_factor()).normalize()


def slowest_page_factor(slo_window: float) -> Decimal:
    return min(burn_factor(w, slo_window) for w in for_severity("page"))


def sli_windows(slo_window: float) -> tuple[str, ...]:
    """Every window an SLI error ratio is recorded for, shortest first, the SLO window last."""
    seconds = {parse_duration(w, "window") for b in SRE_WORKBOOK for w in (b.long, b.short)}
    seconds.add(slo_window)
    return tuple(format_duration(s) for s in sorted(seconds))


# The smallest error budget the generated promtool tests still hold to Prometheus's float arithmetic
# (measured: 1e-11 passed, 1e-15 did not): 99.9999999% is the highest objective.
MIN_BUDGET = Decimal("1e-9")


def check_budgets(spec: SLOFile) -> None:
    """Refuse an objective whose budget no page alert could ever act on, naming its field.

    A total outage burns a budget b at 1/b: when that is not above the slowest page factor, no page
    can ever fire (and the generated "total outage pages" test could not hold)."""
    slowest_page = slowest_page_factor(spec.window)
    for i, s in enumerate(spec.slos):
        for obj in spec.objectives():
            if obj.model != s.model:
                continue
            where = f"spec.slos[{i}].{obj.kind}.objective"
            if obj.budget * slowest_page >= 1:
                lowest = (Decimal(100) * (1 - 1 / slowest_page)).quantize(Decimal("0.0001"))
                raise UsageError(
                    f"{where}: must be above {lowest} for a {spec.window_text} window: a budget of "
                    f"{obj.budget * 100:g}% cannot burn at {format(slowest_page, 'f')}x (the slowest page), so no page "
                    f"could ever fire (got {obj.objective})"
                )
            if obj.budget < MIN_BUDGET:
                raise UsageError(f"{where}: must be at most 99.9999999 (got {obj.objective})")
