"""The report holds its own forecasts to account: ``forecast_check.csv`` and the "Forecast check" section.

Each report in an archive forecasts next week's peak request rate per model (``models.csv``:
``next_week_peak_request_rate`` and its 95 % prediction interval, ``_low``/``_high``). The next report
scores that forecast against the peak it then measures::

    error_ratio      = forecast / actual - 1        (0.1: forecast 10 % too high; -0.1: too low)
    within_interval  = forecast_low <= actual <= forecast_high

Errors that all share one sign (two forecasts or more, each beyond ``BIAS_TOLERANCE``) are called
biased, with the sign: wide intervals can hold every actual while the method misses the same way each
time.
A forecast is scored only by the report of the week it was made for (the archive's newest earlier
report is last week's); a gap in the archive leaves that week unscored and says so. With
``CALIBRATION_WEEKS`` archived weeks or more (this one included), every check the archive holds is
pooled per model and for the fleet: the mean absolute error (mean of ``|error_ratio|``) and the share
of weeks inside the interval. Forecasts have earned trust when at least ``MIN_SCORED`` weeks were
scored, at least ``TRUST_INSIDE`` of them fell inside the interval and the mean absolute error is at
most ``TRUST_MAE``; the report says plainly which have not.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tritonwatch.reports import archive
from tritonwatch.reports.figures import ModelFigures
from tritonwatch.reports.formats import csv_cell, number, percent
from tritonwatch.reports.render import Section, html_table, md_table
from tritonwatch.reports.week import model_name

COLUMNS = (
    "model",
    "version",
    "forecast_week",
    "forecast_peak_request_rate",
    "forecast_low",
    "forecast_high",
    "actual_peak_request_rate",
    "error_ratio",
    "within_interval",
)
CALIBRATION_WEEKS = 4
MIN_SCORED = 3
TRUST_INSIDE = 0.8
TRUST_MAE = 0.10
FLEET = "fleet"
BIAS_TOLERANCE = 0.02  # an error within 2 % is on target: it shows no direction


@dataclass(frozen=True)
class Check:
    model: str
    version: str
    forecast_week: str  # the week the forecast was for (the scoring report's week)
    forecast: float
    low: float
    high: float
    actual: float

    @property
    def name(self) -> str:
        return model_name(self.model, self.version)

    @property
    def error_ratio(self) -> float:
        return self.forecast / self.actual - 1.0

    @property
    def within(self) -> bool:
        return self.low <= self.actual <= self.high

    def cells(self) -> list[str]:
        values = (self.forecast, self.low, self.high, self.actual, self.error_ratio)
        cells = [self.model, self.version, self.forecast_week, *(csv_cell(v) for v in values)]
        return [*cells, str(self.within).lower()]


def from_row(row: archive.Row) -> Check | None:
    """A check an archived ``forecast_check.csv`` holds (None: a row it cannot read). A report from
    before the ``version`` column wrote ``model:version`` in ``model``."""
    numbers = [archive.number(row.get(c)) for c in COLUMNS[3:7]]
    forecast, low, high, actual = numbers
    if forecast is None or low is None or high is None or actual is None or actual <= 0:
        return None
    model, version = row.get("model", ""), row.get("version")
    if version is None:
        model, _, version = model.rpartition(":") if ":" in model else ("", "", model)
        model, version = (model, version) if model else (version, "")
    return Check(model, version, row.get("forecast_week", ""), forecast, low, high, actual)


def score(
    models: Sequence[ModelFigures], previous: archive.Archived | None, week: str
) -> tuple[list[Check], str]:
    """This week's checks of last week's forecasts, and a sentence saying what was scored."""
    if previous is None:
        return (
            [],
            "No earlier report in the archive: nothing to score yet; next week's report scores this one's.",
        )
    if archive.next_week(previous.week) != week:
        return [], (
            f"The newest earlier report is {previous.week}: its forecast was for "
            f"{archive.next_week(previous.week)}, not {week}, so this week is not scored."
        )
    out = []
    for f in models:
        row = previous.models.get((f.week.model, f.week.version))
        if row is None or f.week.peak_request_rate is None or f.week.peak_request_rate <= 0:
            continue
        cells = [archive.number(row.get(f"next_week_peak_request_rate{s}")) for s in ("", "_low", "_high")]
        forecast, low, high = cells
        if forecast is None or low is None or high is None:
            continue
        out.append(Check(f.week.model, f.week.version, week, forecast, low, high, f.week.peak_request_rate))
    unscored = len(previous.models) - len(out)
    note = f"{len(out)} forecasts made by the {previous.week} report scored against this week's peaks"
    return out, note + (f" ({unscored} without a forecast or a peak this week)." if unscored else ".")


@dataclass(frozen=True)
class Calibration:
    subject: str  # model:version, as the report names it, or FLEET
    weeks: int  # weeks scored
    mean_absolute_error: float
    inside: int  # weeks the actual peak fell inside the interval

    @property
    def inside_share(self) -> float:
        return self.inside / self.weeks

    @property
    def trusted(self) -> bool:
        return (
            self.weeks >= MIN_SCORED
            and self.inside_share >= TRUST_INSIDE
            and self.mean_absolute_error <= TRUST_MAE
        )

    def verdict(self) -> str:
        who = "Fleet forecasts" if self.subject == FLEET else f"Forecasts for {self.subject}"
        figures = (
            f"{self.inside} of {self.weeks} weeks inside the 95 % interval, mean absolute error "
            f"{percent(self.mean_absolute_error)}"
        )
        if self.trusted:
            return f"{who} have earned trust: {figures}."
        if self.weeks < MIN_SCORED:
            return f"{who} have not earned trust yet: only {figures} (at least {MIN_SCORED} weeks needed)."
        return (
            f"{who} have not earned trust: {figures} (trusted from {percent(TRUST_INSIDE, 0)} inside and "
            f"at most {percent(TRUST_MAE, 0)} error); read their saturation dates as rough."
        )


def _calibrate(subject: str, checks: Sequence[Check]) -> Calibration:
    mae = sum(abs(c.error_ratio) for c in checks) / len(checks)
    return Calibration(subject, len(checks), mae, sum(c.within for c in checks))


def calibration(checks: Iterable[Check]) -> list[Calibration]:
    """Per model (sorted), then the fleet: every check pooled."""
    pooled = list(checks)
    by_model: dict[str, list[Check]] = {}
    for c in pooled:
        by_model.setdefault(c.name, []).append(c)
    out = [_calibrate(m, cs) for m, cs in sorted(by_model.items())]
    return out + ([_calibrate(FLEET, pooled)] if pooled else [])


def history(earlier: Sequence[archive.Archived]) -> list[Check]:
    """Every check the archive's earlier reports made."""
    return [c for a in earlier for row in a.checks if (c := from_row(row)) is not None]


