"""``tritonwatch demo``: the whole stack on this machine, with load that makes alerts really fire.

Starts, on free loopback ports: the real bundled Triton on ``model_repository/`` (sampled traces to
trace files the sidecar reads), the sidecar, Alertmanager and Prometheus with the rules generated from
the demo's own SLO file (``local/demo_slo.yaml``: an objective on ``fraud_pipeline``, the model its
clients call), then drives a load pattern (steady, a burst, a failure episode of invalid inputs).
Shows a live view per model and, at the end, prints a plain-text ``demo summary``: each alert with the
load phase it first fired in and whether the demo expected it there, the requests and errors of each
phase, and what the uncounted-errors marker on a shimmed ONNX model means. Everything it started is
stopped on exit, Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import urlsplit

from tritonwatch import catalog
from tritonwatch.errors import UsageError
from tritonwatch.local.demosummary import EXPECTED, PATTERN, Phase, PhaseLoad, Seen, fmt_value, summary_text

log = logging.getLogger("tritonwatch.local.demo")

HELP = "run Triton, the sidecar, Prometheus and Alertmanager locally under load, and show the signals"
TRACE_RATE = 20  # one request in 20: enough for a meaningful p99 at the demo's request rates
# Triton 2.51 crashes with OpenTelemetry tracing under load (signal 11, issue #7795), at rate 10 too on
# this project's test machines; its maintainers saw no crash with trace files (mode=triton). The demo
# must not die mid-run, so it traces to files, rotated every TRACE_FILE_TRACES traces, which the
# sidecar reads (--trace-file). Production on a fixed Triton can send OTLP to --otlp-listen instead.
TRACE_FILE_TRACES = 50


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--duration", type=float, default=0.0, metavar="S", help="stop after S seconds (0: until Ctrl-C)"
    )
    p.add_argument(
        "--model-repository",
        default=None,
        metavar="DIR",
        help="models to serve (default: the bundled demo repository: fraud_pipeline around fraud_detector)",
    )
    p.add_argument(
        "--slo",
        default=None,
        metavar="FILE",
        help="the SLO file; required with --model-repository (default: the demo's own, an objective on "
        "fraud_pipeline, named on stderr)",
    )
    p.add_argument(
        "--workdir",
        default="",
        metavar="DIR",
        help="keep logs and data here (default: a temp dir, removed at the end unless --keep-logs)",
    )
    p.add_argument(
        "--keep-logs", action="store_true", help="keep the temp dir of logs and data (its path is printed)"
    )
    p.add_argument(
        "--no-live", action="store_true", help="no live terminal view (the summary is still printed)"
    )
    p.add_argument(
        "--gpu-replay", action="store_true", help="also serve a REPLAYED GPU node (recorded DCGM payloads)"
    )


MAX_TRITON_RESTARTS = 3  # a Triton that dies more often than this in one demo is left dead, and said so
OPEN_ENDED_PERIOD = 240.0  # with no --duration the pattern repeats every 4 minutes


def _get(url: str, timeout: float = 3.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return bytes(resp.read())


def firing_alerts(prometheus_url: str) -> list[dict[str, str]]:
    import json

    try:
        data = json.loads(_get(f"{prometheus_url}/api/v1/alerts"))
    except OSError:
        return []
    return [a["labels"] for a in data.get("data", {}).get("alerts", []) if a.get("state") == "firing"]


_QUANTILE_KEYS = {"0.5": "p50", "0.99": "p99"}  # the quantiles the view shows, by their label


def model_rows(sidecar_port: int) -> dict[str, dict[str, float]]:
    """Per model, the sidecar's current values (read from its own /metrics, as Prometheus sees them)."""
    from tritonwatch.expfmt import parse

    try:
        samples = parse(_get(f"http://127.0.0.1:{sidecar_port}/metrics"))
    except OSError:
        return {}
    wanted = {
        catalog.REQUEST_RATE: "rate",
        catalog.ERROR_RATIO: "errors",
        catalog.QUEUE_TIME_RATIO: "queue",
        catalog.BATCH_EFFICIENCY: "batch_eff",
        catalog.CACHE_HIT_RATIO: "cache",
    }
    rows: dict[str, dict[str, float]] = {}
    for name, key in wanted.items():
        for labels, value in samples.get(name, {}).items():
            rows.setdefault(dict(labels)[catalog.MODEL], {})[key] = value
    for labels, value in samples.get(catalog.LATENCY_QUANTILE, {}).items():
        d = dict(labels)
        column = _QUANTILE_KEYS.get(d.get(catalog.QUANTILE, ""))
        if d.get(catalog.PHASE) == "request" and column:
            rows.setdefault(d[catalog.MODEL], {})[column] = value
    return rows


