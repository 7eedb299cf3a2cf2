"""Fleet overview: every model on every Triton at a glance.

Emits one dashboard (uid from the name ``fleet``): servers up/down, models ready, alerts firing,
then per model and version request rate, error ratio, p50/p99 (trace histogram), queue share,
batch efficiency, cache hit ratio and pending requests, the sidecars' own scrape health, a table
of every model now, and the firing alerts.
"""

from __future__ import annotations

from grafanalib import core

from tritonwatch import catalog
from tritonwatch.dashboards import panels as p
from tritonwatch.dashboards import queries as q

NAME = "fleet"
TITLE = "Triton fleet overview"
SEL = 'model=~"$model"'
LEG = q.MODEL_LEGEND
BAD_RATIO = (("green", None), ("orange", 0.01), ("red", 0.05))


def _sig(name: str, **labels: str) -> str:
    return q.signal(name, selector=SEL, **labels)


def build() -> core.Dashboard:
    lay = p.Layout()
    Q = p.Query
    panels: list[core.Panel] = [
        p.stat(
            "Triton servers up",
            "Triton servers whose /metrics a sidecar scraped successfully (tritonwatch_up, target triton).",
            "none",
            [Q(q.servers_up())],
            lay.place(4, 4),
        ),
        p.stat(
            "Triton servers down",
            "Sidecars that could not scrape their Triton on the last attempt; should be 0.",
            "none",
            [Q(q.servers_down())],
            lay.place(4, 4),
            thresholds=(("green", None), ("red", 1)),
        ),
        p.stat(
            "Model versions ready",
            "Model versions READY in Triton's repository index, summed over servers.",
            "none",
            [Q(f"sum({q.per_model(catalog.MODEL_READY, selector=SEL)})")],
            lay.place(4, 4),
        ),
        p.stat(
            "Requests / s (all models)",
            "Successful inference requests per second over all selected models and replicas, each client "
            "request once: ensemble steps are left out (their requests are their ensemble's).",
            "reqps",
            [Q(f"sum({catalog.entries_only(_sig(catalog.REQUEST_RATE))})")],
            lay.place(4, 4),
        ),
        p.stat(
            "Alerts firing",
            "Prometheus alerts in the firing state (all alerts, not only tritonwatch's).",
            "none",
            [Q(q.alerts_firing_count())],
            lay.place(4, 4),
            thresholds=(("green", None), ("red", 1)),
        ),
        p.stat(
            "Worst error ratio",
            "The highest error ratio among the selected models (failures other than CANCELED / all requests).",
            "percentunit",
            [Q(f"max({_sig(catalog.ERROR_RATIO)})")],
            lay.place(4, 4),
            thresholds=BAD_RATIO,
        ),
    ]
    lay.row()
    panels += [
        p.shown(p.timeseries, catalog.REQUEST_RATE, lay.place(12, 8), SEL),
        p.shown(p.timeseries, catalog.ERROR_RATIO, lay.place(12, 8), SEL, thresholds=BAD_RATIO),
        p.timeseries(
            "Request latency p50",
            "Median request latency (REQUEST_START to REQUEST_END) across replicas, from the sidecar's "
            "histogram of sampled traces.",
            "s",
            [Q(q.quantile("0.5", selector=SEL), LEG)],
            lay.place(12, 8),
        ),
        p.timeseries(
            "Request latency p99",
            "99th percentile request latency across replicas, from the sidecar's histogram of sampled traces.",
            "s",
            [Q(q.quantile("0.99", selector=SEL), LEG)],
            lay.place(12, 8),
        ),
        p.shown(p.timeseries, catalog.QUEUE_TIME_RATIO, lay.place(8, 8), SEL),
        p.shown(p.timeseries, catalog.BATCH_EFFICIENCY, lay.place(8, 8), SEL),
        p.shown(p.timeseries, catalog.CACHE_HIT_RATIO, lay.place(8, 8), SEL),
        p.shown(p.timeseries, catalog.PENDING_REQUESTS, lay.place(8, 8), SEL),
        p.timeseries(
            "Sidecar scrape health",
            "1 when the sidecar's last scrape of a source (triton, triton_api, dcgm) succeeded, per sidecar.",
            "bool",
            [Q(q.sidecar_health(catalog.UP), "{{target}} {{instance}}")],
            lay.place(8, 8),
        ),
        p.timeseries(
            "Sidecar scrape duration",
            "How long the sidecar's last scrape of each source took, per sidecar.",
            "s",
            [Q(q.sidecar_health(catalog.SCRAPE_DURATION), "{{target}} {{instance}}")],
            lay.place(8, 8),
        ),
    ]
    lay.row()
    panels += [
        p.table(
            "Models now",
            "Every selected model and version now: rate, error ratio, p99, queue share, batch efficiency, "
            "cache hits (empty cells: no traffic, no batching or no cache).",
            "short",
            [
                Q(_sig(catalog.REQUEST_RATE), "rate", unit="reqps"),
                p.column(catalog.ERROR_RATIO, SEL),
                Q(q.quantile("0.99", selector=SEL), "p99", unit="s"),
                *(
                    p.column(s, SEL)
                    for s in (catalog.QUEUE_TIME_RATIO, catalog.BATCH_EFFICIENCY, catalog.CACHE_HIT_RATIO)
                ),
            ],
            lay.place(24, 8),
        ),
        p.table(
            "Alerts firing",
            "Every firing alert with its labels (Prometheus's ALERTS series).",
            "none",
            [Q(q.alerts_firing())],
            lay.place(24, 8),
            hide_columns=("Time", "Value", "__name__", "alertstate"),
        ),
    ]
    variables = [p.query_variable("model", "Model", q.MODEL_VALUES)]
    return p.dashboard(
        NAME,
        TITLE,
        "Per-model request rate, errors, latency and efficiency across every Triton server.",
        panels,
        variables,
    )
