"""Step 1 of the rule chain (``alerts/rules.py``): the catalog's recording rules, ``catalog.rules.yml``.

One recording rule per catalog signal (and batch efficiency), ``sum by (model, version, <grouping>)``
of rates, then divided, e.g. ``model:tritonwatch_queue_time_ratio:rate5m``; the GPU rules (busy share
per model and GPU, watts per GPU, joules per inference); the stall window record; the LLM signals and
quantiles; and the headroom records.
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.alerts import build, headroom, stall
from tritonwatch.alerts.model import CATALOG, Group, Rule
from tritonwatch.slo import SLOFile

CATALOG_WINDOW = "5m"


def catalog_rules(spec: SLOFile) -> list[Group]:
    """``model:tritonwatch_*:rate5m`` for every catalog signal, across replicas."""
    rules: list[Rule] = []
    for sig in catalog.SIGNALS:
        expr = catalog.promql(sig, CATALOG_WINDOW, spec.grouping)
        rules.append(build.record(sig.record, expr, dict(sorted(sig.labels))))
    rules.append(
        build.record(
            catalog.BATCH_EFFICIENCY_RECORD, catalog.batch_efficiency_promql(CATALOG_WINDOW, spec.grouping)
        )
    )
    gpu = [
        build.record(record, promql(CATALOG_WINDOW, spec.grouping))
        for record, promql in (
            (catalog.GPU_BUSY_SECONDS_RECORD, catalog.gpu_busy_seconds_promql),
            (catalog.MODEL_GPU_BUSY_RECORD, catalog.gpu_busy_ratio_promql),
            (catalog.GPU_ENERGY_WATTS_RECORD, catalog.gpu_energy_watts_promql),
            (catalog.MODEL_ENERGY_PER_INFERENCE_RECORD, catalog.energy_per_inference_promql),
        )
    ]
    stalls = (build.record(catalog.STALL_WINDOW_RECORD, stall.window_record_expr(spec.grouping)),)
    return [
        Group("tritonwatch-catalog", tuple(rules), CATALOG),
        Group("tritonwatch-gpu", tuple(gpu), CATALOG),
        Group("tritonwatch-stall", stalls, CATALOG),
        Group("tritonwatch-llm", tuple(llm_rules(spec)), CATALOG),
        headroom.records(spec),
    ]


def llm_rules(spec: SLOFile) -> list[Rule]:
    """The LLM signals (token rates, queue, KV cache) and the TTFT/ITL quantiles across replicas."""
    out: list[Rule] = [
        build.record(sig.record, catalog.llm_promql(sig, CATALOG_WINDOW, spec.grouping))
        for sig in catalog.LLM_SIGNALS
    ]
    for hist in catalog.LLM_HISTOGRAMS:
        for q in catalog.LLM_QUANTILES:
            expr = catalog.llm_quantile_promql(hist, q, CATALOG_WINDOW, spec.grouping)
            out.append(build.record(hist.quantile_record, expr, {catalog.QUANTILE: q}))
    return out
