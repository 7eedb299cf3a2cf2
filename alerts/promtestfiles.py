"""The promtool test files: the cases of ``promtests``, ``objectivecases``, ``trafficcases`` and of the modules
that build an alert with its cases (``nodata``, ``stall``, ``headroom``), grouped by the
rule files they read.

``test_files(spec)`` returns ``{"tests/slo-<objective>.test.yml": ..., "tests/operational-<model>.test.yml":
..., "tests/operational.test.yml": ...}``,
each runnable with ``promtool test rules``. The case modules build on ``promtests``; this one stands above
them all, so none imports another in a circle.
"""

from __future__ import annotations

from typing import Any

from tritonwatch import catalog
from tritonwatch.alerts import rulefiles
from tritonwatch.alerts.headroom import headroom_cases
from tritonwatch.alerts.nodata import nodata_cases
from tritonwatch.alerts.objectivecases import operational_cases
from tritonwatch.alerts.promtests import (
    INTERVAL,
    OPERATIONAL_RULES,
    Case,
    burn_cases,
    gpu_cases,
    ready_cases,
    server_cases,
    sidecar_cases,
    uncounted_cases,
    watchdog_cases,
)
from tritonwatch.alerts.stall import stall_cases
from tritonwatch.alerts.trafficcases import low_traffic_cases, steady_burn_cases
from tritonwatch.slo import SLO, Objective, SLOFile


# --- files --------------------------------------------------------------------------------------
def _file(cases: list[Case], rule_files: tuple[str, ...]) -> dict[str, Any]:
    # Only the rule files the cases read: promtool evaluates every loaded rule at every step.
    return {
        "rule_files": [f"../{f}" for f in rule_files],
        "evaluation_interval": INTERVAL,
        "tests": [c.to_yaml() for c in cases],
    }


def slo_test_file(obj: Objective) -> str:
    return f"tests/slo-{obj.name}.test.yml"


def objective_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    """Every case of one objective: they carry its model's series only."""
    return (
        burn_cases(spec, obj)
        + steady_burn_cases(spec, obj)
        + low_traffic_cases(spec, obj)
        + nodata_cases(spec, obj)
    )


def model_cases(spec: SLOFile, slo: SLO) -> list[Case]:
    """The cases of a model's operational alerts (its objectives' limits, its SLI blind to uncounted errors)."""
    out: list[Case] = []
    for objective in catalog.OPERATIONAL_OBJECTIVES:
        out += operational_cases(spec, slo, objective)
    return out + uncounted_cases(spec, slo.model)


def test_files(spec: SLOFile) -> dict[str, dict[str, Any]]:
    """One file per objective and one per model with operational alerts, each loading its model's rule
    file only (promtool evaluates every group of every loaded file at every step: a file listing the
    fleet's rules costs models x models), and the fleet's operational file."""
    files = {
        slo_test_file(obj): _file(objective_cases(spec, obj), (rulefiles.model_file(obj.model),))
        for obj in spec.objectives()
    }
    for slo in spec.slos:
        cases = model_cases(spec, slo)
        if cases:
            rule_files = ("catalog.rules.yml", rulefiles.model_file(slo.model))
            files[f"tests/operational-{slo.model}.test.yml"] = _file(cases, rule_files)
    ops: list[Case] = server_cases(spec) + stall_cases(spec) + ready_cases(spec)
    ops += headroom_cases(spec) + gpu_cases(spec) + sidecar_cases(spec) + watchdog_cases(spec)
    files["tests/operational.test.yml"] = _file(ops, OPERATIONAL_RULES)
    return dict(sorted(files.items()))
