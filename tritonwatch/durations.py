"""Prometheus-style durations in the SLO file (``28d``, ``50ms``): parsed with the field named in the
error, and written back as the shortest spelling (rules, promtool tests and the SLO file agree)."""

from __future__ import annotations

import re

from tritonwatch.errors import UsageError

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d|w)$")


def parse_duration(text: object, where: str) -> float:
    """``"28d"`` -> 2419200.0 seconds; ``where`` names the field in the error."""
    m = _DURATION.match(str(text).strip()) if isinstance(text, str) else None
    if not m:
        raise UsageError(
            f"{where}: unknown duration {text!r} (expected a number and a unit: ms, s, m, h, d, w)"
        )
    return float(m.group(1)) * _UNITS[m.group(2)]


def format_duration(seconds: float) -> str:
    """The shortest Prometheus duration for ``seconds``: 2419200 -> ``28d``, 0.05 -> ``50ms``."""
    for unit in ("d", "h", "m", "s"):
        n = seconds / _UNITS[unit]
        if n >= 1 and abs(n - round(n)) < 1e-9:
            return f"{round(n)}{unit}"
    return f"{seconds * 1000:g}ms"  # sub-second thresholds: 50ms, 0.25ms
