"""The archived weekly report against a real Prometheus holding three backfilled weeks of known growth.

Two models, each alone on its GPU, over the 21 days from Monday 2026-11-09: ``growing`` (4 % of its
first day's peak a day, linear) and ``steady`` (flat). Two consecutive reports go into one archive:
the first ends 2026-11-23 (ISO week 2026-W47, 14 days of history), the second 2026-11-30 (2026-W48).
The second's previous-week figures must be the first's as written, its forecast check the first's
forecast against its own measured peak, and that peak the one the synthetic law puts there. Then the
same report is delivered to a real SMTP server and a real HTTP receiver on loopback, and once more
with the SMTP server gone.
"""

from __future__ import annotations

import contextlib
import csv
import email
import email.policy
import io
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from email.message import EmailMessage
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from support import backfill, stacks, static_endpoint, synthetic
from support.smtp_sink import SmtpSink

from tritonwatch.cli import main
from tritonwatch.local.procs import free_port
from tritonwatch.local.promstack import Prometheus
from tritonwatch.reports import archive

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs("promtool", "prometheus"),
    pytest.mark.usefixtures("platform"),
]

START = datetime(2026, 11, 9, tzinfo=timezone.utc)
GROWTH = {"growing": 0.04, "steady": 0.0}
PEAK = 50.0  # req/s at the first day's daily peak


def _weeks() -> list[synthetic.Week]:
    out = []
    for i, (name, growth) in enumerate(GROWTH.items()):
        inst = synthetic.Instance(
            f"triton-{name}:8002", f"triton-{name}:9450", f"GPU-{i:08d}-0000-0000-0000-{name:0>12}"
        )
        model = synthetic.Model(
            name=name,
            instances=(inst,),
            peak_rate=PEAK,
            error_ratio=0.001 * (i + 1),
            canceled_ratio=0.0,
            batch_size=2.0,
            max_batch_size=8,
            cache_hit_ratio=None,
            request_latency_s=0.03,
            queue_share=0.2,  # off the batching-delay finding's 10 % edge (support/synthetic.py)
            histogram=False,
            latency_sigma=0.3,
        )
        gpu = synthetic.Gpu(inst.gpu_uuid, inst.triton, 0.3, sidecar=False)
        out.append(
            synthetic.Week(
                START, (model,), (gpu,), days=21, step_s=120, growth_per_day=growth, noise=0.01, seed=31 + i
            )
        )
    return out


WEEKS = {w.models[0].name: w for w in _weeks()}
FIRST, SECOND = START + timedelta(days=14), START + timedelta(days=21)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def prometheus(platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Prometheus]:
    blocks = backfill.blocks(list(WEEKS.values()), tmp_path_factory.mktemp("archive-blocks"))
    prom = backfill.serve([blocks], tmp_path_factory.mktemp("archive-prom"))
    try:
        yield prom
    finally:
        prom.stop()


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str


def _report(prometheus: Prometheus, end: datetime, *extra: str) -> Run:
    out, err = io.StringIO(), io.StringIO()
    argv = ["report", "--prometheus", prometheus.url, "--end", _iso(end), "--timeout", "60", *extra]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return Run(code, out.getvalue(), err.getvalue())


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _by_model(path: Path) -> dict[str, dict[str, str]]:
    return {r["model"]: r for r in _csv(path)}


