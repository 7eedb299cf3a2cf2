"""Trace quantile accuracy at trace rates 1, 10 and 100, and the sidecar's CPU cost per 1,000 spans.

Against the real bundled Triton serving the sleeper test model (each request sleeps the delay it
asks for: 85% 5 ms, 13% 25 ms, 2% 100 ms; 4 clients, 4 instances, nothing queues):

* rate 1 through Triton's JSON trace files (mode=triton; OpenTelemetry at rate 1 crashed Triton 2.51
  under load), rates 10 and 100 through OpenTelemetry to the sidecar's OTLP receiver;
* for each run, the sidecar's p50/p90/p95/p99 of compute_infer against (a) the exact nearest-rank
  quantiles of the traced requests themselves (read independently from the forwarded OTLP bodies or
  the trace files: the sidecar's own error) and (b) the quantiles of the delays asked of ALL requests
  sent (what sampling at that rate costs);
* CPU cost: the recorded rate-10 OTLP bodies replayed through the receiver's ingest path (decode,
  join, histogram, sample store) in this process, CPU seconds per 1,000 spans.

Writes bench/results/traces.json and prints a table. Run: ``python -m bench.trace_accuracy``
(about 3 minutes on 2 cores; ``--scale 0.2`` for a quick look).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

from tests.support.otlp_capture import OtlpCapture
from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.exporters.traces import LatencyPart, OtlpReceiver
from tritonwatch.local.procs import free_port, wait_until
from tritonwatch.local.triton import LocalTriton

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SLEEPER = ROOT / "tests" / "models" / "sleeper"
MIX_MS = [5.0] * 85 + [25.0] * 13 + [100.0] * 2
QS = ("0.5", "0.9", "0.95", "0.99")
CLIENTS = 4
PHASE = "compute_infer"


def nearest_rank(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1] if s else math.nan


def drive(base: str, requests_total: int, seed: int) -> list[float]:
    """Send the sleeper ``requests_total`` requests from CLIENTS threads; returns the delays asked (s)."""
    import numpy as np
    import tritonclient.http as httpclient

    rng = random.Random(seed)
    per = requests_total // CLIENTS
    plans = [[rng.choice(MIX_MS) for _ in range(per)] for _ in range(CLIENTS)]

    def worker(plan: list[float]) -> None:
        client = httpclient.InferenceServerClient(base.removeprefix("http://"))
        try:
            for ms in plan:
                inp = httpclient.InferInput("delay_ms", [1], "FP32")
                inp.set_data_from_numpy(np.array([ms], dtype=np.float32))
                client.infer("sleeper", [inp])
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [ms / 1000 for plan in plans for ms in plan]


def otlp_durations(bodies: list[bytes]) -> list[float]:
    """compute_infer of every traced sleeper request in the bodies, with plain JSON (not the sidecar's code)."""
    compute: dict[str, dict[str, int]] = {}
    sleeper_spans: set[str] = set()
    for body in bodies:
        for rs in json.loads(body).get("resourceSpans", []):
            for ss in rs.get("scopeSpans", []):
                for span in ss.get("spans", []):
                    events = {e["name"]: int(e["timeUnixNano"]) for e in span.get("events", [])}
                    if span.get("name") == "compute":
                        compute[span["parentSpanId"]] = events
                    elif any(a["key"] == "triton.model_name" for a in span.get("attributes", [])):
                        if span.get("name") == "sleeper":
                            sleeper_spans.add(span["spanId"])
    out = []
    for sid in sleeper_spans:
        ev = compute.get(sid)
        if ev:
            out.append((ev["COMPUTE_OUTPUT_START"] - ev["COMPUTE_INPUT_END"]) / 1e9)
    return out


def file_durations(folder: Path, name: str) -> list[float]:
    out = []
    for path in folder.glob(name + ".*"):
        by_id: dict[Any, dict[str, Any]] = {}
        for entry in json.loads(path.read_text()):
            t = by_id.setdefault(entry["id"], {})
            if "model_name" in entry:
                t["model"] = entry["model_name"]
            for ts in entry.get("timestamps", []):
                t[ts["name"]] = ts["ns"]
        for t in by_id.values():
            if t.get("model") == "sleeper" and "COMPUTE_OUTPUT_START" in t:
                out.append((t["COMPUTE_OUTPUT_START"] - t["COMPUTE_INPUT_END"]) / 1e9)
    return out


def sidecar_quantiles(port: int) -> tuple[dict[str, float], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        values = parse(resp.read())
    want = {catalog.MODEL: "sleeper", catalog.PHASE: PHASE, catalog.SOURCE: "trace"}
    qs: dict[str, float] = {}
    for labels, v in values.get(catalog.LATENCY_QUANTILE, {}).items():
        d = dict(labels)
        if all(d.get(k) == val for k, val in want.items()):
            qs[d[catalog.QUANTILE]] = v
    count = 0.0
    for labels, v in values.get(catalog.LATENCY_SAMPLES, {}).items():
        d = dict(labels)
        if d.get(catalog.MODEL) == "sleeper" and d.get(catalog.PHASE) == PHASE:
            count = v
    return qs, count


def compare(sidecar: dict[str, float], traced: list[float], asked: list[float]) -> dict[str, Any]:
    exact = {q: nearest_rank(traced, float(q)) for q in QS}
    population = {q: nearest_rank(asked, float(q)) for q in QS}
    return {
        "sidecar_s": sidecar,
        "exact_traced_s": exact,
        "asked_all_requests_s": population,
        "error_vs_exact_traced": {q: sidecar[q] / exact[q] - 1 for q in QS if q in sidecar},
        "error_vs_all_requests": {q: sidecar[q] / population[q] - 1 for q in QS if q in sidecar},
    }


def settle(sidecar: Callable[[], float], independent: Callable[[], int], floor: float, what: str) -> None:
    """Wait until the sidecar and the independent count agree, reach ``floor`` and stop moving for
    one export period of Triton's batch span processor (5 s)."""
    deadline = time.monotonic() + 60
    last, since = -1.0, time.monotonic()
    while time.monotonic() < deadline:
        got, truth = sidecar(), independent()
        if got != last:
            last, since = got, time.monotonic()
        if got == truth >= floor and time.monotonic() - since > 6:
            return
        time.sleep(0.5)
    raise TimeoutError(f"{what}: sidecar {sidecar()} vs {independent()} traced, expected >= {floor:.0f}")


def warm_up(base: str) -> None:
    # A python instance's first request takes tens of ms: warm all four with tracing off.
    requests.post(f"{base}/v2/trace/setting", json={"trace_level": ["OFF"]}, timeout=5).raise_for_status()
    drive(base, 4 * CLIENTS, 0)
    requests.post(
        f"{base}/v2/trace/setting", json={"trace_level": ["TIMESTAMPS"]}, timeout=5
    ).raise_for_status()


def _sidecar(triton: LocalTriton, **kw: Any) -> Sidecar:
    return Sidecar.local(
        triton.http_url, triton.metrics_url, interval=1.0, window=10.0, quantile_window=3600.0, **kw
    ).start()


def run_otlp(repo: Path, plan: dict[int, int]) -> tuple[list[dict[str, Any]], list[bytes]]:
    capture = OtlpCapture().start()
    otlp = f"127.0.0.1:{free_port()}"
    results = []
    recorded: list[bytes] = []
    first_rate = next(iter(plan))
    try:
        with LocalTriton([repo], trace_to=f"http://{otlp}/v1/traces", trace_rate=first_rate) as triton:
            warm_up(triton.http_url)
            for rate, total in plan.items():
                capture.clear()
                requests.post(
                    f"{triton.http_url}/v2/trace/setting", json={"trace_rate": str(rate)}, timeout=5
                ).raise_for_status()
                sidecar = _sidecar(triton, otlp_listen=otlp, otlp_forward=capture.url)
                try:
                    t0 = time.monotonic()
                    asked = drive(triton.http_url, total, seed=rate)
                    elapsed = time.monotonic() - t0
                    settle(
                        lambda port=sidecar.port: sidecar_quantiles(port)[1],
                        lambda: len(otlp_durations(capture.bodies())),
                        0.9 * len(asked) / rate,
                        f"rate {rate}: the traced requests",
                    )
                    qs, count = sidecar_quantiles(sidecar.port)
                finally:
                    sidecar.stop()
                traced = otlp_durations(capture.bodies())
                results.append(
                    {
                        "trace_rate": rate,
                        "input": "otlp",
                        "requests": len(asked),
                        "requests_per_s": round(len(asked) / elapsed, 1),
                        "traced": len(traced),
                        "sidecar_samples": count,
                        **compare(qs, traced, asked),
                    }
                )
                if rate == 10:
                    recorded = capture.bodies()
    finally:
        capture.stop()
    return results, recorded


def run_trace_files(repo: Path, total: int, workdir: Path) -> dict[str, Any]:
    folder = workdir / "traces"
    folder.mkdir()
    path = folder / "trace.json"
    with LocalTriton([repo], trace_file=path, trace_rate=1) as triton:
        requests.post(
            f"{triton.http_url}/v2/trace/setting", json={"log_frequency": "200"}, timeout=5
        ).raise_for_status()
        warm_up(triton.http_url)
        sidecar = _sidecar(triton, trace_file=str(path))
        try:
            t0 = time.monotonic()
            asked = drive(triton.http_url, total, seed=1)
            elapsed = time.monotonic() - t0

            def caught_up() -> bool:
                return sidecar_quantiles(sidecar.port)[1] == len(file_durations(folder, path.name)) > 0

            wait_until(caught_up, 30, "the sidecar to read every completed trace file")
            qs, count = sidecar_quantiles(sidecar.port)
            traced = file_durations(folder, path.name)
        finally:
            sidecar.stop()
    return {
        "trace_rate": 1,
        "input": "trace_file",
        "requests": len(asked),
        "requests_per_s": round(len(asked) / elapsed, 1),
        "traced": len(traced),
        "sidecar_samples": count,
        "note": "traces still in Triton's buffer (under log_frequency=200) are in no file yet",
        **compare(qs, traced, asked),
    }


def cpu_per_1000_spans(bodies: list[bytes], passes: int) -> dict[str, Any]:
    spans = 0
    cpu = 0.0
    for _ in range(passes):
        receiver = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), interval=60.0)
        try:
            t0 = time.process_time()
            for body in bodies:
                spans += receiver.ingest(body, {}, time.time())
            cpu += time.process_time() - t0
        finally:
            receiver.server.server_close()
    return {
        "spans": spans,
        "bodies": len(bodies) * passes,
        "cpu_seconds": round(cpu, 4),
        "cpu_ms_per_1000_spans": round(cpu / spans * 1e6, 3) if spans else None,
    }


