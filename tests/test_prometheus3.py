"""What Prometheus 3 changed under the generated rules, on a real Prometheus of each stack.

* ``le`` is normalised at ingestion: Triton 2.65's first-response histogram writes its bounds as integer
  milliseconds (``le="25"``), which Prometheus 3 stores as ``le="25.0"``. The SLO's SLI reads the
  sidecar's histogram (bounds in seconds, Python's spelling, which 3.x keeps), through ``le_matcher``,
  which also accepts 3.x's spelling of any bound; quantiles do not depend on the spelling.
* Native histograms with custom buckets (``convert_classic_histograms_to_nhcb``): no ``_bucket`` series
  are stored, so every generated latency rule reads nothing. ``rules --check-prometheus URL`` names it
  in one line.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from conftest import DATA
from support import stacks
from support.fake_triton import FakeTriton, fake_triton
from support.static_endpoint import StaticEndpoint

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.exporters.native_latency import bucket_quantile
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.fronthistogram import le_regex
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

FAMILY = catalog.TRITON_FIRST_RESPONSE
BOUNDS_MS = (5, 10, 25, 50, 100)
PER_STEP = (30, 50, 15, 4, 1, 0)  # requests per payload step by bucket: 5 of every 100 over 25 ms
THRESHOLD_MS = 25
SLO_DOC = {
    "apiVersion": "tritonwatch/v1",
    "kind": "ServiceLevelObjectives",
    "metadata": {"name": "prometheus3"},
    "spec": {
        "window": "28d",
        "up_job": "triton",
        "slos": [
            {
                "model": "fraud_detector",
                "latency": {"threshold": f"{THRESHOLD_MS}ms", "objective": 99, "min_samples": 10},
            }
        ],
    },
}


# --- the spelling (fast lane) ------------------------------------------------------------------------
# Go's strconv.FormatFloat(f, 'g', -1, 64) plus ".0" on a whole number, as Prometheus 3.16 writes them
# (model/labels/float.go, FormatOpenMetricsFloat); checked on the real server below for Triton's bounds.
GO_SPELLINGS = {
    1.0: "1.0",
    25.0: "25.0",
    100.0: "100.0",
    0.025: "0.025",
    2.5: "2.5",
    0.0001: "0.0001",
    1e-05: "1e-05",
    0.00012345: "0.00012345",
    123456.0: "123456.0",
    1e6: "1e+06",
    1234567.0: "1.234567e+06",
    1e16: "1e+16",
}


@pytest.mark.parametrize(("bound", "stored"), sorted(GO_SPELLINGS.items()))
def test_prometheus3_le_is_gos_shortest_spelling(bound: float, stored: str) -> None:
    assert catalog.prometheus3_le(bound) == stored


@pytest.mark.parametrize("threshold", sorted(GO_SPELLINGS))
def test_le_matchers_accept_every_spelling_of_their_bound_and_no_other(threshold: float) -> None:
    pattern = re.compile(
        catalog.le_matcher(threshold).removeprefix('le=~"').removesuffix('"').replace("\\\\", "\\")
    )
    front = re.compile(le_regex(Decimal(repr(threshold))))
    spellings = {repr(threshold), catalog.prometheus3_le(threshold), f"{threshold:g}"}
    if threshold.is_integer() and threshold < 1e6:
        spellings.add(str(int(threshold)))  # the Go client's and Triton's (Go writes 1e+06 from there)
    for text in spellings:
        assert pattern.fullmatch(text), (threshold, text, pattern.pattern)
        assert front.fullmatch(text), (threshold, text, front.pattern)
    for other in (threshold * 10, threshold / 10):
        assert not pattern.fullmatch(catalog.prometheus3_le(other)), (threshold, other)


# --- on a real Prometheus of each stack ----------------------------------------------------------------
def triton_payload(step: int) -> bytes:
    """Triton 2.65's lines for fraud_detector after ``step`` steps (integer ms bounds, as Triton writes them)."""
    lines = [
        f"# HELP {FAMILY} Duration from request to first response in milliseconds",
        f"# TYPE {FAMILY} histogram",
    ]
    acc = 0
    labels = 'model="fraud_detector",version="1"'
    for bound, n in zip((*BOUNDS_MS, "+Inf"), PER_STEP, strict=True):
        acc += n * step
        lines.append(f'{FAMILY}_bucket{{{labels},le="{bound}"}} {acc}')
    lines += [f"{FAMILY}_sum{{{labels}}} {11 * step}", f"{FAMILY}_count{{{labels}}} {acc}"]
    return ("\n".join(lines) + "\n").encode()