@pytest.fixture(scope="module")
def archived(prometheus: Prometheus, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("archive")
    for end in (FIRST, SECOND):
        run = _report(prometheus, end, "--archive", str(root))
        assert run.code == 0, run.stderr
    return root


def test_each_report_is_kept_in_its_iso_week(archived: Path) -> None:
    assert archive.weeks(archived) == ["2026-W47", "2026-W48"]
    for week, end in (("2026-W47", FIRST), ("2026-W48", SECOND)):
        folder = archived / week
        for name in (
            "report.html",
            "report.md",
            "models.csv",
            "gpus.csv",
            "forecast_check.csv",
            "changes.csv",
        ):
            assert (folder / name).is_file(), (week, name)
        assert any((folder / "charts").glob("*.png"))
        marker = json.loads((folder / archive.MARKER).read_text())
        assert marker["week"] == week and marker["end"] == end.isoformat()
        md = (folder / "report.md").read_text()
        # It opens with what changed: before the findings.
        assert md.index("## What changed") < md.index("## Findings") < md.index("## Forecast check")


def test_the_second_report_compares_with_the_first(archived: Path) -> None:
    first, second = (_by_model(archived / w / "models.csv") for w in ("2026-W47", "2026-W48"))
    assert set(first) == set(second) == set(GROWTH)
    for name in GROWTH:
        assert first[name]["previous_peak_request_rate"] == ""
        assert second[name]["previous_peak_request_rate"] == first[name]["peak_request_rate"]
    changed = _by_model(archived / "2026-W48" / "changes.csv")
    for name in GROWTH:
        c, f, s = changed[name], first[name], second[name]
        assert c["previous_availability"] == f["availability"] and c["availability"] == s["availability"]
        assert c["previous_p99_latency_seconds"] == f["p99_latency_seconds"]
        assert (
            c["previous_headroom_ratio"] == f["headroom_ratio"] and c["headroom_ratio"] == s["headroom_ratio"]
        )
        change = float(s["peak_request_rate"]) / float(f["peak_request_rate"]) - 1
        assert float(c["peak_change_ratio"]) == pytest.approx(change, rel=1e-6)
    # Growing 4 % of the first day's peak a day: a week later the peak is about 28/(1 + 0.04 * 13.6) higher.
    assert 0.12 < float(changed["growing"]["peak_change_ratio"]) < 0.24
    assert abs(float(changed["steady"]["peak_change_ratio"])) < 0.05
    md = (archived / "2026-W48" / "report.md").read_text()
    assert "Week 2026-W48 against 2026-W47, the archive's previous report; each finding below is marked" in md
    first_md = (archived / "2026-W47" / "report.md").read_text()
    assert "the first report in the archive, so every finding is new" in first_md


def test_the_forecast_check_scores_the_first_reports_forecast(archived: Path) -> None:
    first, second = (_by_model(archived / w / "models.csv") for w in ("2026-W47", "2026-W48"))
    assert _csv(archived / "2026-W47" / "forecast_check.csv") == []  # nothing before it to score
    checks = {f"{r['model']}:{r['version']}": r for r in _csv(archived / "2026-W48" / "forecast_check.csv")}
    assert set(checks) == {f"{name}:1" for name in GROWTH}
    for name in GROWTH:
        c, f, s = checks[f"{name}:1"], first[name], second[name]
        assert c["forecast_week"] == "2026-W48"
        assert c["forecast_peak_request_rate"] == f["next_week_peak_request_rate"]
        assert c["forecast_low"] == f["next_week_peak_request_rate_low"]
        assert c["forecast_high"] == f["next_week_peak_request_rate_high"]
        assert c["actual_peak_request_rate"] == s["peak_request_rate"]
        forecast, actual = float(c["forecast_peak_request_rate"]), float(c["actual_peak_request_rate"])
        assert float(c["error_ratio"]) == pytest.approx(forecast / actual - 1, rel=1e-6)
        inside = float(c["forecast_low"]) <= actual <= float(c["forecast_high"])
        assert c["within_interval"] == str(inside).lower()
    # The actual peaks are the synthetic law's: the last weekday peak of 21 days (14:00 on day 20).
    truth = {name: synthetic.truth(w)[name].peak_request_rate for name, w in WEEKS.items()}
    assert float(checks["growing:1"]["actual_peak_request_rate"]) == pytest.approx(truth["growing"], rel=0.05)
    assert truth["growing"] == pytest.approx(PEAK * (1 + 0.04 * (20 + 14 / 24)), rel=0.03)
    assert float(checks["steady:1"]["actual_peak_request_rate"]) == pytest.approx(PEAK, rel=0.05)
    # Two weeks of linear growth forecast a week ahead: within 5 % of what came.
    for name in GROWTH:
        assert abs(float(checks[f"{name}:1"]["error_ratio"])) < 0.05, checks[f"{name}:1"]
    md = (archived / "2026-W48" / "report.md").read_text()
    assert "2 forecasts made by the 2026-W47 report scored against this week's peaks." in md
    assert "Calibration starts once the archive holds 4 weeks (it holds 2)" in md


def test_a_rerun_replaces_its_week_and_nothing_else(
    prometheus: Prometheus, archived: Path, tmp_path: Path
) -> None:
    root = tmp_path / "archive"
    for week in ("2026-W47", "2026-W48"):
        shutil.copytree(archived / week, root / week)
    before = (root / "2026-W48" / archive.MARKER).read_text()
    (root / "2026-W48" / "stale.txt").write_text("from an earlier run")
    run = _report(prometheus, SECOND, "--archive", str(root))
    assert run.code == 0, run.stderr
    assert archive.weeks(root) == ["2026-W47", "2026-W48"]
    assert not (root / "2026-W48" / "stale.txt").exists()
    assert (root / "2026-W48" / archive.MARKER).read_text() != before  # written again
    # Same data, same previous week: the same figures.
    assert (root / "2026-W48" / "forecast_check.csv").read_text() == (
        archived / "2026-W48" / "forecast_check.csv"
    ).read_text()
    assert sorted(p.name for p in root.iterdir()) == ["2026-W47", "2026-W48"]  # no staging left behind

    # A folder of that name the project did not write is left alone.
    other = tmp_path / "other"
    (other / "2026-W48").mkdir(parents=True)
    (other / "2026-W48" / "notes.txt").write_text("mine")
    run = _report(prometheus, SECOND, "--archive", str(other))
    assert run.code == 1
    assert run.stderr.strip().splitlines()[-1] == (
        f"tritonwatch report: error: --archive {other / '2026-W48'}: exists and was not written by "
        f"tritonwatch report (no {archive.MARKER}); not replacing it"
    )
    assert [p.name for p in (other / "2026-W48").iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in other.iterdir()) == ["2026-W48"]


class _Receiver:
    def __init__(self) -> None:
        self.posts: list[tuple[str, str, bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                receiver.posts.append((self.path, self.headers.get("Content-Type", ""), body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

        self.httpd = static_endpoint.serve(Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/capacity"


@pytest.fixture
def receivers(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[SmtpSink, _Receiver]]:
    sink = SmtpSink(credentials=("planner-bot", "s3cret-pw")).start()
    hook = _Receiver()
    monkeypatch.setenv("TRITONWATCH_SMTP_USER", "planner-bot")
    monkeypatch.setenv("TRITONWATCH_SMTP_PASSWORD", "s3cret-pw")
    try:
        yield sink, hook
    finally:
        sink.stop()
        static_endpoint.shutdown(hook.httpd)


def _delivery_flags(smtp: str, webhook: str) -> list[str]:
    return [
        "--mail-to", "planner@example.com,oncall@example.com",
        "--mail-from", "tritonwatch@example.com",
        "--smtp", smtp,
        "--webhook", webhook,
    ]  # fmt: skip


def test_the_report_is_mailed_and_posted(
    prometheus: Prometheus, archived: Path, receivers: tuple[SmtpSink, _Receiver]
) -> None:
    sink, hook = receivers
    run = _report(prometheus, SECOND, "--archive", str(archived), *_delivery_flags(sink.url, hook.url))
    assert run.code == 0, run.stderr
    assert "s3cret-pw" not in run.stdout + run.stderr
    assert sink.logins == [("planner-bot", "s3cret-pw")]
    (mail,) = sink.mails
    assert mail.sender == "tritonwatch@example.com" and mail.user == "planner-bot"
    assert mail.recipients == ["planner@example.com", "oncall@example.com"]
    msg = email.message_from_bytes(mail.data, policy=email.policy.default)
    assert isinstance(msg, EmailMessage)
    assert str(msg["Subject"]).startswith(
        "Triton capacity report 2026-W48: 1 finding, nearest saturation: GPU "
    )
    assert msg.get_content_type() == "multipart/alternative"
    text, page = msg.get_body(("plain",)), msg.get_body(("html",))
    assert text is not None and page is not None
    plain, html = text.get_content(), page.get_content()
    for name in GROWTH:
        assert f"{name}:1" in plain and f"{name}:1" in html
    assert "## What changed" in plain and "<h2>Forecast check</h2>" in html
    # Every chart is attached and named by the HTML part: inline, not a data: URI.
    images = [p for p in msg.walk() if p.get_content_type() == "image/png"]
    charts = sorted((archived / "2026-W48" / "charts").glob("*.png"))
    assert len(images) == len(charts) > 0
    for image in images:
        cid = str(image["Content-ID"]).strip().strip("<>")
        assert f'src="cid:{cid}"' in html
    assert "data:image/png" not in html
    assert sorted(p.get_content() for p in images) == sorted(c.read_bytes() for c in charts)

    ((path, ctype, body),) = hook.posts
    assert path == "/hooks/capacity" and ctype == "application/json"
    text_field = json.loads(body)["text"]
    assert text_field.startswith("Triton capacity report 2026-W48 (2 models: growing:1, steady:1)")
    assert "Nearest saturation: " in text_field
    assert f"Full report: {archived / '2026-W48' / 'report.html'}" in text_field


def test_a_failed_delivery_exits_non_zero_and_keeps_the_report(
    prometheus: Prometheus, tmp_path: Path, receivers: tuple[SmtpSink, _Receiver]
) -> None:
    _, hook = receivers
    gone = f"smtp://127.0.0.1:{free_port()}"  # nothing listens there
    root = tmp_path / "archive"
    run = _report(prometheus, SECOND, "--archive", str(root), *_delivery_flags(gone, hook.url))
    assert run.code == 1
    last = run.stderr.strip().splitlines()[-1]
    assert (
        last.startswith("tritonwatch report: error: delivery failed")
        and f"--smtp {gone}: mail not sent" in last
    )
    assert "s3cret-pw" not in run.stdout + run.stderr
    assert (root / "2026-W48" / "report.html").is_file() and (root / "2026-W48" / "models.csv").is_file()
    assert len(hook.posts) == 1  # the webhook that works still got its message
