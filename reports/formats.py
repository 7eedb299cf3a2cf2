"""How the report writes a number, for people (tables, findings, the webhook) and for the CSVs.

One home for every format, so that a share reads the same in every section: ``12.3 %`` (a space
before the sign, one decimal unless a figure needs more, such as availability), a change ``+4.0 %``,
a rate ``50.8``. Not applicable is ``—`` in a table and an empty cell in a CSV, never a made-up 0.
"""

from __future__ import annotations

import math

DASH = "—"


def _missing(v: object) -> bool:
    return v is None or v == "" or (isinstance(v, float) and not math.isfinite(v))


def csv_cell(v: object) -> str:
    """A CSV cell: empty for a missing or non-finite figure, 10 significant digits for a float."""
    if _missing(v):
        return ""
    return f"{v:.10g}" if isinstance(v, float) else str(v)


def number(v: object, fmt: str = "{:.3g}") -> str:
    """A figure in a table (3 significant digits by default); text passes through."""
    if _missing(v):
        return DASH
    return fmt.format(v) if isinstance(v, (int, float)) else str(v)


def count(v: object) -> str:
    """A whole count with thousands separators: ``1,234``."""
    return number(v, "{:,.0f}")


def percent(v: object, places: int = 1, signed: bool = False) -> str:
    """A ratio as a percentage: ``0.123`` → ``12.3 %``; ``signed``: ``+12.3 %``."""
    if _missing(v) or not isinstance(v, (int, float)):
        return DASH
    return f"{v * 100:{'+' if signed else ''}.{places}f} %"


def points(v: object) -> str:
    """A change of a ratio in percentage points: ``+1.20 points``."""
    if _missing(v) or not isinstance(v, (int, float)):
        return DASH
    return f"{v * 100:+.2f} points"


def ms(v: object, places: int = 1) -> str:
    """Seconds as milliseconds (the column's header says ms)."""
    if _missing(v) or not isinstance(v, (int, float)):
        return DASH
    return f"{v * 1000:.{places}f}"


def weeks(v: object) -> str:
    return DASH if _missing(v) or not isinstance(v, (int, float)) else f"{v:.1f}"