def pipeline_steps(sidecar_port: int) -> dict[str, tuple[str, ...]]:
    """Each ensemble's steps in order, from the sidecar's ``tritonwatch_ensemble_step_info``."""
    from tritonwatch.expfmt import parse

    try:
        samples = parse(_get(f"http://127.0.0.1:{sidecar_port}/metrics"), {catalog.ENSEMBLE_STEP_INFO})
    except OSError:
        return {}
    found: dict[str, dict[int, str]] = {}
    for labels, value in samples.get(catalog.ENSEMBLE_STEP_INFO, {}).items():
        d = dict(labels)
        if value == 1.0 and d.get(catalog.POSITION, "").isdigit():
            found.setdefault(d[catalog.MODEL], {})[int(d[catalog.POSITION])] = d[catalog.STEP]
    return {m: tuple(steps[k] for k in sorted(steps)) for m, steps in found.items()}


def uncounted_markers(sidecar_port: int) -> dict[str, tuple[str, ...]]:
    """Per model, the reasons the sidecar gives for Triton maybe not counting its errors."""
    from tritonwatch.expfmt import parse

    try:
        samples = parse(_get(f"http://127.0.0.1:{sidecar_port}/metrics"), {catalog.MODEL_UNCOUNTED_ERRORS})
    except OSError:
        return {}
    found: dict[str, set[str]] = {}
    for labels, value in samples.get(catalog.MODEL_UNCOUNTED_ERRORS, {}).items():
        d = dict(labels)
        if value == 1.0 and catalog.MODEL in d:
            found.setdefault(d[catalog.MODEL], set()).add(d.get("reason", ""))
    return {m: tuple(sorted(r)) for m, r in found.items()}


COLUMNS = (
    ("req/s", "rate", "num"),
    ("errors", "errors", "ratio"),
    ("p50", "p50", "ms"),
    ("p99", "p99", "ms"),
    ("queue share", "queue", "ratio"),
    ("batch eff", "batch_eff", "ratio"),
    ("cache hit", "cache", "ratio"),
)


def _log_row(model: str, row: dict[str, float]) -> str:
    """One model's values as the live table shows them (latencies in ms, ratios in %), for the log."""
    return f"{model} " + " ".join(
        f"{title}={fmt_value(row.get(k), kind)}" for title, k, kind in COLUMNS if k in row
    )


def _live_table(
    rows: dict[str, dict[str, float]], firing: list[dict[str, str]], phase: str, elapsed: float
) -> Any:
    from rich.table import Table

    table = Table(title=f"tritonwatch demo: {phase} ({elapsed:.0f}s)", expand=False)
    table.add_column("model")
    for title, _, _ in COLUMNS:
        table.add_column(title, justify="right")
    table.add_column("alerts firing")
    for model, row in sorted(rows.items()):
        names = sorted({a.get("alertname", "") for a in firing if a.get("model") == model})
        table.add_row(
            model, *(fmt_value(row.get(k), kind) for _, k, kind in COLUMNS), ", ".join(names) or "-"
        )
    return table


