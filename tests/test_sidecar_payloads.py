"""Derivations on real /metrics payloads recorded from the local Triton (tests/data/triton_metrics_*).

Expected values are computed from the same two payloads read by prometheus_client's parser (an
independent reader), so the test holds the sidecar's parser, window and formulas together.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tritonwatch import catalog
from tritonwatch.expfmt import Parser, parse
from tritonwatch.exporters.derive import evaluate
from tritonwatch.exporters.window import CounterWindow

DATA = Path(__file__).resolve().parent / "data"
KEY = ("fraud_detector", "1")
SECONDS = 5.0  # the two loaded payloads were recorded 5 s apart


def sample_name(fam_name: str, name: str, text: str) -> str:
    # prometheus_client renames a counter's samples to <name>_total; the payload has no such suffix.
    if name == fam_name + "_total" and f"\n{name}" not in text:
        return fam_name
    return name


def raw(name: str) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    text = (DATA / name).read_text()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            n = sample_name(fam.name, s.name, text)
            key = (s.labels.get("model", ""), s.labels.get("version", ""))
            if s.labels.get("reason") == "CANCELED":
                continue
            out.setdefault(key, {})
            out[key][n] = out[key].get(n, 0.0) + s.value
    return out


@pytest.fixture(scope="module")
def window() -> CounterWindow:
    w = CounterWindow(60)
    parser = Parser(catalog.TRITON_FAMILIES, exact=True)
    for i, name in enumerate(("triton_metrics_load_1.txt", "triton_metrics_load_2.txt")):
        w.ingest(1000.0 + i * SECONDS, parser.parse((DATA / name).read_bytes()))
    return w


def test_recorded_payloads_derive_the_same_as_an_independent_reading(window: CounterWindow) -> None:
    a, b = raw("triton_metrics_load_1.txt")[KEY], raw("triton_metrics_load_2.txt")[KEY]

    def d(name: str) -> float:
        return b[name] - a[name]

    def value(name: str, **labels: str) -> float | None:
        return evaluate(window, catalog.signal(name, **labels), KEY)

    assert d("nv_inference_request_success") > 0, "the recording must hold traffic"
    assert value(catalog.REQUEST_RATE) == pytest.approx(d("nv_inference_request_success") / SECONDS)
    failures = d("nv_inference_request_failure")
    assert value(catalog.ERROR_RATIO) == pytest.approx(
        failures / (failures + d("nv_inference_request_success"))
    )
    assert value(catalog.BATCH_SIZE_MEAN) == pytest.approx(
        d("nv_inference_count") / d("nv_inference_exec_count")
    )
    hits, misses = d("nv_cache_num_hits_per_model"), d("nv_cache_num_misses_per_model")
    assert value(catalog.CACHE_HIT_RATIO) == pytest.approx(hits / (hits + misses))
    assert value(catalog.LATENCY, phase="request") == pytest.approx(
        d("nv_inference_request_duration_us") / 1e6 / d("nv_inference_request_success")
    )
    executed = d("nv_inference_request_success") - hits
    assert value(catalog.LATENCY, phase="compute_infer") == pytest.approx(
        d("nv_inference_compute_infer_duration_us") / 1e6 / executed
    )
    assert value(catalog.QUEUE_TIME_RATIO) == pytest.approx(
        d("nv_inference_queue_duration_us") / d("nv_inference_request_duration_us")
    )
    assert value(catalog.PENDING_REQUESTS) == b["nv_inference_pending_request_count"]


def test_compute_denominator_matches_tritons_own_executed_request_count() -> None:
    # Triton's compute summaries count executed requests: successes less cache hits, as the catalog divides.
    for name in ("triton_metrics_load_1.txt", "triton_metrics_load_2.txt"):
        r = raw(name)[KEY]
        executed = r["nv_inference_request_success"] - r["nv_cache_num_hits_per_model"]
        assert r["nv_inference_compute_infer_summary_us_count"] == executed


def test_fast_parser_agrees_with_prometheus_client_on_every_recorded_payload() -> None:
    for path in sorted(DATA.glob("triton_*metrics*.txt")) + sorted(DATA.glob("triton_gpu_*.txt")):
        text = path.read_text()
        ours = parse(text)
        theirs: dict[str, dict[frozenset[tuple[str, str]], str]] = {}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                n = sample_name(fam.name, s.name, text)
                theirs.setdefault(n, {})[frozenset(s.labels.items())] = repr(
                    float(s.value)
                )  # repr: NaN == NaN
        mine = {n: {frozenset(ls): repr(v) for ls, v in series.items()} for n, series in ours.items()}
        assert mine == theirs, path.name


def test_idle_payload_defines_no_ratio(window: CounterWindow) -> None:
    w = CounterWindow(60)
    idle = (DATA / "triton_metrics_idle.txt").read_bytes()
    w.ingest(0.0, parse(idle, catalog.TRITON_FAMILIES))
    w.ingest(5.0, parse(idle, catalog.TRITON_FAMILIES))
    assert evaluate(w, catalog.signal(catalog.REQUEST_RATE), KEY) == 0.0
    assert evaluate(w, catalog.signal(catalog.CACHE_HIT_RATIO), KEY) is None
    assert evaluate(w, catalog.signal(catalog.ERROR_RATIO), KEY) is None
