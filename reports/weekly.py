"""The archive's part of a report: last week's figures beside this week's, and last week's forecast scored.

``read()`` loads the archive's earlier weeks once and returns what the report adds: the models with
last week's peak (``models.csv``'s ``previous_peak_request_rate``), the "What changed" section it opens
with (``changes``), the "Forecast check" section (``forecast_check``), this week's findings marked new
or ongoing, and last week's resolved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.reports import archive, changes, forecast_check
from tritonwatch.reports.figures import ModelFigures
from tritonwatch.reports.findings import Finding
from tritonwatch.reports.render import Section


@dataclass(frozen=True)
class History:
    previous: archive.Archived | None
    models: list[ModelFigures]
    lead: tuple[Section, ...]
    sections: tuple[Section, ...]
    findings: list[Finding]  # this week's, each marked new or ongoing
    resolved: list[Finding]  # last week's, gone this week
    checks: list[forecast_check.Check]
    calibration: list[forecast_check.Calibration]


def read(
    root: str, week: str, models: Sequence[ModelFigures], found: Sequence[Finding], end: datetime
) -> History:
    path = Path(root)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--archive {root}: exists and is not a directory")
    try:
        earlier = archive.earlier(path, week)
    except OSError as exc:
        raise TritonwatchError(f"--archive {root}: cannot read the archive ({exc.strerror})") from None
    previous = earlier[-1] if earlier else None
    if previous is not None:
        before = previous.models
        models = [
            replace(
                f,
                previous_peak=archive.number(
                    before.get((f.week.model, f.week.version), {}).get("peak_request_rate")
                ),
            )
            for f in models
        ]
    lead, marked, resolved = changes.section(models, found, end, week, previous)
    check, checks, calibration = forecast_check.section(models, previous, earlier, week)
    return History(previous, list(models), (lead,), (check,), marked, resolved, checks, calibration)
