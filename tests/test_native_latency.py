"""Triton's own first-response histogram as a non-decoupled model's request latency (issue 37 item 1).

A REPLAY, not a live Triton: the bundled Triton 2.51 has no ``nv_inference_first_response_histogram_ms``
for non-decoupled models (2.65 observes it for every model with ``--metrics-config
histogram_latencies=true``). The payloads are written in the format Triton's own tests read it
(``tests/data/real/README-native-latency.md`` cites triton-inference-server/server's
``qa/L0_metrics/histogram_metrics_test.py``): ``<family>_bucket{model="m",version="1",le="<ms>"}``,
``_sum`` and ``_count``, integer counts, bounds in milliseconds. Bucket counts grow at known rates over a
fake clock, 10 s a scrape; a fake Triton API serves each model's config (the decoupled flag decides).

* ``fraud_detector`` (the recorded real config, not decoupled): buckets 5/10/25/50/100 ms;
* ``streamer`` (decoupled): the same histogram, which stays time to first token;
* ``ranker`` (an ONNX Runtime model, not decoupled): the same histogram, its request latency;
* ``plain`` (not decoupled) without the histogram: no quantile is invented.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import DATA
from prometheus_client.utils import floatToGoString
from support import stacks
from support.fake_triton import FakeTriton, fake_triton
from support.llm_served import Series, served

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.exporters.native_latency import NativeHistograms

FAMILY = catalog.TRITON_FIRST_RESPONSE
BOUNDS_MS = (5, 10, 25, 50, 100)
# Requests per 10 s scrape by bucket (not cumulative): 30 <= 5 ms, 50 in (5, 10], 15 in (10, 25],
# 4 in (25, 50], 1 in (50, 100], none over 100 ms.
PER_SCRAPE = (30, 50, 15, 4, 1, 0)
MID_MS = (3, 7, 15, 30, 70, 0)  # a latency inside each bucket, for the _sum
SCRAPES = 7  # t = 0 .. 60 s
THRESHOLD_MS = 25  # the SLO's (a bucket bound): 5 of every 100 are over it


def histogram(
    model: str, k: int, bounds: tuple[int, ...] = BOUNDS_MS, per: tuple[int, ...] = PER_SCRAPE
) -> str:
    """Triton's lines for ``model`` after ``k`` scrapes' worth of requests."""
    labels = f'model="{model}",version="1"'
    lines, acc = [], 0
    for bound, n in zip((*bounds, "+Inf"), per, strict=True):
        acc += n * k
        lines.append(f'{FAMILY}_bucket{{{labels},le="{bound}"}} {acc}')
    total = sum(n * ms for n, ms in zip(per, MID_MS, strict=False)) * k
    lines += [f"{FAMILY}_sum{{{labels}}} {total}", f"{FAMILY}_count{{{labels}}} {acc}"]
    return "\n".join(lines) + "\n"


def payload(k: int) -> str:
    return (
        f"# HELP {FAMILY} Duration from request to first response in milliseconds\n# TYPE {FAMILY} histogram\n"
        + (histogram("fraud_detector", k) + histogram("streamer", k) + histogram("ranker", k))
    )


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    real = json.loads((DATA / "triton_config_fraud_detector.json").read_text())
    assert not real.get("model_transaction_policy", {}).get("decoupled", False)
    configs = {
        "fraud_detector": real,
        "streamer": {
            "name": "streamer",
            "backend": "python",
            "model_transaction_policy": {"decoupled": True},
        },
        "plain": {"name": "plain", "backend": "onnxruntime"},
        # an ONNX model as Triton's config API gives its platform and backend
        "ranker": {
            "name": "ranker",
            "platform": "onnxruntime_onnx",
            "backend": "onnxruntime",
            "max_batch_size": 8,
        },
    }
    with fake_triton() as server:
        server.index = [{"name": m, "state": "READY", "version": "1"} for m in configs]
        server.configs = configs
        yield server


def of(series: Series, name: str, model: str) -> dict[frozenset[tuple[str, str]], float]:
    want = {("model", model), ("version", "1")}
    return {ls - want: v for (n, ls), v in series.items() if n == name and want <= ls}


def quantiles(series: Series, model: str, phase: str = "request") -> dict[str, tuple[float, str]]:
    return {
        dict(ls)[catalog.QUANTILE]: (v, dict(ls)[catalog.SOURCE])
        for ls, v in of(series, catalog.LATENCY_QUANTILE, model).items()
        if dict(ls)[catalog.PHASE] == phase
    }


def test_a_non_decoupled_models_histogram_is_its_request_latency(fake: FakeTriton) -> None:
    series = served([payload(k) for k in range(SCRAPES)], fake.base_url)
    # The aggregatable histogram is Triton's, passed through in seconds.
    last = SCRAPES - 1
    want: dict[frozenset[tuple[str, str]], float] = {}
    acc = 0
    for bound, n in zip((*BOUNDS_MS, None), PER_SCRAPE, strict=True):
        acc += n * last
        le = "+Inf" if bound is None else floatToGoString(bound / 1000)
        want[frozenset({("phase", "request"), ("le", le)})] = float(acc)
    assert of(series, f"{catalog.REQUEST_DURATION}_bucket", "fraud_detector") == want
    assert of(series, f"{catalog.REQUEST_DURATION}_count", "fraud_detector") == {
        frozenset({("phase", "request")}): 100.0 * last
    }
    got = quantiles(series, "fraud_detector")
    assert set(got) == set(catalog.QUANTILES)
    assert {source for _v, source in got.values()} == {"histogram"}
    # By hand: rank 0.5 x 100 = 50 in (5, 10] ms: 5 + 5 x 20/50 = 7 ms; 0.99: rank 99 in (25, 50]: 25 + 25 x 4/4.
    assert got["0.5"][0] == pytest.approx(0.007, rel=1e-12)
    assert got["0.99"][0] == pytest.approx(0.050, rel=1e-12)
    # The ONNX model: the same request latency from the same histogram.
    assert quantiles(series, "ranker") == got
    # Neither decoupled nor LLM: no tritonwatch_llm_* series at all.
    mine = ("fraud_detector", "ranker", "plain")
    llm = [n for (n, ls) in series if n.startswith("tritonwatch_llm_") and dict(ls).get("model") in mine]
    assert llm == []
    # The decoupled model keeps it as time to first token, and gets no request latency from it.
    assert of(series, f"{catalog.LLM_TTFT}_count", "streamer") == {frozenset(): 100.0 * last}
    assert quantiles(series, "streamer") == {}
    assert of(series, f"{catalog.REQUEST_DURATION}_bucket", "streamer") == {}
    # A model without the histogram gets no invented quantile.
    assert of(series, catalog.LATENCY_QUANTILE, "plain") == {}


def test_a_model_whose_config_is_unread_gets_neither_meaning() -> None:
    series = served([payload(k) for k in range(3)])  # nothing listens on the API port
    assert quantiles(series, "fraud_detector") == {}
    assert of(series, f"{catalog.LLM_TTFT}_count", "fraud_detector") == {}


@stacks.needs("promtool")
def test_quantiles_equal_promtools_histogram_quantile_and_the_slo_ratio_is_exact(
    fake: FakeTriton, tmp_path: Path
) -> None:
    series = served([payload(k) for k in range(SCRAPES)], fake.base_url)
    sidecar = {q: v for q, (v, _s) in quantiles(series, "fraud_detector").items()}
    # Triton's raw series as Prometheus would scrape them, 10 s apart.
    raw = []
    for bound in (*BOUNDS_MS, "+Inf"):
        head = f'{FAMILY}_bucket{{model="fraud_detector",version="1",le="{bound}"}}'
        values = []
        for k in range(SCRAPES):
            line = next(x for x in histogram("fraud_detector", k).splitlines() if x.startswith(head))
            values.append(line.rsplit(" ", 1)[1])
        raw.append({"series": head, "values": " ".join(values)})
    # What the sidecar served (asserted above equal to Triton's counts) at each scrape, as Prometheus
    # would scrape it from the sidecar: the SLO's rules read it.
    extra = 'instance="sidecar:9450",job="tritonwatch"'
    served_series = []
    acc = [0] * len(PER_SCRAPE)
    for i, bound in enumerate((*BOUNDS_MS, None)):
        acc[i] = sum(PER_SCRAPE[: i + 1])
        le = "+Inf" if bound is None else floatToGoString(bound / 1000)
        name = f'{catalog.REQUEST_DURATION}_bucket{{model="fraud_detector",version="1",phase="request",le="{le}",{extra}}}'
        served_series.append({"series": name, "values": " ".join(str(acc[i] * k) for k in range(SCRAPES))})
    served_series.append(
        {
            "series": f'{catalog.REQUEST_DURATION}_count{{model="fraud_detector",version="1",phase="request",{extra}}}',
            "values": " ".join(str(100 * k) for k in range(SCRAPES)),
        }
    )
    # A second replica whose Triton kept its default buckets (100, 500, 2000, 5000 ms: no 25 ms bound,
    # model_metrics not applied there): left out of the SLI, not counted as all slow.
    other = 'instance="sidecar-b:9450",job="tritonwatch"'
    for le, n in (("0.1", 90), ("0.5", 100), ("2", 100), ("5", 100), ("+Inf", 100)):
        name = f'{catalog.REQUEST_DURATION}_bucket{{model="fraud_detector",version="1",phase="request",le="{le}",{other}}}'
        served_series.append({"series": name, "values": " ".join(str(n * k) for k in range(SCRAPES))})
    served_series.append(
        {
            "series": f'{catalog.REQUEST_DURATION}_count{{model="fraud_detector",version="1",phase="request",{other}}}',
            "values": " ".join(str(100 * k) for k in range(SCRAPES)),
        }
    )
    doc = {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "native"},
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
    slo_file = tmp_path / "slo.yaml"
    slo_file.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["rules", "--slo", str(slo_file), "--out", str(out)]) == 0
    sli = f'{catalog.slo_sli_error_record("5m")}{{slo="fraud_detector-latency"}}'
    rate = f'rate({FAMILY}_bucket{{model="fraud_detector"}}[1m])'
    checks = [
        {
            # histogram_quantile over Triton's own buckets (ms -> s) equals the sidecar's within 1e-6 relative
            "expr": f"abs(histogram_quantile({q}, sum by (le) ({rate})) / 1000 - {v!r}) <= bool {v!r} * 1e-6",
            "eval_time": "1m",
            "exp_samples": [{"labels": "{}", "value": 1}],
        }
        for q, v in sidecar.items()
    ]
    checks.append(
        # 5 of every 100 requests took over 25 ms, a bucket bound: the SLI is that share, exactly
        {
            "expr": f"round(sum({sli}), 1e-12)",
            "eval_time": "1m",
            "exp_samples": [{"labels": "{}", "value": 0.05}],
        }
    )
    test = {
        "rule_files": [str(p) for p in sorted(out.glob("*.rules.yml"))],
        "evaluation_interval": "10s",
        "tests": [{"interval": "10s", "input_series": raw + served_series, "promql_expr_test": checks}],
    }
    path = tmp_path / "native.test.yml"
    path.write_text(yaml.safe_dump(test, width=1 << 16))
    run = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_a_layout_change_starts_the_models_window_again() -> None:
    from tritonwatch.expfmt import parse

    native = NativeHistograms(300.0)
    native.observe(0.0, parse(payload(0)))
    native.observe(10.0, parse(payload(1)))
    # A reload with buckets 20/200 ms: counts restart under other bounds.
    other = histogram("fraud_detector", 1, (20, 200), (90, 10, 0))
    native.observe(20.0, parse(other))
    view = native.view(lambda key: True, ("0.5",))
    assert native.relayouts == 1
    assert view[("fraud_detector", "1")].quantiles == {}  # one scrape of the new layout: no increase yet
    native.observe(30.0, parse(histogram("fraud_detector", 2, (20, 200), (90, 10, 0))))
    got = native.view(lambda key: True, ("0.5",))[("fraud_detector", "1")]
    assert got.quantiles == {"0.5": pytest.approx(0.020 * 50 / 90, rel=1e-12)}  # the new bounds only
    # Two series of one model with different bounds: left out, never summed by le.
    mixed = histogram("fraud_detector", 1).replace('version="1"', 'version="1",namespace="a"') + histogram(
        "fraud_detector", 1, (20, 200), (90, 10, 0)
    ).replace('version="1"', 'version="1",namespace="b"')
    native.observe(40.0, parse(mixed))
    assert native.mixed == {("fraud_detector", "1")}
    assert native.view(lambda key: True, ("0.5",)) == {}


def test_a_triton_restart_counts_as_a_reset_not_a_negative_increase() -> None:
    from tritonwatch.expfmt import parse

    native = NativeHistograms(300.0)
    for t, k in (
        (0.0, 0),
        (10.0, 2),
        (20.0, 1),
    ):  # restarted between the 2nd and 3rd scrape: 1 scrape's worth
        native.observe(t, parse(payload(k)))
    got = native.view(lambda key: key[0] == "fraud_detector", ("0.5", "0.99"))
    assert set(got) == {("fraud_detector", "1")}  # accept decides which models it serves
    # 2 + 1 scrapes' worth, the same shares per bucket: the same quantiles as one scrape's
    assert got[("fraud_detector", "1")].quantiles == {
        "0.5": pytest.approx(0.007, rel=1e-12),
        "0.99": pytest.approx(0.050, rel=1e-12),
    }
    assert got[("fraud_detector", "1")].buckets[-1] == ("+Inf", 100.0)  # the latest cumulative, as Triton's


def test_traces_still_give_the_other_phases_where_the_request_phase_is_native() -> None:
    from tritonwatch.exporters.native_latency import NativeModel
    from tritonwatch.exporters.traces import LatencyPart
    from tritonwatch.exporters.traces.timing import RequestTiming

    native = NativeModel([("0.025", 90.0), ("+Inf", 100.0)], 1.5, {"0.5": 0.0125})
    part = LatencyPart(300.0, clock=lambda: 1000.0, native=lambda: {("m", "1"): native})
    phases = {"request": 0.040, "queue": 0.010, "compute_infer": 0.020}
    part.record([RequestTiming("m", "1", "t", "r", phases), RequestTiming("other", "1", "t2", "r2", phases)])
    rows = {(s.name, tuple(sorted(s.labels.items()))): s.value for fam in part.collect() for s in fam.samples}

    def quantile(model: str, phase: str) -> dict[str, tuple[float, str]]:
        return {
            dict(k)["quantile"]: (v, dict(k)["source"])
            for (n, k), v in rows.items()
            if n == catalog.LATENCY_QUANTILE and ("model", model) in k and ("phase", phase) in k
        }

    assert quantile("m", "request") == {"0.5": (0.0125, "histogram")}  # Triton's, not the one trace
    assert {source for _v, source in quantile("m", "queue").values()} == {"trace"}
    assert quantile("other", "request")["0.5"] == (0.040, "trace")  # no histogram: traces as before
    count = f"{catalog.REQUEST_DURATION}_count"
    assert rows[(count, (("model", "m"), ("phase", "request"), ("version", "1")))] == 100.0
    assert rows[(count, (("model", "m"), ("phase", "queue"), ("version", "1")))] == 1.0
    assert rows[(count, (("model", "other"), ("phase", "request"), ("version", "1")))] == 1.0
    samples = [k for (n, k) in rows if n == catalog.LATENCY_SAMPLES and ("model", "m") in k]
    # the traced-request count is for source=trace quantiles only: none for the native request phase
    assert samples == [
        (("model", "m"), ("phase", phase), ("version", "1")) for phase in ("compute_infer", "queue")
    ]
