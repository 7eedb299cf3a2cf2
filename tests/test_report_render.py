"""The report as a planner reads it, from figures made here (no Prometheus): two consecutive weeks in one
archive, each week's models given as exact 5-minute series.

``steady`` is flat at 50 req/s on weekdays and 80 % of that at weekends, with a declared capacity of
100 req/s; ``busy`` queues 40 % of its request time in the first week only, and its cache rarely hits
in the second. Both periods end on a Monday 00:00 UTC, so each opens on a quiet weekend's end: the
first report has 7 days of history (the weekly cycle cannot be removed), the second 14.
"""

from __future__ import annotations

import csv
import html
import json
import math
import re
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from support import static_endpoint

from tritonwatch.reports import archive, digest, figures, render
from tritonwatch.reports.deliver import Delivery
from tritonwatch.reports.report import assemble
from tritonwatch.reports.week import ModelWeek, Week
from tritonwatch.slo import parse

START = datetime(2026, 11, 30, tzinfo=timezone.utc)  # a Monday
FIRST, SECOND = START + timedelta(days=7), START + timedelta(days=14)
GENERATED = datetime(2026, 12, 14, 6, tzinfo=timezone.utc)
SLOS = parse(
    {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "render-test"},
        "spec": {
            "window": "28d",
            "slos": [
                {"model": "steady", "availability": {"objective": 99}, "capacity": {"max_request_rate": 100}}
            ],
        },
    }
)


def _rate(end: datetime, days: int) -> pd.Series:
    idx = pd.date_range(end - timedelta(days=days) + timedelta(minutes=5), end, freq="5min")
    hour = np.array([x.hour + x.minute / 60 for x in idx])
    daily = 0.6 + 0.4 * np.cos(2 * math.pi * (hour - 14) / 24)
    quiet = np.array([0.8 if x.weekday() >= 5 else 1.0 for x in idx])
    rng = np.random.default_rng(7)
    return pd.Series(50.0 * daily * quiet * (1 + 0.01 * rng.standard_normal(idx.size)), index=idx)


def _week(end: datetime) -> Week:
    days = (end - START).days
    rate = _rate(end, days)
    period = rate[rate.index > pd.Timestamp(end - timedelta(days=7))]
    first = end == FIRST
    models = {
        ("steady", "1"): ModelWeek(
            "steady", "1", requests_total=2e7, peak_request_rate=float(period.max()), rate=rate
        ),
        ("busy", "1"): ModelWeek(
            "busy",
            "1",
            requests_total=1e6,
            peak_request_rate=float(period.max()) / 10,
            queue_share=0.4 if first else 0.05,
            cache_hit_ratio=None if first else 0.05,
            rate=rate / 10,
        ),
    }
    return Week(end - timedelta(days=7), end, 7, models, {}, False, days, f"{days} days")


def _report(end: datetime, root: Path) -> render.Report:
    week = _week(end)
    models, gpus = figures.build(week, SLOS)
    report, _ = assemble(week, models, gpus, "http://prometheus:9090", [], str(root), archive.iso_week(end))
    archive.write(report, root, archive.iso_week(end))
    return report


@pytest.fixture(scope="module")
def archived(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, render.Report, render.Report]:
    root = tmp_path_factory.mktemp("archive")
    return root, _report(FIRST, root), _report(SECOND, root)


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_the_first_week_says_its_forecast_is_unreliable_and_never_forecasts_the_trough(
    archived: tuple[Path, render.Report, render.Report],
) -> None:
    root = archived[0]
    rows = {r["model"]: r for r in _csv(root / "2026-W49" / "models.csv")}
    steady = rows["steady"]
    peak = float(steady["peak_request_rate"])
    assert peak == pytest.approx(50.0, rel=0.03)
    # Next week peaks at 50 again: the forecast is this week's peak, within 10 %, and marked unreliable.
    assert float(steady["next_week_peak_request_rate"]) == peak
    assert steady["next_week_reliable"] == "false"
    md = (root / "2026-W49" / "report.md").read_text()
    assert "## Next week's peak" in md
    assert "The weekly cycle is not removed: 7 days of daily peaks, 14 needed (each weekday seen twice)" in md
    assert f"| steady:1 | {peak:.3g} | {peak:.3g} |" in md
    # Two weeks: the cycle is removed, the forecast is reliable, and the report says nothing of it.
    second = {r["model"]: r for r in _csv(root / "2026-W50" / "models.csv")}["steady"]
    assert second["next_week_reliable"] == "true"
    assert float(second["next_week_peak_request_rate"]) == pytest.approx(50.0, rel=0.05)
    md = (root / "2026-W50" / "report.md").read_text()
    assert "weekly cycle is not removed" not in md
    # Both forecasts scored within +-2 % of what came: on target, not called biased.
    assert "| steady:1 | 51 | 39.5–62.5 | 50.9 | +0.1 % | yes |" in md and "Biased" not in md


