"""The sidecar holds a traced-requests budget on the real Triton by moving its trace_rate with the load.

A Triton of its own traces by OpenTelemetry (starting at one in 10) to a stand-in backend; the sidecar
runs with ``--trace-budget 4`` (traced requests a second). The load on ``sleeper`` steps from about
40 to 120 and back to 40 requests a second; after each step the sidecar must have moved Triton's rate
(read back with ``GET /v2/trace/setting``) and the traced requests the backend received, counted by
their own timestamps over 8 s, must be within 30 % of the budget.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from conftest import TEST_MODELS
from support.harness import read_metrics, running_sidecar, value
from support.otlp_capture import OtlpCapture

from tritonwatch import catalog
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.exporters.traces.otlp import decode
from tritonwatch.local.load import LoadDriver
from tritonwatch.local.procs import wait_until

MODEL = "sleeper"
BUDGET = 4.0
STEPS = (40.0, 120.0, 40.0)  # requests per second
MEASURE = 8.0  # seconds counted after each step settles

pytestmark = [pytest.mark.triton]


@pytest.fixture
def traced_triton() -> Iterator[tuple[Any, OtlpCapture]]:
    from tritonwatch.local.triton import LocalTriton

    capture = OtlpCapture().start()
    with contextlib.ExitStack() as stop:
        stop.callback(capture.stop)
        triton = LocalTriton([TEST_MODELS], trace_to=capture.url, trace_rate=10)
        stop.callback(triton.close)
        triton.start()
        triton.wait_ready(120)
        yield triton, capture


def traced_between(capture: OtlpCapture, start_ns: int, end_ns: int) -> int:
    """Traced requests to MODEL that started in [start_ns, end_ns): one model span each."""
    spans = [s for body in capture.bodies() for s in decode(body)]
    return sum(1 for s in spans if s.name == MODEL and start_ns <= s.start_ns < end_ns)


def rate_in_force(triton: Any) -> float:
    return float(requests.get(f"{triton.http_url}/v2/trace/setting", timeout=5).json()["trace_rate"])


def test_trace_rate_follows_the_load_and_holds_the_budget(traced_triton: tuple[Any, OtlpCapture]) -> None:
    triton, capture = traced_triton
    argv = ["--triton", triton.http_url, "--triton-metrics", triton.metrics_url, "--interval", "1"]
    windows: list[tuple[float, int, int, float]] = []  # (asked rps, start ns, end ns, trace rate)
    with running_sidecar([*argv, "--window", "6", "--trace-budget", str(BUDGET)]) as sidecar:
        for rps in STEPS:
            with LoadDriver(triton.http_url, model=MODEL, concurrency=8, rps=rps, seed=11) as load:
                want = rps / BUDGET

                def settled(load: LoadDriver = load, want: float = want, rps: float = rps) -> bool:
                    return abs(rate_in_force(triton) - want) <= 0.2 * want and load.stats().ok > rps * 3

                wait_until(settled, 40, f"trace rate near {want:g} at {rps:g} requests/s", interval=0.5)
                start = time.time_ns()
                time.sleep(MEASURE)  # a measurement span of load, not a synchronisation
                end = time.time_ns()
                windows.append((rps, start, end, rate_in_force(triton)))
                if rps == STEPS[-1]:  # Triton exports spans in batches: keep load on until the last arrive
                    wait_until(
                        lambda e=end: traced_between(capture, e, 2**63) > 0, 20, "spans after the last step"
                    )
        served = read_metrics(sidecar.port)
        assert value(served, catalog.TRACE_BUDGET) == BUDGET
        assert value(served, catalog.TRACE_RATE) == rate_in_force(triton)
        assert_sidecar_budget_logic(sidecar)
    for rps, start, end, rate in windows:
        traced = traced_between(capture, start, end) / ((end - start) / 1e9)
        print(f"{rps:g} req/s: trace rate {rate:g}, {traced:.2f} traced/s (budget {BUDGET:g})")
        assert traced == pytest.approx(BUDGET, rel=0.3), (rps, rate, traced)
    rates = [w[3] for w in windows]
    assert rates[1] > 2 * rates[0] and rates[2] < rates[1] / 2, rates  # it moved up and back down


def assert_sidecar_budget_logic(sidecar: Sidecar) -> None:
    """The rate the sidecar asks for at a few loads: request rate / budget, never below 10."""
    from tritonwatch.exporters.traces import TraceSettings

    settings = TraceSettings("http://127.0.0.1:1", 1.0, 1.0, budget=BUDGET)
    assert [settings.budget_rate(r) for r in (0.0, 40.0, 120.0, 4000.0)] == [10, 10, 30, 1000]


def test_trace_budget_comes_from_flag_env_or_file_and_is_validated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from support.harness import sidecar_config

    from tritonwatch.errors import UsageError

    assert sidecar_config([]).trace_budget == 0.0  # off unless given
    monkeypatch.setenv("TRITONWATCH_TRACE_BUDGET", "7")
    assert sidecar_config([]).trace_budget == 7.0
    assert sidecar_config(["--trace-budget", "2.5"]).trace_budget == 2.5  # the flag wins
    monkeypatch.delenv("TRITONWATCH_TRACE_BUDGET")
    (tmp_path / "sidecar.yaml").write_text("trace_budget: 12\n")
    assert sidecar_config(["--config", str(tmp_path / "sidecar.yaml")]).trace_budget == 12.0
    with pytest.raises(UsageError, match=r"^--trace-budget: must be >= 0 traced requests/s \(got -1.0\)$"):
        sidecar_config(["--trace-budget", "-1"])
