"""What changed since the archive's previous report: the section an archived report opens with.

Per model version: the peak request rate against last week's, SLO attainment (availability, the
share of the error budget spent, p99 latency) against last week's, and capacity headroom against last
week's; every
finding marked ``new`` (not in last week's ``findings.csv``), ``ongoing`` (there too: same code, same
subject) or ``resolved`` (last week's, gone this week). Last week's figures are read back from its
``models.csv`` exactly as written. Writes ``changes.csv``.

Budget spent is the period's error ratio over the ratio the availability objective allows
(``(1 - availability) / (1 - objective)``): 1.0 is the whole budget, over the report's period.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from tritonwatch.reports import archive
from tritonwatch.reports.figures import Cell, ModelFigures, model_row
from tritonwatch.reports.findings import Finding
from tritonwatch.reports.render import Section, finite_cell, html_table, md_table

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
NEW, ONGOING, RESOLVED = "new", "ongoing", "resolved"


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
        return [self.model, self.version, *(finite_cell(v) for v in values)]


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


@dataclass(frozen=True)
class Status:
    status: str  # NEW, ONGOING or RESOLVED
    severity: str
    subject: str
    text: str


def statuses(findings: Sequence[Finding], previous: archive.Archived | None) -> list[Status]:
    """This week's findings, new or ongoing, then last week's that are gone: resolved."""
    before = previous.findings if previous else {}
    keys = {(x.code, x.subject) for x in findings}
    out = [
        Status(ONGOING if (x.code, x.subject) in before else NEW, x.severity, x.subject, x.text)
        for x in findings
    ]
    out += [
        Status(RESOLVED, r.get("severity", ""), subject, r.get("text", ""))
        for (code, subject), r in sorted(before.items())
        if (code, subject) not in keys
    ]
    return out


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v * 100:.2f} %"


def _ms(v: float | None) -> str:
    return "—" if v is None else f"{v * 1000:.1f}"


def _rate(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def _name(c: Change) -> str:
    return f"{c.model}:{c.version}" if c.version else c.model


TABLE = (
    ("model", _name),
    ("peak req/s", lambda c: _rate(c.now["peak_request_rate"])),
    ("last week", lambda c: _rate(c.before["peak_request_rate"])),
    ("change", lambda c: "—" if c.peak_change_ratio is None else f"{c.peak_change_ratio * 100:+.1f} %"),
    ("availability", lambda c: _pct(c.now["availability"])),
    ("last week", lambda c: _pct(c.before["availability"])),
    ("budget spent", lambda c: _pct(c.now["budget_spent"])),
    ("last week", lambda c: _pct(c.before["budget_spent"])),
    ("p99 ms", lambda c: _ms(c.now["p99_latency_seconds"])),
    ("last week", lambda c: _ms(c.before["p99_latency_seconds"])),
    ("headroom", lambda c: _pct(c.now["headroom_ratio"])),
    ("last week", lambda c: _pct(c.before["headroom_ratio"])),
)


def section(
    models: Sequence[ModelFigures],
    findings: Sequence[Finding],
    end: datetime,
    week: str,
    previous: archive.Archived | None,
) -> tuple[Section, list[Status]]:
    """The "What changed" section (``changes.csv`` beside it) and each finding's status."""
    changes = compare(models, end, previous)
    marked = statuses(findings, previous)
    since = (
        f"Week {week} against {previous.week}, the archive's previous report."
        if previous
        else f"Week {week}: the first report in the archive, so every finding is new; next week's compares with it."
    )
    lines = [f"**{s.status}** · {s.severity} · {s.subject}: {s.text}" for s in marked] or [
        "No findings this week or last."
    ]
    md = ["## What changed", "", since, "", *md_table(TABLE, changes), "", *[f"- {x}" for x in lines], "", ""]
    e = html.escape
    items = (
        "".join(
            f"<li><b>{e(s.status)}</b> · {e(s.severity)} · <b>{e(s.subject)}</b>: {e(s.text)}</li>"
            for s in marked
        )
        or "<li>No findings this week or last.</li>"
    )
    page = f"<h2>What changed</h2><p>{e(since)}</p>{html_table(TABLE, changes)}<ul>{items}</ul>"
    return Section("\n".join(md), page, CSV, COLUMNS, [c.cells() for c in changes]), marked
