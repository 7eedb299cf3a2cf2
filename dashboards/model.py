"""Model detail: one model (or a few) in depth, across all its replicas.

Emits one dashboard (uid from the name ``model``) with variables datasource, model, version and
instance (each defaulting to All): headline stats; latency percentiles across replicas
(``histogram_quantile`` over the sidecar's trace histogram) and a latency heatmap; queue versus
compute time; the batch-size distribution (from Triton's statistics API) and batch efficiency
against ``max_batch_size``; cache hits; failures by reason; canary probe results; per-replica
percentiles from the sidecar's own quantile gauge.
"""

from __future__ import annotations

from grafanalib import core

from tritonwatch import catalog
from tritonwatch.dashboards import panels as p
from tritonwatch.dashboards import queries as q
from tritonwatch.dashboards.slo import error_gap

NAME = "model"
TITLE = "Triton model detail"
LEG = q.MODEL_LEGEND
# The probe's series name the model only (it probes the model, not a version).
PROBE_SELECTOR = f'model=~"$model",{q.INSTANCE_MATCHER}'
PROBE_LEG = "{{model}} {{instance}}"
BAD_RATIO = (("green", None), ("orange", 0.01), ("red", 0.05))


def _advised(side: str) -> str:
    """issue 27: the predicted batch-size shares ``tritonwatch advise --textfile`` writes (per model,
    whatever host runs it: no instance matcher)."""
    sel = f'{q.MODEL_SELECTOR},{catalog.ADVISED}="{side}"'
    return f"avg by ({catalog.BATCH_SIZE}) ({catalog.ADVISED_BATCH_SHARE}{{{sel}}})"


def _pct(quantile: str) -> str:
    return "p" + format(float(quantile) * 100, "g")


def headroom(lay: p.Layout) -> list[core.Panel]:
    """issue 39: the request rate against the SLO-bound capacity, both summed over the selected
    replicas (docs/headroom.md), and their ratio, which the autoscalers and the ticket read."""
    capacity = q.per_model(catalog.CAPACITY, how="sum")
    rate = q.signal(catalog.REQUEST_RATE)
    return [
        p.timeseries(
            "Headroom: request rate vs SLO-bound capacity",
            "Requests per second served, and the rate at which the latency objective would just hold with "
            "the configuration each replica runs now (tritonwatch_model_capacity_requests_per_second, "
            "estimated by the sidecars with --slo from batch_stats), both summed over the selected "
            "replicas. No capacity line where the sidecars refuse (tritonwatch_model_capacity_info).",
            "reqps",
            [p.Query(rate, f"served {LEG}"), p.Query(capacity, f"capacity {LEG}")],
            lay.place(16, 8),
        ),
        p.gauge(
            "Capacity used",
            "Request rate over SLO-bound capacity across the selected replicas: the ticket "
            "TritonModelNearCapacity opens above 80 % held for 30m.",
            "percentunit",
            [p.Query(f"{rate} / {capacity}", LEG)],
            lay.place(8, 8),
            thresholds=(("green", None), ("orange", catalog.NEAR_CAPACITY_LIMIT), ("red", 1.0)),
        ),
    ]


