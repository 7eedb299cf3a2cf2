"""Multiwindow multi-burn-rate windows as data (Google SRE Workbook, chapter "Alerting on SLOs").

The table is written for a 30-day SLO window. A burn factor is "this much of the error budget gone
within the long window": 14.4x over 1h spends 2% of a 30d budget. For another SLO window the windows
stay and the factor scales so that the same share of the budget is spent: factor * window / 30d
(28d: 13.44, 5.6, 2.8, 0.9333).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from tritonwatch.errors import UsageError
from tritonwatch.slo import SLOFile, format_duration, parse_duration

TABLE_WINDOW = 30 * 86400


@dataclass(frozen=True)
class BurnWindow:
    severity: str  # "page" | "ticket"
    long: str  # Prometheus duration
    short: str
    factor: float  # for the 30d table

    def scaled(self, slo_window: float) -> float:
        """The burn factor for an SLO window of ``slo_window`` seconds, rounded for stable output."""
        return round(self.factor * slo_window / TABLE_WINDOW, 4)


# (severity, long window, short window, burn factor over 30d)
SRE_WORKBOOK_30D: tuple[BurnWindow, ...] = (
    BurnWindow("page", "1h", "5m", 14.4),
    BurnWindow("page", "6h", "30m", 6.0),
    BurnWindow("ticket", "1d", "2h", 3.0),
    BurnWindow("ticket", "3d", "6h", 1.0),
)

SEVERITIES = ("page", "ticket")


def for_severity(severity: str) -> tuple[BurnWindow, ...]:
    return tuple(w for w in SRE_WORKBOOK_30D if w.severity == severity)


def sli_windows(slo_window: float) -> tuple[str, ...]:
    """Every window an SLI error ratio is recorded for, shortest first, the SLO window last."""
    seconds = {parse_duration(w, "window") for b in SRE_WORKBOOK_30D for w in (b.long, b.short)}
    seconds.add(slo_window)
    return tuple(format_duration(s) for s in sorted(seconds))


# The smallest error budget the generated promtool tests still hold to Prometheus's float arithmetic
# (measured: 1e-11 passed, 1e-15 did not): 99.9999999% is the highest objective.
MIN_BUDGET = Decimal("1e-9")


def check_budgets(spec: SLOFile) -> None:
    """Refuse an objective whose budget no page alert could ever act on, naming its field.

    A total outage burns a budget b at 1/b: when that is not above the slowest page factor, no page
    can ever fire (and the generated "total outage pages" test could not hold)."""
    slowest_page = Decimal(str(min(w.scaled(spec.window) for w in for_severity("page"))))
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
