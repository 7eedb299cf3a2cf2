"""The report archive (``tritonwatch report --archive DIR``): one folder per ISO week, ``DIR/2026-W49/``.

A week's folder holds the report's files (report.html, report.md, models.csv, gpus.csv, findings.csv,
forecast_check.csv, changes.csv, charts/) and a marker, ``.tritonwatch-report.json`` (the week, the
period, when it was written): only a folder carrying the marker is read as an earlier report or replaced
by a rerun of the same week; anything else in ``DIR`` is left alone. The week is the ISO week in which
the period ends (``end`` minus one second, so a period ending at Monday 00:00 UTC is the week it closes).
A rerun is written beside the old folder first and swapped in, so a failed run leaves last week's intact.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

from tritonwatch.errors import TritonwatchError
from tritonwatch.reports import render
from tritonwatch.reports.findings import GPU, MODEL, RESOLVED, Finding

MARKER = ".tritonwatch-report.json"
FORECAST_CHECK_CSV = "forecast_check.csv"
_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")

Row = dict[str, str]
ModelKey = tuple[str, str]


def iso_week(end: datetime) -> str:
    """The ISO week in which a period ending at ``end`` ends: ``2026-W49``."""
    year, week, _ = (end - timedelta(seconds=1)).isocalendar()
    return f"{year}-W{week:02d}"


def next_week(label: str) -> str:
    """The ISO week after ``label`` (``2026-W53`` is followed by ``2027-W01`` where 2026 has 53)."""
    m = _WEEK.match(label)
    if m is None:
        raise ValueError(f"not an ISO week: {label!r}")
    monday = date.fromisocalendar(int(m[1]), int(m[2]), 1) + timedelta(weeks=1)
    year, week, _ = monday.isocalendar()
    return f"{year}-W{week:02d}"


def number(cell: str | None) -> float | None:
    """A CSV cell the report wrote, as a finite number (None: empty, or not a number)."""
    try:
        v = float(cell) if cell else None
    except ValueError:
        return None
    return v if v is not None and math.isfinite(v) else None


@dataclass(frozen=True)
class Archived:
    """One earlier report, as its files say."""

    week: str
    path: Path
    models: dict[ModelKey, Row]  # models.csv by (model, version)
    findings: dict[tuple[str, str, str], Finding]  # findings.csv's open findings by (code, kind, subject)
    checks: list[Row]  # forecast_check.csv: the forecast it scored


def _rows(path: Path) -> list[Row]:
    try:
        with path.open(newline="") as f:
            return list(csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return []  # an archive folder without the file (an older report) compares as having none


def _ours(folder: Path) -> bool:
    return folder.is_dir() and not folder.is_symlink() and (folder / MARKER).is_file()


def weeks(root: Path) -> list[str]:
    """The archived weeks in ``root``, oldest first (folders carrying the marker only)."""
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if _WEEK.match(p.name) and _ours(p))


def read(root: Path, week: str) -> Archived:
    folder = root / week
    models = {(r.get("model", ""), r.get("version", "")): r for r in _rows(folder / "models.csv")}
    found = (_finding(r) for r in _rows(folder / render.FINDINGS_CSV) if r.get("status") != RESOLVED)
    return Archived(week, folder, models, {f.key: f for f in found}, _rows(folder / FORECAST_CHECK_CSV))


def _finding(row: Row) -> Finding:
    """A finding as an archived findings.csv holds it; a report from before the ``kind`` column wrote
    the subject as ``model name:version`` or ``GPU uuid``."""
    kind, subject = row.get("kind", ""), row.get("subject", "")
    if not kind:
        first, _, rest = subject.partition(" ")
        kind, subject = (
            (GPU, rest) if first == "GPU" else (MODEL, rest) if first == "model" else (MODEL, subject)
        )
    return Finding(
        row.get("code", ""),
        row.get("severity", ""),
        kind,
        subject,
        row.get("text", ""),
        row.get("model", ""),
        row.get("version", ""),
    )


def earlier(root: Path, week: str) -> list[Archived]:
    """Every archived report before ``week``, oldest first."""
    return [read(root, w) for w in weeks(root) if w < week]


def write(report: render.Report, root: Path, week: str) -> list[Path]:
    """Write the report into ``root/week`` (replacing that week's earlier run); returns the paths."""
    folder = root / week
    if (folder.exists() or folder.is_symlink()) and not _ours(folder):
        raise TritonwatchError(
            f"--archive {folder}: exists and was not written by tritonwatch report (no {MARKER}); "
            "not replacing it"
        )
    root.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{week}.", dir=root))
    try:
        staged.chmod(0o777 & ~_umask())  # mkdtemp's 0700 would hide the week from a web server
        paths = render.write(report, staged)
        marker = {
            "week": week,
            "start": report.week.start.isoformat(),
            "end": report.week.end.isoformat(),
            "days": report.week.days,
            "generated": report.generated.isoformat(),
            "generator": "tritonwatch report",
        }
        (staged / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        old = None
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{week}.old.", dir=root))
            folder.rename(old / week)
        staged.rename(folder)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return [folder / p.relative_to(staged) for p in paths]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