def time_it(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.monotonic()
    return fn(), time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the request counts (default 1)")
    ap.add_argument("--out", type=Path, default=RESULTS / "traces.json")
    args = ap.parse_args(argv)
    n = lambda k: max(CLIENTS * 10, int(k * args.scale) // CLIENTS * CLIENTS)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="tritonwatch-bench-traces-") as tmp:
        repo = Path(tmp) / "models"
        shutil.copytree(SLEEPER, repo / "sleeper")
        runs = [run_trace_files(repo, n(2000), Path(tmp))]
        otlp_runs, recorded = run_otlp(repo, {10: n(6000), 100: n(20000)})
        runs += otlp_runs
    cost = cpu_per_1000_spans(recorded, passes=20)
    result = {
        "generated_by": "python -m bench.trace_accuracy",
        "machine": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
        },
        "model": "sleeper: 85% 5 ms, 13% 25 ms, 2% 100 ms; 4 clients, 4 instances",
        "phase": PHASE,
        "quantile_method": "nearest rank",
        "runs": runs,
        "ingest_cost": cost,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    print(
        f"{'rate':>5} {'input':<10} {'requests':>8} {'traced':>6}  "
        + "  ".join(f"p{q[2:]:<3} err(traced/all)" for q in QS)
    )
    for r in runs:
        errs = "  ".join(
            f"{r['sidecar_s'].get(q, math.nan) * 1000:5.1f}ms {r['error_vs_exact_traced'].get(q, math.nan):+.1%}/"
            f"{r['error_vs_all_requests'].get(q, math.nan):+.1%}"
            for q in QS
        )
        print(f"{r['trace_rate']:>5} {r['input']:<10} {r['requests']:>8} {r['traced']:>6}  {errs}")
    print(f"ingest CPU: {cost['cpu_ms_per_1000_spans']} ms per 1,000 spans ({cost['spans']} spans)")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
