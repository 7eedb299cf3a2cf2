"""promtool cases for the per-model operational objectives (``catalog.OPERATIONAL_OBJECTIVES``): each
objective's alert fires past the SLO file's limit and is quiet inside it.

The inputs come from the objective's catalog entry (``Signal.inverse``, ``ConfigRatio.inverse``), so a
new objective gets its cases with nothing written here (``OPERATIONAL_INPUTS`` only pins the sizes and
names the existing cases were generated with).
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import rules
from tritonwatch.alerts.promtests import (
    MAX_BATCH,
    RPM,
    VERSION,
    Case,
    Check,
    _between,
    counter,
    expected,
    gauge,
    model_ticket_labels,
    pct,
    sidecar_labels,
    triton_labels,
)
from tritonwatch.slo import SLO, SLOFile, format_duration, parse_duration


def _objective_inputs(
    c: Case, spec: SLOFile, model: str, objective: str, value: Decimal, per_minute: Decimal, samples: int
) -> None:
    """Triton series that make the objective's signal read ``value``, from its catalog entry's inverse
    (and, for a signal over a config value, the sidecar's gauge of that value at ``MAX_BATCH``)."""
    sig = catalog.entry(objective)
    config: dict[str, Decimal] = {}
    if isinstance(sig, catalog.ConfigRatio):
        config[sig.by] = Decimal(MAX_BATCH)
        value = sig.inverse(value, config[sig.by])
        sig = catalog.signal(sig.of)
    for family, increase in sig.inverse(value, per_minute).items():
        c.add(family, triton_labels(spec, model), counter(increase, samples))
    sidecar = sidecar_labels(spec, **{catalog.MODEL: model, catalog.VERSION: VERSION})
    for family, v in config.items():
        c.add(family, sidecar, gauge(v, samples))


# Per operational objective (catalog.OPERATIONAL_OBJECTIVES, by the signal it bounds): the denominator's
# increase per minute and the samples of its inputs, how a case names the value, and when to check
# (after the alert's `for`).
OPERATIONAL_INPUTS: dict[str, tuple[Decimal, int, str, str]] = {
    catalog.QUEUE_TIME_RATIO: (Decimal(1_000_000), 40, "queue time {pct} of request time", "30m"),
    catalog.BATCH_EFFICIENCY: (Decimal(10), 50, "batch efficiency {pct}", "45m"),
    catalog.CACHE_HIT_RATIO: (RPM, 50, "cache hit ratio {pct}", "45m"),
}


def _operational_inputs(signal: str) -> tuple[Decimal, int, str, str]:
    """``OPERATIONAL_INPUTS``' entry, else RPM a minute over 50 samples, the case named by the signal's
    report column (else its panel title), checked 15m after the alert's ``for``."""
    if signal in OPERATIONAL_INPUTS:
        return OPERATIONAL_INPUTS[signal]
    view, _unit = catalog.view(signal)
    hold = parse_duration(catalog.operational_objective_of(signal).alert.hold or "0s", signal)
    return RPM, 50, f"{view.column or view.title.lower()} {{pct}}", format_duration(hold + 900)


def operational_cases(spec: SLOFile, slo: SLO, objective: catalog.OperationalObjective) -> list[Case]:
    """The objective's alert fires past the SLO file's limit and is quiet inside it."""
    limit = slo.limit(objective)
    if limit is None:
        return []
    per_minute, samples, what, at = _operational_inputs(objective.signal)
    upper = objective.bound == "max"
    out = []
    for fire, value in ((True, _between(limit, upper)), (False, _between(limit, not upper))):
        c = Case(f"{slo.model}: {what.format(pct=pct(value))} {'fires' if fire else 'is quiet'}")
        _objective_inputs(c, spec, slo.model, objective.signal, value, per_minute, samples)
        alert = objective.alert.name
        values = {**rules.operational_texts(spec, alert, slo), "value_pct": pct(value)}
        labels = model_ticket_labels(spec, slo.model)
        alerts = (expected(spec, alert, labels, values),) if fire else ()
        c.checks.append(Check(at, alert, alerts))
        out.append(c)
    return out
