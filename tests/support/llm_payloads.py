"""Two scrapes each of a vLLM and a TensorRT-LLM Triton, built from the backends' own published samples.

Scrape 1 is the sample as published (``tests/data/real/*_readme_metrics.txt``; sources and commits in
``tests/data/real/README-llm.md``), made whole: the README's elided bucket lines (``...``) are filled
from the backend's bucket bounds so that every bucket is present, consistent with the sample's sum;
families the sample predates are added at 0 (vLLM: running, waiting, gpu_cache_usage_perc,
num_preemptions_total; TensorRT-LLM: request_type waiting, kv_cache_block_type fraction, and the
nv_llm_input/output_token_len histograms, names and buckets from custom_metrics_reporter.cc).
Scrape 2 advances them by the documented amounts in ``VLLM_ADVANCE`` / ``TRT_LLM_ADVANCE``.
"""

from __future__ import annotations

from pathlib import Path

REAL = Path(__file__).resolve().parent.parent / "data" / "real"

# vllm_backend src/utils/metrics.py (commit 1e66a222): bucket bounds of the two latency histograms.
VLLM_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
)
VLLM_TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
# TensorRT-LLM custom_metrics_reporter.cc: the token-length histograms' buckets.
TRT_LLM_TOKEN_BUCKETS = (10.0, 50.0, 100.0, 500.0, 1000.0)

# Scrape 1 -> scrape 2 for vLLM: one more round of the vLLM backend's CI metrics test (3 prompts:
# +18 prompt tokens, +48 generated, 3 first tokens, 45 later tokens), with chosen latencies.
VLLM_ADVANCE = {
    "prompt_tokens": 18,
    "generation_tokens": 48,
    "ttft": (0.05, 0.07, 0.3),  # seconds: buckets le=0.06, 0.08, 0.5
    "tpot": (0.006,) * 40 + (0.012,) * 5,  # 40 in le=0.01, 5 in le=0.025
    "preemptions": 3,
    "running": 2,
    "waiting": 1,
    "gpu_cache_usage_perc": 0.25,
}
# Scrape 1 -> scrape 2 for TensorRT-LLM: 10 input-length observations summing 1200 tokens (each 120),
# 20 output-length observations summing 400 (each 20); 3 active, 2 waiting, half the KV blocks used.
TRT_LLM_ADVANCE = {
    "input_tokens": (120.0,) * 10,
    "output_tokens": (20.0,) * 20,
    "active": 3,
    "waiting": 2,
    "used": 3120,
    "free": 3119,
    "fraction": 0.5,
}
VLLM_KEY = ("vllm_model", "1")
TRT_LLM_KEY = ("tensorrt_llm", "1")


def _le(bound: float) -> str:
    return f"{bound:g}"


def _histogram(
    name: str, labels: str, bounds: tuple[float, ...], values: list[float], total: float
) -> list[str]:
    lines = [
        f"{name}_count{{{labels}}} {len(values)}",
        f"{name}_sum{{{labels}}} {total!r}",
    ]
    for b in bounds:
        lines.append(f'{name}_bucket{{{labels},le="{_le(b)}"}} {sum(1 for v in values if v <= b)}')
    lines.append(f'{name}_bucket{{{labels},le="+Inf"}} {len(values)}')
    return lines


def _fill(text: str, name: str, lines: list[str]) -> str:
    """Replace the sample's lines of histogram ``name`` (its count, sum, buckets and ``...``) by ``lines``."""
    out: list[str] = []
    done = False
    for line in text.splitlines():
        is_sample = line.startswith(f"{name}_") and not line.startswith("#")
        in_block = is_sample or (line == "..." and out and out[-1].startswith(f"{name}_"))
        if in_block:
            if not done:
                out.extend(lines)
                done = True
            continue
        out.append(line)
    assert done, name
    return "\n".join(out) + "\n"


def vllm_scrapes() -> tuple[str, str]:
    return vllm_scrape(0), vllm_scrape(1)


def trt_llm_scrapes() -> tuple[str, str]:
    return trt_llm_scrape(0), trt_llm_scrape(1)


