"""GPUs, and what each model costs on them.

Emits one dashboard (uid from the name ``gpu``) with variables datasource, gpu (``gpu_uuid``) and
model: per GPU utilisation, memory used, power, temperature, SM clock and last XID error (DCGM,
or Triton's ``nv_gpu_*`` when there is no DCGM exporter, normalised by the sidecar); per model its
share of each GPU's busy time and its energy per inference.
"""

from __future__ import annotations

from grafanalib import core

from tritonwatch import catalog
from tritonwatch.dashboards import panels as p
from tritonwatch.dashboards import queries as q

NAME = "gpu"
TITLE = "Triton GPUs"
GPU_LEG = "{{gpu_uuid}}"
MODEL_SEL = 'model=~"$model",gpu_uuid=~"$gpu"'
ENERGY_SEL = 'model=~"$model"'
HOT = (("green", None), ("orange", 0.8), ("red", 0.95))


def build() -> core.Dashboard:
    lay = p.Layout()
    Q = p.Query
    panels: list[core.Panel] = [
        p.stat(
            "GPUs",
            "GPUs used by the monitored Triton servers (each GPU once, however many sidecars see it).",
            "none",
            [Q(f"count({q.per_gpu(catalog.GPU_UTILIZATION)})")],
            lay.place(6, 4),
        ),
        p.gauge(
            "Mean GPU utilisation",
            "Mean utilisation over the selected GPUs.",
            "percentunit",
            [Q(f"avg({q.per_gpu(catalog.GPU_UTILIZATION)})")],
            lay.place(6, 4),
            thresholds=HOT,
        ),
        p.stat(
            "Total power",
            "Power drawn by the selected GPUs together.",
            "watt",
            [Q(f"sum({q.per_gpu(catalog.GPU_POWER)})")],
            lay.place(6, 4),
        ),
        p.stat(
            "Hottest GPU",
            "The highest GPU temperature among the selected GPUs.",
            "celsius",
            [Q(f"max({q.per_gpu(catalog.GPU_TEMPERATURE)})")],
            lay.place(6, 4),
            thresholds=(("green", None), ("orange", 80), ("red", 90)),
        ),
    ]
    lay.row()
    panels += [
        p.timeseries(
            "GPU utilisation",
            "Share of time each GPU was busy (DCGM_FI_DEV_GPU_UTIL or nv_gpu_utilization).",
            "percentunit",
            [Q(q.per_gpu(catalog.GPU_UTILIZATION), GPU_LEG)],
            lay.place(12, 8),
            soft_max=1,
        ),
        p.timeseries(
            "GPU memory used",
            "Framebuffer memory used over total, per GPU.",
            "percentunit",
            [Q(q.per_gpu(catalog.GPU_MEMORY_USED_RATIO), GPU_LEG)],
            lay.place(12, 8),
            soft_max=1,
            thresholds=HOT,
        ),
        p.timeseries(
            "GPU power",
            "Power draw per GPU (DCGM_FI_DEV_POWER_USAGE or nv_gpu_power_usage).",
            "watt",
            [Q(q.per_gpu(catalog.GPU_POWER), GPU_LEG)],
            lay.place(8, 8),
        ),
        p.timeseries(
            "GPU temperature",
            "Core temperature per GPU.",
            "celsius",
            [Q(q.per_gpu(catalog.GPU_TEMPERATURE), GPU_LEG)],
            lay.place(8, 8),
        ),
        p.timeseries(
            "SM clock",
            "Streaming multiprocessor clock per GPU: a drop under load means throttling.",
            "hertz",
            [Q(q.per_gpu(catalog.GPU_SM_CLOCK), GPU_LEG)],
            lay.place(8, 8),
        ),
        p.table(
            "Last XID error",
            "The last XID error code DCGM reported per GPU (0: none). Any other value needs a look at the "
            "runbook: 48, 63, 64, 74, 79 and 94/95 usually mean the GPU must be drained.",
            "none",
            [Q(q.per_gpu(catalog.GPU_XID), "XID")],
            lay.place(24, 6),
        ),
        p.timeseries(
            "GPU busy share by model",
            "Each model's share of its GPU's busy time (compute time per execution times executions).",
            "percentunit",
            [
                Q(
                    q.per_model(catalog.MODEL_GPU_BUSY, "sum", (catalog.GPU_UUID,), MODEL_SEL),
                    q.MODEL_LEGEND + " on {{gpu_uuid}}",
                )
            ],
            lay.place(12, 8),
            stack=True,
            fill=30,
            soft_max=1,
        ),
        p.timeseries(
            "Energy per inference",
            "Joules per inference: each GPU's energy split by the models' busy-time shares, over their "
            "inferences (mean across the replicas of a model).",
            "joule",
            [Q(q.per_model(catalog.MODEL_ENERGY_PER_INFERENCE, "avg", (), ENERGY_SEL), q.MODEL_LEGEND)],
            lay.place(12, 8),
        ),
    ]
    variables = [
        p.query_variable("gpu", "GPU", q.GPU_VALUES),
        p.query_variable("model", "Model", q.GPU_MODEL_VALUES),
    ]
    return p.dashboard(
        NAME,
        TITLE,
        "GPU utilisation, memory, power, temperature and XID per GPU; busy share and energy per model.",
        panels,
        variables,
    )