class Stack:
    """Everything the demo starts, stopped in reverse order."""

    def __init__(self, workdir: Path, repo: Path, slo: Path, gpu_replay: bool) -> None:
        self.workdir = workdir
        self.repo = repo
        self.slo = slo
        self.gpu_replay = gpu_replay
        self._stops: list[Any] = []
        self.gpu_sidecar_port = 0

    def start(self) -> None:
        from tritonwatch.alerts.generate import render, write
        from tritonwatch.exporters.sidecar import Sidecar
        from tritonwatch.local.promstack import Alertmanager, Prometheus, ScrapeTarget, prometheus_config
        from tritonwatch.local.triton import LocalTriton

        rules_dir = self.workdir / "rules"
        write(render(str(self.slo)), rules_dir)  # what `tritonwatch rules` writes; a bad file fails by field
        trace_file = self.workdir / "traces" / "trace.json"
        trace_file.parent.mkdir(parents=True, exist_ok=True)
        log.info("starting Triton on %s", self.repo)
        self.triton = LocalTriton(
            [self.repo],
            trace_file=trace_file,
            trace_rate=TRACE_RATE,
            trace_log_frequency=TRACE_FILE_TRACES,
            workdir=self.workdir / "triton",
        )
        self._stops.append(self.triton.close)
        self.triton.start()
        self.am = Alertmanager(self.workdir / "alertmanager", rules_dir / "alertmanager.yml")
        self._stops.append(self.am.stop)
        self.triton.wait_ready(180)
        self.sidecar = Sidecar.local(
            self.triton.http_url,
            self.triton.metrics_url,
            trace_file=str(trace_file),
            interval=1.0,
            window=30.0,
            quantile_window=60.0,
        )
        self._stops.append(self.sidecar.stop)
        self.sidecar.start()
        self.am.wait_ready()
        rule_files = sorted(rules_dir.glob("*.rules.yml"))
        targets = [
            ScrapeTarget("triton", f"127.0.0.1:{self.triton.metrics_port}"),
            ScrapeTarget("tritonwatch", f"127.0.0.1:{self.sidecar.port}"),
        ]
        if self.gpu_replay:
            targets += self._start_gpu_replay()
        self.prometheus = Prometheus(
            self.workdir / "prometheus",
            prometheus_config(targets, rule_files, alertmanager=self.am.address),
        )
        self._stops.append(self.prometheus.stop)
        self.prometheus.wait_ready()

    def _start_gpu_replay(self) -> list[Any]:
        """A REPLAYED GPU node (recorded payloads, labelled as such) with a sidecar of its own.

        The sidecar re-exports only the GPUs its own Triton uses, so the replayed node's GPUs come
        through the replayed Triton's sidecar, as they would from a real GPU host's sidecar.
        """
        from tritonwatch.exporters.sidecar import Sidecar
        from tritonwatch.local import gpureplay
        from tritonwatch.local.promstack import ScrapeTarget

        replay = gpureplay.start_replay()
        self._stops.append(replay.stop)
        gpu_sidecar = Sidecar.local(
            replay.triton_url, replay.triton_metrics_url, dcgm=replay.dcgm_url, interval=1.0, window=30.0
        )
        self._stops.append(gpu_sidecar.stop)
        gpu_sidecar.start()
        self.gpu_sidecar_port = gpu_sidecar.port
        replay_addr = urlsplit(replay.triton_metrics_url).netloc
        log.info(
            "REPLAY: GPU node from recorded payloads (not a live GPU), sidecar on port %d", gpu_sidecar.port
        )
        return [
            ScrapeTarget("triton", replay_addr, labels={"replay": "true"}),
            ScrapeTarget("tritonwatch", f"127.0.0.1:{gpu_sidecar.port}", labels={"replay": "true"}),
        ]

    def stop(self) -> None:
        while self._stops:
            stop = self._stops.pop()
            try:
                stop()
            except Exception as exc:  # keep stopping the rest
                log.warning("stopping: %s", exc)


def _shimmed(repo: Path) -> tuple[str, ...]:
    """The ONNX models local-triton serves through the python-backend shim."""
    from tritonwatch.local.modelrepo import read_repository

    return tuple(m.name for m in read_repository(repo) if m.is_onnx)


def _models(repo: Path) -> list[str]:
    """The models clients call: an ensemble's steps get their traffic through it."""
    from tritonwatch.local.modelrepo import entry_models, read_repository

    return entry_models(read_repository(repo))


