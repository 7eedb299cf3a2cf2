"""SLOs and error budgets, from the recording rules ``tritonwatch rules`` generates.

Emits one dashboard (uid from the name ``slo``) with variables datasource, slo and model: per SLO
its objective, the SLI now, the error budget left over the SLO window, the burn rate over every
alert window (with the page thresholds 14.4x and 6x drawn), where Triton's request time went (queued
vs computing, now and a week before), and the burn-rate alerts firing.
"""

from __future__ import annotations

from grafanalib import core

from tritonwatch import catalog
from tritonwatch.dashboards import panels as p
from tritonwatch.dashboards import queries as q

NAME = "slo"
TITLE = "Triton SLOs and error budgets"
LEG = "{{slo}} {{model}}"
BURN_ALERTS = f'alertname="{catalog.SLO_BURN_ALERT}",{q.SLO_SELECTOR}'
# Multiwindow burn thresholds (SRE Workbook): page at 14.4x (1h) and 6x (6h), ticket at 3x and 1x.
BURN_LINES = (("green", None), ("blue", 1), ("orange", 6), ("red", 14.4))
BUDGET = (("red", None), ("orange", 0.25), ("green", 0.5))


def error_gap(lay: p.Layout, slo_selector: str, model_selector: str) -> list[core.Panel]:
    """Where Triton is blind: its uncounted-errors marker, and its error ratio beside the SLO's."""
    Q = p.Query
    return [
        p.table(
            "Errors Triton may not count",
            f"{catalog.MODEL_UNCOUNTED_ERRORS}: models whose failed requests Triton may count as "
            "successes (python backend, decoupled), from their configs. Their "
            "error ratio from Triton reads low: take availability from the front (availability.from).",
            "none",
            [Q(q.uncounted_errors(model_selector))],
            lay.place(8, 7),
            hide_columns=("Time", "Value"),
        ),
        p.timeseries(
            "Error ratio: clients vs Triton",
            "The availability SLO's error ratio (5m; from the front's counters where the SLO file sets "
            "availability.from) beside Triton's own error ratio, and the gap: errors Triton did not "
            "count (0 where the SLO reads Triton's counters).",
            "percentunit",
            [
                Q(q.slo_error_ratio(slo_selector), "SLO source {{model}}"),
                Q(q.triton_error_ratio(model_selector), "Triton {{model}}"),
                Q(q.error_ratio_gap(slo_selector, model_selector), "not counted by Triton {{model}}"),
            ],
            lay.place(16, 7),
        ),
    ]


def build() -> core.Dashboard:
    lay = p.Layout()
    Q = p.Query
    panels: list[core.Panel] = [
        p.table(
            "SLOs now",
            "Per SLO: the objective, the SLI over the last hour, the error budget left over the SLO "
            "window, and the 1h burn rate.",
            "percentunit",
            [
                Q(q.slo_objective(), "objective"),
                Q(q.slo_sli("1h"), "SLI (1h)"),
                Q(q.slo_budget_remaining(), "budget left"),
                Q(q.slo_burn_rate("1h"), "burn rate (1h)", unit="x"),
            ],
            lay.place(16, 8),
        ),
        p.stat(
            "SLO burn alerts firing",
            f"{catalog.SLO_BURN_ALERT} alerts firing now (page and ticket).",
            "none",
            [Q(q.alerts_firing_count(BURN_ALERTS))],
            lay.place(8, 4),
            thresholds=(("green", None), ("red", 1)),
        ),
        p.stat(
            "Lowest budget left",
            "The smallest error budget left among the selected SLOs, over the SLO window.",
            "percentunit",
            [Q(f"min({q.slo_budget_remaining()})")],
            lay.place(8, 4),
            thresholds=BUDGET,
        ),
    ]
    lay.row()
    panels += [
        p.bargauge(
            "Error budget left",
            "Share of the error budget not yet spent over the SLO window (below 0: the SLO is missed).",
            "percentunit",
            [Q(q.slo_budget_remaining(), LEG)],
            lay.place(8, 8),
            thresholds=BUDGET,
        ),
        p.timeseries(
            "SLI",
            "Share of good events (successful, or under the latency threshold) over 5m and 1h, "
            "against the objective. Each SLI reads the source its SLO file names: Triton's counters "
            "or the front's (availability.from), sampled traces or the front's histogram (latency.from).",
            "percentunit",
            [
                Q(q.slo_sli("5m"), f"5m {LEG}"),
                Q(q.slo_sli("1h"), f"1h {LEG}"),
                Q(q.slo_objective(), f"objective {LEG}"),
            ],
            lay.place(16, 8),
        ),
        p.timeseries(
            "Burn rate per alert window",
            "Error ratio over each alert window divided by the error budget (1 - objective); 1x spends "
            "the budget exactly over the SLO window. Lines: ticket 1x, page 6x and 14.4x.",
            "x",
            [Q(q.slo_burn_rate(w), f"{w} {LEG}") for w in catalog.SLO_BURN_WINDOWS],
            lay.place(16, 9),
            thresholds=BURN_LINES,
        ),
        p.timeseries(
            "Error budget left over time",
            "How the remaining error budget over the SLO window moved.",
            "percentunit",
            [Q(q.slo_budget_remaining(), LEG)],
            lay.place(8, 9),
            thresholds=BUDGET,
        ),
        p.timeseries(
            "Where the time went: queued vs computing",
            "Share of Triton's request time spent queued and computing per model over the last hour, "
            "from its duration counters (no tracing), beside the same hour a week before: what a latency "
            "page's description says. Queueing dominates: capacity or batching (tritonwatch advise, the "
            "capacity signal); computing: the model or the GPU; a front-read SLO burning while both "
            "stay put: the time is outside Triton.",
            "percentunit",
            [
                Q(q.time_split("queued"), "queued {{model}}"),
                Q(q.time_split("computing"), "computing {{model}}"),
                Q(q.time_split("queued", "1w"), "queued a week before {{model}}"),
                Q(q.time_split("computing", "1w"), "computing a week before {{model}}"),
            ],
            lay.place(24, 8),
        ),
        *error_gap(lay, q.SLO_SELECTOR, q.MODEL_ONLY),
        p.table(
            "SLO alerts firing",
            f"Firing {catalog.SLO_BURN_ALERT} alerts with severity, SLO and model.",
            "none",
            [Q(q.alerts_firing(BURN_ALERTS))],
            lay.place(24, 6),
            hide_columns=("Time", "Value", "__name__", "alertstate"),
        ),
    ]
    variables = [
        p.query_variable("slo", "SLO", q.SLO_VALUES),
        p.query_variable("model", "Model", q.SLO_MODEL_VALUES),
    ]
    return p.dashboard(
        NAME,
        TITLE,
        "Objectives, SLIs, error budget left and burn rates for every SLO in the SLO file.",
        panels,
        variables,
    )
