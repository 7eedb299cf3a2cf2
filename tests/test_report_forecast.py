"""Forecasts and SLO-bound capacity against a real Prometheus holding two backfilled weeks per model.

``support.synthetic.forecast_weeks()`` gives five models, each alone on its GPU, over the same 14 days
with quiet weekends: linear growth, 5 %/day compounding growth, flat, falling, and a flat one whose
latency rises sharply past a known request rate. They are backfilled with ``promtool tsdb
create-blocks-from openmetrics`` into one Prometheus and the report runs once through ``main(argv)``.
The truths are computed analytically from the synthetic laws (``weeks_to_reach``, ``slo_capacity``).
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from support import backfill, chromium, stacks, synthetic

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.local.promstack import Prometheus
from tritonwatch.reports.promapi import PromClient
from tritonwatch.reports.week import history_days

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs("promtool", "prometheus"),
    pytest.mark.usefixtures("platform"),
]

ROOT = Path(__file__).resolve().parent.parent
SLO_FILE = ROOT / "tests" / "data" / "forecast_slo.yaml"
ARTIFACTS = ROOT / ".artifacts" / "report"
WEEKS = {w.models[0].name: w for w in synthetic.forecast_weeks()}
END_TIME = WEEKS["linear"].end
END = END_TIME.strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Run:
    out: Path
    stderr: str


@pytest.fixture(scope="module")
def prometheus(platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    """Five models over 14 days at a 2-minute step: ~870k samples, ~5 s to write and convert."""
    blocks = backfill.blocks(list(WEEKS.values()), tmp_path_factory.mktemp("forecast-blocks"))
    prom = backfill.serve([blocks], tmp_path_factory.mktemp("forecast-prom"))
    try:
        yield prom
    finally:
        prom.stop()


def _report(prometheus: Prometheus, out: Path, *extra: str) -> Run:
    argv = ["report", "--prometheus", prometheus.url, "--end", END, "--slo", str(SLO_FILE), "--out", str(out)]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main([*argv, *extra]) == 0
    return Run(out, err.getvalue())


@pytest.fixture(scope="module")
def run(prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> Run:
    return _report(prometheus, tmp_path_factory.mktemp("forecast-out"))


def _csv(path: Path, key: str) -> dict[str, dict[str, str]]:
    with path.open() as f:
        return {row[key]: row for row in csv.DictReader(f)}


def _models(run: Run) -> dict[str, dict[str, str]]:
    return _csv(run.out / "models.csv", "model")


def _gpus(run: Run) -> dict[str, dict[str, str]]:
    return _csv(run.out / "gpus.csv", "gpu_uuid")


def _truth_weeks(name: str) -> float:
    week = WEEKS[name]
    return synthetic.weeks_to_reach(week, week.gpus[0].peak_utilization, 1.0)


def test_growing_weeks_saturate_within_ten_percent_of_the_truth(run: Run) -> None:
    models, gpus = _models(run), _gpus(run)
    for name, other in (("linear", "compound"), ("compound", "linear")):
        truth = _truth_weeks(name)  # linear 2.29 weeks, compound 1.53
        r, g = models[name], gpus[WEEKS[name].gpus[0].uuid]
        assert r["capacity_source"] == "gpu" and r["forecast_model"] == name, r
        assert abs(float(r["weeks_to_saturation"]) - truth) <= 0.1 * truth, (name, r, truth)
        assert g["weeks_to_saturation"] == r["weeks_to_saturation"] and g["models"] == f"{name}:1"
        assert float(r["weeks_to_saturation_low"]) < float(r["weeks_to_saturation"])
        assert float(r["weeks_to_saturation"]) < float(r["weeks_to_saturation_high"])
        # Both models are shown; the fit not chosen is the one that misses the truth.
        assert abs(float(r[f"weeks_to_saturation_{other}"]) - truth) > 0.2 * truth
    # Linear peaks: the compounding curve bends up and says sooner, outside the line's range, so the
    # report leads with that earlier date. Compounding peaks: the line is late, the fit leads.
    lin, comp = models["linear"], models["compound"]
    assert float(lin["lead_weeks_to_saturation"]) == float(lin["weeks_to_saturation_compound"])
    assert float(comp["lead_weeks_to_saturation"]) == float(comp["weeks_to_saturation"])
    for r in (lin, comp):
        lead = float(r["lead_weeks_to_saturation"])
        assert r["saturation_date"] == (END_TIME + timedelta(weeks=lead)).strftime("%Y-%m-%d")
    # The case: compounding 5 %/day saturates in ~1.5 weeks, not the straight line's ~2.8.
    assert float(comp["weeks_to_saturation_linear"]) > 1.5 * _truth_weeks("compound")


def test_flat_and_falling_weeks_have_no_date(run: Run) -> None:
    models, gpus = _models(run), _gpus(run)
    for name in ("flat", "falling"):
        r, g = models[name], gpus[WEEKS[name].gpus[0].uuid]
        for row in (r, g):
            for col in ("weeks_to_saturation", "weeks_to_saturation_linear", "weeks_to_saturation_compound"):
                assert row[col] == "", (name, col, row[col])
            assert row["lead_weeks_to_saturation"] == "" and row["saturation_date"] == ""
        assert r["gpus_needed_4w"] == r["gpus_needed_12w"] == "1"
    assert float(gpus[WEEKS["falling"].gpus[0].uuid]["trend_slope_per_day"]) < 0


def test_slo_bound_capacity_within_ten_percent_of_the_knee(run: Run) -> None:
    knee = WEEKS["knee"].models[0]
    truth = synthetic.slo_capacity(knee, 0.1, 0.99)  # 64.3 req/s: 99 % within 100 ms up to there
    r = _models(run)["knee"]
    assert r["capacity_source"] == "latency"
    assert abs(float(r["capacity_request_rate"]) - truth) <= 0.1 * truth, (r["capacity_request_rate"], truth)
    assert r["slo_capacity_request_rate"] == r["capacity_request_rate"]
    # Its daily peaks (~100 req/s) are past it: saturated now, not in 100 % GPU terms (50 % busy).
    assert float(r["headroom_ratio"]) == pytest.approx(1 - float(r["peak_request_rate"]) / truth, abs=0.1)
    assert r["lead_weeks_to_saturation"] == "0" and r["saturation_date"] == "2026-11-09"
    md = (run.out / "report.md").read_text()
    assert "already at or past its latency-bound capacity" in md
    assert f"knee:1: {float(r['capacity_request_rate']):.3g} req/s (99 % of requests within" in md
    # A model without a latency objective is judged by its GPU.
    assert _models(run)["flat"]["slo_capacity_request_rate"] == ""


def test_what_to_do_gpus_needed_and_cost_of_a_request(run: Run) -> None:
    models = _models(run)
    # Linear: the busiest-weekday envelope 0.4 (1 + 0.05 d) at 14 + 28 and 14 + 84 days.
    for weeks, col in ((4, "gpus_needed_4w"), (12, "gpus_needed_12w")):
        util = 0.4 * WEEKS["linear"].growth(14 + 7 * weeks)
        assert models["linear"][col] == str(math.ceil(util)), (col, util)
    # Compounding: 0.3 * 1.05 ** 42 = 2.3 GPUs' worth in 4 weeks; ~36 in 12.
    assert models["compound"]["gpus_needed_4w"] == "3"
    twelve = 0.3 * WEEKS["compound"].growth(14 + 84)
    assert abs(float(models["compound"]["gpus_needed_12w"]) - twelve) <= 0.1 * twelve
    for name, week in WEEKS.items():
        m = week.models[0]
        r = models[name]
        assert r["gpus_now"] == "1"
        # Compute time once per batch: (input 100 us + output 50 us + infer) / batch size.
        busy = (150e-6 + m.request_latency_s * (1 - m.queue_share) * 0.8) / m.batch_size
        assert float(r["gpu_seconds_per_request"]) == pytest.approx(busy, rel=1e-3), name
        # Alone on its GPU: all the GPU's energy over the period, per successful request.
        written = {s.name: s.values for s in synthetic.series(week)}
        i = int(7 * synthetic.DAY // week.step_s)
        energy = written[catalog.TRITON_ENERGY][-1] - written[catalog.TRITON_ENERGY][-1 - i]
        ok = written[catalog.TRITON_SUCCESS][-1] - written[catalog.TRITON_SUCCESS][-1 - i]
        assert float(r["joules_per_request"]) == pytest.approx(energy / ok, rel=0.01), name


def test_history_is_all_prometheus_holds_and_progress_goes_to_stderr(run: Run) -> None:
    md = (run.out / "report.md").read_text()
    assert "forecasts fitted over 14 days (all the request data Prometheus holds; retention 30 days)" in md
    assert "adjusted for the day of the week" in md  # two weeks: the weekly cycle is taken out
    lines = run.stderr.splitlines()
    for step in (
        "oldest data",
        "request rate [1/14]",
        "request rate [14/14]",
        "requests within 100 ms [1/7]",
    ):
        assert any(x.startswith("report: ") and x.endswith(step) for x in lines), step
    assert lines[-1] == "4 findings for 5 models and 5 GPUs"


def test_history_days_flag_limits_the_fit(prometheus: Prometheus, tmp_path: Path) -> None:
    one_week = _report(prometheus, tmp_path / "out", "--history-days", "7")
    md = (one_week.out / "report.md").read_text()
    assert "forecasts fitted over 7 days (--history-days)" in md
    assert "adjusted for the day of the week" not in md
    r = _models(one_week)["compound"]
    assert r["forecast_model"] == "compound"  # a week is enough to see it compound


def test_history_days_decisions(prometheus: Prometheus) -> None:
    client = PromClient(prometheus.url, timeout=30)
    assert history_days(client, END_TIME, 7, None) == (
        14,
        "14 days (all the request data Prometheus holds; retention 30 days)",
    )
    assert history_days(client, END_TIME, 7, 60) == (30, "30 days (--history-days 60 is past the retention)")
    assert history_days(client, END_TIME, 7, 3) == (7, "7 days (--history-days)")  # never under --days
    # A period ending later than the data: history still reaches back to the oldest sample.
    assert history_days(client, END_TIME + timedelta(days=3), 7, None)[0] == 17


def test_html_report_in_headless_chromium(run: Run, tmp_path: Path) -> None:
    from PIL import Image

    if not chromium.available():
        pytest.fail(f"{chromium.CHROMIUM} is not installed: the suite needs it (make debs installs chromium)")
    page = run.out / "report.html"
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "forecast.png"
    chromium.screenshot(page, shot, tmp_path / "chromium", height=10000)
    shutil.copy(page, ARTIFACTS / "forecast.html")
    img = Image.open(shot).convert("RGB")
    assert img.size == (1280, 10000)
    pixels = np.asarray(img)
    # Painted down to the last of the six forecast charts, and the page ends inside the screenshot.
    painted = np.nonzero((pixels < 250).any(axis=(1, 2)))[0]
    assert painted.size > 0 and 9000 < painted[-1] < 9900, painted[-1:]
    colours = {tuple(c) for c in pixels.reshape(-1, 3)[::7]}
    # The fits' colours (tab:purple linear, tab:brown compounding) and the capacity line (tab:orange).
    for name, rgb in {
        "linear fit": (148, 103, 189),
        "compounding fit": (140, 86, 75),
        "capacity": (255, 127, 14),
    }.items():
        assert any(sum(abs(a - b) for a, b in zip(p, rgb, strict=True)) < 12 for p in colours), name
    text = chromium.text(page, tmp_path / "chromium")
    models = _models(run)
    for name in ("linear", "compound"):
        date = models[name]["saturation_date"]
        assert f"GPU {WEEKS[name].gpus[0].uuid}" in text
        assert date and date in text, (name, date)
    assert "compounding growth fits better" in text and "linear growth fits better" in text
    assert "plan for the earlier date" in text