def vllm_scrape(step: int, slow_first_tokens: int = 0) -> str:
    """The vLLM sample advanced ``step`` times by ``VLLM_ADVANCE`` (gauges at their advanced values),
    plus ``slow_first_tokens`` first tokens of 2 s (to shift the distribution over time)."""
    sample = (REAL / "vllm_backend_readme_metrics.txt").read_text()
    labels = 'model="vllm_model",version="1"'
    # The sample's first token took 0.0323 s; of its 15 later tokens 14 were under 10 ms and the sum
    # (0.045 s) puts the last one under 0.025 s: it goes in le=0.025.
    ttft1 = [0.03233122825622559]
    tpot1 = [0.0] * 14 + [0.02]
    ttft_sum1, tpot_sum1 = 0.03233122825622559, 0.04501533508300781
    a = VLLM_ADVANCE
    ttft = ttft1 + list(a["ttft"]) * step + [2.0] * slow_first_tokens  # type: ignore[call-overload]
    tpot = tpot1 + list(a["tpot"]) * step  # type: ignore[call-overload]
    text = _fill(
        sample,
        "vllm:time_to_first_token_seconds",
        _histogram(
            "vllm:time_to_first_token_seconds",
            labels,
            VLLM_TTFT_BUCKETS,
            ttft,
            ttft_sum1 + sum(a["ttft"]) * step + 2.0 * slow_first_tokens,  # type: ignore[arg-type]
        ),
    )
    text = _fill(
        text,
        "vllm:time_per_output_token_seconds",
        _histogram(
            "vllm:time_per_output_token_seconds",
            labels,
            VLLM_TPOT_BUCKETS,
            tpot,
            tpot_sum1 + sum(a["tpot"]) * step,  # type: ignore[arg-type]
        ),
    )
    text = text.replace("\n...\n", "\n")  # the other histograms keep the buckets the sample shows
    text = text.replace(
        f"vllm:prompt_tokens_total{{{labels}}} 10",
        f"vllm:prompt_tokens_total{{{labels}}} {10 + a['prompt_tokens'] * step}",
    ).replace(
        f"vllm:generation_tokens_total{{{labels}}} 16",
        f"vllm:generation_tokens_total{{{labels}}} {16 + a['generation_tokens'] * step}",
    )
    g = dict(a) if step else {k: 0 for k in a}
    g["preemptions"] = a["preemptions"] * step  # type: ignore[operator]
    text += (
        "\n".join(
            [
                "# HELP vllm:num_preemptions_total Number of preemption tokens processed.",
                "# TYPE vllm:num_preemptions_total counter",
                f"vllm:num_preemptions_total{{{labels}}} {g['preemptions']}",
                "# HELP vllm:num_requests_running Number of requests currently running on GPU.",
                "# TYPE vllm:num_requests_running gauge",
                f"vllm:num_requests_running{{{labels}}} {g['running']}",
                "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
                "# TYPE vllm:num_requests_waiting gauge",
                f"vllm:num_requests_waiting{{{labels}}} {g['waiting']}",
                "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
                "# TYPE vllm:gpu_cache_usage_perc gauge",
                f"vllm:gpu_cache_usage_perc{{{labels}}} {g['gpu_cache_usage_perc']}",
            ]
        )
        + "\n"
    )
    return text


def trt_llm_scrape(step: int) -> str:
    """The TensorRT-LLM sample advanced ``step`` times by ``TRT_LLM_ADVANCE``."""
    sample = (REAL / "tensorrtllm_backend_readme_metrics.txt").read_text()
    a = TRT_LLM_ADVANCE
    text = sample
    if step:
        text = (
            text.replace(
                'request_type="active",version="1"} 0',
                f'request_type="active",version="1"}} {a["active"]}',
            )
            .replace(
                'kv_cache_block_type="used",model="tensorrt_llm",version="1"} 1',
                f'kv_cache_block_type="used",model="tensorrt_llm",version="1"}} {a["used"]}',
            )
            .replace(
                'kv_cache_block_type="free",model="tensorrt_llm",version="1"} 6239',
                f'kv_cache_block_type="free",model="tensorrt_llm",version="1"}} {a["free"]}',
            )
        )
    waiting = a["waiting"] if step else 0
    fraction = a["fraction"] if step else 1 / 6239  # used / max of the sample
    text = text.replace(
        "# HELP nv_trt_llm_runtime_memory_metrics",
        f'nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="waiting",version="1"}} {waiting}\n'
        "# HELP nv_trt_llm_runtime_memory_metrics",
    ).replace(
        "# HELP nv_trt_llm_inflight_batcher_metrics",
        f'nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"}} {fraction!r}\n'
        "# HELP nv_trt_llm_inflight_batcher_metrics",
    )
    for family, kind, key in (
        ("nv_llm_input_token_len", "total_input_tokens", "input_tokens"),
        ("nv_llm_output_token_len", "total_output_tokens", "output_tokens"),
    ):
        values = list(a[key]) * step  # type: ignore[call-overload]
        labels = f'model="tensorrt_llm",response_metric_type="{kind}",version="1"'
        text += (
            "\n".join(
                [
                    f"# HELP {family} TRT LLM response metrics",
                    f"# TYPE {family} histogram",
                    *_histogram(family, labels, TRT_LLM_TOKEN_BUCKETS, values, float(sum(values))),
                ]
            )
            + "\n"
        )
    return text
