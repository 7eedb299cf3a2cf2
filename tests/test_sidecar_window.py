"""The counter window and the catalog's formulas, on exposition text with known increases."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from tritonwatch import catalog
from tritonwatch.expfmt import Parser, parse
from tritonwatch.exporters.derive import evaluate, evaluate_many
from tritonwatch.exporters.window import CounterWindow, IncreaseWindow

KEY = ("fraud_detector", "1")
DATA = Path(__file__).resolve().parent / "data"


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
    return evaluate(window, catalog.signal(name, **labels), KEY)


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


def test_a_nan_sample_keeps_the_series_and_its_last_good_value() -> None:
    # Issue 13, case 5: 10 req/s with one NaN reading in between. Forgetting the series at the NaN
    # took the next good value as first sight: 50 requests over 15 s, 3.33 req/s.
    w = CounterWindow(60)
    nan = payload(0).replace(
        'nv_inference_request_success{model="fraud_detector",version="1"} 0',
        'nv_inference_request_success{model="fraud_detector",version="1"} NaN',
    )
    assert "NaN" in nan
    for t, text in ((0.0, payload(0)), (5.0, payload(50)), (10.0, nan), (15.0, payload(150))):
        w.ingest(t, parse(text, catalog.TRITON_FAMILIES))
    assert value(w, catalog.REQUEST_RATE) == 10.0


def test_a_nan_sample_keeps_the_keyed_window_series() -> None:
    w: IncreaseWindow[str] = IncreaseWindow(60)
    for t, v in ((0.0, 0.0), (5.0, 50.0), (10.0, math.nan), (15.0, 150.0)):
        w.ingest(t, [("energy", "GPU-a", v)])
    assert w.increases() == {"GPU-a": 150.0}
    assert w.span() == 15.0


# Triton started with --metrics-config counter_latencies=false has no nv_inference_*_duration_us
# families. No such recording is at hand: these payloads are the recorded ones
# (tests/data/triton_metrics_load_{1,2}.txt) with those five families' lines dropped.
_DURATION_FAMILY = re.compile(r"^(# (HELP|TYPE) )?nv_inference_\w+_duration_us\b")


def without_duration_counters(name: str) -> str:
    text = (DATA / name).read_text()
    kept = [ln for ln in text.splitlines() if not _DURATION_FAMILY.match(ln)]
    assert len(kept) < len(text.splitlines())
    return "\n".join(kept) + "\n"


def test_latency_is_absent_not_zero_without_duration_counters() -> None:
    # Issue 13, case 1: the latencies read 0.0 and a latency SLO always looked met.
    w = CounterWindow(60)
    parser = Parser(catalog.TRITON_FAMILIES, exact=True)
    for t, name in ((1000.0, "triton_metrics_load_1.txt"), (1005.0, "triton_metrics_load_2.txt")):
        w.ingest(t, parser.parse(without_duration_counters(name)))
    for phase in catalog.PHASES:
        assert value(w, catalog.LATENCY, phase=phase) is None
    assert value(w, catalog.QUEUE_TIME_RATIO) is None
    # What the payload has is still derived, exactly (the recordings, 5 s apart).
    assert value(w, catalog.REQUEST_RATE) == (34586 - 17485) / 5.0
    assert value(w, catalog.BATCH_SIZE_MEAN) == (8419 - 4250) / (6504 - 3303)
    assert value(w, catalog.CACHE_HIT_RATIO) == (26167 - 13235) / ((26167 - 13235) + (8726 - 4414))


def test_latency_with_duration_counters_of_no_traffic_is_zero_not_absent() -> None:
    # The counters are there and did not move while requests were served: a true 0.
    w = CounterWindow(60)
    feed(w, payload(10), payload(20))
    assert value(w, catalog.LATENCY, phase="request") == 0.0
    assert value(w, catalog.LATENCY, phase="compute_input") is None  # not in this payload


def fleet(models: int, tick: int) -> str:
    """Every family the window reads, for ``models`` models (two of them split by gpu_uuid)."""
    lines = []
    for family in sorted(catalog.TRITON_FAMILIES):
        lines.append(f"# TYPE {family} counter")
        for i in range(models):
            m = f'model="m{i}",version="1"'
            value = (i + 1) * tick * 10 + len(family)
            if family == catalog.TRITON_FAILURE:
                lines += [
                    f'{family}{{{m},reason="{r}"}} {value // 3}' for r in ("BACKEND", "CANCELED", "OTHER")
                ]
            elif i < 2:
                lines += [f'{family}{{{m},gpu_uuid="GPU-{g}"}} {value + g}' for g in (0, 1)]
            else:
                lines.append(f"{family}{{{m}}} {value}")
    return "\n".join(lines) + "\n"


def _steps(models: int) -> list[str]:
    """Steady payloads, then a NaN, a reset (Triton restart) and a layout change, then steady again."""
    texts = [fleet(models, tick) for tick in range(1, 5)]
    nan = re.sub(
        rf'^({catalog.TRITON_SUCCESS}{{model="m3",version="1"}}) \d+$', r"\1 NaN", texts[-1], flags=re.M
    )
    assert nan != texts[-1]
    texts += [nan, fleet(models, 6), fleet(models, 1), fleet(models + 1, 2)]
    texts += [fleet(models + 1, tick) for tick in range(3, 7)]
    return texts


def test_an_unchanged_layout_ingested_in_bulk_gives_exactly_the_general_path() -> None:
    parser = Parser(catalog.TRITON_FAMILIES, exact=True)
    bulk, general = CounterWindow(4), CounterWindow(4)
    used_bulk = 0
    for i, text in enumerate(_steps(30)):
        parsed = parser.parse(text)
        assert parsed.layout is not None
        before = bulk._fast
        bulk.ingest(i * 1.0, parsed)
        used_bulk += before is not None and bulk._fast is before
        general.ingest(i * 1.0, dict(parsed))  # a plain dict: no layout, the general path
        assert bulk.models == general.models
        keys = sorted(general.models)
        for sig in catalog.SIGNALS:
            want = [evaluate(general, sig, key) for key in keys]
            assert [evaluate(bulk, sig, key) for key in keys] == want, (i, sig.name)
            # and the collector's once-per-update pass over every model gives the same values
            assert evaluate_many(bulk, sig, keys) == want == evaluate_many(general, sig, keys)
    assert used_bulk >= 6  # the steady stretches did take the bulk path