def bias(checks: Sequence[Check]) -> str | None:
    """A sentence when every scored forecast erred the same way (two or more, each by more than
    ``BIAS_TOLERANCE``): the errors are then not noise but a bias of the method, whatever the intervals
    say."""
    if len(checks) < 2:
        return None
    errors = [c.error_ratio for c in checks]
    if all(e < -BIAS_TOLERANCE for e in errors):
        sign = "all low"
    elif all(e > BIAS_TOLERANCE for e in errors):
        sign = "all high"
    else:
        return None
    lo, hi = min(errors), max(errors)
    return (
        f"Biased, {sign}: every one of the {len(checks)} forecasts scored erred the same way "
        f"({percent(lo, signed=True)} to {percent(hi, signed=True)}), inside their intervals or not; "
        "read next week's forecasts with that in mind."
    )


CHECK_TABLE = (
    ("model", lambda c: c.name),
    ("forecast req/s", lambda c: number(c.forecast)),
    ("95 % interval", lambda c: f"{number(c.low)}–{number(c.high)}"),
    ("actual req/s", lambda c: number(c.actual)),
    ("error", lambda c: percent(c.error_ratio, signed=True)),
    ("inside", lambda c: "yes" if c.within else "no"),
)
CALIBRATION_TABLE = (
    ("model", lambda c: c.subject),
    ("weeks scored", lambda c: str(c.weeks)),
    ("mean absolute error", lambda c: percent(c.mean_absolute_error)),
    ("inside the interval", lambda c: f"{c.inside} of {c.weeks} ({percent(c.inside_share, 0)})"),
    ("trusted", lambda c: "yes" if c.trusted else "no"),
)


def section(
    models: Sequence[ModelFigures],
    previous: archive.Archived | None,
    earlier: Sequence[archive.Archived],
    week: str,
) -> tuple[Section, list[Check], list[Calibration]]:
    """The "Forecast check" section (``forecast_check.csv`` beside it), the checks and the calibration."""
    checks, note = score(models, previous, week)
    archived = len(earlier) + 1
    calib = calibration([*history(earlier), *checks]) if archived >= CALIBRATION_WEEKS else []
    md = ["## Forecast check", "", note, ""]
    page = f"<h2>Forecast check</h2><p>{html.escape(note)}</p>"
    if checks:
        md += [*md_table(CHECK_TABLE, checks), ""]
        page += html_table(CHECK_TABLE, checks)
    biased = bias(checks)
    if biased:
        md += [f"**{biased}**", ""]
        page += f"<p><b>{html.escape(biased)}</b></p>"
    if archived < CALIBRATION_WEEKS:
        text = (
            f"Calibration starts once the archive holds {CALIBRATION_WEEKS} weeks (it holds {archived}): "
            "until then the forecasts are untested and have not earned trust."
        )
        md += [text, ""]
        page += f"<p>{html.escape(text)}</p>"
    elif calib:
        lines = [c.verdict() for c in calib]
        md += ["### Calibration", "", *md_table(CALIBRATION_TABLE, calib), "", *[f"- {x}" for x in lines], ""]
        page += "<h3>Calibration</h3>" + html_table(CALIBRATION_TABLE, calib)
        page += "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"
    else:
        text = (
            f"The archive holds {archived} weeks but no forecast has been scored yet: none has earned trust."
        )
        md += [text, ""]
        page += f"<p>{html.escape(text)}</p>"
    rows = [c.cells() for c in checks]
    return Section("\n".join(md) + "\n", page, archive.FORECAST_CHECK_CSV, COLUMNS, rows), checks, calib
