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
from tritonwatch.expfmt import Layout, parse
from tritonwatch.exporters.snapshot import scraped
from tritonwatch.exporters.traces import SOURCE_SUMMARY, LatencyPart
from tritonwatch.exporters.traces.summaries import (
    SummaryReader,
    SummaryRows,
    _as_rows,
    _plan,
    merge_summaries,
)
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
    part = LatencyPart(300.0, snapshots=scraped(parse(payload, catalog.TRITON_FAMILIES)))
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


# --- the plan per parser layout gives what the walk gives (exporters/traces/summaries.py) -----------------


def fleet(models: int, tick: int) -> str:
    """Triton's summaries of ``models`` models (one instance each) as Triton prints them, moving with ``tick``."""
    out = []
    for phase in catalog.PHASES:
        family = catalog.triton_summary(phase)
        out += [f"# HELP {family} Summary of {phase} durations.", f"# TYPE {family} summary"]
        for i in range(models):
            labels = f'model="model_{i:04d}",version="1"'
            for q in ("0.5", "0.9", "0.95", "0.99", "0.999"):
                out.append(f'{family}{{{labels},quantile="{q}"}} {(100 + i) * (1 + float(q)) + tick / 7:.3f}')
            out.append(f"{family}_sum{{{labels}}} {(100 + i) * tick * 10}")
            out.append(f"{family}_count{{{labels}}} {tick * 10}")
    return "\n".join(out) + "\n"


def reader_rows(payload: str, reader: SummaryReader | None = None) -> tuple[SummaryRows, SummaryRows]:
    """(rows through a reader and the parser's layout, rows of the walk) for one payload."""
    samples = parse(payload, catalog.TRITON_FAMILIES)
    assert isinstance(samples.layout, Layout)
    return (reader or SummaryReader()).rows(samples), _as_rows(merge_summaries(samples))


def with_value(payload: str, line_part: str, value: str) -> str:
    """``payload`` with the value of the first line containing ``line_part`` replaced."""
    lines = payload.splitlines()
    (i,) = [n for n, line in enumerate(lines) if line_part in line][:1]
    lines[i] = lines[i].rsplit(" ", 1)[0] + " " + value
    return "\n".join(lines) + "\n"


def test_the_plan_reads_what_the_walk_reads_row_for_row() -> None:
    load = (DATA / "triton_metrics_load_2.txt").read_text()
    datadog = (DATA / "real" / "datadog_nvidia_triton_metrics.txt").read_text()
    bench = fleet(30, 3)
    q = 'model="model_0004",version="1",quantile="0.9"'
    cases = {
        "recorded": load,
        "real, unobserved models": datadog,
        "bench": bench,
        "a NaN": with_value(bench, "nv_inference_queue_summary_us{" + q, "NaN"),
        "a negative": with_value(bench, "nv_inference_request_summary_us{" + q, "-1"),
        "a minus zero": with_value(bench, "nv_inference_request_summary_us{" + q, "-0"),
        "a count of 0": with_value(
            bench, 'nv_inference_compute_infer_summary_us_count{model="model_0007"', "0"
        ),
        "a NaN count": with_value(
            bench, 'nv_inference_compute_infer_summary_us_count{model="model_0008"', "NaN"
        ),
    }
    for name, text in cases.items():
        got, want = reader_rows(text)
        assert (got.rows, got.seconds) == (want.rows, want.seconds), name
        assert want.rows, name
    # the plan was used: the layouts above have one (the split case below has none)
    samples = parse(bench, catalog.TRITON_FAMILIES)
    assert samples.layout is not None and _plan(samples.layout) is not None
    assert _plan(parse(datadog, catalog.TRITON_FAMILIES).layout) is not None  # type: ignore[arg-type]
    # exactly the rows the walk leaves out
    dropped = set(reader_rows(bench)[0].rows) - set(reader_rows(cases["a count of 0"])[0].rows)
    assert dropped == {("model_0007", "1", "compute_infer", q) for q in catalog.QUANTILES}


def test_split_or_interleaved_summaries_take_the_walk() -> None:
    first = (DATA / "triton_metrics_load_1.txt").read_text()
    second = (DATA / "triton_metrics_load_2.txt").read_text()
    split = parse(split_by_gpu(first, second), catalog.TRITON_FAMILIES)
    assert split.layout is not None and _plan(split.layout) is None
    got, want = reader_rows(split_by_gpu(first, second))
    assert (got.rows, got.seconds) == (want.rows, want.seconds)
    # one model's quantiles apart from each other: leaving one row out must not reorder the others
    lines = fleet(3, 1).splitlines()
    head = [n for n, line in enumerate(lines) if line.startswith("nv_inference_queue_summary_us{")]
    lines[head[0]], lines[head[5]] = lines[head[5]], lines[head[0]]
    interleaved = "\n".join(lines) + "\n"
    assert _plan(parse(interleaved, catalog.TRITON_FAMILIES).layout) is None  # type: ignore[arg-type]
    got, want = reader_rows(interleaved)
    assert (got.rows, got.seconds) == (want.rows, want.seconds)


def test_one_reader_follows_payloads_and_layouts() -> None:
    """A reader keeps its plan while the layout is the parser's same object, and reads each scrape's values."""
    metrics = TritonMetrics("http://127.0.0.1:1/metrics", CounterWindow(60), 5, 1, 1 << 20)
    reader = SummaryReader()
    for tick in (1, 2, 3):
        samples = metrics.parser.parse(fleet(20, tick))
        got = reader.rows(samples)
        want = _as_rows(merge_summaries(samples))
        assert (got.rows, got.seconds) == (want.rows, want.seconds)
    # a payload with a model more: a new layout, a new plan
    samples = metrics.parser.parse(fleet(21, 4))
    got = reader.rows(samples)
    assert len(got.rows) == 21 * len(catalog.PHASES) * len(catalog.QUANTILES)
    assert (got.rows, got.seconds) == (lambda w: (w.rows, w.seconds))(_as_rows(merge_summaries(samples)))
