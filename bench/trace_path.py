"""The whole trace path as Triton drives it: sidecar CPU per traced request, end to end (issue 24).

A real ``tritonwatch sidecar`` process scrapes a Triton stand-in serving recorded real payloads
(``tests/support/fake_triton.py``: fraud_detector) and takes traces three ways; the figure is that
process's CPU time (all its threads, ``/proc/PID/stat`` utime + stime) divided by the traced requests
it recorded (the increase of ``tritonwatch_request_duration_seconds_count{phase="request"}``), with
``/metrics`` GET every ``SCRAPE_EVERY`` seconds (as a Prometheus would) counted in:

* ``otlp_R``: recorded Triton 2.51 OTLP JSON bodies (``tests/data/triton_otlp_traces.json``, 12
  requests, 30 spans; ids rewritten so that every request is new) sent as Triton's batch exporter sends
  them (one body at a time on one keep-alive connection, up to 512 spans each) to the receiver's
  socket at R traced requests/s;
* ``files_R``: Triton's trace files (mode=triton, ``tests/data/trace_file_sleeper.json`` with new
  ids), a rotation ``PATH.N`` of 1,000 traces written at R traced requests/s, read by ``--trace-file``;
* ``overload``: OTLP at twice what one core handles (2 / the measured CPU per request of the top OTLP
  rate): the sidecar must stay up, answer /metrics GETs (every 0.5 s here) under 0.1 s median, keep
  its RSS bounded, and count what it shed (``tritonwatch_spans_dropped_total{reason="overload"}``);
* ``real_triton`` (``--real``): the bundled real Triton (OpenTelemetry, rate 10) serving fraud_detector
  under ``tritonwatch load``-style clients, spans straight to the sidecar's receiver.

The OpenTelemetry Collector cannot run here; its published figure is cited in docs/tracing.md.
Writes bench/results/trace_path.json and prints a table. Run: ``python -m bench.trace_path
[--seconds 20] [--real]``. The machine may be shared: CPU time per request is the figure, not wall time.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.hostile import status_kib
from bench.scrape import cpu_seconds
from tests.support.fake_triton import FakeTriton
from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DATA = ROOT / "tests" / "data"
SCRAPE_EVERY = 5.0  # a /metrics GET this often (Prometheus's usual 15-30 s is gentler)
SENDERS = 3  # exporters at once in the overload run
IDLE_SECONDS = 10.0  # the sidecar's cost without traces is measured this long before each run
SPANS_PER_BODY = 512  # OpenTelemetry's batch span processor: at most 512 spans an export
TRACES_PER_FILE = 1000  # Triton's log_frequency: one rotation every this many traces
MARK = "ffffeeee"  # the id prefix rewritten per round of bodies: every request is new
# Four bodies (512 spans each) Triton 2.51 sent at trace rate 10 while fraud_detector served 8 clients
# (bench/data/README.md): real ids, real timestamps, one request's spans sometimes split across bodies.
RECORDED = "triton_otlp_fraud_detector.json.gz"


# --- recorded traffic, renewed ---------------------------------------------------------------------
def otlp_templates() -> tuple[list[str], list[int]]:
    """The recorded bodies with the first 8 hex digits of every id replaced by MARK, and the traced
    requests (model spans) in each: one round of them, MARK rewritten per round, is all new requests."""
    bodies = json.loads(gzip.decompress((ROOT / "bench" / "data" / RECORDED).read_bytes()))
    templates, requests = [], []
    for body in bodies:
        n = 0
        for rs in body["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if span.get(key):
                            span[key] = MARK + span[key][8:]
                    n += any(a["key"] == "triton.model_name" for a in span.get("attributes", []))
        templates.append(json.dumps(body, separators=(",", ":")))
        requests.append(n)
    return templates, requests


def trace_file_entries() -> list[list[dict[str, Any]]]:
    """The recorded trace file's traces, each a list of its entries."""
    by_id: dict[int, list[dict[str, Any]]] = {}
    for rotation in json.loads((DATA / "trace_file_sleeper.json").read_text()):
        for entry in rotation:
            by_id.setdefault(entry["id"], []).append(entry)
    return list(by_id.values())