def expected_quantiles() -> dict[str, float]:
    cumulative, acc = [], 0
    for bound, n in zip((*BOUNDS_MS, math.inf), PER_STEP, strict=True):
        acc += n
        cumulative.append((bound / 1000, float(acc)))
    out = {}
    for q in catalog.QUANTILES:
        v = bucket_quantile(float(q), cumulative)
        assert v is not None
        out[q] = v
    return out


@contextlib.contextmanager
def advancing(endpoint: StaticEndpoint, every: float = 0.5) -> Iterator[None]:
    """Moves the payload one step on every ``every`` s: every step adds the same mix of requests."""
    stop = threading.Event()

    def run() -> None:
        step = 0
        while not stop.wait(every):
            step += 1
            endpoint.payload = triton_payload(step)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


@pytest.fixture
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        server.index = [{"name": "fraud_detector", "state": "READY", "version": "1"}]
        server.configs = {
            "fraud_detector": json.loads((DATA / "triton_config_fraud_detector.json").read_text())
        }
        yield server


def _query(url: str, expr: str) -> list[dict[str, Any]]:
    resp = requests.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10)
    assert resp.status_code == 200, (expr, resp.text[:300])
    return list(resp.json()["data"]["result"])


def _scalar(url: str, expr: str) -> float | None:
    result = _query(url, expr)
    assert len(result) <= 1, (expr, result)
    return float(result[0]["value"][1]) if result else None


def _rules(tmp_path: Path) -> list[Path]:
    slo_file = tmp_path / "slo.yaml"
    slo_file.write_text(yaml.safe_dump(SLO_DOC))
    out = tmp_path / "rules"
    assert main(["rules", "--slo", str(slo_file), "--out", str(out)]) == 0
    return sorted(out.glob("*.rules.yml"))


@contextlib.contextmanager
def scraped(tmp_path: Path, fake: FakeTriton, config_extra: dict[str, Any] | None = None) -> Iterator[str]:
    """Triton 2.65's histogram (a static endpoint moving one step every 0.5 s) and a real sidecar of it,
    scraped every second by the stack's Prometheus with the generated rules; yields its URL."""
    endpoint = StaticEndpoint(triton_payload(0)).start()
    sidecar = Sidecar.local(fake.base_url, endpoint.url, interval=1.0, window=60.0)
    prom = None
    try:
        sidecar.start()
        targets = [
            ScrapeTarget("triton", f"127.0.0.1:{endpoint.port}"),
            ScrapeTarget("tritonwatch", f"127.0.0.1:{sidecar.port}"),
        ]
        config = prometheus_config(targets, _rules(tmp_path))
        if config_extra:
            config["global"] = {**config["global"], **config_extra}  # type: ignore[dict-item]
        prom = Prometheus(tmp_path / "prometheus", config).wait_ready(60)
        with advancing(endpoint):
            yield prom.url
    finally:
        if prom is not None:
            prom.stop()
        sidecar.stop()
        endpoint.stop()


