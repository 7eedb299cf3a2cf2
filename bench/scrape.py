"""The scrape path at fleet scale, side by side in one run (issue 17: faster than Prometheus's own scrape).

For payloads of 50, 500 and 2,000 models (with summaries, values changing every second) served on
loopback by a process of their own, this measures in the same run:

* prometheus_client's text parser on the payload (in this process);
* the sidecar's cycle (fetch + parse + derive): ``tritonwatch_scrape_duration_seconds{target="triton"}``
  of a real ``tritonwatch sidecar`` subprocess scraping at a 1 s interval;
* a real Prometheus scraping the same payload: ``scrape_duration_seconds``;
* GETs of the sidecar's own /metrics while its loop runs, by ``--clients`` client processes each
  scraping every second over a kept-alive connection (half ask for gzip, as Prometheus does; half
  not): median and p99 seconds per GET, to the last byte;
* the sidecar's CPU share (from /proc) and resident memory over the measured time (``--seconds``
  for the largest size: 600 s is the 10-minute memory check), after ``--warmup`` seconds in which its
  60 s window fills.

Prints a table of ratios and writes bench/results/scrape.json. Run: ``python -m bench.scrape``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from bench.payloads import payload, sample_count
from tritonwatch import catalog
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


# The sidecar's own scrape of the payload, read from its /metrics without parsing all of it.
_CYCLE = re.compile(
    rb"^" + re.escape(catalog.SCRAPE_DURATION.encode()) + rb'\{target="triton"\} (\S+)$', re.M
)
_UP = re.compile(rb"^" + re.escape(catalog.UP.encode()) + rb'\{target="triton"\} (\S+)$', re.M)


def percentile(values: list[float], q: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def run_size(
    models: int, seconds: float, workdir: Path, warmup: float = 0.0, clients: int = 4
) -> dict[str, Any]:
    body = payload(models, 1)
    parser_s = client_parser_seconds(body)
    payload_port = free_port()
    server = Managed(
        "payloads",
        [sys.executable, "-m", "bench.payloads", "--models", str(models), "--port", str(payload_port)],
        log_path=workdir / f"payloads-{models}.log",
    )
    payload_url = f"http://127.0.0.1:{payload_port}/metrics"
    port = free_port()
    sidecar = Managed(
        "sidecar",
        [
            sys.executable, "-m", "tritonwatch", "sidecar",
            "--triton", "http://127.0.0.1:9",  # no API here: costs only triton_api
            "--triton-metrics", payload_url,
            "--listen", f"127.0.0.1:{port}",
            "--interval", "1", "--window", "60", "--timeout", "5",
        ],
        log_path=workdir / f"sidecar-{models}.log",
    )  # fmt: skip
    prom = Prometheus(
        workdir / f"prom-{models}",
        prometheus_config([ScrapeTarget("payload", f"127.0.0.1:{payload_port}")], scrape_interval="1s"),
    )
    url = f"http://127.0.0.1:{port}/metrics"
    scrapers: list[Managed] = []
    try:
        wait_until(lambda: http_ok(payload_url), 60, "the payload server")
        prom.wait_ready()
        wait_until(lambda: http_ok(url), 60, "the sidecar")
        # Memory is compared once the sidecar's 60 s window is full: before that it grows by design.
        warm_end = time.monotonic() + warmup
        while time.monotonic() < warm_end:
            time.sleep(1.0)
        outs = [workdir / f"client-{models}-{i}.json" for i in range(clients)]
        for i, out in enumerate(outs):
            argv = [sys.executable, "-m", "bench.client", "--url", url, "--seconds", str(seconds)]
            argv += ["--offset", f"{i / max(clients, 1):.3f}", "--out", str(out)]
            scrapers.append(Managed(f"client-{i}", argv + (["--gzip"] if i % 2 == 0 else [])))
        durations: list[float] = []
        rss: list[int] = []
        cpu0, t0 = cpu_seconds(sidecar.pid), time.monotonic()
        end = t0 + seconds
        while time.monotonic() < end:
            text = get(url)
            d, up = _CYCLE.search(text), _UP.search(text)
            if d and up and float(up.group(1)) == 1.0:
                durations.append(float(d.group(1)))
            rss.append(rss_bytes(sidecar.pid))
            time.sleep(1.0)
        cpu_share = (cpu_seconds(sidecar.pid) - cpu0) / (time.monotonic() - t0)
        for c in scrapers:
            wait_until(lambda c=c: c.proc.poll() is not None, 30, "a client to finish")
        gets = [t for out in outs for t in json.loads(out.read_text())]
        window = f"{int(seconds)}s"
        prom_median = prom_query(
            prom.url, f'quantile_over_time(0.5, scrape_duration_seconds{{job="payload"}}[{window}])'
        )
        prom_up = prom_query(prom.url, f'min_over_time(up{{job="payload"}}[{window}])')
    finally:
        for c in scrapers:
            c.stop()
        sidecar.stop()
        prom.stop()
        server.stop()
    third = max(1, len(rss) // 3)
    side_median = statistics.median(durations) if durations else float("nan")
    ok = [t for t in gets if not math.isnan(t)]
    first, last = statistics.mean(rss[:third]) / 2**20, statistics.mean(rss[-third:]) / 2**20
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
        "sidecar_rss_mb_first_third": first,
        "sidecar_rss_mb_last_third": last,
        "sidecar_rss_change": (last - first) / first,
        "sidecar_rss_mb_max": max(rss) / 2**20,
        "sidecar_get_clients": clients,
        "sidecar_get_count": len(gets),
        "sidecar_get_failed": len(gets) - len(ok),
        "sidecar_get_median_s": statistics.median(ok) if ok else None,
        "sidecar_get_p99_s": percentile(ok, 0.99) if ok else None,
        "sidecar_get_max_s": max(ok) if ok else None,
        "warmup_s": warmup,
        "measured_s": seconds,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        f"{'models':>6} {'samples':>8} {'py parser':>10} {'sidecar':>9} {'prometheus':>10} "
        f"{'sidecar/prom':>12} {'cpu':>6} {'rss MB':>13} {'GET p50':>8} {'GET p99':>8}"
    )
    lines = [head]
    nan = float("nan")
    for r in rows:
        lines.append(
            f"{r['models']:>6} {r['samples']:>8} {r['client_python_parser_s']:>9.3f}s "
            f"{r['sidecar_cycle_median_s']:>8.3f}s {(r['prometheus_scrape_median_s'] or nan):>9.3f}s "
            f"{(r['ratio_sidecar_vs_prometheus'] or nan):>11.2f}x {r['sidecar_cpu_share_of_one_core'] * 100:>5.0f}% "
            f"{r['sidecar_rss_mb_first_third']:>5.0f}->{r['sidecar_rss_mb_last_third']:<5.0f} "
            f"{(r['sidecar_get_median_s'] or nan):>7.3f}s {(r['sidecar_get_p99_s'] or nan):>7.3f}s"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.scrape", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,500,2000", help="model counts")
    ap.add_argument(
        "--seconds",
        type=float,
        default=600.0,
        help="measured seconds for the largest size (memory flat over it; the others get 20 s)",
    )
    ap.add_argument("--warmup", type=float, default=65.0, help="seconds before measuring the largest size")
    ap.add_argument("--clients", type=int, default=4, help="client processes scraping the sidecar")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    with tempfile.TemporaryDirectory(prefix="tritonwatch-bench-") as tmp:
        for n in sizes:
            secs = args.seconds if n == max(sizes) else min(args.seconds, 20.0)
            print(f"measuring {n} models for {secs:.0f}s ...", file=sys.stderr, flush=True)
            rows.append(run_size(n, secs, Path(tmp), args.warmup if n == max(sizes) else 0.0, args.clients))
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
