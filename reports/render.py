"""Write the report: ``report.html`` (self-contained, charts inline as PNG data URIs, no script),
``report.md`` (the same findings and tables, charts beside it in ``charts/``), ``models.csv`` and
``gpus.csv`` (one row per model version / GPU; not applicable is an empty cell), ``findings.csv``.

The findings are one list: this week's, then last week's resolved ones (with an archive, each marked
new, ongoing or resolved). Each forecast's fit statistics (AIC, R²) are the method note's; numbers
are written by ``tritonwatch.reports.formats``.
"""

from __future__ import annotations

import base64
import csv
import errno
import html
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from tritonwatch import catalog
from tritonwatch.reports import capacity, knee
from tritonwatch.reports.charts import Chart
from tritonwatch.reports.figures import (
    BY_RATE,
    GPU_COLUMNS,
    MODEL_COLUMNS,
    SOURCES,
    Cell,
    GpuFigures,
    ModelFigures,
    gpu_row,
    model_row,
)
from tritonwatch.reports.findings import RESOLVED, Finding
from tritonwatch.reports.formats import DASH, count, csv_cell, ms, number, percent, points, weeks
from tritonwatch.reports.week import Week, model_name

GPU_METHOD = (
    "GPUs needed in 4 and 12 weeks: the GPUs a model runs on now, scaled by the peak the chosen growth "
    "model forecasts then (today's fitted peak where growth is not significant) over capacity, rounded up; "
    "models sharing a GPU each count it. The cost "
    "of a request is the GPU time its executions kept GPUs busy (compute time over the batch it ran in), "
    "and its share of those GPUs' energy (power split by busy share), over the period's successful requests."
)
METHOD = [capacity.METHOD, knee.METHOD, GPU_METHOD]
# Every finding of the period, one a row: the archive's next report reads it to mark findings new,
# ongoing or resolved.
FINDINGS_CSV = "findings.csv"
# kind: model or gpu; subject: the model version (model:version) or the GPU's uuid; model and version as
# in every per-model CSV (empty for a GPU); status: new, ongoing or resolved against the newest earlier
# archived week (empty without --archive).
FINDINGS_COLUMNS = ("code", "severity", "status", "kind", "subject", "model", "version", "text")


@dataclass(frozen=True)
class Section:
    """A part of the report gathered before it is rendered (the LLM models, the configuration advice):
    its markdown and HTML, placed before "Method" in the order given, and the CSV file written beside."""

    markdown: str
    html: str
    csv: str  # the file's name in --out
    columns: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Report:
    week: Week
    prometheus: str
    models: Sequence[ModelFigures]
    gpus: Sequence[GpuFigures]
    findings: Sequence[Finding]
    charts: Sequence[Chart]
    generated: datetime
    sections: Sequence[Section] = ()
    lead: Sequence[Section] = ()  # what the report opens with, before the findings (what changed)
    resolved: Sequence[Finding] = ()  # last week's findings gone this week (with --archive)


# --- cell formatting (the formats themselves: tritonwatch.reports.formats) ------------------------
def _both(row: dict[str, Cell]) -> str:
    return f"{weeks(row['weeks_to_saturation_linear'])} / {weeks(row['weeks_to_saturation_compound'])}"


def _forecast(row: dict[str, Cell]) -> str:
    return capacity.MODEL_NAMES.get(str(row["forecast_model"]), DASH)


def _weeks(row: dict[str, Cell]) -> str:
    w, lo, hi = (
        row["weeks_to_saturation"],
        row.get("weeks_to_saturation_low"),
        row.get("weeks_to_saturation_high"),
    )
    if not isinstance(w, float):
        return f"{DASH} (no upward trend)" if row.get("headroom_ratio") is not None else DASH
    if w == 0.0:
        return "0 (now)"
    if isinstance(lo, float):
        return f"{w:.1f} ({lo:.1f}–{hi:.1f})" if isinstance(hi, float) else f"{w:.1f} (≥ {lo:.1f})"
    return f"{w:.1f}"


Column = tuple[str, Callable[[dict[str, Cell]], str]]
R = TypeVar("R")  # a table's row: a CSV row here, an LlmFigures in the LLM section


def _column(signal: str) -> str:
    """A catalog signal's column header (the dashboards title the same signal from the same entry)."""
    return catalog.view(signal)[0].column


def _figure(signal: str) -> Callable[[dict[str, Cell]], str]:
    """A reported catalog figure's cell, by its unit: a percentage for a ratio, else a number."""
    view, unit = catalog.view(signal)
    if unit == "percentunit":
        return lambda r: percent(r[view.field])
    return lambda r: number(r[view.field])


