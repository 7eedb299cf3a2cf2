"""Faults at the targets, each from a misbehaving server of the tests' own (``tests/support``).

For every fault: the sidecar's /metrics keeps answering within 2 s, ``tritonwatch_up{target}`` goes
to 0 and back to 1, the derived values are dropped rather than guessed, nothing is negative or NaN
(checked on every read), ``tritonwatch_scrape_errors_total{target,reason}`` rises, and once the fault
clears the derived values come back exactly as the recorded payloads dictate.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fake_triton import FakeTriton, RecordedCounters, fake_triton
from support.harness import models_served, poll, read_metrics, running_sidecar, value

from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.sidecar import Sidecar

DATA = Path(__file__).resolve().parent / "data"
MODEL = "fraud_detector"
KEY = {"model": MODEL, "version": "1"}
DERIVED = {s.name for s in catalog.SIGNALS} | {catalog.BATCH_EFFICIENCY}


def expected(rec: RecordedCounters) -> dict[tuple[str, str], float]:
    """Every derived value of ``fraud_detector`` over any run of good scrapes, from one recorded step."""

    def d(family: str, **kw: tuple[tuple[str, str], ...]) -> float:
        return rec.step(family, MODEL, **kw)

    success = d(catalog.TRITON_SUCCESS)
    failed = d(catalog.TRITON_FAILURE, skip=(("reason", "CANCELED"),))
    hits, misses = d(catalog.TRITON_CACHE_HITS), d(catalog.TRITON_CACHE_MISSES)
    batch = d(catalog.TRITON_INFERENCE_COUNT) / d(catalog.TRITON_EXEC_COUNT)
    out = {
        (catalog.REQUEST_RATE, ""): success,  # per step, and one step is one second of the clock
        (catalog.ERROR_RATIO, ""): failed / (success + failed),
        (catalog.QUEUE_TIME_RATIO, ""): d(catalog.triton_duration("queue"))
        / d(catalog.triton_duration("request")),
        (catalog.BATCH_SIZE_MEAN, ""): batch,
        (catalog.CACHE_HIT_RATIO, ""): hits / (hits + misses),
        (catalog.PENDING_REQUESTS, ""): rec.gauge(catalog.TRITON_PENDING, MODEL),
        (catalog.BATCH_EFFICIENCY, ""): batch / 64,  # max_batch_size 64 in the recorded config
    }
    for phase in catalog.PHASES:
        executed = success - hits if phase.startswith("compute") else success
        out[(catalog.LATENCY, phase)] = d(catalog.triton_duration(phase)) * 1e-6 / executed
    # The recorded step must exercise every formula with non-trivial numbers.
    assert success > 1000 and failed > 0 and hits > 0 and 1 < batch < 64, out
    return out


def derived_values(samples: Samples) -> dict[tuple[str, str], float]:
    out = {}
    for name in DERIVED:
        for labels, v in samples.get(name, {}).items():
            lm = dict(labels)
            if lm.get("model") == MODEL:
                out[(name, lm.get("phase", ""))] = v
    return out


def has_derived(samples: Samples) -> bool:
    return any(samples.get(name) for name in DERIVED)


def errors(samples: Samples, target: str, reason: str) -> float:
    return value(samples, catalog.SCRAPE_ERRORS, target=target, reason=reason) or 0.0


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        yield server


@pytest.fixture(scope="module")
def sidecar(fake: FakeTriton) -> Iterator[Sidecar]:
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url]
    argv += ["--interval", "0.05", "--timeout", "0.3", "--window", "30"]
    with running_sidecar(argv, clock=fake.clock) as sc:
        yield sc


@pytest.fixture()
def healthy(fake: FakeTriton, sidecar: Sidecar) -> Iterator[Samples]:
    """Every test starts and ends with all targets up and the derived values exact."""
    samples = assert_exact(fake, sidecar)
    yield samples
    fake.metrics_mode = fake.api_mode = "ok"
    fake.release.set()
    if fake.httpd is None:
        fake.resume()


def both_up(s: Samples) -> bool:
    return all(value(s, catalog.UP, target=t) == 1.0 for t in ("triton", "triton_api"))


def assert_exact(fake: FakeTriton, sidecar: Sidecar) -> Samples:
    want = expected(fake.recorded)
    samples = poll(
        sidecar.port,
        lambda s: both_up(s) and set(derived_values(s)) == set(want),
        "both targets up and every derived value present",
    )
    got = derived_values(samples)
    assert got == pytest.approx(want, rel=1e-9)
    # fail_always fails every request: error ratio exactly 1, success rate exactly 0, no latency
    fa = {"model": "fail_always", "version": "1"}
    assert value(samples, catalog.ERROR_RATIO, **fa) == 1.0
    assert value(samples, catalog.REQUEST_RATE, **fa) == 0.0
    assert not any(dict(ls).get("model") == "fail_always" for ls in samples.get(catalog.LATENCY, {}))
    # the API side: readiness, max_batch_size and the batch distribution as recorded
    assert value(samples, catalog.MODEL_READY, **KEY) == 1.0
    assert value(samples, catalog.MAX_BATCH_SIZE, **KEY) == 64.0
    assert value(samples, catalog.BATCH_EXECUTIONS, **KEY, batch_size="2") == 1212.0
    return samples


def fault_then_recovery(fake: FakeTriton, sidecar: Sidecar, before: Samples, mode: str, reason: str) -> None:
    errors_before = errors(before, "triton", reason)
    fake.metrics_mode = mode
    down = poll(
        sidecar.port,
        lambda s: (
            value(s, catalog.UP, target="triton") == 0.0 and errors(s, "triton", reason) > errors_before
        ),
        f"up{{target=triton}} 0 and errors{{reason={reason}}} rising under {mode}",
    )
    assert not has_derived(down), f"derived values served while the target is down: {derived_values(down)}"
    assert value(down, catalog.UP, target="triton_api") == 1.0  # the other target is unaffected
    assert value(down, catalog.MODEL_READY, **KEY) == 1.0
    # still down, still nothing derived, on later reads too
    later = poll(
        sidecar.port,
        lambda s: errors(s, "triton", reason) >= errors(down, "triton", reason) + 2,
        "two more failed scrapes",
    )
    assert value(later, catalog.UP, target="triton") == 0.0 and not has_derived(later)
    fake.metrics_mode = "ok"
    fake.release.set()
    assert_exact(fake, sidecar)


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        ("html", "parse"),
        ("garbage", "parse"),
        ("bad_line", "parse"),
        ("bad_value", "parse"),
        ("hang", "timeout"),
        ("trickle", "timeout"),
        ("status503", "http_status"),
    ],
)
def test_metrics_fault(fake: FakeTriton, sidecar: Sidecar, healthy: Samples, mode: str, reason: str) -> None:
    fake.release.clear()
    fault_then_recovery(fake, sidecar, healthy, mode, reason)


def test_flapping_503_never_serves_a_guess(fake: FakeTriton, sidecar: Sidecar, healthy: Samples) -> None:
    want = expected(fake.recorded)
    before = errors(healthy, "triton", "http_status")
    fake.metrics_mode = "flap"
    seen = {0.0: 0, 1.0: 0}
    poll_deadline_reads = 0
    last = healthy
    while (not seen[0.0] or not seen[1.0] or poll_deadline_reads < 20) and poll_deadline_reads < 400:
        last = read_metrics(sidecar.port)
        poll_deadline_reads += 1
        up = value(last, catalog.UP, target="triton")
        assert up is not None
        seen[up] += 1
        got = derived_values(last)
        if up == 0.0:
            assert not got, got
        elif got:
            # between failures the values are the exact ones, never a mix or a guess
            assert got == pytest.approx(want, rel=1e-9)
    assert seen[0.0] and seen[1.0], seen
    assert errors(last, "triton", "http_status") > before
    fake.metrics_mode = "ok"
    assert_exact(fake, sidecar)


def test_restart_resets_counters_without_negative_or_absurd_values(
    fake: FakeTriton, sidecar: Sidecar, healthy: Samples
) -> None:
    # the API counts each endpoint's failure under its own reason: the index is read first
    reasons = {"triton": "connection", "triton_api": "index_connection"}
    before = {t: errors(healthy, t, r) for t, r in reasons.items()}
    fake.restart()  # gone: connections refused; on resume, counters start again from 0
    down = poll(
        sidecar.port,
        lambda s: all(  # same server: /metrics and the API are both gone
            value(s, catalog.UP, target=t) == 0.0 and errors(s, t, reasons[t]) > n for t, n in before.items()
        ),
        "up 0 for triton and triton_api while Triton is gone",
    )
    assert not has_derived(down)
    assert not down.get(catalog.MODEL_READY)
    fake.resume()
    # counters now far below what they were: reset-aware increases keep every value exact
    assert_exact(fake, sidecar)
    assert fake.restarted and fake.steps < 1000


API_FAMILIES = (
    catalog.MODEL_READY,
    catalog.MAX_BATCH_SIZE,
    catalog.MODEL_UNCOUNTED_ERRORS,  # fraud_detector's recorded config: backend python (the ONNX shim)
    catalog.BATCH_EXECUTIONS,
    catalog.BATCH_EFFICIENCY,
)


@pytest.mark.parametrize(
    ("mode", "reason", "gone"),
    [
        # every endpoint hangs: readiness, max_batch_size, the batch distribution and efficiency go
        ("hang", "index_timeout", API_FAMILIES),
        # only the statistics are bad: only the batch distribution goes (issue 13, case 3)
        ("wrong_shape", "stats_bad_json", (catalog.BATCH_EXECUTIONS,)),
        # (a negative count costs only that model's distribution: test_hostile_sidecar.py, issue 23)
    ],
)
def test_triton_api_fault_drops_only_what_needs_the_api(
    fake: FakeTriton, sidecar: Sidecar, healthy: Samples, mode: str, reason: str, gone: tuple[str, ...]
) -> None:
    assert all(healthy.get(name) for name in API_FAMILIES)  # each one there before the fault
    before = errors(healthy, "triton_api", reason)
    fake.release.clear()
    fake.api_mode = mode
    down = poll(
        sidecar.port,
        lambda s: (
            value(s, catalog.UP, target="triton_api") == 0.0 and errors(s, "triton_api", reason) > before
        ),
        f"up{{target=triton_api}} 0 and errors{{reason={reason}}} rising under {mode}",
    )
    for name in API_FAMILIES:
        if name in gone:
            assert not down.get(name), name
        else:
            assert down.get(name) == healthy.get(name), name  # exactly what a healthy API gave
    # /metrics-derived values are unaffected and still exact
    assert value(down, catalog.UP, target="triton") == 1.0
    skip = catalog.BATCH_EFFICIENCY if catalog.BATCH_EFFICIENCY in gone else ""
    want = {k: v for k, v in expected(fake.recorded).items() if k[0] != skip}
    got = {k: v for k, v in derived_values(down).items() if k[0] != skip}
    assert got == pytest.approx(want, rel=1e-9)
    fake.api_mode = "ok"
    fake.release.set()
    assert_exact(fake, sidecar)


def test_metrics_answer_fast_while_every_target_hangs(
    fake: FakeTriton, sidecar: Sidecar, healthy: Samples
) -> None:
    fake.release.clear()
    fake.metrics_mode = fake.api_mode = "hang"
    poll(
        sidecar.port,
        lambda s: (
            value(s, catalog.UP, target="triton") == 0.0 and value(s, catalog.UP, target="triton_api") == 0.0
        ),
        "both targets down",
    )
    for _ in range(10):
        s = read_metrics(sidecar.port)  # each within 2 s
        assert not has_derived(s)
    fake.metrics_mode = fake.api_mode = "ok"
    fake.release.set()
    assert_exact(fake, sidecar)


def test_dcgm_exporter_disappears_and_comes_back() -> None:
    """DCGM gone: its target goes down, the DCGM-only families go (no guessed temperature), the
    Triton-derived ones stay; back on the same port: exactly the recorded readings again."""
    from support.static_endpoint import StaticEndpoint

    from tritonwatch.local.gpureplay import GpuReplay

    payload = (DATA / "dcgm_node2gpu_1.txt").read_bytes()
    temps = {dict(ls)[catalog.DCGM_UUID]: v for ls, v in parse(payload)[catalog.DCGM_GPU_TEMP].items()}
    node = GpuReplay().start()  # a replayed GPU node's Triton (its gpu_uuids say which GPUs are used)
    dcgm = StaticEndpoint(payload).start()
    try:
        used = {u: t for u, t in temps.items() if u in node_gpus(node)}
        assert len(used) == 2 and len(temps) == 3  # the third GPU is not this Triton's
        argv = ["--triton", node.triton_url, "--triton-metrics", node.triton_metrics_url, "--dcgm", dcgm.url]
        argv += ["--interval", "0.05", "--timeout", "0.3", "--window", "5"]
        with running_sidecar(argv) as sc:
            # The derived families are served as last prepared by the render thread, which may still be
            # one from the first scrape (a window with no span, so no rates): wait for the rates too,
            # else their absence below could be that and not a DCGM outage taking them down.
            first = poll(
                sc.port,
                lambda s: dcgm_temps(s) == used and "resnet50" in models_served(s),
                "DCGM temperatures of the used GPUs and a request rate for resnet50",
            )
            assert value(first, catalog.UP, target="dcgm") == 1.0
            dcgm.stop()
            down = poll(
                sc.port,
                lambda s: value(s, catalog.UP, target="dcgm") == 0.0 and errors(s, "dcgm", "connection") > 0,
                "up{target=dcgm} 0 while the exporter is gone",
            )
            assert not dcgm_temps(down)  # DCGM-only: dropped, not kept from the last reading
            assert value(down, catalog.UP, target="triton") == 1.0
            assert "resnet50" in models_served(down)
            dcgm.start()  # same port
            poll(
                sc.port,
                lambda s: value(s, catalog.UP, target="dcgm") == 1.0 and dcgm_temps(s) == used,
                "DCGM back with the recorded readings",
            )
    finally:
        dcgm.stop()
        node.stop()


def dcgm_temps(s: Samples) -> dict[str, float]:
    return {dict(ls)[catalog.GPU_UUID]: v for ls, v in s.get(catalog.GPU_TEMPERATURE, {}).items()}


def node_gpus(node: Any) -> set[str]:
    samples = parse(node.triton.payload())
    return {
        dict(ls)[catalog.GPU_UUID]
        for ls in samples.get(catalog.TRITON_INFERENCE_COUNT, {})
        if catalog.GPU_UUID in dict(ls)
    }


def test_fetches_start_no_thread_of_their_own(
    fake: FakeTriton, healthy: Samples, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A timer thread per fetch (the deadline watchdog) was a thread start per scrape of every target;
    # one watchdog thread serves every fetch of the process.
    from tritonwatch.fetch import Fetcher

    started: list[str] = []
    start = threading.Thread.start
    me = threading.current_thread()

    def counting(self: threading.Thread) -> None:
        if threading.current_thread() is me:  # not the fake server's own request threads
            started.append(self.name)
        start(self)

    monkeypatch.setattr(threading.Thread, "start", counting)
    fetcher = Fetcher(2.0)
    try:
        for _ in range(5):
            assert fetcher.get(fake.metrics_url)
    finally:
        fetcher.close()
    assert started in ([], ["fetch-watchdog"])
