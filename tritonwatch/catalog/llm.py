"""LLM serving: the backends' series (vLLM, TensorRT-LLM), the per-model LLM signals and histograms."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tritonwatch.catalog.render import by_clause

# --- LLM serving (decoupled models: vLLM and TensorRT-LLM backends, streaming traces) --------------
# Family and label names as the backends emit them into Triton's /metrics (tests/data/real/README-llm.md
# lists the sources): vLLM backend src/utils/metrics.py (labels model, version); TensorRT-LLM backend
# custom_metrics_reporter.cc (gauges keyed by a category label, plus token-length histograms).
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"  # counter
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"  # counter
VLLM_PREEMPTIONS = "vllm:num_preemptions_total"  # counter
VLLM_RUNNING = "vllm:num_requests_running"  # gauge
VLLM_WAITING = "vllm:num_requests_waiting"  # gauge
VLLM_KV_CACHE = "vllm:kv_cache_usage_perc"  # gauge, a ratio despite the name (1 = 100 %); vLLM >= 0.9
VLLM_GPU_CACHE = "vllm:gpu_cache_usage_perc"  # its name before vLLM 0.9 (served beside it in 0.9-0.10)
VLLM_TTFT = "vllm:time_to_first_token_seconds"  # histogram, seconds
VLLM_ITL = "vllm:inter_token_latency_seconds"  # histogram, seconds: gap between output tokens (newer vLLM)
VLLM_TPOT = "vllm:time_per_output_token_seconds"  # the same, older vLLM and the Triton vllm_backend
TRT_LLM_REQUESTS = "nv_trt_llm_request_metrics"  # gauge by request_type: active, waiting, scheduled, ...
TRT_LLM_KV_CACHE = "nv_trt_llm_kv_cache_block_metrics"  # gauge by kv_cache_block_type: fraction, used, max
TRT_LLM_INFLIGHT = "nv_trt_llm_inflight_batcher_metrics"  # gauge by inflight_batcher_specific_metric
TRT_LLM_INPUT_TOKENS = "nv_llm_input_token_len"  # histogram of input tokens; _sum counts them
TRT_LLM_OUTPUT_TOKENS = "nv_llm_output_token_len"  # histogram of output tokens; _sum counts them
# Triton's own first-response histogram (ms; ``--metrics-config histogram_latencies=true``). Triton 2.51
# (the bundled local one) does not have it: its libtritonserver holds no such name and the flag is
# accepted silently. Read when a newer Triton serves it.
TRITON_FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"

LLM_TTFT = "tritonwatch_llm_time_to_first_token_seconds"  # histogram
LLM_ITL = "tritonwatch_llm_inter_token_latency_seconds"  # histogram
LLM_TTFT_QUANTILE = "tritonwatch_llm_time_to_first_token_quantile_seconds"
LLM_ITL_QUANTILE = "tritonwatch_llm_inter_token_latency_quantile_seconds"
LLM_PROMPT_TOKENS_RATE = "tritonwatch_llm_prompt_tokens_per_second"
LLM_GENERATION_TOKENS_RATE = "tritonwatch_llm_generation_tokens_per_second"
LLM_REQUESTS_RUNNING = "tritonwatch_llm_requests_running"
LLM_REQUESTS_WAITING = "tritonwatch_llm_requests_waiting"
LLM_KV_CACHE_UTILIZATION = "tritonwatch_llm_kv_cache_utilization_ratio"
LLM_PREEMPTIONS_RATE = "tritonwatch_llm_preemptions_per_second"
LLM_QUANTILES = ("0.5", "0.9", "0.99")
# Where a quantile came from: exact nearest rank over traced requests, or interpolated within the
# buckets of a backend's histogram over the window (as PromQL's histogram_quantile does).
LLM_SOURCE_TRACE = "trace"
LLM_SOURCE_HISTOGRAM = "histogram"


@dataclass(frozen=True)
class LlmInput:
    """One backend series feeding an LLM signal: a sample name, label values it must have, a scale."""

    sample: str
    match: tuple[tuple[str, str], ...] = ()
    scale: float = 1.0

    def accepts(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match)

    def selector(self, extra: str = "") -> str:
        parts = [f'{k}="{v}"' for k, v in self.match] + ([extra] if extra else [])
        return self.sample + (f"{{{','.join(parts)}}}" if parts else "")


@dataclass(frozen=True)
class LlmSignal:
    """One per-model LLM signal, fed by whichever backend's inputs the model has (one per model).

    ``kind``: ``rate`` -- reset-aware increase of the inputs per second over the window;
    ``sum`` -- the latest values summed over the model's series; ``mean`` -- their mean (a ratio
    gauge such as KV-cache use, which is averaged across replicas, never summed).
    """

    name: str
    help: str
    unit: str
    kind: str
    inputs: tuple[LlmInput, ...]
    record: str
    # The sidecar's own gauge, summed across replicas, for models no backend input covers (streaming
    # models measured from traces): the rule and the panels fall back on it with ``or``.
    fallback: str = ""


LLM_SIGNALS: tuple[LlmSignal, ...] = (
    LlmSignal(
        LLM_PROMPT_TOKENS_RATE,
        "Prompt (prefill) tokens processed per second over the window (vLLM, TensorRT-LLM).",
        "short",
        "rate",
        (
            LlmInput(VLLM_PROMPT_TOKENS),
            LlmInput(f"{TRT_LLM_INPUT_TOKENS}_sum", (("response_metric_type", "total_input_tokens"),)),
        ),
        "model:tritonwatch_llm_prompt_tokens:rate5m",
    ),
    LlmSignal(
        LLM_GENERATION_TOKENS_RATE,
        "Generated (output) tokens per second over the window (vLLM, TensorRT-LLM; for other "
        "decoupled models: successful requests/s times the mean responses per traced request).",
        "short",
        "rate",
        (
            LlmInput(VLLM_GENERATION_TOKENS),
            LlmInput(f"{TRT_LLM_OUTPUT_TOKENS}_sum", (("response_metric_type", "total_output_tokens"),)),
        ),
        "model:tritonwatch_llm_generation_tokens:rate5m",
        fallback=LLM_GENERATION_TOKENS_RATE,
    ),
    LlmSignal(
        LLM_REQUESTS_RUNNING,
        "Requests being generated now (vLLM running; TensorRT-LLM active), summed over the model's series.",
        "short",
        "sum",
        (LlmInput(VLLM_RUNNING), LlmInput(TRT_LLM_REQUESTS, (("request_type", "active"),))),
        "model:tritonwatch_llm_requests_running:sum",
    ),
    LlmSignal(
        LLM_REQUESTS_WAITING,
        "Requests queued for generation (vLLM waiting; TensorRT-LLM waiting), summed over the model's series.",
        "short",
        "sum",
        (LlmInput(VLLM_WAITING), LlmInput(TRT_LLM_REQUESTS, (("request_type", "waiting"),))),
        "model:tritonwatch_llm_requests_waiting:sum",
    ),
    LlmSignal(
        LLM_KV_CACHE_UTILIZATION,
        "Share of the KV cache in use (vLLM kv_cache_usage_perc, before 0.9 gpu_cache_usage_perc; "
        "TensorRT-LLM fraction of blocks used).",
        "percentunit",
        "mean",
        (
            LlmInput(VLLM_KV_CACHE),
            LlmInput(VLLM_GPU_CACHE),
            LlmInput(TRT_LLM_KV_CACHE, (("kv_cache_block_type", "fraction"),)),
        ),
        "model:tritonwatch_llm_kv_cache_utilization_ratio:avg",
    ),
    LlmSignal(
        LLM_PREEMPTIONS_RATE,
        "Requests preempted per second over the window (vLLM; TensorRT-LLM reports no such counter).",
        "short",
        "rate",
        (LlmInput(VLLM_PREEMPTIONS),),
        "model:tritonwatch_llm_preemptions:rate5m",
    ),
)


@dataclass(frozen=True)
class LlmHistogram:
    """A latency histogram the sidecar exports under one name, from the first source a model has."""

    name: str
    quantile_name: str
    help: str
    sources: tuple[tuple[str, float], ...]  # (backend histogram family, scale to seconds)
    trace_measure: str  # the key under which traced requests feed it
    quantile_record: str


LLM_HISTOGRAMS: tuple[LlmHistogram, ...] = (
    LlmHistogram(
        LLM_TTFT,
        LLM_TTFT_QUANTILE,
        "Time to first token (first response of a streaming request), cumulative: the backend's own "
        "histogram (vLLM, or Triton's first-response histogram) passed through, else sampled traces.",
        ((VLLM_TTFT, 1.0), (TRITON_FIRST_RESPONSE, 0.001)),
        "time_to_first_token",
        "model:tritonwatch_llm_time_to_first_token_seconds:quantile5m",
    ),
    LlmHistogram(
        LLM_ITL,
        LLM_ITL_QUANTILE,
        "Inter-token latency (gap between successive responses of a streaming request), cumulative: "
        "vLLM's inter-token (older: time-per-output-token) histogram passed through, else sampled traces.",
        ((VLLM_ITL, 1.0), (VLLM_TPOT, 1.0)),
        "inter_token",
        "model:tritonwatch_llm_inter_token_latency_seconds:quantile5m",
    ),
)

# Samples the sidecar keeps from Triton's /metrics for the LLM part (the parser takes sample names).
LLM_SAMPLES: frozenset[str] = frozenset(
    {i.sample for s in LLM_SIGNALS for i in s.inputs}
    | {
        f"{family}{suffix}"
        for h in LLM_HISTOGRAMS
        for family, _ in h.sources
        for suffix in ("_bucket", "_sum", "_count")
    }
)


def llm_promql(sig: LlmSignal, window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    """The LLM signal across replicas: each backend's inputs joined with ``or`` (a model has one)."""
    by = by_clause(grouping)
    if sig.kind == "rate":
        parts = [f"rate({i.selector(selector)}[{window}])" for i in sig.inputs]
    else:
        parts = [i.selector(selector) for i in sig.inputs]
    joined = " or ".join(parts)
    agg = "avg" if sig.kind == "mean" else "sum"
    scaled = [i.scale for i in sig.inputs if i.scale != 1.0]
    assert not scaled, "scaled LLM inputs are not rendered"  # none today; keep the two engines equal
    expr = f"{agg} by ({by}) ({joined})"
    if sig.fallback:
        sel = f"{{{selector}}}" if selector else ""
        expr = f"{expr} or sum by ({by}) ({sig.fallback}{sel})"
    return expr


def llm_signal(name: str) -> LlmSignal:
    return next(s for s in LLM_SIGNALS if s.name == name)


def llm_histogram(name: str) -> LlmHistogram:
    return next(h for h in LLM_HISTOGRAMS if h.name == name)


def llm_quantile_promql(
    hist: LlmHistogram, quantile: str, window: str = "5m", grouping: Sequence[str] = (), selector: str = ""
) -> str:
    """A quantile of an LLM latency histogram across replicas, per model and version."""
    by = "le, " + by_clause(grouping)
    sel = f"{{{selector}}}" if selector else ""
    return f"histogram_quantile({quantile}, sum by ({by}) (rate({hist.name}_bucket{sel}[{window}])))"