MODEL_TABLE: tuple[Column, ...] = (
    ("model", lambda r: model_name(str(r["model"]), str(r["version"] or ""))),
    ("requests", lambda r: count(r["requests_total"])),
    ("peak req/s", lambda r: number(r["peak_request_rate"])),
    (_column(catalog.ERROR_RATIO), lambda r: percent(r["error_ratio"], 2)),
    ("availability vs objective", lambda r: percent(r["availability_vs_objective"], 2, signed=True)),
    (_column(catalog.BATCH_SIZE_MEAN), lambda r: number(r["mean_batch_size"])),
    *((_column(e.name), _figure(e.name)) for e in catalog.REPORTED),
    ("p99 ms", lambda r: ms(r["p99_latency_seconds"])),
)
_GPU_COUNTS = ("gpus_now", "gpus_needed_4w", "gpus_needed_12w")
# Capacity and what to do, per model: a table of its own so either can grow columns.
CAPACITY_TABLE: tuple[Column, ...] = (
    MODEL_TABLE[0],
    ("capacity from", lambda r: SOURCES.get(str(r["capacity_source"]), DASH)),
    ("capacity req/s", lambda r: number(r["capacity_request_rate"])),
    ("headroom", lambda r: percent(r["headroom_ratio"])),
    ("growth model (by fit)", _forecast),
    ("weeks (95 % range)", _weeks),
    ("weeks: linear / compounding", _both),
    ("saturates (earlier)", lambda r: str(r["saturation_date"] or DASH)),
    ("GPUs now / 4 wk / 12 wk", lambda r: " / ".join(number(r[c], "{:.0f}") for c in _GPU_COUNTS)),
    ("GPU-s / request", lambda r: number(r["gpu_seconds_per_request"])),
    ("J / request", lambda r: number(r["joules_per_request"])),
)
GPU_TABLE: tuple[Column, ...] = (
    ("GPU", lambda r: str(r["gpu_uuid"])),
    ("models on it", lambda r: str(r["models"] or DASH)),
    ("peak utilisation", lambda r: percent(r["peak_utilization"])),
    ("mean utilisation", lambda r: percent(r["mean_utilization"])),
    ("headroom", lambda r: percent(r["headroom_ratio"])),
    ("peak trend per day", lambda r: points(r["trend_slope_per_day"])),
    ("growth model (by fit)", _forecast),
    ("weeks (95 % range)", _weeks),
    ("weeks: linear / compounding", _both),
    ("saturates (earlier)", lambda r: str(r["saturation_date"] or DASH)),
)


def _rows(report: Report) -> tuple[list[dict[str, Cell]], list[dict[str, Cell]]]:
    end = report.week.end
    return [model_row(f, end) for f in report.models], [gpu_row(g, end) for g in report.gpus]


# --- files --------------------------------------------------------------------------------------
def write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Cell]]) -> None:
    write_rows(path, columns, ([csv_cell(r[c]) for c in columns] for r in rows))


def write_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """A CSV file: the header, then rows of cells already written as text."""
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(columns)
        w.writerows(rows)


def _period(week: Week) -> str:
    return f"{week.start:%Y-%m-%d %H:%M} – {week.end:%Y-%m-%d %H:%M} UTC ({week.days} days)"


def _source_note(report: Report) -> str:
    rate = "the recording rule" if report.week.recorded else "raw Triton counters"
    return (
        f"Prometheus {report.prometheus}; request rate from {rate}; weekly figures from raw counters; "
        f"forecasts fitted over {report.week.history_note}."
    )


def _slo_capacity_notes(report: Report) -> list[str]:
    """Per model with a latency objective: the SLO-bound capacity found, or why the data cannot tell."""
    out = []
    for f in report.models:
        if f.knee is None:
            continue
        if f.knee.rate is not None:
            used = "used" if f.capacity_source == "latency" else "not used: the declared capacity is lower"
            out.append(f"{f.name}: {f.knee.rate:.3g} req/s ({f.knee.reason}; {used}).")
        else:
            fallback = SOURCES.get(f.capacity_source, "none")
            out.append(f"{f.name}: the data cannot tell: {f.knee.reason}; capacity from: {fallback}.")
    return out