def test_every_per_model_csv_spells_model_and_version_alike(
    archived: tuple[Path, render.Report, render.Report],
) -> None:
    folder = archived[0] / "2026-W50"
    for name in ("models.csv", "changes.csv", "forecast_check.csv", "findings.csv"):
        rows = _csv(folder / name)
        assert rows, name
        assert {(r["model"], r["version"]) for r in rows if r.get("kind", "model") == "model"} <= {
            ("steady", "1"),
            ("busy", "1"),
        }, name
    # The contract's columns stay, in their order.
    header = next(csv.reader((folder / "models.csv").open()))
    contract = ["model", "peak_request_rate", "previous_peak_request_rate", "next_week_peak_request_rate"]
    assert [c for c in header if c in contract] == contract
    assert {"next_week_peak_request_rate_low", "next_week_peak_request_rate_high"} <= set(header)


def test_findings_carry_a_status_against_the_previous_archived_week(
    archived: tuple[Path, render.Report, render.Report],
) -> None:
    root = archived[0]
    first = _csv(root / "2026-W49" / "findings.csv")
    assert [(r["code"], r["status"], r["kind"], r["subject"], r["model"], r["version"]) for r in first] == [
        ("queueing", "new", "model", "busy:1", "busy", "1")
    ]
    second = _csv(root / "2026-W50" / "findings.csv")
    assert list(second[0]) == list(render.FINDINGS_COLUMNS)
    assert [(r["code"], r["status"], r["subject"]) for r in second] == [
        ("cache_ineffective", "new", "busy:1"),
        ("queueing", "resolved", "busy:1"),
    ]
    # A third week reads the second's: the resolved finding is not resolved again, the cache one is ongoing.
    previous = archive.read(root, "2026-W50")
    assert list(previous.findings) == [("cache_ineffective", "model", "busy:1")]


def test_one_findings_list_leading_with_what_to_do(
    archived: tuple[Path, render.Report, render.Report],
) -> None:
    root, _, report = archived
    page = (root / "2026-W50" / "report.html").read_text()
    assert page.count("<h2>Findings</h2>") == 1 and page.count("<ul>") == page.count("</ul>")
    items = re.findall(r"<li>(.*?)</li>", page.split("<h2>Findings</h2>", 1)[1].split("</ul>", 1)[0])
    text = [re.sub(r"<[^>]+>", "", html.unescape(i)) for i in items]
    assert text == [
        "newwatchmodel busy:1: Consider turning response_cache off for this model: it hits 5.0 % of "
        "lookups, for a lookup per request and its memory.",
        "resolvedmodel busy:1: last week: Add model instances (instance_group count) or GPUs, or raise "
        "max_batch_size if the model allows it: requests spend 40.0 % of their time queued.",
    ]
    for item in text:  # each said once on the page
        assert html.unescape(re.sub(r"<[^>]+>", "", page)).count(item.split(": ", 1)[1]) == 1
    md = (root / "2026-W50" / "report.md").read_text()
    assert md.count("Consider turning response_cache off") == 1


def test_headers_differ_and_the_fit_statistics_live_in_the_method_note(
    archived: tuple[Path, render.Report, render.Report],
) -> None:
    root = archived[0]
    page = (root / "2026-W50" / "report.html").read_text()
    for table in re.findall(r"<table>.*?</table>", page):
        headers = re.findall(r"<th>(.*?)</th>", table)
        assert len(headers) == len(set(headers)), headers
    method = page.split("<h2>Method</h2>", 1)[1].split("<h2>Charts</h2>", 1)[0]
    assert "model steady:1: " in method and "AIC" in method and "R²" in method
    before = page.split("<h2>Method</h2>", 1)[0]
    assert "AIC" not in before and "R²" not in before


def test_one_percent_format(archived: tuple[Path, render.Report, render.Report]) -> None:
    root = archived[0]
    for name in ("report.html", "report.md"):
        text = re.sub(r"<style>.*?</style>", "", (root / "2026-W50" / name).read_text(), flags=re.S)
        text = re.sub(r"data:image/png;base64,[^\"]+", "", text)
        assert re.findall(r"\d%", text) == [], name  # always "12.3 %"
        assert re.findall(r"\d+\.\d+ %", text)


class _Hook(BaseHTTPRequestHandler):
    posts: list[bytes] = []

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        _Hook.posts.append(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


def test_the_webhook_links_the_report_url(archived: tuple[Path, render.Report, render.Report]) -> None:
    root, _, report = archived
    httpd = static_endpoint.serve(_Hook)
    try:
        hook = f"http://127.0.0.1:{httpd.server_address[1]}/hook"
        served = Delivery(webhook=hook, report_url="https://reports.example.com/capacity")
        assert digest.send(served, report, "2026-W50", root / "2026-W50", archived=True) == [
            f"posted to {hook}"
        ]
        assert digest.send(Delivery(webhook=hook), report, "2026-W50", root / "2026-W50", archived=True)
    finally:
        static_endpoint.shutdown(httpd)
    linked, local = (json.loads(p)["text"] for p in _Hook.posts)
    assert linked.splitlines()[-1] == "Full report: https://reports.example.com/capacity/2026-W50/report.html"
    assert local.splitlines()[-1] == f"Full report: {root / '2026-W50' / 'report.html'}"
    # With an archive, the new findings only: the resolved one is not news.
    assert "New findings: 1" in linked and "response_cache" in linked and "instance_group" not in linked
