"""``tritonwatch report``: the weekly capacity report from Prometheus.

Writes into ``--out``: ``report.html`` (self-contained), ``report.md``, ``models.csv``, ``gpus.csv``,
``findings.csv`` and ``charts/*.png``. With ``--archive DIR`` it keeps the report in ``DIR/<ISO week>/``
(``tritonwatch.reports.archive``), opens with what changed since the newest earlier week
(``changes``) and scores that week's forecast (``forecast_check``); ``--mail-to``/``--webhook``
deliver it after it is written (``deliver``, ``digest``). Progress goes to stderr; the list of files
written to stdout. pandas and matplotlib are imported inside ``run()`` only, so the rest of the CLI
starts fast.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.flags import utc_time
from tritonwatch.reports import deliver
from tritonwatch.reports.batching import DEFAULT_MODELS_PER_QUERY

if TYPE_CHECKING:
    from tritonwatch.reports.figures import GpuFigures, ModelFigures
    from tritonwatch.reports.render import Report, Section
    from tritonwatch.reports.week import Week
    from tritonwatch.reports.weekly import History

HELP = (
    "the weekly capacity report from Prometheus: headroom, SLO-bound capacity, growth forecasts, "
    "weeks to saturation, GPUs needed, findings"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--prometheus", metavar="URL", help="Prometheus base URL, e.g. http://prometheus:9090"
    )
    parser.add_argument(
        "--end", metavar="ISO-8601", help="end of the period (default: now), e.g. 2026-11-09T00:00:00Z"
    )
    parser.add_argument(
        "--days", type=int, default=7, metavar="N", help="length of the period in days (default: 7)"
    )
    parser.add_argument(
        "--history-days",
        type=int,
        metavar="N",
        help="days of history the forecasts fit (default: all the request data Prometheus holds, up to "
        "its retention and at most 90; never fewer than --days)",
    )
    parser.add_argument(
        "--slo", metavar="FILE", help="SLO file: objectives and declared capacity (capacity.max_request_rate)"
    )
    parser.add_argument("--out", metavar="DIR", help="directory to write the report into")
    parser.add_argument(
        "--archive",
        metavar="DIR",
        help="keep the report in DIR/<ISO week>/ (the week the period ends in; a rerun replaces it), "
        "open with what changed since the newest earlier week there and score its forecast",
    )
    parser.add_argument(
        "--models-per-query",
        type=int,
        default=DEFAULT_MODELS_PER_QUERY,
        metavar="N",
        help="split each per-model query into batches of N models, so that no query's work or answer "
        f"grows with the fleet (default: {DEFAULT_MODELS_PER_QUERY}; 0: the whole fleet in one query)",
    )
    parser.add_argument(
        "--timeout", type=float, default=120.0, metavar="S", help="per-query timeout in seconds"
    )
    deliver.add_arguments(parser)


def parse_end(text: str | None) -> datetime:
    return utc_time(text, "--end") if text else datetime.now(timezone.utc).replace(microsecond=0)


def run(args: argparse.Namespace) -> int:
    # Checked here, not by argparse's required=: the flags may come from TRITONWATCH_* variables, and
    # --out is required only without --archive. Both in one line, so that one run names all that is
    # missing (the mail's flags: deliver.parse, "--mail-to: needs --mail-from and --smtp").
    needed = [("--prometheus URL", args.prometheus), ("--out DIR or --archive DIR", args.out or args.archive)]
    missing = [flag for flag, given in needed if not given]
    if missing:
        raise UsageError(
            f"the following arguments are required: {', '.join(missing)} (or their TRITONWATCH_* variables)"
        )
    if args.days < 1:
        raise UsageError(f"--days: must be at least 1 (got {args.days})")
    history = args.history_days
    if history is not None and history < 1:
        raise UsageError(f"--history-days: must be at least 1 (got {history})")
    if args.models_per_query < 0:
        raise UsageError(f"--models-per-query: must be 0 or more (got {args.models_per_query})")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise UsageError(f"--timeout: must be a positive number of seconds (got {args.timeout})")
    url = urlsplit(args.prometheus)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise UsageError(
            f"--prometheus: {args.prometheus!r} is not an http(s) URL (e.g. http://127.0.0.1:9090)"
        )
    end = parse_end(args.end)
    delivery = deliver.parse(args)
    slos = None
    if args.slo:
        from tritonwatch import slo

        slos = slo.load(args.slo)

    from tritonwatch.reports import archive, configuration, digest, figures, llm, render
    from tritonwatch.reports.archive import iso_week
    from tritonwatch.reports.promapi import Progress, PromClient
    from tritonwatch.reports.week import collect, history_days

    lats = {s.model: s.latency for s in slos.slos if s.latency} if slos else {}
    thresholds = {m: lat.threshold for m, lat in lats.items() if lat.source is None}
    front_latency = {m: (lat.source, lat.threshold) for m, lat in lats.items() if lat.source is not None}
    progress = Progress()
    client = PromClient(
        args.prometheus, timeout=args.timeout, progress=progress, models_per_query=args.models_per_query
    )
    try:
        days, note = history_days(client, end, args.days, history)
        fronts = (
            {s.model: s.availability.source for s in slos.slos if s.availability and s.availability.source}
            if slos
            else {}
        )
        week = collect(client, end, args.days, days, thresholds, note, fronts, front_latency)
        progress.step("capacity, forecasts and charts")
        models, gpus = figures.build(week, slos)
        # Every section is gathered before anything is written: the report is rendered once.
        sections = [
            s
            for s in (
                llm.section(client, end, args.days, week, slos),  # LLM models
                configuration.section(client, end, slos, models),  # configured against advised
            )
            if s is not None
        ]
        label = iso_week(end)
        report, history = assemble(week, models, gpus, client.url, sections, args.archive, label)
        paths = []
        if args.archive:
            paths += _write(
                lambda: archive.write(report, Path(args.archive), label), "--archive", args.archive
            )
        if args.out:
            paths += _write(lambda: render.write(report, Path(args.out)), "--out", args.out)
    finally:
        progress.done()
    for p in paths:
        print(p)
    print(
        f"{len(report.findings)} findings for {len(report.models)} models and {len(report.gpus)} GPUs",
        file=sys.stderr,
    )
    if delivery:
        folder = Path(args.archive) / label if args.archive else Path(args.out)
        for line in digest.send(delivery, report, label, folder, archived=history is not None):
            print(f"report: {line}", file=sys.stderr)
    return 0


def assemble(
    week: Week,
    models: list[ModelFigures],
    gpus: list[GpuFigures],
    prometheus: str,
    sections: Sequence[Section],
    archive_root: str | None,
    label: str,
    generated: datetime | None = None,
) -> tuple[Report, History | None]:
    """The report from the period's figures (``figures.build``): findings and charts, and with an
    archive, what changed since its newest earlier week, last week's forecast scored and each finding's
    status. Nothing is written."""
    from tritonwatch.reports import charts, findings, render, weekly

    found = findings.findings(models, gpus, week.end)
    history = weekly.read(archive_root, label, models, found, week.end) if archive_root else None
    report = render.Report(
        week=week,
        prometheus=prometheus,
        models=history.models if history else models,
        gpus=gpus,
        findings=history.findings if history else found,
        resolved=history.resolved if history else (),
        charts=charts.all_charts(models, gpus, week),
        generated=generated or datetime.now(timezone.utc),
        sections=[*sections, *(history.sections if history else ())],
        lead=history.lead if history else (),
    )
    return report, history


def _write(write: Callable[[], list[Path]], flag: str, where: str) -> list[Path]:
    try:
        return write()
    except OSError as exc:
        at = f": {exc.filename}" if exc.filename else ""
        raise TritonwatchError(f"{flag} {where}: cannot write the report ({exc.strerror}{at})") from None
