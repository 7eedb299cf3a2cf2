"""Write the report: ``report.html`` (self-contained, charts inline as PNG data URIs, no script),
``report.md`` (the same findings and tables, charts beside it in ``charts/``), ``models.csv`` and
``gpus.csv`` (one row per model version / GPU; not applicable is an empty cell).
"""

from __future__ import annotations

import base64
import csv
import errno
import html
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from tritonwatch import catalog
from tritonwatch.reports import capacity, knee
from tritonwatch.reports.charts import Chart
from tritonwatch.reports.figures import (
    GPU_COLUMNS,
    MODEL_COLUMNS,
    SOURCES,
    Cell,
    GpuFigures,
    ModelFigures,
    gpu_row,
    model_row,
)
from tritonwatch.reports.findings import Finding
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
FINDINGS_COLUMNS = ("code", "severity", "subject", "text")


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


# --- cell formatting ----------------------------------------------------------------------------
def finite_cell(v: object) -> str:
    """A CSV cell as the models.csv cells, empty for a missing or non-finite figure (the LLM and
    configuration tables)."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return f"{v:.10g}" if isinstance(v, float) else str(v)


def _csv_cell(v: Cell) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.10g}"
    return str(v)


def _num(v: Cell, fmt: str = "{:.3g}") -> str:
    return "—" if v is None or v == "" else fmt.format(v) if isinstance(v, float) else str(v)


def _pct(v: Cell) -> str:
    return "—" if not isinstance(v, float) else f"{v * 100:.2f}%"


def _signed_pct(v: Cell) -> str:
    return "—" if not isinstance(v, float) else f"{v * 100:+.2f}%"


def _points(v: Cell) -> str:
    return "—" if not isinstance(v, float) else f"{v * 100:+.2f} points"


def _ms(v: Cell) -> str:
    return "—" if not isinstance(v, float) else f"{v * 1000:.1f}"


def _fmt_weeks(v: Cell) -> str:
    return f"{v:.1f}" if isinstance(v, float) else "—"


def _both(row: dict[str, Cell]) -> str:
    return (
        f"{_fmt_weeks(row['weeks_to_saturation_linear'])} / {_fmt_weeks(row['weeks_to_saturation_compound'])}"
    )


def _forecast(row: dict[str, Cell]) -> str:
    return capacity.MODEL_NAMES.get(str(row["forecast_model"]), "—")


def _weeks(row: dict[str, Cell]) -> str:
    w, lo, hi = (
        row["weeks_to_saturation"],
        row.get("weeks_to_saturation_low"),
        row.get("weeks_to_saturation_high"),
    )
    if not isinstance(w, float):
        return "— (no upward trend)" if row.get("headroom_ratio") is not None else "—"
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
        return lambda r: _pct(r[view.field])
    return lambda r: _num(r[view.field])


MODEL_TABLE: tuple[Column, ...] = (
    ("model", lambda r: model_name(str(r["model"]), str(r["version"] or ""))),
    ("requests", lambda r: _num(r["requests_total"], "{:,.0f}")),
    ("peak req/s", lambda r: _num(r["peak_request_rate"])),
    (_column(catalog.ERROR_RATIO), lambda r: _pct(r["error_ratio"])),
    ("availability vs objective", lambda r: _signed_pct(r["availability_vs_objective"])),
    (_column(catalog.BATCH_SIZE_MEAN), lambda r: _num(r["mean_batch_size"])),
    *((_column(e.name), _figure(e.name)) for e in catalog.REPORTED),
    ("p99 ms", lambda r: _ms(r["p99_latency_seconds"])),
)
_GPU_COUNTS = ("gpus_now", "gpus_needed_4w", "gpus_needed_12w")
# Capacity and what to do, per model: a table of its own so either can grow columns.
CAPACITY_TABLE: tuple[Column, ...] = (
    MODEL_TABLE[0],
    ("capacity from", lambda r: SOURCES.get(str(r["capacity_source"]), "—")),
    ("capacity req/s", lambda r: _num(r["capacity_request_rate"])),
    ("headroom", lambda r: _pct(r["headroom_ratio"])),
    ("growth model (by fit)", _forecast),
    ("weeks (95 % range)", _weeks),
    ("weeks: linear / compounding", _both),
    ("saturates (earlier)", lambda r: str(r["saturation_date"] or "—")),
    ("GPUs now / 4 wk / 12 wk", lambda r: " / ".join(_num(r[c], "{:.0f}") for c in _GPU_COUNTS)),
    ("GPU-s / request", lambda r: _num(r["gpu_seconds_per_request"])),
    ("J / request", lambda r: _num(r["joules_per_request"])),
)
GPU_TABLE: tuple[Column, ...] = (
    ("GPU", lambda r: str(r["gpu_uuid"])),
    ("models on it", lambda r: str(r["models"] or "—")),
    ("peak utilisation", lambda r: _pct(r["peak_utilization"])),
    ("mean utilisation", lambda r: _pct(r["mean_utilization"])),
    ("headroom", lambda r: _pct(r["headroom_ratio"])),
    ("peak trend per day", lambda r: _points(r["trend_slope_per_day"])),
    ("growth model (by fit)", _forecast),
    ("weeks (95 % range)", _weeks),
    ("weeks: linear / compounding", _both),
    ("saturates (earlier)", lambda r: str(r["saturation_date"] or "—")),
)


def _rows(report: Report) -> tuple[list[dict[str, Cell]], list[dict[str, Cell]]]:
    end = report.week.end
    return [model_row(f, end) for f in report.models], [gpu_row(g, end) for g in report.gpus]


# --- files --------------------------------------------------------------------------------------
def write_csv(path: Path, columns: Sequence[str], rows: Sequence[dict[str, Cell]]) -> None:
    write_rows(path, columns, ([_csv_cell(r[c]) for c in columns] for r in rows))


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
    if report.findings:
        out += [f"- **{x.severity}** · {x.subject}: {x.text}" for x in report.findings]
    else:
        out.append("- Nothing to act on this period.")
    out += ["", "## Models", "", *md_table(MODEL_TABLE, models)]
    out += ["", "## Capacity and what to do", "", *md_table(CAPACITY_TABLE, models)]
    notes = _slo_capacity_notes(report)
    if notes:
        out += ["", "SLO-bound capacity:", "", *[f"- {n}" for n in notes]]
    out += ["", "## GPUs", ""]
    out += md_table(GPU_TABLE, gpus) if gpus else ["No GPU utilisation series in the period."]
    # Each section's markdown ends with its blank line.
    out += ["", "".join(s.markdown for s in report.sections) + "## Method", ""]
    for para in METHOD:
        out += [para, ""]
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
.sev { border-radius: 3px; padding: 0 0.4em; font-size: 0.85em; margin-right: 0.4em; }
li { margin: 0.4em 0; } img { max-width: 100%; border: 1px solid #ddd; }
"""