class LoadPattern:
    """Drives each model through PATTERN's phases, one LoadDriver per phase."""

    def __init__(self, triton_url: str, models: list[str], duration: float) -> None:
        self.url = triton_url
        self.models = models
        self.period = duration if duration > 0 else OPEN_ENDED_PERIOD
        self.phase = PATTERN[0].name
        self.phases: dict[str, PhaseLoad] = {}  # what each phase sent; read after stop()
        self._drivers: list[Any] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-load", daemon=True)

    def _stop_drivers(self) -> None:
        """Stop the running phase's drivers (each waits for its requests in flight) and add up what
        they sent to that phase."""
        if not self._drivers:
            return
        load = self.phases.setdefault(self.phase, PhaseLoad())
        # Every driver stops sending at once: one after the other, each waiting out its requests in flight
        # (up to its timeout on a server that is restarting), the last phase's counts came after the demo
        # had read them.
        for d in self._drivers:
            d.halt()
        for d in self._drivers:
            stats = d.stop()
            load.requests += stats.requests
            load.errors += stats.errors
            load.invalid += stats.invalid
        self._drivers = []

    def _switch(self, phase: Phase) -> None:
        from tritonwatch.local.load import LoadDriver

        self._stop_drivers()
        self._drivers = [
            LoadDriver(
                self.url, model=m, concurrency=phase.concurrency, repeat=3, error_ratio=phase.error_ratio
            ).start()
            for m in self.models
        ]
        self.phase = phase.name
        log.info(
            "load phase: %s (concurrency %d, invalid inputs %.0f%%)",
            phase.name,
            phase.concurrency,
            phase.error_ratio * 100,
        )

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            frac = ((time.monotonic() - t0) % self.period) / self.period
            current = [p for p in PATTERN if p.start <= frac][-1]
            if current.name != self.phase or not self._drivers:
                self._switch(current)
            self._stop.wait(0.5)
        self._stop_drivers()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def run(args: argparse.Namespace) -> int:
    if args.duration < 0:
        raise UsageError(f"--duration: must be >= 0 (got {args.duration})")
    from tritonwatch.local.bundled import demo_slo, model_repository, own_demo_slo

    repo = Path(args.model_repository) if args.model_repository else model_repository()
    if not repo.is_dir():
        raise UsageError(f"--model-repository: {repo} is not a directory")
    args.slo = demo_slo(args.slo, args.model_repository)
    if not Path(args.slo).is_file():
        raise UsageError(f"--slo: {args.slo} is not a file")
    # Only a temp dir of our own is ever removed; a --workdir the user named is theirs and stays.
    own_temp = not args.workdir and not args.keep_logs
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="tritonwatch-demo-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    stack = Stack(workdir, repo, Path(args.slo), args.gpu_replay)
    own = not args.model_repository and args.slo == str(own_demo_slo())
    seen = Seen(shimmed=_shimmed(repo), expected=dict(EXPECTED) if own else {})
    rows: dict[str, dict[str, float]] = {}
    load: LoadPattern | None = None
    try:
        stack.start()
        gpu = (
            f"  GPU node      REPLAY of recorded payloads, sidecar http://127.0.0.1:{stack.gpu_sidecar_port}/metrics\n"
            if args.gpu_replay
            else ""
        )
        shims = "".join(
            f"  {m:<13} ONNX served through a python-backend shim here (the summary's note says what that means)\n"
            for m in seen.shimmed
        )
        print(
            f"tritonwatch demo (logs in {workdir}{', removed at the end' if own_temp else ''})\n"
            f"  Triton        {stack.triton.http_url}  metrics {stack.triton.metrics_url}\n"
            f"  sidecar       http://127.0.0.1:{stack.sidecar.port}/metrics\n"
            f"  Prometheus    {stack.prometheus.url}\n"
            f"  Alertmanager  {stack.am.url}\n"
            f"{gpu}  SLO file      {args.slo}\n{shims}",
            flush=True,
        )
        load = LoadPattern(stack.triton.http_url, _models(repo), args.duration)
        load.start()
        rows = _watch(stack, load, seen, args, stop)
    finally:
        if load:
            load.stop()
            seen.phases = load.phases
        stack.stop()
        if own_temp:
            shutil.rmtree(workdir, ignore_errors=True)
    print(summary_text(rows, seen), flush=True)
    if not own_temp:
        print(f"logs and data kept in {workdir}", flush=True)
    return 0


def _watch(
    stack: Stack, load: LoadPattern, seen: Seen, args: argparse.Namespace, stop: threading.Event
) -> dict[str, dict[str, float]]:
    t0 = time.monotonic()
    live_ok = not args.no_live and sys.stdout.isatty()
    rows: dict[str, dict[str, float]] = {}
    live: Any = None
    if live_ok:
        from rich.live import Live

        live = Live(refresh_per_second=2, transient=True)
        live.start()
    try:
        while not stop.is_set():
            elapsed = time.monotonic() - t0
            if args.duration and elapsed >= args.duration:
                break
            if stack.triton.crashed() and len(seen.triton_deaths) < MAX_TRITON_RESTARTS:
                # Triton 2.51 segfaults now and then while it traces (server#7795; trace files too, in
                # the python backend's ResponseSend): a demo that kept running on a dead server would
                # show nothing. Same ports, so the sidecar, Prometheus and the load follow it.
                seen.triton_deaths.append((elapsed, stack.triton.exit_code()))
                log.warning(
                    "tritonserver died (exit code %s); starting it again. Last lines of %s:\n%s",
                    stack.triton.exit_code(),
                    stack.triton.log_path,
                    stack.triton.log_tail(15),
                )
                stack.triton.restart(timeout=120)
            now_rows = model_rows(stack.sidecar.port)
            if args.gpu_replay:
                now_rows.update({f"{m} (REPLAY)": r for m, r in model_rows(stack.gpu_sidecar_port).items()})
            for model, values in now_rows.items():
                # Keep each value's last reading: one slow scrape under the burst must not blank the view.
                rows.setdefault(model, {}).update(values)
            seen.pipelines.update(pipeline_steps(stack.sidecar.port))
            seen.uncounted.update(uncounted_markers(stack.sidecar.port))
            firing = firing_alerts(stack.prometheus.url)
            for a in firing:
                key = (a.get("alertname", ""), a.get("model", ""), a.get("severity", ""))
                if key[0] != "Watchdog":
                    seen.alerts.setdefault(key, (elapsed, load.phase))
            if live is not None:
                live.update(_live_table(rows, firing, load.phase, elapsed))
            elif int(elapsed) % 10 == 0:
                log.info("%s: %s", load.phase, "; ".join(_log_row(m, r) for m, r in sorted(rows.items())))
            stop.wait(1.0)
    finally:
        if live is not None:
            live.stop()
    return rows
