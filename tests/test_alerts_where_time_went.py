"""A latency page says where the time went, on a real Prometheus with the generated rules.

Three models burn their latency SLO (every sampled request slower than 50 ms). Triton's duration
counters say why: ``queued`` spends 75% of its request time queued (a week before 10%), ``computing``
95% computing, and ``fronted`` (its SLI read from a front's histogram) takes 200 ms a request inside
Triton against 250 ms a week before: flat, so the time went outside Triton. The week before is
backfilled (``promtool tsdb create-blocks-from openmetrics``); the present is scraped every second
from an endpoint whose counters grow at known rates. The pages' descriptions must say each of these.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from support.backfill import copy_blocks, openmetrics_to_blocks
from support.static_endpoint import serve, shutdown

from tritonwatch import catalog
from tritonwatch.alerts import where_time_went
from tritonwatch.cli import main
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import PROMETHEUS_BIN, Prometheus, ScrapeTarget, prometheus_config

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs(PROMETHEUS_BIN, "promtool"),
    pytest.mark.usefixtures("platform"),
]

RATE = 100.0  # requests a second, every model
# model -> (request, queue, compute_infer) microseconds a request, now and a week before
NOW = {
    "queued": (200_000, 150_000, 50_000),
    "computing": (200_000, 10_000, 190_000),
    "fronted": (200_000, 20_000, 180_000),
}
WEEK = {
    "queued": (200_000, 20_000, 180_000),
    "computing": (200_000, 20_000, 180_000),
    "fronted": (250_000, 25_000, 225_000),
}
FRONT = "front_request_duration_seconds_bucket"

SLO = {
    "apiVersion": "tritonwatch/v1",
    "kind": "ServiceLevelObjectives",
    "metadata": {"name": "split"},
    "spec": {
        "window": "28d",
        "slos": [
            {"model": "queued", "latency": {"threshold": "50ms", "objective": 99}},
            {"model": "computing", "latency": {"threshold": "50ms", "objective": 99}},
            {
                "model": "fronted",
                "latency": {
                    "threshold": "50ms",
                    "objective": 99,
                    "from": {"histogram": f'{FRONT}{{server="fronted"}}'},
                },
            },
        ],
    },
}


def triton_lines(seconds: float, table: dict[str, tuple[int, int, int]]) -> list[str]:
    """Triton's counters and the sidecar's histogram ``seconds`` after they started at 0."""
    n = RATE * seconds
    out = []
    for model, (request, queue, infer) in table.items():
        labels = f'model="{model}",version="1"'
        out += [
            f"{catalog.TRITON_SUCCESS}{{{labels}}} {n:.6f}",
            f"{catalog.triton_duration('request')}{{{labels}}} {n * request:.6f}",
            f"{catalog.triton_duration('queue')}{{{labels}}} {n * queue:.6f}",
            f"{catalog.triton_duration('compute_input')}{{{labels}}} 0",
            f"{catalog.triton_duration('compute_infer')}{{{labels}}} {n * infer:.6f}",
            f"{catalog.triton_duration('compute_output')}{{{labels}}} 0",
        ]
    return out


def live_lines(seconds: float) -> list[str]:
    n = RATE * seconds
    out = triton_lines(seconds, NOW)
    for model in ("queued", "computing"):  # every sampled request over 50 ms
        h = f'{catalog.REQUEST_DURATION}_bucket{{model="{model}",version="1",phase="request",le='
        out += [f'{h}"0.05"}} 0', f'{h}"+Inf"}} {n:.6f}']
        out.append(f'{catalog.REQUEST_DURATION}_count{{model="{model}",version="1",phase="request"}} {n:.6f}')
    out += [f'{FRONT}{{server="fronted",le="0.05"}} 0', f'{FRONT}{{server="fronted",le="+Inf"}} {n:.6f}']
    return out


def backfill_week_before(work: Path, now: float) -> Path:
    """The week before, 2 hours up to 10 minutes past ``now - 1w``, every 15 s, as TSDB blocks."""
    start = now - 7 * 86400 - 7200
    om = work / "week.om"
    by_series: dict[str, list[str]] = {}
    for step in range(int((7200 + 600) / 15)):
        t = start + step * 15
        for line in triton_lines(step * 15.0, WEEK):
            series, value = line.rsplit(" ", 1)
            by_series.setdefault(series, []).append(f"{series} {value} {t:.3f}")
    families = sorted({s.split("{")[0] for s in by_series})
    with om.open("w") as f:
        for family in families:  # OpenMetrics: a family's series together, each in time order
            f.write(f"# TYPE {family} gauge\n")
            for series, samples in by_series.items():
                if series.split("{")[0] == family:
                    f.write("\n".join(samples) + "\n")
        f.write("# EOF\n")
    out = work / "blocks"
    openmetrics_to_blocks(om, out)
    return out


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[Prometheus]:
    (tmp_path / "slo.yaml").write_text(yaml.safe_dump(SLO))
    assert main(["rules", "--slo", str(tmp_path / "slo.yaml"), "--out", str(tmp_path / "rules")]) == 0
    now = time.time()
    copy_blocks(backfill_week_before(tmp_path, now), tmp_path / "data")
    started = time.monotonic()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            body = ("\n".join(live_lines(time.monotonic() - started)) + "\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = serve(Handler)
    target = ScrapeTarget("split", f"127.0.0.1:{httpd.server_address[1]}")
    config = prometheus_config([target], sorted((tmp_path / "rules").glob("model-*.rules.yml")))
    prom = Prometheus(tmp_path, config, storage=tmp_path / "data")
    try:
        prom.wait_ready(60)
        yield prom
    finally:
        prom.stop()
        shutdown(httpd)


def pages(prom: Prometheus) -> dict[str, str]:
    resp = requests.get(f"{prom.url}/api/v1/alerts", timeout=5)
    resp.raise_for_status()
    alerts: list[dict[str, Any]] = resp.json()["data"]["alerts"]
    return {
        a["labels"]["model"]: a["annotations"]["description"]
        for a in alerts
        if a["labels"].get("alertname") == catalog.SLO_BURN_ALERT
        and a["labels"].get("severity") == "page"
        and a["state"] == "firing"
    }


def test_a_latency_page_says_where_the_time_went(prometheus: Prometheus) -> None:
    # Each page once the week before is read too (the 1h window's rate needs two scrapes).
    def told() -> bool:
        got = pages(prometheus)
        return len(got) == 3 and all("a week before" in d for d in got.values())

    wait_until(told, 60, "three latency pages with the time split", interval=0.5)
    got = pages(prometheus)
    assert got["queued"].endswith(
        " Over the last 1h Triton's request time was 75% queued and 25% computing"
        f" (a week before: 10% and 90%). {where_time_went.ADVICE_QUEUE}"
    ), got["queued"]
    assert got["computing"].endswith(
        " Over the last 1h Triton's request time was 5% queued and 95% computing"
        f" (a week before: 10% and 90%). {where_time_went.ADVICE_COMPUTE}"
    ), got["computing"]
    assert got["fronted"].endswith(
        " Over the last 1h Triton's request time was 10% queued and 90% computing"
        " (a week before: 10% and 90%). Triton's own time a request is flat (x0.80 a week before): "
        f"{where_time_went.OUTSIDE}"
    ), got["fronted"]