# --- the sidecar process -----------------------------------------------------------------------------
class Sidecar:
    def __init__(
        self, triton: str, workdir: Path, *extra: str, otlp_port: int = 0, metrics: str = ""
    ) -> None:
        self.port, self.otlp_port = free_port(), otlp_port or free_port()
        argv = [sys.executable, "-m", "tritonwatch", "sidecar", "--triton", triton]
        argv += ["--triton-metrics", metrics or f"{triton}/metrics", "--listen", f"127.0.0.1:{self.port}"]
        argv += ["--otlp-listen", f"127.0.0.1:{self.otlp_port}", "--interval", "5", *extra]
        self.proc = Managed("sidecar", argv, log_path=workdir / f"sidecar-{self.port}.log")
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        wait_until(lambda: http_ok(self.url), 30, "the sidecar to serve /metrics")

    @property
    def pid(self) -> int:
        return int(self.proc.proc.pid)

    def metrics(self) -> tuple[dict[str, Any], float]:
        t0 = time.monotonic()
        with urllib.request.urlopen(self.url, timeout=10) as resp:
            body = resp.read()
        return parse(body), time.monotonic() - t0

    def recorded(self) -> float:
        values, _ = self.metrics()
        return sum(
            v
            for labels, v in values.get(catalog.REQUEST_DURATION + "_count", {}).items()
            if dict(labels).get(catalog.PHASE) == "request"
        )

    def dropped(self) -> dict[str, float]:
        values, _ = self.metrics()
        return {dict(k)["reason"]: v for k, v in values.get(catalog.SPANS_DROPPED, {}).items()}

    def stop(self) -> None:
        self.proc.stop()


class Scraper(threading.Thread):
    """GETs /metrics every ``every`` seconds; keeps each GET's duration."""

    def __init__(self, sidecar: Sidecar, every: float) -> None:
        super().__init__(daemon=True)
        self.sidecar, self.every = sidecar, every
        self.durations: list[float] = []
        self.failures = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(self.every):
            t0 = time.monotonic()
            try:
                with urllib.request.urlopen(self.sidecar.url, timeout=10) as resp:
                    resp.read()
                self.durations.append(time.monotonic() - t0)
            except OSError:
                self.failures += 1


