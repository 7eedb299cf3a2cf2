"""The weekly report at fleet scale (issue 25): N models x 4 weeks at 15 s in VictoriaMetrics.

For each N (default 50, 200, 500) a real VictoriaMetrics (Debian ``victoria-metrics``, loopback, its own
data dir) is loaded with N models' Triton and sidecar series (``tests/support/synthetic.py``'s
generator: one Triton per model, 8 models per GPU, every 10th model with the sidecar's latency
histogram) over 28 days at a 15 s step, through ``/api/v1/import`` (JSON lines), one model at a time:
the loader holds one model's arrays and one request body at once, whatever N. Then
``tritonwatch report --prometheus URL --days 7`` runs against it in a subprocess (its history is all
28 days) and its wall time and peak RSS (``ru_maxrss`` of the child) are recorded, with the models per
query at the default and, for comparison, unbounded (one query for the whole fleet), after a first run
that reads the store's files from disk into the page cache (recorded apart as ``cold_run``).

Loading is the slow part on a small machine (about 2.2 M samples per model): a loaded data dir is kept
under ``bench/.cache/report_scale/N<n>`` (ignored by git) and reused. Writes
bench/results/report_scale.json. Run: ``python -m bench.report_scale [--models 50,200,500]``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until
from tritonwatch.reports.batching import DEFAULT_MODELS_PER_QUERY

ROOT = Path(__file__).resolve().parent.parent
# The synthetic weeks are a test fixture (not shipped in the wheel): the bench runs from a checkout.
sys.path.insert(0, str(ROOT / "tests"))
from support import synthetic  # noqa: E402

RESULTS = ROOT / "bench" / "results"
CACHE = ROOT / "bench" / ".cache" / "report_scale"
DAYS = 28
STEP_S = 15
END = datetime(2026, 11, 30, tzinfo=timezone.utc)
MODELS_PER_GPU = 8
CHUNK_POINTS = 5760  # one day at 15 s per JSON line: a line's text stays a few hundred kB


def fleet(n: int) -> synthetic.Week:
    """N models, one Triton each, 8 per GPU; sizes and rates vary so the report has something to rank."""
    gpus = []
    models = []
    for g in range((n + MODELS_PER_GPU - 1) // MODELS_PER_GPU):
        uuid = f"GPU-{g:08d}-0000-0000-0000-000000000000"
        gpus.append(synthetic.Gpu(uuid, f"triton-{g}:8002", 0.2 + 0.6 * ((g * 37) % 100) / 100, sidecar=True))
    for i in range(n):
        g = i // MODELS_PER_GPU
        inst = synthetic.Instance(f"triton-{g}:8002", f"triton-{g}:9450", gpus[g].uuid)
        batching = i % 3 != 0
        models.append(
            synthetic.Model(
                name=f"model-{i:04d}",
                instances=(inst,),
                peak_rate=1.0 + (i * 7919) % 200,
                error_ratio=0.001 * (1 + i % 5),
                canceled_ratio=0.0,
                batch_size=4.0 if batching else 1.0,
                max_batch_size=16 if batching else 0,
                cache_hit_ratio=None,
                request_latency_s=0.01 + 0.002 * (i % 50),
                queue_share=0.1,
                histogram=i % 10 == 0,
            )
        )
    start = END - timedelta(days=DAYS)
    return synthetic.Week(start=start, models=tuple(models), gpus=tuple(gpus), days=DAYS, step_s=STEP_S)


def _lines(series: Iterator[Any], stamps: list[str]) -> Iterator[bytes]:
    """JSON lines of ``/api/v1/import``: one per series and day, values as the shortest exact text."""
    for s in series:
        metric = json.dumps({"__name__": s.name, **s.labels}, sort_keys=True)
        values = s.values
        integral = bool(np.all(values == np.floor(values)))
        for k, ts in enumerate(stamps):
            part = values[k * CHUNK_POINTS : (k + 1) * CHUNK_POINTS]
            text = (
                ",".join(map(str, part.astype(np.int64).tolist()))
                if integral
                else ",".join(map(repr, part.tolist()))
            )
            yield f'{{"metric":{metric},"values":[{text}],"timestamps":[{ts}]}}\n'.encode()


def _post(url: str, body: bytes) -> None:
    req = urllib.request.Request(url, data=body, method="POST")
    with urllib.request.urlopen(req, timeout=600) as resp:
        if resp.status // 100 != 2:
            raise RuntimeError(f"{url}: HTTP {resp.status}")


class Store:
    """A VictoriaMetrics on loopback over ``data`` (kept: it is the cache)."""

    def __init__(self, data: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = Managed(
            "victoria-metrics",
            [
                "victoria-metrics",
                f"-storageDataPath={data}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-selfScrapeInterval=0",
                "-search.disableCache",  # every report run pays for its queries, none read a cached rollup
                "-search.maxPointsPerTimeseries=30000",
            ],
            log_path=log,
        )
        wait_until(lambda: self._ready(), 120, f"victoria-metrics at {self.url}")

    def _ready(self) -> bool:
        if not self.proc.alive():
            raise RuntimeError(f"victoria-metrics exited: {self.proc.log_tail(5)}")
        return http_ok(f"{self.url}/health")

    def series_count(self) -> int:
        """Series in the store at the end of the data (every model's and GPU's)."""
        query = urllib.parse.urlencode({"query": 'count({__name__!=""})', "time": END.timestamp()})
        with urllib.request.urlopen(f"{self.url}/api/v1/query?{query}", timeout=600) as resp:
            return int(float(json.load(resp)["data"]["result"][0]["value"][1]))

    def stop(self) -> None:
        self.proc.stop(grace=60)


def load(week: synthetic.Week, store: Store) -> dict[str, float]:
    """Import the week model by model (and the GPUs); returns samples and seconds."""
    t = week.times()
    ms = (t * 1000).astype(np.int64)
    stamps = [",".join(map(str, ms[k : k + CHUNK_POINTS].tolist())) for k in range(0, ms.size, CHUNK_POINTS)]
    rng = np.random.default_rng(week.seed)
    samples = 0
    started = time.monotonic()
    url = f"{store.url}/api/v1/import"
    for m in week.models:
        batch = list(synthetic.model_series(week, m, rng))
        samples += sum(s.values.size for s in batch)
        _post(url, b"".join(_lines(iter(batch), stamps)))
    for g in week.gpus:
        batch = list(synthetic.gpu_series(week, g, rng))
        samples += sum(s.values.size for s in batch)
        _post(url, b"".join(_lines(iter(batch), stamps)))
    # Make the imported samples searchable before the report asks.
    with urllib.request.urlopen(f"{store.url}/internal/force_flush", timeout=600):
        pass
    return {"samples": samples, "seconds": round(time.monotonic() - started, 1)}


# Runs the report as its only child and prints that child's peak RSS (KiB): ru_maxrss of the children
# is the largest child's, so each measured run gets a parent of its own.
_WRAPPER = (
    "import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)"
)


def run_report(url: str, out: Path, models_per_query: int) -> dict[str, Any]:
    """``tritonwatch report`` in a child process: wall time and the child's peak RSS."""
    cmd = [sys.executable, "-c", _WRAPPER, sys.executable, "-m", "tritonwatch", "report"]
    cmd += ["--prometheus", url, "--days", "7", "--end", END.strftime("%Y-%m-%dT%H:%M:%SZ")]
    cmd += ["--out", str(out), "--models-per-query", str(models_per_query), "--timeout", "600"]
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(f"report failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    peak_kib = int(proc.stderr.strip().splitlines()[-1])
    rows = sum(1 for _ in (out / "models.csv").open()) - 1
    fitted = re.search(r"forecasts fitted over ([^(.]+)", (out / "report.md").read_text())
    return {
        "wall_s": round(wall, 1),
        "peak_rss_mib": round(peak_kib / 1024, 1),
        "report_rows": rows,
        "history": fitted.group(1).strip() if fitted else "",
    }


def measure(n: int, models_per_query: list[int]) -> dict[str, Any]:
    week = fleet(n)
    cache = CACHE / f"N{n}"
    result: dict[str, Any] = {"models": n, "days": DAYS, "step_s": STEP_S}
    loaded = (cache / "loaded.json").exists()
    if not loaded:
        shutil.rmtree(cache, ignore_errors=True)
        cache.mkdir(parents=True)
    store = Store(cache / "data", cache / "victoria-metrics.log")
    try:
        if not loaded:
            info = load(week, store)
            (cache / "loaded.json").write_text(json.dumps(info))
        info = json.loads((cache / "loaded.json").read_text())
        result["samples"] = info["samples"]
        result["load_s"] = info["seconds"]
        result["series"] = store.series_count()
        # One run first, recorded apart, so that every measured run reads the store's files from the
        # page cache: the first run after the store starts pays for reading them from disk.
        with tempfile.TemporaryDirectory() as out:
            result["cold_run"] = run_report(store.url, Path(out), models_per_query[0])
        result["runs"] = []
        for mpq in models_per_query:
            with tempfile.TemporaryDirectory() as out:
                run = run_report(store.url, Path(out), mpq)
            run["models_per_query"] = mpq
            print(f"report_scale: N={n} models_per_query={mpq}: {run}", file=sys.stderr)
            result["runs"].append(run)
    finally:
        store.stop()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.report_scale", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="50,200,500", help="fleet sizes, comma-separated")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.models.split(",") if x]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "report_scale.json"
    results: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    for n in sizes:
        results[str(n)] = measure(n, [DEFAULT_MODELS_PER_QUERY, 0])
        results["machine"] = f"{os.cpu_count()} CPUs, shared"
        out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