def _next_week_note(report: Report) -> str | None:
    """Said once where any model's forecast could not take the weekly cycle out."""
    short = sorted({f.next_week.days for f in report.models if f.next_week and not f.next_week.weekly})
    if not short:
        return None
    return (
        f"The weekly cycle is not removed: {short[-1]} days of daily peaks, {capacity.WEEKLY_MIN_DAYS} needed "
        "(each weekday seen twice), so a quiet weekend cannot be told from a trend. These forecasts are "
        "unreliable until then: each is at least this week's highest peak, never a trend fitted into a "
        "weekend's trough."
    )


NEXT_WEEK_TABLE: tuple[tuple[str, Callable[[ModelFigures], str]], ...] = (
    ("model", lambda f: f.name),
    ("peak this week req/s", lambda f: number(f.week.peak_request_rate)),
    ("forecast next week req/s", lambda f: number(f.next_week.peak if f.next_week else None)),
    (
        "95 % interval",
        lambda f: f"{number(f.next_week.low)}–{number(f.next_week.high)}" if f.next_week else DASH,
    ),
    ("how", lambda f: f.next_week.basis() if f.next_week else DASH),
)


def _forecasts(report: Report) -> list[ModelFigures]:
    return [f for f in report.models if f.next_week is not None]


def fit_notes(report: Report) -> list[str]:
    """Which growth model each forecast chose, and why (AIC, R²): the method note's, not the findings'."""
    out = [
        f"model {f.name}: {f.forecast.explain()}."
        for f in report.models
        if f.forecast and f.capacity_source in BY_RATE
    ]
    return out + [f"GPU {g.uuid}: {g.forecast.explain()}." for g in report.gpus]


def _said(x: Finding) -> str:
    """A resolved finding is last week's: no severity now, its text said as last week's."""
    return f"last week: {x.text}" if x.status == RESOLVED else x.text


def _finding_md(x: Finding) -> str:
    status = f"**{x.status}** · " if x.status else ""
    severity = "" if x.status == RESOLVED else f"**{x.severity}** · "
    return f"- {status}{severity}{x.label}: {_said(x)}"


def markdown(report: Report) -> str:
    models, gpus = _rows(report)
    out = [
        "# Triton capacity report",
        "",
        f"Period: {_period(report.week)}  ",
        f"Source: {_source_note(report)}",
        "",
        "".join(s.markdown for s in report.lead) + "## Findings",
        "",
    ]
    listed = [*report.findings, *report.resolved]
    out += [_finding_md(x) for x in listed] if listed else ["- Nothing to act on this period."]
    out += ["", "## Models", "", *md_table(MODEL_TABLE, models)]
    out += ["", "## Capacity and what to do", "", *md_table(CAPACITY_TABLE, models)]
    notes = _slo_capacity_notes(report)
    if notes:
        out += ["", "SLO-bound capacity:", "", *[f"- {n}" for n in notes]]
    ahead = _forecasts(report)
    if ahead:
        out += ["", "## Next week's peak", "", *md_table(NEXT_WEEK_TABLE, ahead)]
        note = _next_week_note(report)
        out += ["", note] if note else []
    out += ["", "## GPUs", ""]
    out += md_table(GPU_TABLE, gpus) if gpus else ["No GPU utilisation series in the period."]
    # Each section's markdown ends with its blank line.
    out += ["", "".join(s.markdown for s in report.sections) + "## Method", ""]
    for para in METHOD:
        out += [para, ""]
    fits = fit_notes(report)
    if fits:
        out += ["Growth model chosen per forecast:", "", *[f"- {n}" for n in fits], ""]
    out += ["## Charts", ""]
    out += [f"![{c.title}](charts/{c.key}.png)" for c in report.charts]
    out += ["", f"Generated {report.generated:%Y-%m-%d %H:%M} UTC by tritonwatch report.", ""]
    return "\n".join(out)


