"""LLM serving: streaming (decoupled) models on Triton's vLLM and TensorRT-LLM backends.

Emits one dashboard (uid from the name ``llm``) with variables datasource, model, version and
instance: headline stats; time to first token and inter-token latency percentiles across replicas
(``histogram_quantile`` over the sidecar's ``tritonwatch_llm_*`` histograms) with their heatmaps;
prompt and generated tokens per second; KV-cache use; requests running and waiting; preemptions;
and each sidecar's own percentiles (exact over traces, or interpolated in the backend's buckets).
"""

from __future__ import annotations

from grafanalib import core

from tritonwatch import catalog
from tritonwatch.dashboards import panels as p
from tritonwatch.dashboards import queries as q

NAME = "llm"
TITLE = "Triton LLM serving"
LEG = q.MODEL_LEGEND
FULL = (("green", None), ("orange", 0.85), ("red", 0.95))


def _pct(quantile: str) -> str:
    return "p" + format(float(quantile) * 100, "g")


def build() -> core.Dashboard:
    lay = p.Layout()
    Q = p.Query
    sig = q.llm_signal
    ttft, itl = catalog.LLM_TTFT, catalog.LLM_ITL
    panels: list[core.Panel] = [
        p.stat(
            "Generated tokens / s",
            "Output tokens per second, summed across replicas (backend counters, else traced responses).",
            "short",
            [Q(sig(catalog.LLM_GENERATION_TOKENS_RATE), LEG)],
            lay.place(6, 4),
        ),
        p.stat(
            "p99 time to first token",
            "99th percentile time to first token across replicas.",
            "s",
            [Q(q.llm_quantile(ttft, "0.99"), LEG)],
            lay.place(6, 4),
        ),
        p.stat(
            "p99 inter-token latency",
            "99th percentile gap between successive tokens across replicas.",
            "s",
            [Q(q.llm_quantile(itl, "0.99"), LEG)],
            lay.place(6, 4),
        ),
        p.gauge(
            "KV cache in use",
            "Share of the KV cache in use (mean across replicas).",
            "percentunit",
            [Q(sig(catalog.LLM_KV_CACHE_UTILIZATION), LEG)],
            lay.place(6, 4),
            thresholds=FULL,
        ),
    ]
    lay.row()
    panels += [
        p.timeseries(
            "Time to first token",
            "Percentiles of the time from request to first token, across replicas.",
            "s",
            [Q(q.llm_quantile(ttft, x), f"{_pct(x)} {LEG}") for x in catalog.LLM_QUANTILES],
            lay.place(12, 8),
        ),
        p.timeseries(
            "Inter-token latency",
            "Percentiles of the gap between successive tokens of a stream, across replicas.",
            "s",
            [Q(q.llm_quantile(itl, x), f"{_pct(x)} {LEG}") for x in catalog.LLM_QUANTILES],
            lay.place(12, 8),
        ),
        p.heatmap(
            "Time to first token heatmap",
            "First tokens per second in each bucket, all selected replicas together.",
            "s",
            Q(q.llm_buckets(ttft), "{{le}}"),
            lay.place(12, 9),
        ),
        p.heatmap(
            "Inter-token latency heatmap",
            "Tokens per second in each inter-token gap bucket, all selected replicas together.",
            "s",
            Q(q.llm_buckets(itl), "{{le}}"),
            lay.place(12, 9),
        ),
        p.timeseries(
            "Tokens / s",
            "Prompt (prefill) and generated tokens per second per model, across replicas.",
            "short",
            [
                Q(sig(catalog.LLM_PROMPT_TOKENS_RATE), f"prompt {LEG}"),
                Q(sig(catalog.LLM_GENERATION_TOKENS_RATE), f"generated {LEG}"),
            ],
            lay.place(12, 8),
        ),
        p.timeseries(
            "KV cache use",
            "Share of the KV cache in use per model: near 1 the backend queues or preempts requests.",
            "percentunit",
            [Q(sig(catalog.LLM_KV_CACHE_UTILIZATION), LEG)],
            lay.place(12, 8),
            soft_max=1,
            thresholds=FULL,
        ),
        p.timeseries(
            "Requests running and waiting",
            "Requests being generated and requests queued for generation, summed across replicas.",
            "short",
            [
                Q(sig(catalog.LLM_REQUESTS_RUNNING), f"running {LEG}"),
                Q(sig(catalog.LLM_REQUESTS_WAITING), f"waiting {LEG}"),
            ],
            lay.place(12, 8),
        ),
        p.timeseries(
            "Preemptions / s",
            "Requests the backend preempted per second (vLLM; KV cache exhausted).",
            "short",
            [Q(sig(catalog.LLM_PREEMPTIONS_RATE), LEG)],
            lay.place(12, 8),
        ),
        p.timeseries(
            "Per-replica time to first token (sidecar)",
            "Each sidecar's own p99 over its window: exact over traced requests (source=trace) or "
            "interpolated in the backend's buckets (source=histogram).",
            "s",
            [Q(q.llm_sidecar_quantile(ttft, "0.99"), "{{model}} {{instance}}")],
            lay.place(12, 8),
        ),
        p.timeseries(
            "Per-replica inter-token latency (sidecar)",
            "Each sidecar's own p99 gap between tokens over its window.",
            "s",
            [Q(q.llm_sidecar_quantile(itl, "0.99"), "{{model}} {{instance}}")],
            lay.place(12, 8),
        ),
    ]
    variables = [
        p.query_variable("model", "Model", q.LLM_ANY_MODEL_VALUES),
        p.query_variable("version", "Version", q.LLM_VERSION_VALUES),
        p.query_variable("instance", "Host", q.LLM_INSTANCE_VALUES, regex=q.HOST_REGEX),
    ]
    return p.dashboard(
        NAME,
        TITLE,
        "Time to first token, inter-token latency, tokens per second, KV cache and queue of LLM models.",
        panels,
        variables,
    )