def build() -> core.Dashboard:
    lay = p.Layout()
    Q = p.Query
    sig = q.signal
    panels: list[core.Panel] = [
        p.shown(p.stat, catalog.REQUEST_RATE, lay.place(4, 4)),
        p.shown(p.stat, catalog.ERROR_RATIO, lay.place(4, 4), thresholds=BAD_RATIO),
        p.stat(
            "p99 latency",
            "99th percentile request latency across replicas (sampled traces).",
            "s",
            [Q(q.quantile("0.99"), LEG)],
            lay.place(4, 4),
        ),
        p.shown(p.stat, catalog.QUEUE_TIME_RATIO, lay.place(4, 4)),
        p.shown(
            p.gauge,
            catalog.BATCH_EFFICIENCY,
            lay.place(4, 4),
            thresholds=(("red", None), ("orange", 0.25), ("green", 0.5)),
        ),
        p.stat(
            "Model ready",
            "1 when every replica reports the version READY in its repository index (min across replicas).",
            "bool",
            [Q(q.per_model(catalog.MODEL_READY, how="min"), LEG)],
            lay.place(4, 4),
            thresholds=(("red", None), ("green", 1)),
        ),
    ]
    lay.row()
    panels += error_gap(lay, q.MODEL_ONLY, q.MODEL_SELECTOR)
    lay.row()
    panels += [
        p.timeseries(
            "Request latency percentiles",
            "p50, p90, p95 and p99 of request latency (REQUEST_START to REQUEST_END) across all replicas, "
            "from the sidecar's histogram of sampled traces.",
            "s",
            [Q(q.quantile(x), f"{_pct(x)} {LEG}") for x in catalog.QUANTILES],
            lay.place(12, 9),
        ),
        p.heatmap(
            "Request latency heatmap",
            "Requests per second in each latency bucket of the sidecar's trace histogram, all selected "
            "replicas together.",
            "s",
            Q(q.latency_buckets(), "{{le}}"),
            lay.place(12, 9),
        ),
        p.timeseries(
            "Time per request by phase",
            "Mean time per request queued and in compute (input, infer, output), stacked: where a "
            "request's time goes.",
            "s",
            [Q(sig(catalog.LATENCY, phase=ph), f"{ph} {LEG}") for ph in catalog.PHASES if ph != "request"],
            lay.place(8, 8),
            stack=True,
            fill=30,
        ),
        p.timeseries(
            "p99 by phase",
            "99th percentile of queue, compute_infer and request time across replicas (sampled traces).",
            "s",
            [Q(q.quantile("0.99", phase=ph), f"{ph} {LEG}") for ph in catalog.HISTOGRAM_PHASES],
            lay.place(8, 8),
        ),
        p.shown(p.timeseries, catalog.QUEUE_TIME_RATIO, lay.place(8, 8)),
        p.bargauge(
            "Batch-size distribution",
            "Executions per batch size over the dashboard's time range (Triton statistics API batch_stats).",
            "short",
            [Q(q.batch_distribution(), "batch {{batch_size}}", instant=True)],
            lay.place(8, 8),
        ),
        p.bargauge(
            "Batch sizes: executed vs advised",
            "Share of executions per batch size: executed over the time range, and as `tritonwatch advise "
            "--textfile` predicts at today's load for the configuration as it is and as recommended "
            "(docs/advise.md). Empty until the advisor's file is scraped.",
            "percentunit",
            [
                Q(
                    f"{q.batch_distribution()} / scalar(sum({q.batch_distribution()}))",
                    "executed {{batch_size}}",
                    instant=True,
                ),
                Q(_advised("current"), "predicted as configured {{batch_size}}", instant=True),
                Q(_advised("recommended"), "predicted as recommended {{batch_size}}", instant=True),
            ],
            lay.place(8, 8),
        ),
        p.timeseries(
            *p.about(catalog.BATCH_SIZE_MEAN),
            [
                Q(sig(catalog.BATCH_SIZE_MEAN), f"mean {LEG}"),
                Q(q.max_batch_size(), f"max_batch_size {LEG}"),
            ],
            lay.place(8, 8),
        ),
        p.shown(p.timeseries, catalog.BATCH_EFFICIENCY, lay.place(8, 8), soft_max=1),
        p.shown(p.timeseries, catalog.CACHE_HIT_RATIO, lay.place(8, 8), soft_max=1),
        p.timeseries(
            "Cache hits and misses",
            "Response cache hits and misses per second, summed across replicas.",
            "ops",
            [
                Q(q.counter_rate(catalog.TRITON_CACHE_HITS), f"hits {LEG}"),
                Q(q.counter_rate(catalog.TRITON_CACHE_MISSES), f"misses {LEG}"),
            ],
            lay.place(8, 8),
        ),
        p.timeseries(
            "Failures by reason",
            "Failed requests per second by Triton's failure reason (REJECTED, CANCELED, BACKEND, OTHER).",
            "reqps",
            [Q(q.counter_rate(catalog.TRITON_FAILURE, by=("reason",)), "{{reason}} " + LEG)],
            lay.place(8, 8),
        ),
        p.timeseries(
            "Canary probe success",
            "1 when the sidecar's canary inference succeeded, per model and sidecar (probe must be on).",
            "bool",
            [Q(q.per_model(catalog.PROBE_SUCCESS, "min", ("instance",), PROBE_SELECTOR), PROBE_LEG)],
            lay.place(8, 8),
        ),
        p.timeseries(
            "Canary probe duration",
            "Mean time of the sidecar's canary inferences over the interval, per model and sidecar.",
            "s",
            [
                Q(
                    q.histogram_mean(catalog.PROBE_DURATION, (catalog.MODEL, "instance"), PROBE_SELECTOR),
                    PROBE_LEG,
                )
            ],
            lay.place(8, 8),
        ),
        p.shown(p.timeseries, catalog.PENDING_REQUESTS, lay.place(8, 8)),
        p.shown(p.timeseries, catalog.REQUEST_RATE, lay.place(12, 8)),
        p.timeseries(
            "p99 per replica (sidecar)",
            "Each sidecar's own p99 of request latency over its quantile window: spots one slow replica "
            "(not aggregatable; the percentiles panel is the fleet view).",
            "s",
            [Q(q.sidecar_quantile("0.99"), LEG + " {{instance}}")],
            lay.place(12, 8),
        ),
        *headroom(lay),
    ]
    lay.row()
    panels += [
        p.shown(p.timeseries, s.name, lay.place(8, 8), soft_max=1 if s.unit == "percentunit" else None)
        for s in catalog.SIGNALS
        if s.view is not None and s.view.drilldown
    ]
    variables = [
        p.query_variable("model", "Model", q.MODEL_VALUES),
        p.query_variable("version", "Version", q.VERSION_VALUES),
        p.query_variable("instance", "Host", q.INSTANCE_VALUES, regex=q.HOST_REGEX),
    ]
    return p.dashboard(
        NAME,
        TITLE,
        "Latency percentiles, queue vs compute, batching, cache and failures for the selected models.",
        panels,
        variables,
    )
