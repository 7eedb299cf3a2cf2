"""The latency objective ``tritonwatch init`` proposes for a model clients call.

The threshold is a bucket bound of the histogram the SLI will read on this server's version
(``alerts.model_metrics.source``: Triton's own from 2.65, else the sidecar's trace histogram), the first
one the measured p99 meets with a margin. The p99 is Triton's request summary (``summary_latencies=true``,
its last 60 s), read from its metrics endpoint; where Triton keeps none (the response cache on
suppresses it) only means are known, and the threshold follows the mean of the requests the cache did
not answer, saying so.
"""

from __future__ import annotations

import logging
import math
from decimal import Decimal
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from tritonwatch import catalog, modelconfig, slo
from tritonwatch.alerts import model_metrics
from tritonwatch.errors import UsageError
from tritonwatch.expfmt import parse as parse_metrics
from tritonwatch.fetch import Fetcher, ScrapeError
from tritonwatch.tritonapi import check_base_url

log = logging.getLogger("tritonwatch.init")

# A threshold the measured p99 meets with room for a slower day: the first bucket bound at or above
# P99_MARGIN times Triton's p99.
P99_MARGIN = 1.5
# Without a p99 only means are known. Tails of a few times the mean are common for batching servers:
# 4x the mean of the requests the cache did not answer (hits take microseconds and would drag the mean
# below any tail), to be checked against the sidecar's p99 once it has run.
LATENCY_MEAN_FACTOR = 4
LATENCY_OBJECTIVE = Decimal("99")
REQUEST_SUMMARY = catalog.triton_summary("request")
TRITON_METRICS_PORT = 8002  # Triton's default, as the sidecar assumes


class Means(NamedTuple):
    """A model's successful requests over the observed span, and the part the cache answered."""

    requests: int
    request_ns: int
    cache_hits: int
    cache_hit_ns: int


def metrics_url(triton: str, given: str) -> str:
    """``--triton-metrics``, else Triton's default metrics port on the ``--triton`` host (as the sidecar)."""
    if given:
        if check_base_url(given):
            raise UsageError(
                f"--triton-metrics: {given!r} is not an http(s) URL (e.g. http://127.0.0.1:8002/metrics)"
            )
        return given
    parts = urlsplit(triton)
    return f"{parts.scheme}://{parts.hostname}:{TRITON_METRICS_PORT}/metrics"


def request_p99(url: str, timeout: float) -> dict[str, float]:
    """Per model, the largest p99 (seconds) of its request summaries (one per version, or per GPU
    instance); empty where Triton keeps none or the endpoint does not answer. A summary that observed
    nothing (``_count`` 0) or says NaN is left out."""
    fetcher = Fetcher(timeout)
    count = catalog.triton_summary_count("request")
    try:
        samples = parse_metrics(fetcher.get(url), {REQUEST_SUMMARY, count})
    except (ScrapeError, ValueError) as exc:
        log.info("no request p99 from %s (%s): thresholds follow the mean", url, exc)
        return {}
    finally:
        fetcher.close()
    unobserved = {frozenset(labels) for labels, n in samples.get(count, {}).items() if n == 0}
    out: dict[str, float] = {}
    for labelset, value in samples.get(REQUEST_SUMMARY, {}).items():
        labels = dict(labelset)
        model = labels.get(catalog.MODEL)
        if labels.get(catalog.QUANTILE) != "0.99" or model is None or math.isnan(value) or value < 0:
            continue
        if frozenset(kv for kv in labelset if kv[0] != catalog.QUANTILE) in unobserved:
            continue
        out[model] = max(out.get(model, 0.0), value / 1e6)  # Triton's summaries are in microseconds
    return out


def propose(
    model: str, config: modelconfig.ModelConfig, version: str, p99: float | None, seen: Means
) -> tuple[tuple[str, dict[str, Any], str] | None, list[str]]:
    """The ``latency`` field (key, values, why) or None, and the notes to write beside it."""
    src = model_metrics.source(version, config)
    bounds = [b / 1000.0 for b in src.buckets_ms]
    missed = seen.requests - seen.cache_hits
    if p99 is not None:
        target = P99_MARGIN * p99
        measured = f"p99 {p99 * 1000:.3g} ms (Triton's request summary, last 60 s)"
        rule = f"the first bucket >= {P99_MARGIN:g}x it"
    else:
        slow_ns = seen.request_ns - seen.cache_hit_ns if missed > 0 else seen.request_ns
        mean = slow_ns / (missed if missed > 0 else seen.requests) / 1e9
        target = LATENCY_MEAN_FACTOR * mean
        answered = "not answered from the cache " if missed > 0 and seen.cache_hits else ""
        measured = f"no p99 from Triton; mean request {answered}{mean * 1000:.3g} ms"
        rule = f"the first bucket >= {LATENCY_MEAN_FACTOR}x it"
    bucket = next((b for b in bounds if b >= target - 1e-12), None)
    if bucket is None:
        return None, [
            f"latency: {measured}: beyond the largest bucket of {src.name} ({src.origin}); {src.why}"
        ]
    field = (
        "latency",
        {"threshold": slo.format_duration(bucket), "objective": LATENCY_OBJECTIVE},
        f'{measured}; {rule}. Check against tritonwatch_model_latency_quantile_seconds{{quantile="0.99"}}',
    )
    return field, model_metrics.init_notes(model, bucket, src)
