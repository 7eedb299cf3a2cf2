"""The two engines agree on every LLM signal, exactly, on the same samples.

The vLLM and TensorRT-LLM backends' samples (tests/support/llm_payloads.py), advanced unevenly at
each 10 s step, are fed to the sidecar's LLM window at those times and backfilled into a real Prometheus with
the same timestamps, together with the histograms the sidecar exports from them. At the last step
Prometheus evaluates the catalog's expressions (the recording rules' formulas, over the sidecar's
60 s window): samples sit on both edges of the window, so neither engine extrapolates and the values
must be equal (Prometheus 3: see ``engines``).
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client.utils import floatToGoString
from support import backfill, stacks
from support.llm_payloads import TRT_LLM_KEY, VLLM_KEY, trt_llm_scrape, vllm_scrape

from tritonwatch import catalog
from tritonwatch.expfmt import Parser
from tritonwatch.exporters.llm import LlmWindow
from tritonwatch.local.promstack import Prometheus

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs("promtool", "prometheus"),
    pytest.mark.usefixtures("platform"),
]

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "alerts" / "generated" / "catalog.rules.yml"
T0 = 1_790_000_000  # seconds; any time will do
STEP = 10
STEPS = 12
WINDOW = 60


def _labels(ls: tuple[tuple[str, str], ...]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in ls)


@pytest.fixture(scope="module")
def engines(
    platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LlmWindow, Prometheus]]:
    work = tmp_path_factory.mktemp("llm-engines")
    parser = Parser(catalog.TRITON_FAMILIES, exact=True)
    # Prometheus 3's ranges are left-open: (t-60s, t] holds the samples from t-50s and extrapolates the
    # missing step at their mean rate, which is the sidecar's over a 50 s window.
    window = LlmWindow(WINDOW - STEP if platform.prometheus_major >= 3 else WINDOW)
    series: dict[tuple[str, tuple[tuple[str, str], ...]], list[tuple[int, float]]] = {}
    for step in range(STEPS + 1):
        t = T0 + STEP * step
        # Uneven advances (1, 2, 4, 7, ... steps; slow first tokens from the 6th scrape on): a value
        # over any other window than the sidecar's would differ.
        advance = 1 + step * (step + 1) // 2
        slow = max(0, step - 5) ** 2
        samples = parser.parse(vllm_scrape(advance, slow) + trt_llm_scrape(advance))
        window.observe(float(t), samples)
        for name, by_labels in samples.items():
            for ls, v in by_labels.items():
                series.setdefault((name, ls), []).append((t, v))
        # What the sidecar exports from them: the pass-through histograms, in seconds.
        for (hist, key), (pairs, total, count) in window.histograms.cumulative.items():
            base = (("model", key[0]), ("version", key[1]))
            for bound, c in pairs:
                le = "+Inf" if math.isinf(bound) else floatToGoString(bound)
                series.setdefault((f"{hist}_bucket", (*base, ("le", le))), []).append((t, c))
            series.setdefault((f"{hist}_sum", base), []).append((t, total))
            series.setdefault((f"{hist}_count", base), []).append((t, count))
    lines = [
        f"{name}{{{_labels(ls)}}} {v!r} {t}"
        for (name, ls), points in sorted(series.items())
        for t, v in points
    ]
    om = work / "llm.om"
    om.write_text("\n".join(lines) + "\n# EOF\n")
    storage = work / "data"
    backfill.openmetrics_to_blocks(om, storage)
    prom = backfill.serve_storage(storage, work)
    try:
        yield window, prom
    finally:
        prom.stop()


def query(prom: Prometheus, expr: str) -> dict[tuple[str, str], float]:
    params = urllib.parse.urlencode({"query": expr, "time": str(T0 + STEP * STEPS)})
    with urllib.request.urlopen(f"{prom.url}/api/v1/query?{params}", timeout=10) as r:
        result = json.loads(r.read())["data"]["result"]
    return {(s["metric"]["model"], s["metric"]["version"]): float(s["value"][1]) for s in result}


def test_every_llm_signal_is_the_same_in_both_engines(engines: tuple[LlmWindow, Prometheus]) -> None:
    window, prom = engines
    compared = 0
    for sig in catalog.LLM_SIGNALS:
        theirs = query(prom, catalog.llm_promql(sig, window=f"{WINDOW}s"))
        for key in (VLLM_KEY, TRT_LLM_KEY):
            mine = window.value(sig, key)
            assert (mine is None) == (key not in theirs), (sig.name, key, mine, theirs)
            if mine is not None:
                assert mine == pytest.approx(theirs[key], rel=1e-12), (sig.name, key)
                compared += 1
    assert compared == 11  # every signal of both backends but TensorRT-LLM's preemptions


def test_sidecar_quantiles_are_prometheus_histogram_quantile(engines: tuple[LlmWindow, Prometheus]) -> None:
    window, prom = engines
    mine = window.histograms.quantiles(catalog.LLM_QUANTILES)
    compared = 0
    for hist in catalog.LLM_HISTOGRAMS:
        for q in catalog.LLM_QUANTILES:
            theirs = query(prom, catalog.llm_quantile_promql(hist, q, window=f"{WINDOW}s"))
            assert set(theirs) == {VLLM_KEY}, hist.name
            assert mine[(hist.name, VLLM_KEY)][0][q] == pytest.approx(theirs[VLLM_KEY], rel=1e-12)
            compared += 1
    assert compared == 6


def test_recording_rules_are_the_catalog_formulas() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r]
    for sig in catalog.LLM_SIGNALS:
        match = [r for r in rules if r["record"] == sig.record]
        assert len(match) == 1, sig.record
        assert " ".join(match[0]["expr"].split()) == " ".join(catalog.llm_promql(sig, "5m").split())
    for hist in catalog.LLM_HISTOGRAMS:
        match = {r["labels"]["quantile"]: r["expr"] for r in rules if r["record"] == hist.quantile_record}
        assert match == {q: catalog.llm_quantile_promql(hist, q, "5m") for q in catalog.LLM_QUANTILES}
