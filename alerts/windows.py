"""Multiwindow multi-burn-rate windows as data (Google SRE Workbook, chapter "Alerting on SLOs").

A burn rate is the error ratio over the error budget: at 1x the budget runs out exactly when the SLO
window ends, at 14.4x in a 14.4th of it. The factors are burn rates, so they mean the same for every
SLO window the file accepts and are not scaled with it: a ticket (1x and more) means the budget runs
out within the window if this goes on, a page (6x, 14.4x) that it runs out within days. Scaling them
by ``window / 30d`` (as this module once did) made a 7d SLO ticket at 0.2333x, a burn that ends the
window with three quarters of the budget left.

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
    factor: float  # burn rate: error ratio over the error budget


# (severity, long window, short window, burn factor)
SRE_WORKBOOK: tuple[BurnWindow, ...] = (
    BurnWindow("page", "1h", "5m", 14.4),
    BurnWindow("page", "6h", "30m", 6.0),
    BurnWindow("ticket", "1d", "2h", 3.0),
    BurnWindow("ticket", "3d", "6h", 1.0),
)

SEVERITIES = ("page", "ticket")


def for_severity(severity: str) -> tuple[BurnWindow, ...]:
    return tuple(w for w in SRE_WORKBOOK if w.severity == severity)


def slowest_page_factor() -> float:
    return min(w.factor for w in for_severity("page"))


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
    slowest_page = Decimal(str(slowest_page_factor()))
    for i, s in enumerate(spec.slos):
        for obj in spec.objectives():
            if obj.model != s.model:
                continue
            where = f"spec.slos[{i}].{obj.kind}.objective"
            if obj.budget * slowest_page >= 1:
                lowest = (Decimal(100) * (1 - 1 / slowest_page)).quantize(Decimal("0.0001"))
                raise UsageError(
                    f"{where}: must be above {lowest} for a {spec.window_text} window: a budget of "
                    f"{obj.budget * 100:g}% cannot burn at {slowest_page}x (the slowest page), so no page "
                    f"could ever fire (got {obj.objective})"
                )
            if obj.budget < MIN_BUDGET:
                raise UsageError(f"{where}: must be at most 99.9999999 (got {obj.objective})")