def md_table(columns: Sequence[tuple[str, Callable[[R], str]]], rows: Sequence[R]) -> list[str]:
    lines = ["| " + " | ".join(c for c, _ in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(fn(r).replace("|", "\\|") for _, fn in columns) + " |" for r in rows]
    return lines


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { margin-bottom: 0.2em; } .meta { color: #555; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f0f3f7; } td:first-child, th:first-child { text-align: left; }
.action { color: #fff; background: #c0392b; } .watch { color: #222; background: #f1c40f; }
.sev, .status { border-radius: 3px; padding: 0 0.4em; font-size: 0.85em; margin-right: 0.4em; }
.status { border: 1px solid #888; } .resolved { color: #2e7d32; border-color: #2e7d32; }
li { margin: 0.4em 0; } img { max-width: 100%; border: 1px solid #ddd; }
"""


def html_table(columns: Sequence[tuple[str, Callable[[R], str]]], rows: Sequence[R]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fn(r))}</td>" for _, fn in columns) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _finding_html(x: Finding) -> str:
    e = html.escape
    status = f'<span class="status {e(x.status)}">{e(x.status)}</span>' if x.status else ""
    severity = "" if x.status == RESOLVED else f'<span class="sev {e(x.severity)}">{e(x.severity)}</span>'
    return f"<li>{status}{severity}<b>{e(x.label)}</b>: {e(_said(x))}</li>"


def html_page(report: Report, chart_src: Callable[[Chart], str] | None = None) -> str:
    """The page; ``chart_src`` gives each chart's ``src`` (default: an inline PNG data URI; the mail's
    HTML part names its attached images by ``cid:``)."""
    models, gpus = _rows(report)
    src = chart_src or (lambda c: f"data:image/png;base64,{base64.b64encode(c.png).decode()}")
    e = html.escape
    findings = (
        "".join(_finding_html(x) for x in [*report.findings, *report.resolved])
        or "<li>Nothing to act on this period.</li>"
    )
    charts = "".join(
        f'<h3>{e(c.title)}</h3><img alt="{e(c.title)}" src="{e(src(c))}">' for c in report.charts
    )
    notes = _slo_capacity_notes(report)
    slo_notes = (
        "<p>SLO-bound capacity:</p><ul>" + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>"
        if notes
        else ""
    )
    ahead = _forecasts(report)
    note = _next_week_note(report)
    next_week = (
        f"<h2>Next week's peak</h2>{html_table(NEXT_WEEK_TABLE, ahead)}"
        + (f"<p>{e(note)}</p>" if note else "")
        if ahead
        else ""
    )
    fits = fit_notes(report)
    method = "".join(f"<p>{e(p)}</p>" for p in METHOD) + (
        "<p>Growth model chosen per forecast:</p><ul>" + "".join(f"<li>{e(n)}</li>" for n in fits) + "</ul>"
        if fits
        else ""
    )
    gpu_table = html_table(GPU_TABLE, gpus) if gpus else "<p>No GPU utilisation series in the period.</p>"
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"<title>Triton capacity report {report.week.end:%Y-%m-%d}</title><style>{_CSS}</style></head><body>"
        "<h1>Triton capacity report</h1>"
        f'<p class="meta">Period: {e(_period(report.week))}<br>Source: {e(_source_note(report))}</p>'
        + "".join(s.html for s in report.lead)
        + f"<h2>Findings</h2><ul>{findings}</ul>"
        f"<h2>Models</h2>{html_table(MODEL_TABLE, models)}"
        f"<h2>Capacity and what to do</h2>{html_table(CAPACITY_TABLE, models)}{slo_notes}{next_week}"
        f"<h2>GPUs</h2>{gpu_table}" + "".join(s.html for s in report.sections) + f"<h2>Method</h2>{method}"
        f"<h2>Charts</h2>{charts}"
        f'<p class="meta">Generated {report.generated:%Y-%m-%d %H:%M} UTC by tritonwatch report.</p>'
        "</body></html>\n"
    )


def write(report: Report, out: Path) -> list[Path]:
    """Write every file into ``out`` (created if missing); returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    # Every place a file goes is made or checked first: a charts/ that cannot be a folder (or a chart
    # path that is a folder) stops the run before any file is written, not halfway through.
    (out / "charts").mkdir(exist_ok=True)
    for c in report.charts:
        if (out / "charts" / f"{c.key}.png").is_dir():
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(out / "charts" / f"{c.key}.png"))
    models, gpus = _rows(report)
    paths = [out / "report.html", out / "report.md", out / "models.csv", out / "gpus.csv", out / FINDINGS_CSV]
    paths[0].write_text(html_page(report))
    paths[1].write_text(markdown(report))
    write_csv(paths[2], MODEL_COLUMNS, models)
    write_csv(paths[3], GPU_COLUMNS, gpus)
    write_rows(
        paths[4],
        FINDINGS_COLUMNS,
        (
            [x.code, x.severity, x.status, x.kind, x.subject, x.model, x.version, x.text]
            for x in [*report.findings, *report.resolved]
        ),
    )
    for c in report.charts:
        p = out / "charts" / f"{c.key}.png"
        p.write_bytes(c.png)
        paths.append(p)
    for section in (*report.lead, *report.sections):
        p = out / section.csv
        write_rows(p, section.columns, section.rows)
        paths.append(p)
    return paths