def html_table(columns: Sequence[tuple[str, Callable[[R], str]]], rows: Sequence[R]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(fn(r))}</td>" for _, fn in columns) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_page(report: Report, chart_src: Callable[[Chart], str] | None = None) -> str:
    """The page; ``chart_src`` gives each chart's ``src`` (default: an inline PNG data URI; the mail's
    HTML part names its attached images by ``cid:``)."""
    models, gpus = _rows(report)
    src = chart_src or (lambda c: f"data:image/png;base64,{base64.b64encode(c.png).decode()}")
    e = html.escape
    findings = (
        "".join(
            f'<li><span class="sev {e(x.severity)}">{e(x.severity)}</span><b>{e(x.subject)}</b>: {e(x.text)}</li>'
            for x in report.findings
        )
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
    method = "".join(f"<p>{e(p)}</p>" for p in METHOD)
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
        f"<h2>Capacity and what to do</h2>{html_table(CAPACITY_TABLE, models)}{slo_notes}"
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
    write_rows(paths[4], FINDINGS_COLUMNS, ([x.code, x.severity, x.subject, x.text] for x in report.findings))
    for c in report.charts:
        p = out / "charts" / f"{c.key}.png"
        p.write_bytes(c.png)
        paths.append(p)
    for section in (*report.lead, *report.sections):
        p = out / section.csv
        write_rows(p, section.columns, section.rows)
        paths.append(p)
    return paths
