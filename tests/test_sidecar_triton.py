"""The sidecar against the real local Triton: derived values agree with Triton's own statistics API."""

from __future__ import annotations

import json
import math
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.load import LoadDriver
from tritonwatch.local.procs import wait_until

MODEL = "fraud_detector"
WINDOW = 10.0


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def sidecar_values(port: int) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
        return parse(resp.read())


def model_value(values: dict[str, Any], name: str, **labels: str) -> float | None:
    want = {"model": MODEL, "version": "1", **labels}
    for labelset, v in values.get(name, {}).items():
        if all(dict(labelset).get(k) == val for k, val in want.items()):
            return float(v)
    return None


def up(values: dict[str, Any], target: str) -> float | None:
    return values.get(catalog.UP, {}).get(((catalog.TARGET, target),))


@dataclass
class Stats:
    time: float
    success: float
    success_ns: float
    inferences: float
    executions: float

    @classmethod
    def read(cls, base: str) -> Stats:
        s = get_json(f"{base}/v2/models/{MODEL}/stats")["model_stats"][0]
        succ = s["inference_stats"]["success"]
        return cls(time.time(), succ["count"], succ["ns"], s["inference_count"], s["execution_count"])


def expected(a: Stats, b: Stats) -> dict[str, float]:
    n = b.success - a.success
    return {
        "rate": n / (b.time - a.time),
        "batch": (b.inferences - a.inferences) / (b.executions - a.executions),
        "latency": (b.success_ns - a.success_ns) / n / 1e9,
    }


@pytest.fixture
def sidecar(triton: Any) -> Iterator[Sidecar]:
    s = Sidecar.local(triton.http_url, triton.metrics_url, interval=1.0, window=WINDOW).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def load(triton: Any) -> Iterator[LoadDriver]:
    # 8 clients, each sends every fresh input once and repeats it three times: 3 of 4 are cache hits.
    # A fresh seed per test: inputs cached by an earlier test would count as hits here.
    driver = LoadDriver(triton.http_url, model=MODEL, concurrency=8, repeat=3).start()
    try:
        yield driver
    finally:
        driver.stop()


def wait_for_traffic(sidecar: Sidecar, load: LoadDriver) -> None:
    def flowing() -> bool:
        return model_value(sidecar_values(sidecar.port), catalog.REQUEST_RATE) not in (None, 0.0)

    try:
        wait_until(flowing, 60, "a request rate on the sidecar")
    except Exception:
        pytest.fail(f"no rate: load {load.stats()}, sidecar {sidecar.metrics.health.last_error!r}")


def assert_agrees(port: int, base: str) -> dict[str, float]:
    a = Stats.read(base)
    deadline = time.monotonic() + WINDOW + 1.5
    while time.monotonic() < deadline:
        time.sleep(0.25)
    b = Stats.read(base)
    values = sidecar_values(port)
    truth = expected(a, b)
    got = {
        "rate": model_value(values, catalog.REQUEST_RATE),
        "batch": model_value(values, catalog.BATCH_SIZE_MEAN),
        "latency": model_value(values, catalog.LATENCY, phase="request"),
        "cache": model_value(values, catalog.CACHE_HIT_RATIO),
    }
    assert got["rate"] == pytest.approx(truth["rate"], rel=0.3), (got, truth)
    assert got["batch"] == pytest.approx(truth["batch"], rel=0.3), (got, truth)
    assert got["latency"] == pytest.approx(truth["latency"], rel=0.3), (got, truth)
    assert got["cache"] == pytest.approx(0.75, abs=0.1)
    return {k: v for k, v in got.items() if v is not None}


def test_derived_signals_agree_with_statistics_api(triton: Any, sidecar: Sidecar, load: LoadDriver) -> None:
    wait_for_traffic(sidecar, load)
    got = assert_agrees(sidecar.port, triton.http_url)
    values = sidecar_values(sidecar.port)
    assert up(values, "triton") == 1.0 and up(values, "triton_api") == 1.0
    assert model_value(values, catalog.MODEL_READY) == 1.0
    assert model_value(values, catalog.MAX_BATCH_SIZE) == 64.0
    eff = model_value(values, catalog.BATCH_EFFICIENCY)
    assert eff is not None and eff == pytest.approx(got["batch"] / 64, rel=0.3)
    share = model_value(values, catalog.QUEUE_TIME_RATIO)
    assert share is not None and 0.0 <= share <= 1.0
    # Executions by batch size sum to the statistics API's execution count (same instant, +-1 scrape).
    execs = sum(v for ls, v in values[catalog.BATCH_EXECUTIONS].items() if dict(ls)["model"] == MODEL)
    total = get_json(f"{triton.http_url}/v2/models/{MODEL}/stats")["model_stats"][0]["execution_count"]
    assert execs == pytest.approx(total, rel=0.2)


def test_restart_gives_no_negative_nan_or_inflated_value(
    triton: Any, sidecar: Sidecar, load: LoadDriver
) -> None:
    wait_for_traffic(sidecar, load)
    baseline = assert_agrees(sidecar.port, triton.http_url)["rate"]
    seen_down = seen_back = False
    triton.kill()
    restarted = False
    deadline = time.monotonic() + 120
    back_at = None
    while time.monotonic() < deadline:
        values = sidecar_values(sidecar.port)
        for name, series in values.items():
            if name.startswith("tritonwatch_model_"):
                for labels, v in series.items():
                    assert not math.isnan(v) and v >= 0, (name, labels, v)
        rate = model_value(values, catalog.REQUEST_RATE)
        assert rate is None or rate <= baseline * 1.5, f"inflated rate {rate} vs {baseline}"
        for ratio in (catalog.ERROR_RATIO, catalog.CACHE_HIT_RATIO, catalog.QUEUE_TIME_RATIO):
            v = model_value(values, ratio)
            assert v is None or 0.0 <= v <= 1.0, (ratio, v)
        state = up(values, "triton")
        if state == 0.0:
            seen_down = True
            assert rate is None, "derived values must be dropped while Triton is down"
            if not restarted:
                triton.start()
                restarted = True
        if seen_down and restarted and state == 1.0:
            if not seen_back:
                seen_back, back_at = True, time.monotonic()
            if back_at is not None and time.monotonic() - back_at > WINDOW + 2:
                break
        time.sleep(0.5)
    assert seen_down and seen_back
    triton.wait_ready(60)
    assert_agrees(sidecar.port, triton.http_url)
