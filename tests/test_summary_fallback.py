"""The latency-quantile fallback on Triton's own summaries (issue 13, case 7), on recorded and real scrapes.

Triton keeps one summary per GPU model instance, labelled ``gpu_uuid``. The split payload below is two
recorded scrapes of the real local Triton 2.51 (``triton_metrics_load_{1,2}.txt``) given one
``gpu_uuid`` each, as two instances of one model; the merged quantile is the larger of the two
(``LatencyPart._summaries`` says why). The DataDog ``nvidia_triton`` fixture is a real scrape where
models that never ran still print quantiles (``3``) next to ``_count 0``.
"""

from __future__ import annotations

import math
from pathlib import Path

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.traces import SOURCE_SUMMARY, LatencyPart
from tritonwatch.exporters.triton import TritonMetrics
from tritonwatch.exporters.window import CounterWindow

DATA = Path(__file__).resolve().parent / "data"
MODEL = 'model="fraud_detector"'


def split_by_gpu(first: str, second: str) -> str:
    """``second``'s payload where fraud_detector's summaries come twice: gpu_uuid A (second), B (first)."""
    out = []
    for a, b in zip(second.splitlines(), first.splitlines(), strict=True):
        if MODEL in a and "_summary_us" in a:
            out.append(a.replace(MODEL, f'gpu_uuid="GPU-A",{MODEL}'))
            out.append(b.replace(MODEL, f'gpu_uuid="GPU-B",{MODEL}'))
        else:
            out.append(a)
    return "\n".join(out) + "\n"


def summary_quantiles(payload: str) -> dict[tuple[str, str, str, str], float]:
    metrics = TritonMetrics("http://127.0.0.1:1/metrics", CounterWindow(60), 5, 1, 1 << 20)
    metrics.samples = parse(payload, catalog.TRITON_FAMILIES)
    metrics.fresh = True
    part = LatencyPart(300.0, metrics=metrics)
    (fam,) = (m for m in part.collect() if m.name == catalog.LATENCY_QUANTILE)
    out = {}
    for s in fam.samples:
        assert s.labels[catalog.SOURCE] == SOURCE_SUMMARY
        key = (s.labels["model"], s.labels["version"], s.labels["phase"], s.labels["quantile"])
        out[key] = s.value
    return out


def recorded(name: str) -> dict[tuple[str, str], float]:
    """fraud_detector's recorded summary quantiles in µs by (phase, quantile)."""
    samples = parse((DATA / name).read_text())
    out = {}
    for phase in catalog.PHASES:
        for labels, v in samples.get(catalog.triton_summary(phase), {}).items():
            lm = dict(labels)
            if lm["model"] == "fraud_detector" and lm["quantile"] in catalog.QUANTILES and not math.isnan(v):
                out[(phase, lm["quantile"])] = v
    return out


def test_summaries_split_by_gpu_uuid_are_merged_not_overwritten() -> None:
    first = (DATA / "triton_metrics_load_1.txt").read_text()
    second = (DATA / "triton_metrics_load_2.txt").read_text()
    got = summary_quantiles(split_by_gpu(first, second))
    one, two = recorded("triton_metrics_load_1.txt"), recorded("triton_metrics_load_2.txt")
    assert set(one) == set(two) and len(one) == 16  # 4 phases with values x 4 quantiles
    want = {("fraud_detector", "1", p, q): max(one[(p, q)], two[(p, q)]) / 1e6 for p, q in one}
    assert {k: v for k, v in got.items() if k[0] == "fraud_detector"} == want
    # instance B (listed last) is below A somewhere: keeping the last series read would show B's
    assert any(two[k] > one[k] for k in one)
    # a single instance is passed through unchanged
    alone = summary_quantiles(second)
    assert {k: v for k, v in alone.items() if k[0] == "fraud_detector"} == {
        ("fraud_detector", "1", p, q): v / 1e6 for (p, q), v in two.items()
    }


def test_summaries_that_observed_nothing_give_no_quantiles() -> None:
    payload = (DATA / "real" / "datadog_nvidia_triton_metrics.txt").read_text()
    got = summary_quantiles(payload)
    # only densenet_onnx served requests (count 3); the other seven print 3 us over _count 0
    assert got == {("densenet_onnx", "1", "request", q): 3e-6 for q in ("0.5", "0.9", "0.95", "0.99")}