# --- senders ---------------------------------------------------------------------------------------
def send_otlp(port: int, rate: float, seconds: float, templates: list[str], requests: list[int],
              gen: list[int]) -> dict[str, Any]:  # fmt: skip
    """POST the recorded bodies, round after round with new ids, at ``rate`` traced requests/s for
    ``seconds``: one at a time on one keep-alive connection, each once the last was answered."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    statuses: dict[int, int] = {}
    waits: list[float] = []
    start = time.monotonic()
    due = 0.0  # seconds after start the next body is due
    sent = 0
    i = 0
    # Until the schedule or the wall clock runs out: a receiver slower than the rate slows the sender,
    # as it would slow Triton's exporter (Triton's own queue then drops spans nobody counts).
    while due < seconds and time.monotonic() - start < seconds:
        if i % len(templates) == 0:
            gen[0] += 1
        k = i % len(templates)
        wait = start + due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        body = templates[k].replace(MARK, f"{gen[0]:08x}").encode()
        t0 = time.monotonic()
        try:
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            status = resp.status
            if resp.will_close or status == 503:  # a 503 closes: the next body on a new connection
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        except OSError:
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            status = 0
        waits.append(time.monotonic() - t0)
        statuses[status] = statuses.get(status, 0) + 1
        sent += requests[k]
        due += requests[k] / rate
        i += 1
    conn.close()
    elapsed = time.monotonic() - start
    return {
        "requests_sent": sent,
        "sent_per_s": round(sent / elapsed, 1),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "post_median_s": round(statistics.median(waits), 5) if waits else None,
        "post_max_s": round(max(waits), 4) if waits else None,
    }


def write_trace_files(path: Path, rate: float, seconds: float, traces: list[list[dict[str, Any]]]) -> dict:
    """Write rotations ``PATH.N`` of TRACES_PER_FILE traces at ``rate`` traces/s, as Triton does."""
    every = TRACES_PER_FILE / rate
    start = time.monotonic()
    n = 0
    next_id = 1
    while start + n * every - start < seconds:
        due = start + n * every
        if due > time.monotonic():
            time.sleep(due - time.monotonic())
        entries = []
        for i in range(TRACES_PER_FILE):
            for e in traces[i % len(traces)]:
                entries.append({**e, "id": next_id + i})
        next_id += TRACES_PER_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(entries, separators=(",", ":")))
        os.replace(tmp, path.with_name(f"{path.name}.{n}"))
        n += 1
    return {"requests_sent": n * TRACES_PER_FILE, "sent_per_s": round(n * TRACES_PER_FILE / seconds, 1)}


# --- runs ------------------------------------------------------------------------------------------
def measure(sidecar: Sidecar, drive: Any, settle: float, scrape_every: float) -> dict[str, Any]:
    """CPU, recorded requests, drops and /metrics GETs around ``drive()``; waits ``settle`` s after."""
    # The sidecar's own cost without traces (its Triton scrapes, the /metrics GETs), per second.
    idle = Scraper(sidecar, scrape_every)
    cpu0, t0 = cpu_seconds(sidecar.pid), time.monotonic()
    idle.start()
    time.sleep(IDLE_SECONDS)
    idle.stop_event.set()
    idle.join()
    idle_rate = (cpu_seconds(sidecar.pid) - cpu0) / (time.monotonic() - t0)
    scraper = Scraper(sidecar, scrape_every)
    before_rec, before_drop = sidecar.recorded(), sidecar.dropped()
    cpu0, t0 = cpu_seconds(sidecar.pid), time.monotonic()
    scraper.start()
    sent = drive()
    # Let the queue drain (what was accepted is processed, on this CPU budget too).
    last, still, deadline = -1.0, 0, time.monotonic() + settle
    while time.monotonic() < deadline and still < 3:  # unchanged for 3 s: nothing left to record
        now = sidecar.recorded()
        still = still + 1 if now == last else 0
        last = now
        if now - before_rec >= sent["requests_sent"]:
            break
        time.sleep(1.0)
    scraper.stop_event.set()
    scraper.join()
    cpu = cpu_seconds(sidecar.pid) - cpu0
    idle_cpu = idle_rate * (time.monotonic() - t0)
    recorded = sidecar.recorded() - before_rec
    after_drop = sidecar.dropped()
    drops = {k: v - before_drop.get(k, 0.0) for k, v in after_drop.items() if v - before_drop.get(k, 0.0)}
    gets = scraper.durations
    return {
        **sent,
        "recorded": int(recorded),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_traced_request": round(cpu / recorded * 1000, 4) if recorded else None,
        "traced_requests_per_s_per_core": round(recorded / cpu) if cpu else None,
        "idle_cpu_per_s": round(idle_rate, 4),
        # Less what the sidecar spends anyway over the same time (its scrapes of Triton, the GETs).
        "cpu_ms_per_traced_request_net": round(max(cpu - idle_cpu, 0.0) / recorded * 1000, 4)
        if recorded
        else None,
        "dropped": drops,
        "metrics_gets": len(gets),
        "metrics_get_median_s": round(statistics.median(gets), 4) if gets else None,
        "metrics_get_max_s": round(max(gets), 4) if gets else None,
        "metrics_get_failures": scraper.failures,
        "rss_kib": status_kib(sidecar.pid, "VmRSS"),
        "peak_rss_kib": status_kib(sidecar.pid, "VmHWM"),
    }


def run_otlp(triton: FakeTriton, workdir: Path, rates: list[float], seconds: float) -> list[dict[str, Any]]:
    templates, per_body = otlp_templates()
    gen = [0]
    sidecar = Sidecar(triton.base_url, workdir)
    out = []
    try:
        # Warm up: imports, first renders, the model known from Triton's index.
        send_otlp(sidecar.otlp_port, 500, 2, templates, per_body, gen)
        time.sleep(1)
        for rate in rates:
            res = measure(
                sidecar,
                lambda r=rate: send_otlp(sidecar.otlp_port, r, seconds, templates, per_body, gen),
                30,
                SCRAPE_EVERY,
            )
            out.append(
                {
                    "run": f"otlp_{rate:g}",
                    "input": "otlp",
                    "rate": rate,
                    "requests_per_body": sum(per_body) / len(per_body),
                    **res,
                }
            )
            print(json.dumps(out[-1]), flush=True)
    finally:
        sidecar.stop()
    return out


def run_overload(triton: FakeTriton, workdir: Path, rate: float, seconds: float) -> dict[str, Any]:
    """OTLP at ``rate`` from SENDERS exporters at once (one sequential sender cannot outpace the
    receiver on a shared 2-core machine: its own round trips bound it), /metrics GET every 0.5 s."""
    templates, per_body = otlp_templates()
    sidecar = Sidecar(triton.base_url, workdir)

    def drive() -> dict[str, Any]:
        results: list[dict[str, Any]] = []
        threads = [
            threading.Thread(
                target=lambda g=[(k + 1) * 10**6]: results.append(
                    send_otlp(sidecar.otlp_port, rate / SENDERS, seconds, templates, per_body, g)
                )
            )
            for k in range(SENDERS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        statuses: dict[str, int] = {}
        for r in results:
            for code, n in r["statuses"].items():
                statuses[code] = statuses.get(code, 0) + n
        return {
            "requests_sent": sum(r["requests_sent"] for r in results),
            "sent_per_s": round(sum(r["sent_per_s"] for r in results), 1),
            "statuses": statuses,
            "post_median_s": statistics.median(r["post_median_s"] for r in results),
            "post_max_s": max(r["post_max_s"] for r in results),
        }

    try:
        send_otlp(sidecar.otlp_port, 500, 2, templates, per_body, [9 * 10**6])
        base_rss = status_kib(sidecar.pid, "VmRSS")
        res = measure(sidecar, drive, 30, 0.5)
        up = http_ok(sidecar.url)
    finally:
        sidecar.stop()
    return {"run": "overload", "input": f"otlp, {SENDERS} exporters", "rate": rate,
            "requests_per_body": sum(per_body) / len(per_body), "rss_before_kib": base_rss, "up_after": up,
            **res}  # fmt: skip


def run_files(triton: FakeTriton, workdir: Path, rates: list[float], seconds: float) -> list[dict[str, Any]]:
    traces = trace_file_entries()
    out = []
    for rate in rates:
        folder = workdir / f"files-{rate:g}"
        folder.mkdir()
        path = folder / "trace.json"
        sidecar = Sidecar(triton.base_url, workdir, "--trace-file", str(path))
        try:
            time.sleep(2)
            res = measure(
                sidecar, lambda r=rate, p=path: write_trace_files(p, r, seconds, traces), 30, SCRAPE_EVERY
            )
        finally:
            sidecar.stop()
        out.append({"run": f"files_{rate:g}", "input": "trace_file", "rate": rate, **res})
        print(json.dumps(out[-1]), flush=True)
    return out


def run_real(workdir: Path, seconds: float) -> dict[str, Any]:
    """The bundled real Triton, OpenTelemetry at rate 10, fraud_detector under 8 client threads."""
    from tritonwatch.local.load import LoadDriver
    from tritonwatch.local.triton import LocalTriton

    otlp_port = free_port()
    with LocalTriton([ROOT / "model_repository"], trace_to=f"http://127.0.0.1:{otlp_port}/v1/traces",
                     trace_rate=10) as triton:  # fmt: skip
        sidecar = Sidecar(triton.http_url, workdir, otlp_port=otlp_port, metrics=triton.metrics_url)
        bodies = []

        def drive() -> dict[str, Any]:
            load = LoadDriver(triton.http_url, "fraud_detector", concurrency=8)
            stats = load.run(seconds)
            return {"requests_sent": stats.requests, "sent_per_s": round(stats.rate, 1)}

        try:
            res = measure(sidecar, drive, 15, SCRAPE_EVERY)
            values, _ = sidecar.metrics()
            bodies = [v for k, v in values.get(catalog.SPANS_RECEIVED, {}).items()]
        finally:
            sidecar.stop()
    return {"run": "real_triton", "input": "otlp (real Triton 2.51, rate 10)", "rate": None,
            "spans_received_total": bodies, **res}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trace_path", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run (default 20)")
    ap.add_argument("--rates", default="2000,10000", help="OTLP traced requests/s (default 2000,10000)")
    ap.add_argument("--file-rates", default="2000,10000", help="trace-file traced requests/s")
    ap.add_argument("--real", action="store_true", help="also the bundled real Triton (about 1 minute)")
    ap.add_argument("--only-real", action="store_true", help="the real Triton run alone")
    ap.add_argument(
        "--triton-default-batch",
        action="store_true",
        help="the real Triton with OpenTelemetry's default batch processor, not local-triton's (issue 37)",
    )
    ap.add_argument("--out", type=Path, default=RESULTS / "trace_path.json")
    args = ap.parse_args(argv)
    if args.triton_default_batch:
        from tritonwatch.local import triton as local_triton

        local_triton.OTEL_BATCH = ()  # the figures before issue 37, for comparison
    rates = [float(r) for r in args.rates.split(",")]
    file_rates = [float(r) for r in args.file_rates.split(",")]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tritonwatch-bench-trace-path-") as tmp:
        workdir = Path(tmp)
        triton = FakeTriton().start()
        try:
            if args.only_real:
                rates, file_rates = [], []
            runs += run_otlp(triton, workdir, rates, args.seconds)
            runs += run_files(triton, workdir, file_rates, args.seconds)
            if rates:
                top = runs[len(rates) - 1]["cpu_ms_per_traced_request"] or 1.0
                capacity = 1000.0 / top  # traced requests/s one core handles
                runs.append(run_overload(triton, workdir, 2 * capacity, args.seconds))
                print(json.dumps(runs[-1]), flush=True)
        finally:
            triton.stop()
        if args.real or args.only_real:
            runs.append(run_real(workdir, args.seconds))
            print(json.dumps(runs[-1]), flush=True)
    result = {
        "generated_by": "python -m bench.trace_path " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "load_average_at_end": os.getloadavg(),
        },  # fmt: skip
        "figure": "sidecar process CPU (utime+stime, all threads) / traced requests recorded",
        "scrape_every_s": SCRAPE_EVERY,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(f"{'run':<14} {'sent/s':>9} {'recorded':>9} {'cpu s':>7} {'ms/req':>8} {'req/s/core':>10} "
          f"{'net ms':>7} {'GET med':>8} {'peak RSS':>9}  dropped")  # fmt: skip
    for r in runs:
        print(f"{r['run']:<14} {r['sent_per_s']:>9} {r['recorded']:>9} {r['cpu_s']:>7} "
              f"{r['cpu_ms_per_traced_request'] or 0:>8.4f} {r['traced_requests_per_s_per_core'] or 0:>10} "
              f"{r['cpu_ms_per_traced_request_net'] or 0:>7.4f} "
              f"{r['metrics_get_median_s'] or 0:>8.4f} {r['peak_rss_kib'] // 1024:>7}Mi  {r['dropped']}")  # fmt: skip
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
