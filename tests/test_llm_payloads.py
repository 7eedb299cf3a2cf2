"""The LLM signals on the vLLM and TensorRT-LLM backends' own published /metrics samples.

Each backend's two scrapes (tests/support/llm_payloads.py: the published sample, then advanced by a
documented amount) are served over HTTP as a Triton /metrics endpoint; a real sidecar scrapes them
10 s apart on a fake clock and serves its /metrics; every LLM signal is read back and held to the
value computed by hand from the advance.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.llm_payloads import TRT_LLM_KEY, VLLM_KEY, trt_llm_scrapes, vllm_scrapes
from support.llm_served import SECONDS, Series, served, served_twice

from tritonwatch import catalog


def get(series: Series, name: str, key: tuple[str, str], **labels: str) -> float:
    want = frozenset({"model": key[0], "version": key[1], **labels}.items())
    return series[(name, want)]


def names(series: Series, key: tuple[str, str]) -> set[str]:
    return {n for n, ls in series if ("model", key[0]) in ls}


@pytest.fixture(scope="module")
def vllm() -> Iterator[Series]:
    yield served_twice(*vllm_scrapes())


@pytest.fixture(scope="module")
def trt() -> Iterator[Series]:
    yield served_twice(*trt_llm_scrapes())


def test_vllm_rates_and_gauges_are_the_hand_computed_values(vllm: Series) -> None:
    assert get(vllm, catalog.LLM_PROMPT_TOKENS_RATE, VLLM_KEY) == 18 / SECONDS
    assert get(vllm, catalog.LLM_GENERATION_TOKENS_RATE, VLLM_KEY) == 48 / SECONDS
    assert get(vllm, catalog.LLM_PREEMPTIONS_RATE, VLLM_KEY) == 3 / SECONDS
    assert get(vllm, catalog.LLM_REQUESTS_RUNNING, VLLM_KEY) == 2
    assert get(vllm, catalog.LLM_REQUESTS_WAITING, VLLM_KEY) == 1
    assert get(vllm, catalog.LLM_KV_CACHE_UTILIZATION, VLLM_KEY) == 0.25


def test_vllm_histograms_pass_through_in_seconds(vllm: Series) -> None:
    ttft = catalog.LLM_TTFT
    assert get(vllm, f"{ttft}_count", VLLM_KEY) == 4
    assert get(vllm, f"{ttft}_sum", VLLM_KEY) == pytest.approx(0.03233122825622559 + 0.42, rel=1e-12)
    assert get(vllm, f"{ttft}_bucket", VLLM_KEY, le="0.04") == 1
    assert get(vllm, f"{ttft}_bucket", VLLM_KEY, le="0.08") == 3
    assert get(vllm, f"{ttft}_bucket", VLLM_KEY, le="0.5") == 4
    assert get(vllm, f"{ttft}_bucket", VLLM_KEY, le="+Inf") == 4
    itl = catalog.LLM_ITL
    assert get(vllm, f"{itl}_count", VLLM_KEY) == 60
    assert get(vllm, f"{itl}_bucket", VLLM_KEY, le="0.01") == 54
    assert get(vllm, f"{itl}_bucket", VLLM_KEY, le="0.025") == 60


def test_vllm_quantiles_interpolate_the_window_increase_as_histogram_quantile(vllm: Series) -> None:
    # TTFT: 3 first tokens in the window, in le=0.06, 0.08, 0.5 (cumulative 1, 2, 3 over 0.04..0.5).
    def ttft(q: str) -> float:
        return get(vllm, catalog.LLM_TTFT_QUANTILE, VLLM_KEY, quantile=q, source="histogram")

    assert ttft("0.5") == pytest.approx(0.06 + 0.02 * (1.5 - 1) / 1)
    assert ttft("0.9") == pytest.approx(0.25 + 0.25 * (2.7 - 2) / 1)
    assert ttft("0.99") == pytest.approx(0.25 + 0.25 * (2.97 - 2) / 1)

    # ITL: 40 later tokens in le=0.01 and 5 in le=0.025.
    def itl(q: str) -> float:
        return get(vllm, catalog.LLM_ITL_QUANTILE, VLLM_KEY, quantile=q, source="histogram")

    assert itl("0.5") == pytest.approx(0.01 * 22.5 / 40)
    assert itl("0.9") == pytest.approx(0.01 + 0.015 * (40.5 - 40) / 5)
    assert itl("0.99") == pytest.approx(0.01 + 0.015 * (44.55 - 40) / 5)


def test_trt_llm_signals_are_the_hand_computed_values(trt: Series) -> None:
    assert get(trt, catalog.LLM_PROMPT_TOKENS_RATE, TRT_LLM_KEY) == 1200 / SECONDS
    assert get(trt, catalog.LLM_GENERATION_TOKENS_RATE, TRT_LLM_KEY) == 400 / SECONDS
    assert get(trt, catalog.LLM_REQUESTS_RUNNING, TRT_LLM_KEY) == 3
    assert get(trt, catalog.LLM_REQUESTS_WAITING, TRT_LLM_KEY) == 2
    assert get(trt, catalog.LLM_KV_CACHE_UTILIZATION, TRT_LLM_KEY) == 0.5


def test_what_a_backend_does_not_report_is_absent_not_zero(trt: Series, vllm: Series) -> None:
    # TensorRT-LLM's Triton backend has no preemption counter and no latency histograms.
    absent = {
        catalog.LLM_PREEMPTIONS_RATE,
        f"{catalog.LLM_TTFT}_count",
        f"{catalog.LLM_ITL}_count",
        catalog.LLM_TTFT_QUANTILE,
        catalog.LLM_ITL_QUANTILE,
    }
    assert not absent & names(trt, TRT_LLM_KEY)
    every = {s.name for s in catalog.LLM_SIGNALS} | {h.quantile_name for h in catalog.LLM_HISTOGRAMS}
    every |= {f"{h.name}_count" for h in catalog.LLM_HISTOGRAMS}
    assert every <= names(vllm, VLLM_KEY)


def test_a_backend_restart_counts_from_zero_not_negative() -> None:
    # vLLM restarts between the 2nd and 3rd scrape: its counters start again from the sample's values.
    first, second = vllm_scrapes()
    after = served([first, second, first])
    # 18 prompt tokens before the restart, then the sample's 10 counted from 0, over 20 s.
    assert get(after, catalog.LLM_PROMPT_TOKENS_RATE, VLLM_KEY) == (18 + 10) / (2 * SECONDS)
    assert get(after, catalog.LLM_PREEMPTIONS_RATE, VLLM_KEY) == 3 / (2 * SECONDS)


def test_while_triton_is_down_the_llm_families_are_absent_not_stale() -> None:
    first, second = vllm_scrapes()
    down = served([first, second, None])
    assert not names(down, VLLM_KEY)
    assert down[("tritonwatch_up", frozenset({("target", "triton")}))] == 0


def current_vllm(text: str, old_kv: float | None = None) -> str:
    """The sample under today's vLLM names (vllm-project/vllm ``vllm/v1/metrics/loggers.py``, README-llm.md):
    ``kv_cache_usage_perc`` for ``gpu_cache_usage_perc`` (renamed in 0.9) and ``inter_token_latency_seconds``
    for ``time_per_output_token_seconds``; ``old_kv``: the old KV name served beside it, as 0.9-0.10 do."""
    out = text.replace(catalog.VLLM_GPU_CACHE, catalog.VLLM_KV_CACHE).replace(
        catalog.VLLM_TPOT, catalog.VLLM_ITL
    )
    assert catalog.VLLM_KV_CACHE in out and f"{catalog.VLLM_ITL}_bucket" in out
    if old_kv is not None:
        out += f'{catalog.VLLM_GPU_CACHE}{{model="vllm_model",version="1"}} {old_kv}\n'
    return out


def test_current_vllm_names_give_the_same_values() -> None:
    # the old KV name with another value: the new name, listed first, wins (as the rule's ``or`` does)
    now = served_twice(*(current_vllm(t, old_kv=0.75) for t in vllm_scrapes()))
    assert get(now, catalog.LLM_KV_CACHE_UTILIZATION, VLLM_KEY) == 0.25
    itl = catalog.LLM_ITL
    assert get(now, f"{itl}_count", VLLM_KEY) == 60
    assert get(now, f"{itl}_bucket", VLLM_KEY, le="0.01") == 54
    assert get(now, f"{itl}_bucket", VLLM_KEY, le="0.025") == 60
    q = get(now, catalog.LLM_ITL_QUANTILE, VLLM_KEY, quantile="0.9", source="histogram")
    assert q == pytest.approx(0.01 + 0.015 * (40.5 - 40) / 5)
    assert get(now, catalog.LLM_GENERATION_TOKENS_RATE, VLLM_KEY) == 48 / SECONDS
