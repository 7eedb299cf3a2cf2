"""The one catalog of tritonwatch signals.

Every derived signal is defined here once: its exported name, unit, help text, the Triton series it
reads and its formula. The sidecar (``exporters/``) evaluates the formula over reset-aware counter
increases between its own scrapes; ``promql()`` renders the same formula as a Prometheus expression
that aggregates across replicas (``sum by (model, version, <grouping>)`` of rates, then divided);
the recording rules (``alerts/``), the dashboards and the capacity report all take their queries
from here. Nothing else in the project spells a metric name.

What people see of a signal is here too: its ``View`` (the panel title and description the dashboards
use, the capacity report's column), and the operational alerts (``OPERATIONAL_ALERTS``, among them the
per-model ``OPERATIONAL_OBJECTIVES``) with their ``for`` and texts, which the rules and the promtool
cases render.

The package holds one job per module, all re-exported here (``catalog.X`` is the way to use it):
``names`` (every label and series name), ``signals`` (the per-model signals and their formulas),
``render`` (their PromQL across replicas), ``alerts`` (SLO names, operational alerts and
objectives), ``gpu`` (GPU joined to models), ``llm`` (LLM serving).
"""

from __future__ import annotations

# Re-exported: every public name of the submodules is ``tritonwatch.catalog.<name>``.
from tritonwatch.catalog.alerts import *  # noqa: F403
from tritonwatch.catalog.gpu import *  # noqa: F403
from tritonwatch.catalog.llm import *  # noqa: F403
from tritonwatch.catalog.llm import LLM_SAMPLES
from tritonwatch.catalog.names import *  # noqa: F403
from tritonwatch.catalog.names import (
    PHASES,
    TRITON_ENERGY,
    TRITON_FAILURE,
    TRITON_GPU_MEMORY_TOTAL,
    TRITON_GPU_MEMORY_USED,
    TRITON_GPU_POWER,
    TRITON_GPU_UTILIZATION,
    triton_summary,
    triton_summary_count,
)
from tritonwatch.catalog.render import *  # noqa: F403
from tritonwatch.catalog.signals import *  # noqa: F403
from tritonwatch.catalog.signals import SIGNALS

# Families (and LLM sample names) the sidecar must keep from Triton's /metrics (everything else is
# skipped when parsing).
TRITON_FAMILIES: frozenset[str] = frozenset(
    {f for s in SIGNALS for f in s.all_families()}
    | {TRITON_FAILURE, TRITON_GPU_UTILIZATION, TRITON_GPU_MEMORY_USED, TRITON_GPU_MEMORY_TOTAL}
    | {TRITON_GPU_POWER, TRITON_ENERGY}
    | {triton_summary(p) for p in PHASES}
    | {triton_summary_count(p) for p in PHASES}
    | LLM_SAMPLES
)
