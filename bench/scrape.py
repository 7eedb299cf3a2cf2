"""The scrape path at fleet scale, side by side in one run (issue: faster than Prometheus's own scrape).

For payloads of 50, 500 and 2,000 models (with summaries, values changing every second) served on
loopback, this measures in the same run:

* prometheus_client's text parser on the payload (in this process);
* the sidecar's cycle (fetch + parse + derive): ``tritonwatch_scrape_duration_seconds{target="triton"}``
  of a real ``tritonwatch sidecar`` subprocess scraping at a 1 s interval;
* a real Prometheus scraping the same payload: ``scrape_duration_seconds``;
* the sidecar's CPU share (all its processes, from /proc) and resident memory over the run;
* the cost of one GET of the sidecar's own /metrics (collect).

Prints a table of ratios and writes bench/results/scrape.json. Run: ``python -m bench.scrape``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench.payloads import PayloadServer, payload, sample_count
from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

RESULTS = Path(__file__).resolve().parent / "results"
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def rss_bytes(pid: int) -> int:
    return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return bytes(resp.read())


def client_parser_seconds(body: bytes, repeats: int = 3) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = body.decode()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _family in text_string_to_metric_families(text):
            pass
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def prom_query(url: str, query: str) -> float | None:
    data = json.loads(get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query})))
    result = data["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def run_size(models: int, seconds: float, workdir: Path, warmup: float = 0.0) -> dict[str, Any]:
    server = PayloadServer(models).start()
    body = payload(models, 1)
    parser_s = client_parser_seconds(body)
    port = free_port()
    sidecar = Managed(
        "sidecar",
        [
            sys.executable, "-m", "tritonwatch", "sidecar",
            "--triton", "http://127.0.0.1:9",  # no API here: costs only triton_api
            "--triton-metrics", server.url,
            "--listen", f"127.0.0.1:{port}",
            "--interval", "1", "--window", "60", "--timeout", "5",
        ],
        log_path=workdir / f"sidecar-{models}.log",
    )  # fmt: skip
    prom = Prometheus(
        workdir / f"prom-{models}",
        prometheus_config([ScrapeTarget("payload", f"127.0.0.1:{server.port}")], scrape_interval="1s"),
    )
    try:
        prom.wait_ready()
        wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/metrics"), 60, "the sidecar")
        # Memory is compared once the sidecar's 60 s window is full: before that it grows by design.
        warm_end = time.monotonic() + warmup
        while time.monotonic() < warm_end:
            time.sleep(1.0)
        durations: list[float] = []
        collect: list[float] = []
        rss: list[int] = []
        cpu0, t0 = cpu_seconds(sidecar.pid), time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            c0 = time.perf_counter()
            samples = parse(get(f"http://127.0.0.1:{port}/metrics"))
            collect.append(time.perf_counter() - c0)
            d = samples.get(catalog.SCRAPE_DURATION, {}).get(((catalog.TARGET, "triton"),))
            up = samples.get(catalog.UP, {}).get(((catalog.TARGET, "triton"),))
            if d is not None and up == 1.0:
                durations.append(d)
            rss.append(rss_bytes(sidecar.pid))
            time.sleep(1.0)
        cpu_share = (cpu_seconds(sidecar.pid) - cpu0) / (time.monotonic() - t0)
        window = f"{int(seconds)}s"
        prom_median = prom_query(
            prom.url, f'quantile_over_time(0.5, scrape_duration_seconds{{job="payload"}}[{window}])'
        )
        prom_up = prom_query(prom.url, f'min_over_time(up{{job="payload"}}[{window}])')
    finally:
        sidecar.stop()
        prom.stop()
        server.stop()
    third = max(1, len(rss) // 3)
    side_median = statistics.median(durations) if durations else float("nan")
    return {
        "models": models,
        "samples": sample_count(models),
        "payload_bytes": len(body),
        "client_python_parser_s": parser_s,
        "sidecar_cycle_median_s": side_median,
        "sidecar_cycles": len(durations),
        "prometheus_scrape_median_s": prom_median,
        "prometheus_up_min": prom_up,
        "ratio_sidecar_vs_prometheus": side_median / prom_median if prom_median else None,
        "ratio_client_parser_vs_prometheus": parser_s / prom_median if prom_median else None,
        "sidecar_cpu_share_of_one_core": cpu_share,
        "sidecar_rss_mb_first_third": statistics.mean(rss[:third]) / 2**20,
        "sidecar_rss_mb_last_third": statistics.mean(rss[-third:]) / 2**20,
        "sidecar_collect_median_s": statistics.median(collect) if collect else None,
        "warmup_s": warmup,
        "measured_s": seconds,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'models':>6} {'samples':>8} {'py parser':>10} {'sidecar':>9} {'prometheus':>10} "
        f"{'sidecar/prom':>12} {'parser/prom':>11} {'cpu':>6} {'rss MB':>13} {'collect':>8}"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"{r['models']:>6} {r['samples']:>8} {r['client_python_parser_s']:>9.3f}s {r['sidecar_cycle_median_s']:>8.3f}s "
            f"{(r['prometheus_scrape_median_s'] or float('nan')):>9.3f}s {(r['ratio_sidecar_vs_prometheus'] or float('nan')):>11.2f}x "
            f"{(r['ratio_client_parser_vs_prometheus'] or float('nan')):>10.1f}x {r['sidecar_cpu_share_of_one_core'] * 100:>5.0f}% "
            f"{r['sidecar_rss_mb_first_third']:>5.0f}->{r['sidecar_rss_mb_last_third']:<5.0f} {(r['sidecar_collect_median_s'] or 0) * 1000:>6.1f}ms"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scrape", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,500,2000", help="model counts")
    ap.add_argument("--seconds", type=float, default=60.0, help="measured seconds per size (the largest)")
    ap.add_argument("--warmup", type=float, default=65.0, help="seconds before measuring the largest size")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonwatch-bench-") as tmp:
        for n in sizes:
            secs = args.seconds if n == max(sizes) else min(args.seconds, 20.0)
            print(f"measuring {n} models for {secs:.0f}s ...", file=sys.stderr, flush=True)
            rows.append(run_size(n, secs, Path(tmp), args.warmup if n == max(sizes) else 0.0))
    print(table(rows))
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "scrape.json"
    out.write_text(
        json.dumps({"machine": os.uname().machine, "cpus": os.cpu_count(), "runs": rows}, indent=2) + "\n"
    )
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
