"""The archive's bookkeeping without Prometheus: ISO weeks, the running calibration of the report's
forecasts over an archive of seven weeks whose forecast errors are known, and the delivery flags checked
at the edge (each bad value one line naming its flag, before anything is queried)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tritonwatch.cli import main
from tritonwatch.reports import archive, forecast_check
from tritonwatch.reports.render import FINDINGS_COLUMNS, write_rows

# Per model, each scored week's forecast error (forecast / actual - 1) against an actual peak of 100,
# and whether the actual fell inside the forecast's interval.
ERRORS = {
    "alpha:1": [0.02, -0.04, 0.06, 0.0, -0.02, 0.04],
    "beta:1": [0.20, -0.10, 0.30, 0.10, -0.20, 0.0],
}
INSIDE = {"alpha:1": [True] * 6, "beta:1": [False, True, False, False, False, True]}
WEEKS = [f"2026-W{w}" for w in range(40, 47)]  # W40 has nothing to score; W41-W46 score their week


def _archive(root: Path) -> None:
    for i, week in enumerate(WEEKS):
        folder = root / week
        folder.mkdir(parents=True)
        (folder / archive.MARKER).write_text(json.dumps({"week": week}))
        rows = []
        for model in ERRORS if i else ():
            e, inside = ERRORS[model][i - 1], INSIDE[model][i - 1]
            forecast = 100.0 * (1 + e)
            low, high = (forecast - 15, forecast + 15) if inside else (forecast - 1, forecast + 1)
            assert (low <= 100.0 <= high) == inside
            figures = [f"{forecast:.10g}", f"{low:.10g}", f"{high:.10g}", "100", f"{e:.10g}", ""]
            # W41 as reports wrote it before the version column: model:version in one cell.
            name = [model] if week == "2026-W41" else model.split(":")
            rows.append([*name, week, *figures])
        columns = forecast_check.COLUMNS
        if week == "2026-W41":
            columns = tuple(c for c in columns if c != "version")
        write_rows(folder / archive.FORECAST_CHECK_CSV, columns, rows)
    # Not the project's: no marker. Never read as a week.
    (root / "2026-W45x").mkdir()
    (root / "2026-W39").mkdir()
    (root / "2026-W39" / "forecast_check.csv").write_text("model\nghost:1\n")


def test_iso_weeks() -> None:
    # A period ending at Monday 00:00 UTC is the week it closes; a minute later, the new week.
    assert archive.iso_week(datetime(2026, 12, 7, tzinfo=timezone.utc)) == "2026-W49"
    assert archive.iso_week(datetime(2026, 12, 7, 0, 1, tzinfo=timezone.utc)) == "2026-W50"
    assert archive.iso_week(datetime(2027, 1, 4, tzinfo=timezone.utc)) == "2026-W53"  # 2026 has 53 weeks
    assert archive.next_week("2026-W52") == "2026-W53" and archive.next_week("2026-W53") == "2027-W01"
    assert archive.next_week("2027-W52") == "2028-W01"


def test_calibration_over_seven_archived_weeks(tmp_path: Path) -> None:
    _archive(tmp_path)
    earlier = archive.earlier(tmp_path, "2026-W47")
    assert [a.week for a in earlier] == WEEKS
    checks = forecast_check.history(earlier)
    assert len(checks) == 12 and all(c.actual == 100.0 for c in checks)
    assert {(c.model, c.version) for c in checks} == {("alpha", "1"), ("beta", "1")}
    calib = {c.subject: c for c in forecast_check.calibration(checks)}
    assert list(calib) == ["alpha:1", "beta:1", forecast_check.FLEET]
    alpha, beta, fleet = calib["alpha:1"], calib["beta:1"], calib[forecast_check.FLEET]
    assert (alpha.weeks, alpha.inside) == (6, 6) and alpha.mean_absolute_error == pytest.approx(
        0.18 / 6, abs=1e-12
    )
    assert (beta.weeks, beta.inside) == (6, 2) and beta.mean_absolute_error == pytest.approx(
        0.90 / 6, abs=1e-12
    )
    assert (fleet.weeks, fleet.inside) == (12, 8) and fleet.mean_absolute_error == pytest.approx(
        1.08 / 12, abs=1e-12
    )
    assert [alpha.trusted, beta.trusted, fleet.trusted] == [True, False, False]

    section, scored, shown = forecast_check.section([], earlier[-1], earlier, "2026-W47")
    assert scored == [] and [c.subject for c in shown] == ["alpha:1", "beta:1", "fleet"]
    md = section.markdown
    assert "| alpha:1 | 6 | 3.0 % | 6 of 6 (100 %) | yes |" in md
    assert "| beta:1 | 6 | 15.0 % | 2 of 6 (33 %) | no |" in md
    assert "| fleet | 12 | 9.0 % | 8 of 12 (67 %) | no |" in md
    assert "- Forecasts for alpha:1 have earned trust: 6 of 6 weeks inside the 95 % interval" in md
    assert (
        "- Forecasts for beta:1 have not earned trust: 2 of 6 weeks inside the 95 % interval, mean absolute "
        "error 15.0 % (trusted from 80 % inside and at most 10 % error); read their saturation dates as rough."
    ) in md
    assert "- Fleet forecasts have not earned trust: 8 of 12 weeks inside" in md


def test_a_gap_in_the_archive_leaves_the_week_unscored(tmp_path: Path) -> None:
    _archive(tmp_path)
    earlier = archive.earlier(tmp_path, "2026-W49")
    checks, note = forecast_check.score([], earlier[-1], "2026-W49")
    assert checks == []
    assert (
        note
        == "The newest earlier report is 2026-W46: its forecast was for 2026-W47, not 2026-W49, so this week is not scored."
    )


def test_too_few_weeks_say_the_forecasts_are_untested(tmp_path: Path) -> None:
    _archive(tmp_path)
    earlier = archive.earlier(tmp_path, "2026-W42")  # W40 and W41: with this one, 3 weeks
    section, _, shown = forecast_check.section([], earlier[-1], earlier, "2026-W42")
    assert shown == []
    assert (
        "Calibration starts once the archive holds 4 weeks (it holds 3): until then the forecasts are untested"
        in (section.markdown)
    )


BASE = ["report", "--prometheus", "http://127.0.0.1:9", "--archive", "ARCHIVE"]


@pytest.mark.parametrize(
    ("flags", "error"),
    [
        (["--mail-to", "planner"], "--mail-to: 'planner' is not a mail address (e.g. planner@example.com)"),
        (
            ["--mail-to", "a@example.com\nBcc: x@evil.example"],
            "--mail-to: 'a@example.com\\nBcc: x@evil.example' is not",
        ),
        (
            ["--mail-to", "a@example.com", "--mail-from", "r@example.com"],
            "--mail-to: needs --mail-from and --smtp",
        ),
        (["--mail-from", "r@example.com"], "--mail-from: needs --mail-to"),
        (
            [
                "--mail-to",
                "a@example.com",
                "--mail-from",
                "r@example.com",
                "--smtp",
                "http://mail.example.com",
            ],
            "--smtp: 'http://mail.example.com' is not smtp://host[:port], smtp+starttls://host[:port] or smtps://",
        ),
        (
            [
                "--mail-to",
                "a@example.com",
                "--mail-from",
                "r@example.com",
                "--smtp",
                "smtps://bot:hunter2@mail.example.com",
            ],
            "--smtp: user and password do not belong in the URL; use TRITONWATCH_SMTP_USER/TRITONWATCH_SMTP_PASSWORD",
        ),
        (
            ["--webhook", "ftp://chat.example.com/hook"],
            "--webhook: 'ftp://chat.example.com/hook' is not an http(s) URL",
        ),
        (
            ["--report-url", "reports.example.com"],
            "--report-url: 'reports.example.com' is not an http(s) URL",
        ),
    ],
)
def test_bad_delivery_flags_are_one_line_naming_the_flag(
    flags: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [str(tmp_path) if a == "ARCHIVE" else a for a in BASE]
    assert main([*argv, *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"tritonwatch report: error: {error}"), err
    assert "hunter2" not in err[0]
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing queried


def test_a_password_is_never_sent_in_the_clear(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRITONWATCH_SMTP_USER", "bot")
    monkeypatch.setenv("TRITONWATCH_SMTP_PASSWORD", "hunter2")
    argv = [str(tmp_path) if a == "ARCHIVE" else a for a in BASE]
    mail = ["--mail-to", "a@example.com", "--mail-from", "r@example.com", "--smtp", "smtp://mail.example.com"]
    assert main([*argv, *mail]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "tritonwatch report: error: --smtp: smtp://mail.example.com: refusing to send the password "
        "unencrypted; use smtp+starttls:// or smtps://"
    )
    monkeypatch.delenv("TRITONWATCH_SMTP_PASSWORD")
    assert main([*argv, *mail]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "tritonwatch report: error: TRITONWATCH_SMTP_USER and TRITONWATCH_SMTP_PASSWORD: set both or neither"
    )
    creds = tmp_path.parent / "creds"
    creds.write_text("bot\n")
    assert main([*argv, *mail[:-1], "smtps://mail.example.com", "--smtp-credentials", str(creds)]) == 2
    assert capsys.readouterr().err.strip().endswith("needs the user on line 1 and the password on line 2")


def test_findings_are_new_ongoing_or_resolved(tmp_path: Path) -> None:
    from tritonwatch.reports import changes
    from tritonwatch.reports.findings import Finding

    folder = tmp_path / "2026-W48"
    folder.mkdir()
    (folder / archive.MARKER).write_text("{}")
    last_week = [
        ["saturation", "watch", "new", "model", "a:1", "a", "1", "reaches capacity in 6.0 weeks"],
        ["queueing", "action", "new", "model", "b:1", "b", "1", "Requests spend 40.0 % of their time queued"],
        ["saturation", "action", "ongoing", "gpu", "GPU-0", "", "", "Add GPUs now"],
        # Resolved last week: not a finding of last week's any more, so not resolved again.
        ["cache_ineffective", "watch", "resolved", "model", "d:1", "d", "1", "The response cache hits 1 %"],
    ]
    write_rows(folder / "findings.csv", FINDINGS_COLUMNS, last_week)
    previous = archive.read(tmp_path, "2026-W48")
    assert sorted(previous.findings) == [
        ("queueing", "model", "b:1"),
        ("saturation", "gpu", "GPU-0"),
        ("saturation", "model", "a:1"),
    ]
    now = [
        Finding("saturation", "action", "model", "a:1", "reaches capacity in 3.0 weeks", "a", "1"),
        Finding("cache_ineffective", "watch", "model", "c:1", "The response cache hits 5.0 %", "c", "1"),
        Finding("queueing", "action", "model", "c:1", "Requests spend 35.0 % of their time queued", "c", "1"),
        Finding("saturation", "action", "gpu", "GPU-0", "Add GPUs now"),
    ]
    marked, resolved = changes.statuses(now, previous)
    assert [(s.status, s.subject, s.text) for s in marked + resolved] == [
        ("ongoing", "a:1", "reaches capacity in 3.0 weeks"),
        ("new", "c:1", "The response cache hits 5.0 %"),
        ("new", "c:1", "Requests spend 35.0 % of their time queued"),
        ("ongoing", "GPU-0", "Add GPUs now"),
        ("resolved", "b:1", "Requests spend 40.0 % of their time queued"),
    ]
    assert [(r.model, r.version, r.kind, r.severity) for r in resolved] == [("b", "1", "model", "action")]
    marked, resolved = changes.statuses(now, None)
    assert [s.status for s in marked] == ["new"] * 4 and resolved == []


def test_an_archive_from_before_the_kind_column_still_compares(tmp_path: Path) -> None:
    from tritonwatch.reports import changes
    from tritonwatch.reports.findings import Finding

    folder = tmp_path / "2026-W48"
    folder.mkdir()
    (folder / archive.MARKER).write_text("{}")
    older = [["queueing", "action", "model b:1", "queued"], ["saturation", "watch", "GPU GPU-0", "soon"]]
    write_rows(folder / "findings.csv", ("code", "severity", "subject", "text"), older)
    previous = archive.read(tmp_path, "2026-W48")
    assert sorted(previous.findings) == [("queueing", "model", "b:1"), ("saturation", "gpu", "GPU-0")]
    marked, resolved = changes.statuses([Finding("queueing", "action", "model", "b:1", "queued")], previous)
    assert [x.status for x in marked] == ["ongoing"] and [x.subject for x in resolved] == ["GPU-0"]


def test_a_forecast_check_whose_errors_share_one_sign_says_biased() -> None:
    from tritonwatch.reports.forecast_check import Check, bias

    # The first weeks' case: five forecasts 20-28 % low, every actual inside a +-40 % interval.
    low = [
        Check(m, "1", "2026-W49", f, f * 0.6, f * 1.4, 50.0)
        for m, f in zip("abcde", (40, 39, 38, 37, 36), strict=True)
    ]
    assert all(c.within for c in low)
    assert bias(low) == (
        "Biased, all low: every one of the 5 forecasts scored erred the same way (-28.0 % to -20.0 %), "
        "inside their intervals or not; read next week's forecasts with that in mind."
    )
    high = [
        Check("a", "1", "2026-W49", 55.0, 40.0, 70.0, 50.0),
        Check("b", "1", "2026-W49", 51.0, 40.0, 70.0, 50.0),
    ]
    assert bias(high) is not None and bias(high).startswith("Biased, all high: every one of the 2 forecasts")  # type: ignore[union-attr]
    assert bias([*high, low[0]]) is None  # errors of both signs: not biased
    assert bias(high[:1]) is None  # one forecast shows no pattern
    exact = [Check(m, "1", "2026-W49", 50.05, 40.0, 60.0, 50.0) for m in "ab"]
    assert bias(exact) is None  # +0.1 % twice: on target, not a direction

    # The section scores last week's forecasts and says it, in bold, below the table.
    from tritonwatch.reports.figures import ModelFigures
    from tritonwatch.reports.week import ModelWeek

    models = [ModelFigures(ModelWeek(m, "1", peak_request_rate=50.0), None, None, "") for m in ("a", "b")]
    forecasts = {
        (m, "1"): {"next_week_peak_request_rate": f, "next_week_peak_request_rate_low": "20",
                   "next_week_peak_request_rate_high": "70"}
        for m, f in (("a", "40"), ("b", "45"))
    }  # fmt: skip
    last_week = archive.Archived("2026-W48", Path("."), forecasts, {}, [])
    section, checks, _ = forecast_check.section(models, last_week, [last_week], "2026-W49")
    assert [(c.name, round(c.error_ratio, 3), c.within) for c in checks] == [
        ("a:1", -0.2, True),
        ("b:1", -0.1, True),
    ]
    assert (
        "**Biased, all low: every one of the 2 forecasts scored erred the same way (-20.0 % to -10.0 %)"
        in (section.markdown)
    )
    assert section.columns[:2] == ("model", "version") and [r[:2] for r in section.rows] == [
        ["a", "1"],
        ["b", "1"],
    ]