def _evaluated_since(url: str, since: float) -> bool:
    groups = requests.get(f"{url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    # RFC 3339 with nanoseconds: seconds are enough here
    stamps = [datetime.fromisoformat(g["lastEvaluation"][:19] + "+00:00").timestamp() for g in groups]
    return bool(stamps) and min(stamps) > since + 1


def _until(check: Any, what: str, timeout: float = 60.0) -> None:
    wait_until(lambda: bool(check()), timeout, what)


def test_triton_integer_ms_histogram_gives_the_same_sli_and_quantiles(
    platform: stacks.Stack, fake: FakeTriton, tmp_path: Path
) -> None:
    sli = f'{catalog.slo_sli_error_record("5m")}{{slo="fraud_detector-latency"}}'

    def raw(q: str) -> str:
        return f'histogram_quantile({q}, sum by (le) (rate({FAMILY}_bucket{{model="fraud_detector"}}[1m]))) / 1000'

    def served(q: str) -> str:
        return (
            f"histogram_quantile({q}, sum by (le) (rate({catalog.REQUEST_DURATION}_bucket"
            f'{{model="fraud_detector",phase="request"}}[1m])))'
        )

    quantiles = expected_quantiles()
    with scraped(tmp_path, fake) as url:
        # Each target's first two scrapes land at their own offsets: wait for every series read below
        # (the SLI may come from the sidecar's histogram while Triton's has one sample: a race once).
        every = [sli, *(e(q) for e in (raw, served) for q in quantiles)]
        _until(lambda: all(_scalar(url, e) is not None for e in every), "the SLI and both quantile series")
        # 5 of every 100 requests took over 25 ms (a bucket bound): the SLI is that share.
        assert _scalar(url, sli) == pytest.approx(0.05, rel=1e-9)
        # How each stack stored Triton's integer bounds: 3.x normalised them, 2.x kept the text.
        spelled = {le: _scalar(url, f'count({FAMILY}_bucket{{le="{le}"}})') for le in ("25", "25.0")}
        stored = "25.0" if platform.prometheus_major >= 3 else "25"
        assert spelled == {stored: 1.0, ({"25", "25.0"} - {stored}).pop(): None}
        # The sidecar's histogram (seconds) keeps its spelling on both.
        assert _scalar(url, f'count({catalog.REQUEST_DURATION}_bucket{{le="0.025"}})') == 1.0
        for q, want in quantiles.items():
            for expr in (raw(q), served(q)):
                assert _scalar(url, expr) == pytest.approx(want, rel=1e-9), (q, expr)
        slo_file = tmp_path / "slo.yaml"
        assert (
            main(
                ["rules", "--slo", str(slo_file), "--out", str(tmp_path / "again"), "--check-prometheus", url]
            )
            == 0
        )


@pytest.mark.parametrize(
    "platform", ["current"], indirect=True
)  # only 3.x has native histograms with custom buckets
def test_native_histograms_with_custom_buckets_are_named_in_one_line(
    platform: stacks.Stack, fake: FakeTriton, tmp_path: Path
) -> None:
    assert platform.prometheus_major >= 3
    sli = f'{catalog.slo_sli_error_record("5m")}{{slo="fraud_detector-latency"}}'
    series = f'{catalog.REQUEST_DURATION}{{model="fraud_detector",phase="request"}}'
    with scraped(tmp_path, fake, {"convert_classic_histograms_to_nhcb": True}) as url:
        _until(lambda: _scalar(url, f"histogram_count(rate({series}[1m]))"), "its rate, two scrapes in")
        since = time.time()
        _until(lambda: _evaluated_since(url, since), "every rule group evaluated after that")
        # What the generated rules then see: no _bucket series, an SLI that is not there at all.
        assert _query(url, f"{catalog.REQUEST_DURATION}_bucket") == []
        assert _query(url, sli) == []
        err = io.StringIO()
        slo_file = tmp_path / "slo.yaml"
        with contextlib.redirect_stderr(err):
            code = main(
                ["rules", "--slo", str(slo_file), "--out", str(tmp_path / "out"), "--check-prometheus", url]
            )
        assert code != 0
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1, lines
        assert (
            catalog.REQUEST_DURATION in lines[0] and "always_scrape_classic_histograms: true" in lines[0]
        ), lines
        assert "fraud_detector-latency" in lines[0]
        assert not (tmp_path / "out").exists()  # nothing written on a failed check
