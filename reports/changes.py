"""What changed since the archive's previous report: the section an archived report opens with.

Per model version: the peak request rate against last week's, SLO attainment (availability, the
share of the error budget spent, p99 latency) against last week's, and capacity headroom against last
week's; and
each finding's status: ``new`` (not in last week's ``findings.csv``), ``ongoing`` (there too: same code,
same subject) or ``resolved`` (last week's, gone this week), shown in the report's one findings list. Last week's figures are read back from its
``models.csv`` exactly as written. Writes ``changes.csv``.

Budget spent is the period's error ratio over the ratio the availability objective allows
(``(1 - availability) / (1 - objective)``): 1.0 is the whole budget, over the report's period.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from tritonwatch.reports import archive
from tritonwatch.reports.figures import Cell, ModelFigures, model_row
from tritonwatch.reports.findings import NEW, ONGOING, RESOLVED, Finding
from tritonwatch.reports.formats import csv_cell, ms, number, percent
from tritonwatch.reports.render import Section, html_table, md_table
from tritonwatch.reports.week import model_name

CSV = "changes.csv"
COLUMNS = (
    "model",
    "version",
    "peak_request_rate",
    "previous_peak_request_rate",
    "peak_change_ratio",
    "availability",
    "previous_availability",
    "budget_spent",
    "previous_budget_spent",
    "p99_latency_seconds",
    "previous_p99_latency_seconds",
    "headroom_ratio",
    "previous_headroom_ratio",
)


def budget_spent(availability: float | None, objective: float | None) -> float | None:
    if availability is None or objective is None or objective >= 1.0:
        return None
    return (1.0 - availability) / (1.0 - objective)


def _num(v: Cell) -> float | None:
    return v if isinstance(v, float) else None


@dataclass(frozen=True)
class Change:
    model: str
    version: str
    now: dict[str, float | None]  # peak_request_rate, availability, budget_spent, headroom_ratio
    before: dict[str, float | None]  # the same, last week's (None: no row or an empty cell)

    @property
    def peak_change_ratio(self) -> float | None:
        a, b = self.now["peak_request_rate"], self.before["peak_request_rate"]
        return a / b - 1.0 if a is not None and b else None

    def cells(self) -> list[str]:
        n, b = self.now, self.before
        values = (
            n["peak_request_rate"],
            b["peak_request_rate"],
            self.peak_change_ratio,
            n["availability"],
            b["availability"],
            n["budget_spent"],
            b["budget_spent"],
            n["p99_latency_seconds"],
            b["p99_latency_seconds"],
            n["headroom_ratio"],
            b["headroom_ratio"],
        )
        return [self.model, self.version, *(csv_cell(v) for v in values)]


def _figures(row: dict[str, float | None]) -> dict[str, float | None]:
    return {
        "peak_request_rate": row.get("peak_request_rate"),
        "availability": row.get("availability"),
        "budget_spent": budget_spent(row.get("availability"), row.get("availability_objective")),
        "p99_latency_seconds": row.get("p99_latency_seconds"),
        "headroom_ratio": row.get("headroom_ratio"),
    }


def compare(models: Sequence[ModelFigures], end: datetime, previous: archive.Archived | None) -> list[Change]:
    out = []
    for f in models:
        row = model_row(f, end)
        now = _figures({k: _num(v) for k, v in row.items()})
        old = previous.models.get((f.week.model, f.week.version), {}) if previous else {}
        before = _figures({k: archive.number(v) for k, v in old.items()})
        out.append(Change(f.week.model, f.week.version, now, before))
    return out


def statuses(
    findings: Sequence[Finding], previous: archive.Archived | None
) -> tuple[list[Finding], list[Finding]]:
    """This week's findings marked new or ongoing, and last week's that are gone: resolved."""
    before = previous.findings if previous else {}
    keys = {x.key for x in findings}
    now = [replace(x, status=ONGOING if x.key in before else NEW) for x in findings]
    gone = [replace(x, status=RESOLVED) for k, x in sorted(before.items()) if k not in keys]
    return now, gone


def _name(c: Change) -> str:
    return model_name(c.model, c.version)


TABLE = (
    ("model", _name),
    ("peak req/s", lambda c: number(c.now["peak_request_rate"])),
    ("peak last week", lambda c: number(c.before["peak_request_rate"])),
    ("peak change", lambda c: percent(c.peak_change_ratio, signed=True)),
    ("availability", lambda c: percent(c.now["availability"], 2)),
    ("availability last week", lambda c: percent(c.before["availability"], 2)),
    ("budget spent", lambda c: percent(c.now["budget_spent"])),
    ("budget last week", lambda c: percent(c.before["budget_spent"])),
    ("p99 ms", lambda c: ms(c.now["p99_latency_seconds"])),
    ("p99 ms last week", lambda c: ms(c.before["p99_latency_seconds"])),
    ("headroom", lambda c: percent(c.now["headroom_ratio"])),
    ("headroom last week", lambda c: percent(c.before["headroom_ratio"])),
)


def section(
    models: Sequence[ModelFigures],
    findings: Sequence[Finding],
    end: datetime,
    week: str,
    previous: archive.Archived | None,
) -> tuple[Section, list[Finding], list[Finding]]:
    """The "What changed" section (``changes.csv`` beside it), this week's findings with their status and
    last week's resolved (listed once, in the report's findings)."""
    changes = compare(models, end, previous)
    now, gone = statuses(findings, previous)
    since = (
        f"Week {week} against {previous.week}, the archive's previous report; each finding below is marked "
        "new, ongoing or resolved against it."
        if previous
        else f"Week {week}: the first report in the archive, so every finding is new; next week's compares with it."
    )
    md = ["## What changed", "", since, "", *md_table(TABLE, changes), "", ""]
    page = f"<h2>What changed</h2><p>{html.escape(since)}</p>{html_table(TABLE, changes)}"
    return Section("\n".join(md), page, CSV, COLUMNS, [c.cells() for c in changes]), now, gone
