"""Pipelines: an ensemble and its steps, each client request counted once.

Emits one dashboard (uid from the name ``pipeline``) with variables datasource, ensemble (models whose
``tritonwatch_model_role_info`` role is ``ensemble``) and step (the selected ensembles' steps, from
``tritonwatch_ensemble_step_info``): the steps in order; the ensemble's request rate, error ratio and
queue share (its ensemble formulas, docs/pipelines.md); the time each traced request spends in each
step, stacked by step and split into queue and compute (``--trace-file``), summed across replicas
and divided; where traced requests end (the step a failed chain stopped at); and each step's own
error ratio and queue share, to see where failures and waiting happen.
"""

from __future__ import annotations

from grafanalib import core

from tritonwatch import catalog
from tritonwatch.dashboards import panels as p
from tritonwatch.dashboards import queries as q

NAME = "pipeline"
TITLE = "Triton pipelines (ensembles)"
ENSEMBLE = 'model=~"$ensemble"'
STEPS = 'model=~"$step"'
BOTH = 'model=~"($ensemble)|($step)"'
ENSEMBLE_VALUES = (
    f'label_values({catalog.MODEL_ROLE_INFO}{{{catalog.ROLE}="{catalog.ROLE_ENSEMBLE}"}}, {catalog.MODEL})'
)
STEP_VALUES = f"label_values({catalog.ENSEMBLE_STEP_INFO}{{{ENSEMBLE}}}, {catalog.STEP})"
LEG = q.MODEL_LEGEND


def build() -> core.Dashboard:
    lay = p.Layout()
    Q = p.Query
    steps_of = f"max by ({catalog.MODEL}, {catalog.STEP}, {catalog.POSITION}) ({catalog.ENSEMBLE_STEP_INFO}{{{ENSEMBLE}}})"
    panels: list[core.Panel] = [
        p.table(
            "Steps",
            "Each selected ensemble's steps in order (ensemble_scheduling.step[] of its config).",
            "none",
            [Q(steps_of)],
            lay.place(8, 8),
            hide_columns=("Time", "Value"),
        ),
        p.timeseries(
            "Requests / s (clients)",
            "Successful requests per second to the ensemble: each client request once, whatever its steps.",
            "reqps",
            [Q(q.signal(catalog.REQUEST_RATE, ENSEMBLE), LEG)],
            lay.place(8, 8),
        ),
        p.timeseries(
            "Error ratio: the ensemble and its steps",
            "Failed requests over all requests. The ensemble counts each failed request once; a step that "
            "answers an error response counts a success there, so look at the ensemble for those.",
            "percentunit",
            [Q(q.signal(catalog.ERROR_RATIO, BOTH), LEG)],
            lay.place(8, 8),
        ),
    ]
    lay.row()
    panels += [
        p.timeseries(
            "Time per step (traced requests)",
            "Mean time per traced request of the ensemble in each step, queue (hand-over and waiting in "
            "the step's queue) and compute, stacked: the stack is the mean traced request duration.",
            "s",
            [Q(catalog.ensemble_step_promql(q.RATE, ENSEMBLE), "{{step}} {{phase}}")],
            lay.place(12, 8),
            stack=True,
        ),
        p.timeseries(
            "Where traced requests end",
            "Traced requests per second by the last step their chain reached: a chain that ends before "
            "the ensemble's last step failed there (a trace carries no status).",
            "reqps",
            [Q(q.counter_rate(catalog.ENSEMBLE_CHAIN_ENDS, (catalog.STEP,), ENSEMBLE), "{{model}} {{step}}")],
            lay.place(12, 8),
        ),
        p.timeseries(
            "Queue share: the ensemble and its steps",
            "The ensemble's share of request time not spent computing in its steps, and each step's own "
            "queue share (all its callers): the step whose share is high is where requests wait.",
            "percentunit",
            [Q(q.signal(catalog.QUEUE_TIME_RATIO, BOTH), LEG)],
            lay.place(12, 8),
        ),
    ]
    variables = [
        p.query_variable("ensemble", "Ensemble", ENSEMBLE_VALUES),
        p.query_variable("step", "Step", STEP_VALUES),
    ]
    return p.dashboard(
        NAME,
        TITLE,
        "An ensemble and its steps: client request rate, errors once per request, time per step, queue share.",
        panels,
        variables,
    )
