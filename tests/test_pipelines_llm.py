"""The TensorRT-LLM ensemble: an LLM SLO set on ``ensemble`` reads its ``tensorrt_llm`` step.

The fake Triton's API serves the real ``all_models/inflight_batcher_llm`` configs of
triton-inference-server/tensorrtllm_backend as Triton's config API returns them
(``tests/data/real/tensorrtllm_backend_configs.json``; repository, path and commit in
``tests/data/real/README-llm.md``). ``/metrics`` serves the backend's published TensorRT-LLM sample
(``tests/support/llm_payloads.py``) plus Triton's first-response histogram for ``tensorrt_llm`` (what a
Triton that has it serves for a decoupled model; 2.51 has none, docs/llm.md): 20 first responses
between the two scrapes. A real sidecar scrapes both; the generated rules of an SLO on ``ensemble``
then run under promtool on the series the sidecar served for ``ensemble``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.utils import floatToGoString
from support import stacks
from support.fake_triton import FakeTriton, fake_triton
from support.llm_payloads import trt_llm_scrapes
from support.llm_served import Series, served

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.exporters.llm import llm_entries

REAL = Path(__file__).resolve().parent / "data" / "real"
CONFIGS = json.loads((REAL / "tensorrtllm_backend_configs.json").read_text())
needs_promtool = stacks.needs("promtool")

ENSEMBLE, LLM_STEP = ("ensemble", "1"), ("tensorrt_llm", "1")
FIRST_MS = (100, 250, 500, 1000)  # bucket bounds (ms) of the first-response histogram served
# The 20 first responses of scrape 2, by bucket: 10 <= 100 ms, 6 <= 250, 3 <= 500, 1 <= 1000.
CUMULATIVE = (10, 16, 19, 20)
SUM_MS = 10 * 50 + 6 * 200 + 3 * 400 + 1 * 800  # 3700
# histogram_quantile by hand: 0.5 -> rank 10, the whole first bucket: 0.1 s; 0.9 -> rank 18 in
# (0.25, 0.5]: 0.25 + 0.25 * 2/3; 0.99 -> rank 19.8 in (0.5, 1]: 0.5 + 0.5 * 0.8.
QUANTILES = {"0.5": 0.1, "0.9": 0.25 + 0.25 * 2 / 3, "0.99": 0.9}


def first_response(model: str, counts: tuple[int, ...], total_ms: float) -> str:
    name, labels = catalog.TRITON_FIRST_RESPONSE, f'model="{model}",version="1"'
    lines = [f"# TYPE {name} histogram"]
    for bound, count in zip(FIRST_MS, counts, strict=True):
        lines.append(f'{name}_bucket{{{labels},le="{bound}"}} {count}')
    lines += [
        f'{name}_bucket{{{labels},le="+Inf"}} {counts[-1]}',
        f"{name}_sum{{{labels}}} {total_ms}",
        f"{name}_count{{{labels}}} {counts[-1]}",
    ]
    return "\n".join(lines) + "\n"


def payloads(also: str = "") -> list[str]:
    """The two scrapes; ``also`` names a second step that serves the same first-response histogram."""
    out = []
    for trt, counts, total in zip(trt_llm_scrapes(), ((0, 0, 0, 0), CUMULATIVE), (0, SUM_MS), strict=True):
        text = trt + first_response("tensorrt_llm", counts, total)
        if also:
            text += first_response(also, counts, total).split("\n", 1)[1]
        out.append(text)
    return out


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        server.index = [{"name": m, "state": "READY", "version": "1"} for m in CONFIGS]
        server.configs = dict(CONFIGS)
        yield server


def of(series: Series, name: str, key: tuple[str, str]) -> dict[frozenset[tuple[str, str]], float]:
    """The samples of ``name`` for one model, by their other labels."""
    want = {("model", key[0]), ("version", key[1])}
    return {ls - want: v for (n, ls), v in series.items() if n == name and want <= ls}


def test_the_real_configs_give_the_tensorrt_llm_topology(fake: FakeTriton) -> None:
    series = served(list(payloads()), fake.base_url)
    roles = {dict(ls)["model"]: dict(ls)[catalog.ROLE] for (n, ls) in series if n == catalog.MODEL_ROLE_INFO}
    assert roles == {
        "ensemble": "ensemble",
        "preprocessing": "step",
        "tensorrt_llm": "step",
        "postprocessing": "step",
        "tensorrt_llm_bls": "model",  # what it calls is in no config (role bls once traces show it)
    }
    steps = {
        (dict(ls)[catalog.STEP], dict(ls)[catalog.POSITION])
        for (n, ls) in series
        if n == catalog.ENSEMBLE_STEP_INFO and ("model", "ensemble") in ls
    }
    assert steps == {("preprocessing", "1"), ("tensorrt_llm", "2"), ("postprocessing", "3")}


def test_the_ensemble_serves_its_llm_steps_first_token_histogram_and_quantiles(fake: FakeTriton) -> None:
    series = served(list(payloads()), fake.base_url)
    bucket = f"{catalog.LLM_TTFT}_bucket"
    want = {
        frozenset({("le", floatToGoString(b / 1000))}): float(c)
        for b, c in zip(FIRST_MS, CUMULATIVE, strict=True)
    }
    want[frozenset({("le", "+Inf")})] = 20.0
    assert of(series, bucket, LLM_STEP) == want
    assert of(series, bucket, ENSEMBLE) == want
    assert of(series, f"{catalog.LLM_TTFT}_sum", ENSEMBLE) == {frozenset(): pytest.approx(SUM_MS / 1000)}
    quantiles = {
        dict(ls)[catalog.QUANTILE]: v for ls, v in of(series, catalog.LLM_TTFT_QUANTILE, ENSEMBLE).items()
    }
    assert quantiles == pytest.approx(QUANTILES, rel=1e-12)
    assert of(series, catalog.LLM_TTFT_QUANTILE, ENSEMBLE) == of(series, catalog.LLM_TTFT_QUANTILE, LLM_STEP)
    # Token rates stay on the step: the rules compute them from the backend's families, only the step's.
    assert of(series, catalog.LLM_GENERATION_TOKENS_RATE, LLM_STEP) == {frozenset(): 400 / 10}
    assert of(series, catalog.LLM_GENERATION_TOKENS_RATE, ENSEMBLE) == {}
    for model in ("preprocessing", "postprocessing", "tensorrt_llm_bls"):
        assert of(series, bucket, (model, "1")) == {}


def test_a_non_decoupled_step_with_the_histogram_is_request_latency_not_a_second_llm_step(
    fake: FakeTriton,
) -> None:
    # postprocessing is not decoupled: Triton's first-response histogram is its request latency
    # (exporters/native_latency.py), so the ensemble's one LLM step is still tensorrt_llm.
    series = served(list(payloads(also="postprocessing")), fake.base_url)
    assert of(series, f"{catalog.LLM_TTFT}_bucket", ("postprocessing", "1")) == {}
    assert of(series, f"{catalog.REQUEST_DURATION}_count", ("postprocessing", "1")) == {
        frozenset({(catalog.PHASE, "request")}): 20.0
    }
    assert of(series, f"{catalog.LLM_TTFT}_bucket", ENSEMBLE) == of(
        series, f"{catalog.LLM_TTFT}_bucket", LLM_STEP
    )


def test_two_llm_steps_give_the_ensemble_none_rather_than_a_guess(fake: FakeTriton) -> None:
    # (a postprocessing step made decoupled here: two decoupled steps with the histogram)
    fake.configs["postprocessing"] = {
        **CONFIGS["postprocessing"],
        "model_transaction_policy": {"decoupled": True},
    }
    series = served(list(payloads(also="postprocessing")), fake.base_url)
    assert of(series, f"{catalog.LLM_TTFT}_bucket", ("postprocessing", "1"))
    assert of(series, f"{catalog.LLM_TTFT}_bucket", ENSEMBLE) == {}
    assert of(series, catalog.LLM_TTFT_QUANTILE, ENSEMBLE) == {}


@needs_promtool
def test_an_ensemble_ttft_slo_reads_what_the_sidecar_served_for_it(fake: FakeTriton, tmp_path: Path) -> None:
    series = served(list(payloads()), fake.base_url)
    doc = {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "trtllm"},
        "spec": {
            "window": "28d",
            "up_job": "triton",
            "slos": [
                {
                    "model": "ensemble",
                    "time_to_first_token": {"threshold": "500ms", "objective": 99, "min_samples": 10},
                }
            ],
        },
    }
    slo_file = tmp_path / "slo.yaml"
    slo_file.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    assert main(["rules", "--slo", str(slo_file), "--out", str(out)]) == 0
    # The input series: the ensemble's buckets as the sidecar served them at the second scrape, after
    # the first scrape's zeros, a minute apart (labels a scrape adds: instance, job).
    extra = 'instance="sidecar:9450",job="tritonwatch"'
    inputs = []
    for ls, value in sorted(of(series, f"{catalog.LLM_TTFT}_bucket", ENSEMBLE).items()):
        le = dict(ls)["le"]
        inputs.append(
            {
                "series": f'{catalog.LLM_TTFT}_bucket{{model="ensemble",version="1",le="{le}",{extra}}}',
                "values": f"0 {value:g}",
            }
        )
    count = of(series, f"{catalog.LLM_TTFT}_count", ENSEMBLE)[frozenset()]
    inputs.append(
        {
            "series": f'{catalog.LLM_TTFT}_count{{model="ensemble",version="1",{extra}}}',
            "values": f"0 {count:g}",
        }
    )
    sli = f'{catalog.slo_sli_error_record("5m")}{{slo="ensemble-time-to-first-token"}}'
    record = catalog.llm_histogram(catalog.LLM_TTFT).quantile_record
    sidecar_quantiles = {
        dict(ls)[catalog.QUANTILE]: v for ls, v in of(series, catalog.LLM_TTFT_QUANTILE, ENSEMBLE).items()
    }
    assert sidecar_quantiles == pytest.approx(QUANTILES, rel=1e-12)
    test = {
        "rule_files": [str(p) for p in sorted(out.glob("*.rules.yml"))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    # 1 of the 20 first tokens took over 500 ms
                    {
                        "expr": f"round(sum({sli}), 1e-9)",
                        "eval_time": "1m",
                        "exp_samples": [{"labels": "{}", "value": 0.05}],
                    },
                    # the rule's quantile is the sidecar's, within 1e-12 s (PromQL's float order)
                    *(
                        {
                            "expr": f'abs(sum({record}{{model="ensemble",quantile="{q}"}}) - {v!r}) < bool 1e-12',
                            "eval_time": "1m",
                            "exp_samples": [{"labels": "{}", "value": 1}],
                        }
                        for q, v in sidecar_quantiles.items()
                    ),
                ],
            }
        ],
    }
    path = tmp_path / "ensemble.test.yml"
    path.write_text(yaml.safe_dump(test))
    run = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_only_a_ready_ensemble_without_its_own_gets_its_one_llm_step() -> None:
    ensembles = {"ensemble": ("preprocessing", "tensorrt_llm", "postprocessing"), "other": ("tensorrt_llm",)}
    ready = {ENSEMBLE: True, ("other", "1"): False, ("ensemble", "2"): True}
    assert llm_entries((ensembles, ready), [LLM_STEP]) == {ENSEMBLE: LLM_STEP, ("ensemble", "2"): LLM_STEP}
    # two versions of the step: which one the ensemble runs is not known here
    assert llm_entries((ensembles, ready), [LLM_STEP, ("tensorrt_llm", "2")]) == {}
    # the ensemble's own (traced) value wins; a model that is no ensemble gets nothing
    assert llm_entries((ensembles, ready), [LLM_STEP, ENSEMBLE]) == {("ensemble", "2"): LLM_STEP}
    assert llm_entries(({}, {("tensorrt_llm_bls", "1"): True}), [LLM_STEP]) == {}
