"""GPU readings normalised from dcgm-exporter or Triton, and the maths that joins GPUs to models.

Pure functions and small value classes, no I/O: ``tritonwatch.exporters.gpu`` feeds them scrapes, the tests feed
them recorded payloads.

* ``dcgm_readings`` / ``triton_readings``: one ``GpuReading`` per device, units normalised (ratios
  0-1, watts, joules, hertz) whatever the source's unit (%, MiB, mJ, MHz, bytes).
* ``select_used``: keep the devices this Triton uses, resolving a MIG GPU to the one GPU instance
  this Triton holds.
* ``busy_seconds`` / ``busy_shares`` / ``energy_per_inference``: the model-to-GPU join (docs/gpu.md),
  defined in ``tritonwatch.catalog.gpu`` beside the PromQL of the same formulas.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tritonwatch import catalog
from tritonwatch.catalog.gpu import ModelGpuKey
from tritonwatch.expfmt import LabelSet, Samples

MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class GpuReading:
    """One GPU (or MIG GPU instance) as last scraped; None where the source has no value."""

    uuid: str
    source: str  # "dcgm" or "triton"
    mig_instance: str = ""  # DCGM's GPU_I_ID; "" for a whole GPU
    mig_profile: str = ""
    index: str = ""
    model_name: str = ""
    hostname: str = ""
    pod: str = ""
    utilization: float | None = None  # ratio 0-1
    memory_used_ratio: float | None = None
    power_watts: float | None = None
    energy_joules: float | None = None  # counter: since boot (DCGM) or since Triton started
    temperature_celsius: float | None = None
    sm_clock_hertz: float | None = None
    last_xid: float | None = None


def _value(v: float) -> float | None:
    return None if math.isnan(v) else v


# field name on GpuReading <- (DCGM family, scale to our unit)
_DCGM_FIELDS: tuple[tuple[str, str, float], ...] = (
    ("power_watts", catalog.DCGM_POWER, 1.0),
    ("energy_joules", catalog.DCGM_ENERGY, 1e-3),  # mJ -> J
    ("temperature_celsius", catalog.DCGM_GPU_TEMP, 1.0),
    ("sm_clock_hertz", catalog.DCGM_SM_CLOCK, 1e6),  # MHz -> Hz
    ("last_xid", catalog.DCGM_XID, 1.0),
)


@dataclass
class _DcgmRow:
    labels: dict[str, str]
    values: dict[str, float] = field(default_factory=dict)


def dcgm_readings(samples: Samples) -> dict[tuple[str, str], GpuReading]:
    """Per (UUID, GPU_I_ID) the normalised reading of a dcgm-exporter scrape.

    Utilisation is ``DCGM_FI_DEV_GPU_UTIL`` / 100, or ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` where GPU_UTIL
    is not served (MIG instances); memory is FB_USED / (FB_USED + FB_FREE), both MiB, so the ratio is
    the same with or without the reserved framebuffer of newer drivers. Rows without ``UUID`` are
    skipped: they cannot be joined to Triton.
    """
    rows: dict[tuple[str, str], _DcgmRow] = {}
    for family in catalog.DCGM_FAMILIES:
        for labels, value in samples.get(family, {}).items():
            lm = dict(labels)
            uuid = lm.get(catalog.DCGM_UUID, "")
            if not uuid:
                continue
            key = (uuid, lm.get(catalog.DCGM_MIG_INSTANCE, ""))
            row = rows.setdefault(key, _DcgmRow(lm))
            v = _value(value)
            if v is not None:
                row.values[family] = v
    out: dict[tuple[str, str], GpuReading] = {}
    for (uuid, instance), row in sorted(rows.items()):
        vals = row.values
        lm = row.labels
        util = vals.get(catalog.DCGM_GPU_UTIL)
        utilization = util / 100.0 if util is not None else vals.get(catalog.DCGM_GR_ENGINE_ACTIVE)
        used, free = vals.get(catalog.DCGM_FB_USED), vals.get(catalog.DCGM_FB_FREE)
        memory = used / (used + free) if used is not None and free is not None and used + free > 0 else None
        scaled = {name: vals[fam] * scale for name, fam, scale in _DCGM_FIELDS if vals.get(fam) is not None}
        host = next((lm[h] for h in catalog.DCGM_HOSTNAME_LABELS if lm.get(h)), "")
        out[(uuid, instance)] = GpuReading(
            uuid=uuid,
            source="dcgm",
            mig_instance=instance,
            mig_profile=lm.get(catalog.DCGM_MIG_PROFILE, ""),
            index=lm.get(catalog.DCGM_GPU_INDEX, ""),
            model_name=lm.get(catalog.DCGM_MODEL_NAME, ""),
            hostname=host,
            pod=lm.get(catalog.DCGM_POD, ""),
            utilization=utilization,
            memory_used_ratio=memory,
            **scaled,
        )
    return out


def _by_gpu(samples: Samples, family: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, value in samples.get(family, {}).items():
        uuid = dict(labels).get(catalog.GPU_UUID, "")
        v = _value(value)
        if uuid and v is not None:
            out[uuid] = v
    return out


def triton_readings(samples: Samples) -> dict[str, GpuReading]:
    """Per ``gpu_uuid`` the reading from Triton's own GPU metrics (the fallback without DCGM).

    ``nv_gpu_utilization`` is already 0-1; memory is used / total bytes; ``nv_energy_consumption`` is
    joules since Triton started. Triton has no temperature, clock or XID series.
    """
    util = _by_gpu(samples, catalog.TRITON_GPU_UTILIZATION)
    used = _by_gpu(samples, catalog.TRITON_GPU_MEMORY_USED)
    total = _by_gpu(samples, catalog.TRITON_GPU_MEMORY_TOTAL)
    power = _by_gpu(samples, catalog.TRITON_GPU_POWER)
    energy = _by_gpu(samples, catalog.TRITON_ENERGY)
    out: dict[str, GpuReading] = {}
    for uuid in sorted(set(util) | set(used) | set(power) | set(energy)):
        t = total.get(uuid)
        u = used.get(uuid)
        out[uuid] = GpuReading(
            uuid=uuid,
            source="triton",
            utilization=util.get(uuid),
            memory_used_ratio=u / t if u is not None and t else None,
            power_watts=power.get(uuid),
            energy_joules=energy.get(uuid),
        )
    return out


_GPU_LABELLED = frozenset(
    {catalog.TRITON_INFERENCE_COUNT, catalog.TRITON_EXEC_COUNT}
    | {catalog.triton_duration(p) for p in catalog.PHASES}
)


def triton_gpu_uuids(samples: Samples) -> frozenset[str]:
    """The GPUs this Triton uses: every ``gpu_uuid`` in its metrics (model counters and nv_gpu_*)."""
    found: set[str] = set()
    for family, series in samples.items():
        if not (family.startswith(("nv_gpu_", "nv_energy")) or family in _GPU_LABELLED):
            continue  # only execution-side counters and GPU gauges carry gpu_uuid
        for labels in series:
            for name, value in labels:
                if name == catalog.GPU_UUID and value:
                    found.add(value)
    return frozenset(found)


def _merge(base: GpuReading | None, top: GpuReading) -> GpuReading:
    """``top``'s values over ``base``'s (a MIG instance row over its whole-GPU row)."""
    if base is None:
        return top
    changes = {
        k: getattr(top, k)
        for k in GpuReading.__dataclass_fields__
        if getattr(top, k) is not None and getattr(top, k) != ""
    }
    return replace(base, **changes)


def select_used(
    readings: Mapping[tuple[str, str], GpuReading], used: Iterable[str], pod: str = ""
) -> dict[str, GpuReading]:
    """Per used ``gpu_uuid`` the one DCGM device it means.

    Triton labels a MIG instance with its parent GPU's UUID (it asks DCGM for the device's
    attributes), while dcgm-exporter serves one row per GPU instance (``UUID`` + ``GPU_I_ID``). The
    instance is the one whose ``pod`` label is this pod (Kubernetes: dcgm-exporter maps devices to
    the pods holding them); else the only instance; else it is ambiguous and the GPU is left out.
    """
    out: dict[str, GpuReading] = {}
    for uuid in sorted(set(used)):
        whole = readings.get((uuid, ""))
        instances = [r for (u, inst), r in readings.items() if u == uuid and inst]
        if not instances:
            if whole is not None:
                out[uuid] = whole
            continue
        mine = [r for r in instances if pod and r.pod == pod]
        if len(mine) == 1:
            out[uuid] = _merge(whole, mine[0])
        elif len(instances) == 1:
            out[uuid] = _merge(whole, instances[0])
    return out


def model_gpu_key(labels: LabelSet) -> ModelGpuKey | None:
    model = version = gpu = None
    for name, value in labels:
        if name == catalog.MODEL:
            model = value
        elif name == catalog.VERSION:
            version = value
        elif name == catalog.GPU_UUID:
            gpu = value
    if model is None or not gpu:
        return None
    return (model, version or "", gpu)
