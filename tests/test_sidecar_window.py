"""The counter window and the catalog's formulas, on exposition text with known increases."""

from __future__ import annotations

import math

import pytest

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.window import CounterWindow

KEY = ("fraud_detector", "1")


def payload(
    success: float,
    failure: float = 0.0,
    canceled: float = 0.0,
    inf: float | None = None,
    exe: float | None = None,
    hits: float = 0.0,
    misses: float = 0.0,
    request_us: float = 0.0,
    queue_us: float = 0.0,
    infer_us: float = 0.0,
    pending: float = 0.0,
    gpus: tuple[str, ...] = (),
) -> str:
    """A Triton-shaped payload; with ``gpus`` the execution counters are split evenly by gpu_uuid."""
    inf = success if inf is None else inf
    exe = inf if exe is None else exe
    m = 'model="fraud_detector",version="1"'
    lines = [
        "# TYPE nv_inference_request_success counter",
        f"nv_inference_request_success{{{m}}} {success}",
        "# TYPE nv_inference_request_failure counter",
        f'nv_inference_request_failure{{{m},reason="BACKEND"}} {failure}',
        f'nv_inference_request_failure{{{m},reason="CANCELED"}} {canceled}',
        "# TYPE nv_cache_num_hits_per_model counter",
        f"nv_cache_num_hits_per_model{{{m}}} {hits}",
        f"nv_cache_num_misses_per_model{{{m}}} {misses}",
        f"nv_inference_request_duration_us{{{m}}} {request_us}",
        f"nv_inference_queue_duration_us{{{m}}} {queue_us}",
        "# TYPE nv_inference_pending_request_count gauge",
        f"nv_inference_pending_request_count{{{m}}} {pending}",
    ]
    split = [f',gpu_uuid="{g}"' for g in gpus] or [""]
    for s in split:
        n = len(split)
        lines += [
            f"nv_inference_count{{{m}{s}}} {inf / n}",
            f"nv_inference_exec_count{{{m}{s}}} {exe / n}",
            f"nv_inference_compute_infer_duration_us{{{m}{s}}} {infer_us / n}",
        ]
    return "\n".join(lines) + "\n"


def feed(window: CounterWindow, *texts: str, step: float = 1.0) -> None:
    for i, text in enumerate(texts):
        window.ingest(1000.0 + i * step, parse(text, catalog.TRITON_FAMILIES))


def value(window: CounterWindow, name: str, **labels: str) -> float | None:
    return window.evaluate(catalog.signal(name, **labels), KEY)


def test_rates_ratios_and_means_from_known_increases() -> None:
    w = CounterWindow(60)
    feed(
        w,
        payload(
            100,
            failure=1,
            canceled=5,
            inf=100,
            exe=50,
            hits=30,
            misses=70,
            request_us=1e5,
            queue_us=2e4,
            infer_us=7e4,
        ),
        payload(
            200,
            failure=3,
            canceled=9,
            inf=180,
            exe=70,
            hits=90,
            misses=110,
            request_us=3e5,
            queue_us=7e4,
            infer_us=1.1e5,
            pending=4,
        ),
        step=10.0,
    )
    assert value(w, catalog.REQUEST_RATE) == pytest.approx(10.0)  # 100 more in 10 s
    assert value(w, catalog.ERROR_RATIO) == pytest.approx(2 / 102)  # CANCELED is the client's doing
    assert value(w, catalog.CACHE_HIT_RATIO) == pytest.approx(60 / 100)
    assert value(w, catalog.BATCH_SIZE_MEAN) == pytest.approx(80 / 20)
    assert value(w, catalog.LATENCY, phase="request") == pytest.approx(0.2 / 100)
    assert value(w, catalog.LATENCY, phase="queue") == pytest.approx(0.05 / 100)
    # compute time is per executed request: 100 successes less 60 cache hits
    assert value(w, catalog.LATENCY, phase="compute_infer") == pytest.approx(0.04 / 40)
    assert value(w, catalog.QUEUE_TIME_RATIO) == pytest.approx(0.25)
    assert value(w, catalog.PENDING_REQUESTS) == 4


def test_counter_reset_counts_from_zero_never_negative() -> None:
    w = CounterWindow(60)
    # 1000 requests, then Triton restarts and has served 50 since
    feed(w, payload(900, request_us=9e5), payload(1000, request_us=1e6), payload(50, request_us=5e4))
    rate = value(w, catalog.REQUEST_RATE)
    assert rate == pytest.approx((100 + 50) / 2)
    assert value(w, catalog.LATENCY, phase="request") == pytest.approx(1e-3)


def test_gpu_split_series_are_summed() -> None:
    w = CounterWindow(60)
    feed(
        w,
        payload(0, inf=0, exe=0, gpus=("GPU-a", "GPU-b")),
        payload(100, inf=100, exe=25, gpus=("GPU-a", "GPU-b")),
    )
    assert value(w, catalog.BATCH_SIZE_MEAN) == pytest.approx(4.0)


def test_no_traffic_gives_absent_ratios_and_zero_rate() -> None:
    w = CounterWindow(60)
    feed(w, payload(10), payload(10))
    assert value(w, catalog.REQUEST_RATE) == 0.0
    for name in (
        catalog.ERROR_RATIO,
        catalog.CACHE_HIT_RATIO,
        catalog.BATCH_SIZE_MEAN,
        catalog.QUEUE_TIME_RATIO,
    ):
        assert value(w, name) is None


def test_single_scrape_defines_nothing_and_window_expires() -> None:
    w = CounterWindow(5)
    feed(w, payload(0))
    assert value(w, catalog.REQUEST_RATE) is None
    feed(w, payload(0), payload(10), payload(20), step=1.0)
    w.ingest(1100.0, parse(payload(20), catalog.TRITON_FAMILIES))  # long after: old deltas gone
    assert value(w, catalog.REQUEST_RATE) == 0.0


def test_models_appear_and_disappear() -> None:
    w = CounterWindow(60)
    feed(w, payload(10), payload(20))
    assert KEY in w.models
    w.ingest(1005.0, parse("# TYPE nv_inference_request_success counter\n", catalog.TRITON_FAMILIES))
    assert KEY not in w.models


def test_nan_values_are_ignored() -> None:
    w = CounterWindow(60)
    feed(
        w,
        payload(10),
        payload(20).replace(
            'nv_inference_request_success{model="fraud_detector",version="1"} 20',
            'nv_inference_request_success{model="fraud_detector",version="1"} NaN',
        ),
    )
    v = value(w, catalog.REQUEST_RATE)
    assert v is not None and not math.isnan(v)
