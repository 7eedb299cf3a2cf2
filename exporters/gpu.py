"""The GPU part of the sidecar: per-GPU health from DCGM (or Triton), joined to the models on it.

Emits, only for the GPUs this Triton uses (the ``gpu_uuid`` values in its metrics), label
``gpu_uuid``::

    tritonwatch_gpu_utilization_ratio      DCGM_FI_DEV_GPU_UTIL / 100 (MIG: GR_ENGINE_ACTIVE) | nv_gpu_utilization
    tritonwatch_gpu_memory_used_ratio      FB_USED / (FB_USED + FB_FREE) | nv_gpu_memory_used_bytes / _total_bytes
    tritonwatch_gpu_power_watts            DCGM_FI_DEV_POWER_USAGE | nv_gpu_power_usage
    tritonwatch_gpu_temperature_celsius    DCGM only
    tritonwatch_gpu_sm_clock_hertz         DCGM only (MHz x 1e6)
    tritonwatch_gpu_last_xid_error         DCGM only: code of the last XID error, 0 for none
    tritonwatch_gpu_info{gpu, model_name, hostname, mig_instance, mig_profile, source}  1

and per model, labels ``model``, ``version``::

    tritonwatch_model_gpu_busy_ratio{gpu_uuid}      the model's share of the GPU's busy time
    tritonwatch_model_energy_per_inference_joules   GPU energy split by busy share / inferences
    tritonwatch_model_gpu_attribution_info{reason}  1 where the two above are absent for a reason:
        no_gpu_uuid (execution counters without gpu_uuid), no_gpu_energy (no energy counter)
    tritonwatch_model_gpu_busy_seconds_total{gpu_uuid, attribution}  models placed by their config:
    tritonwatch_model_gpu_inferences_total{gpu_uuid, attribution}    counters for the rules (gpucounters)

DCGM (``--dcgm``, target ``dcgm``) is preferred, GPU by GPU: a GPU whose ``UUID`` DCGM does not
serve (DCGM not given, down, or covering only some GPUs) takes its families from Triton's own
``nv_gpu_*`` and ``nv_energy_consumption`` (``source="triton"`` in ``tritonwatch_gpu_info``), and
has no DCGM-only families. The method is written down in docs/gpu.md.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch.catalog.gpu import ExecIncrease, ModelGpuKey, busy_shares, energy_per_inference
from tritonwatch.expfmt import parse, per_layout
from tritonwatch.exporters.context import PartContext
from tritonwatch.exporters.exposition import TextFamily, Texts
from tritonwatch.exporters.gpucounters import ConfigCounters
from tritonwatch.exporters.gpuquery import (
    GpuReading,
    dcgm_readings,
    model_gpu_key,
    select_used,
    triton_gpu_uuids,
    triton_readings,
)
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.placement import NO_CONFIG, Placement, gpu_fractions, split_by_config
from tritonwatch.exporters.snapshot import Snapshots, TritonSnapshot
from tritonwatch.exporters.source import Health, Partial, Source, skipped_lines
from tritonwatch.exporters.triton import ApiState, BatchStat
from tritonwatch.exporters.window import IncreaseWindow, ModelKey
from tritonwatch.fetch import MAX_LINE_BYTES, Fetcher

DcgmKey = tuple[str, str]  # (UUID, GPU_I_ID)

# Triton's execution counters read per gpu_uuid: family -> (field, scale to seconds / count)
_EXEC_FAMILIES: tuple[tuple[str, str, float], ...] = (
    *((t.family, "compute", t.scale) for t in catalog.GPU_COMPUTE),  # the busy formula's input, as the rules'
    (catalog.TRITON_INFERENCE_COUNT, "inferences", 1.0),
    (catalog.TRITON_EXEC_COUNT, "executions", 1.0),
)

INFO_LABELS = [
    catalog.GPU_UUID,
    "gpu",
    "model_name",
    "hostname",
    "mig_instance",
    "mig_profile",
    catalog.SOURCE,
]


def own_pod() -> str:
    """This pod's name, to find the MIG instance dcgm-exporter maps to it (empty off Kubernetes)."""
    if os.environ.get("POD_NAME"):
        return os.environ["POD_NAME"]
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return os.environ.get("HOSTNAME", "")  # a pod's hostname is its name
    return ""


class DcgmSource(Source):
    """Scrapes dcgm-exporter; keeps the latest readings and a window of energy-counter increases."""

    target = "dcgm"

    def __init__(
        self,
        url: str,
        window: float,
        interval: float,
        timeout: float,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(interval, clock)
        self.url = url
        self.fetcher = Fetcher(timeout, max_bytes, max_line=MAX_LINE_BYTES)
        self.lock = threading.Lock()
        self.readings: dict[DcgmKey, GpuReading] = {}
        self.energy: IncreaseWindow[DcgmKey] = IncreaseWindow(window)

    def describe(self) -> str:
        return self.url

    def scrape(self) -> Partial | None:
        payload = self.fetcher.get(self.url)
        now = self.clock()
        parsed = parse(payload, catalog.DCGM_FAMILIES)
        readings = dcgm_readings(parsed)
        with self.lock:
            self.energy.ingest(
                now, ((k, k, r.energy_joules) for k, r in readings.items() if r.energy_joules is not None)
            )
            self.readings = readings
        return skipped_lines(self.url, self.fetcher.skipped, parsed.skipped)

    def on_failure(self) -> None:
        with self.lock:
            self.readings = {}
            self.energy.clear()

    def snapshot(self) -> tuple[dict[DcgmKey, GpuReading], dict[DcgmKey, float]]:
        """The latest readings and each device's mean power (W) from its energy counter."""
        with self.lock:
            span = self.energy.span()
            watts = {k: j / span for k, j in self.energy.increases().items()} if span > 0 else {}
            return dict(self.readings), watts


class TritonGpuWindow:
    """Fed every successful Triton scrape (a subscriber of its snapshots); read under ``lock``.

    Keeps per (model, version, gpu_uuid) increases of the execution counters, per GPU increases of
    ``nv_energy_consumption``, Triton's GPU readings and the set of GPUs this Triton uses.
    """

    def __init__(self, window: float, api: Callable[[], ApiState] = ApiState) -> None:
        self.lock = threading.Lock()
        self.generation = 0  # of the last snapshot observed ...
        self.models: frozenset[ModelKey] = frozenset()  # ... and its models
        self.api = api  # the triton_api target's latest state: configs' placements, batch_stats
        # The last placements and batch statistics the API gave: kept while a read fails (a failed
        # index empties the API's state), so a blip neither drops config attribution for a render nor
        # loses a scrape's share of busy time (a cumulative value carried forward moves nothing).
        self._placements: Mapping[str, Placement] = {}
        self._config_models: frozenset[str] = frozenset()
        self._batch_stats: Mapping[ModelKey, Mapping[int, BatchStat]] = {}
        self.exec: IncreaseWindow[tuple[ModelGpuKey, str]] = IncreaseWindow(window)
        self.energy: IncreaseWindow[str] = IncreaseWindow(window)
        self.readings: dict[str, GpuReading] = {}
        self.used: frozenset[str] = frozenset()
        self.gpu_models: frozenset[ModelKey] = frozenset()  # models with gpu_uuid execution counters
        # Config-placed models' busy seconds and inferences as counters, for the recording rules
        self.config_counters = ConfigCounters()

    def observe(self, snapshot: TritonSnapshot) -> None:
        with self.lock:
            self._observe(snapshot)

    def _observe(self, snapshot: TritonSnapshot) -> None:
        now, samples = snapshot.time, snapshot.samples
        self.generation, self.models = snapshot.generation, snapshot.models
        # Every execution counter of a GPU instance carries a gpu_uuid that ``used`` holds: a Triton
        # with no GPU (CPU instances only) has no rows, and its thousands of series are not scanned.
        self.used = per_layout(samples, triton_gpu_uuids)
        rows: list[tuple[Hashable, tuple[ModelGpuKey, str], float]] = []
        gpu_models: set[ModelKey] = set()
        self.placements()
        config_models = self._config_models
        batch_stats = self.api().batch_stats or self._batch_stats
        self._batch_stats = batch_stats
        for family, name, scale in _EXEC_FAMILIES if self.used else ():
            for labels, value in samples.get(family, {}).items():
                key = model_gpu_key(labels)
                if key is None and config_models:
                    key = _unlabelled_key(labels, config_models)
                    if key is not None:
                        rows.append(((family, labels), (key, name), value * scale))
                    continue
                if key is not None:
                    rows.append(((family, labels), (key, name), value * scale))
                    gpu_models.add(key[:2])
        # Config-placed models: their busy time batch by batch from the statistics API (read on its
        # own interval, so up to one of them behind this scrape; exact over a window of many).
        for (model, version), per_size in batch_stats.items() if config_models else ():
            if model in config_models:
                busy = sum(b.compute_seconds for b in per_size.values())
                rows.append((("batch_stats", model, version), ((model, version, ""), "busy"), busy))
        self.exec.ingest(now, rows)
        if config_models:
            self.config_counters.add(self.exec.last)
        self.gpu_models = frozenset(gpu_models)
        self.readings = triton_readings(samples)
        self.energy.ingest(
            now, ((u, u, r.energy_joules) for u, r in self.readings.items() if r.energy_joules is not None)
        )

    def placements(self) -> Mapping[str, Placement]:
        """Model name -> its instance groups, as last read. Also sets the models whose config places
        them on GPUs (their counters without gpu_uuid are kept too, gpu ""), worked out again only
        when the API's state, replaced whole, brings new placements."""
        current = self.api().placement
        if current and current is not self._placements:
            self._config_models = frozenset(m for m, p in current.items() if not p.reason)
            self._placements = current
        return self._placements

    def increases(self) -> dict[ModelGpuKey, ExecIncrease]:
        sums: dict[ModelGpuKey, dict[str, float]] = {}
        for (key, name), value in self.exec.increases().items():
            sums.setdefault(key, {})[name] = value
        return {
            k: ExecIncrease(
                v.get("compute", 0.0), v.get("inferences", 0.0), v.get("executions", 0.0), v.get("busy")
            )
            for k, v in sums.items()
        }

    def watts(self) -> dict[str, float]:
        span = self.energy.span()
        return {u: j / span for u, j in self.energy.increases().items()} if span > 0 else {}


def _unlabelled_key(labels: tuple[tuple[str, str], ...], models: frozenset[str]) -> ModelGpuKey | None:
    """(model, version, "") for a series without gpu_uuid of a model placed by its config."""
    d = dict(labels)
    model = d.get(catalog.MODEL)
    if model is None or model not in models or d.get(catalog.GPU_UUID):
        return None
    return (model, d.get(catalog.VERSION, ""), "")


@dataclass(frozen=True)
class Fractions:
    """Per model placed by its config: ``{gpu_uuid: share of its instances}`` or why there is none;
    ``version`` changes with the contents (the model families' cache key)."""

    version: int
    by_model: dict[str, dict[str, float] | str]


def _gauge(name: str, help_text: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, help_text, labels=labels)


class GpuPart(Part):
    """Builds the GPU families at scrape time from the DCGM source and the Triton window."""

    def __init__(
        self,
        snapshots: Snapshots,
        triton: TritonGpuWindow,
        dcgm: DcgmSource | None,
        pod: str = "",
        texts: Texts | None = None,
    ) -> None:
        self.snapshots = snapshots
        self.triton = triton
        self.texts = texts
        # (Triton scrape, power readings) -> the per-model families built from them
        self._model_cache: tuple[tuple[int, list[tuple[str, float]], int], list[Metric]] | None = None
        # (its inputs, compared by identity or value) -> the config placements worked out from them
        self._fractions_memo: tuple[tuple[object, ...], Fractions] | None = None
        self.dcgm = dcgm
        self.pod = pod
        self.health: Health | None = dcgm.health if dcgm else None

    def devices(self) -> tuple[dict[str, GpuReading], dict[str, float]]:
        """Per used gpu_uuid: the reading to export, and the mean power from its energy counter.

        The source is chosen per GPU: DCGM for every GPU whose ``UUID`` it serves, Triton's own
        ``nv_gpu_*`` for the others (a dcgm-exporter that covers only some of the node's GPUs, or
        none while it is down). A GPU DCGM serves but cannot resolve (an ambiguous MIG instance) is
        left out rather than read from Triton, whose numbers are then the whole GPU's.
        """
        with self.triton.lock:
            used = self.triton.used
            fallback = {u: r for u, r in self.triton.readings.items() if u in used}
            fallback_watts = self.triton.watts()
        chosen: dict[str, GpuReading] = {}
        covered: set[str] = set()
        power: dict[str, float] = {}
        if self.dcgm is not None and self.dcgm.health.up:
            readings, watts = self.dcgm.snapshot()
            covered = {u for (u, _inst) in readings}
            chosen = select_used(readings, used, self.pod)
            # A MIG instance's energy counter is its parent GPU's, shared with instances this
            # Triton cannot see: no energy is attributed from it (docs/gpu.md).
            power = {
                u: watts[(u, r.mig_instance)]
                for u, r in chosen.items()
                if not r.mig_instance and (u, r.mig_instance) in watts
            }
        for uuid, reading in fallback.items():
            if uuid not in covered:
                chosen[uuid] = reading
                if uuid in fallback_watts:
                    power[uuid] = fallback_watts[uuid]
        return chosen, power

    def collect(self) -> Iterator[Metric]:
        devices, watts = self.devices()
        yield from self._gpu_families(devices)
        yield from self._model_families(watts, self._fractions(devices))

    def _fractions(self, devices: Mapping[str, GpuReading]) -> Fractions:
        """Per model placed by its config: its GPUs' shares of its instances, or why it has none.

        Device indices in a config are CUDA's; DCGM's ``gpu`` label is NVML's index: the two agree
        when CUDA_DEVICE_ORDER=PCI_BUS_ID and CUDA_VISIBLE_DEVICES is unset (docs/gpu.md).
        """
        with self.triton.lock:
            placements = self.triton.placements()
            used = self.triton.used
            window_models, gpu_models = self.triton.models, self.triton.gpu_models
        index_uuid = tuple(
            sorted(
                (int(r.index), uuid)
                for uuid, r in devices.items()
                if r.index.isdigit() and not r.mig_instance and r.source == "dcgm"
            )
        )
        # Rendered for every /metrics update: worked out again only when an input changed (the
        # mappings are replaced whole, so identity tells), not per render at fleet size.
        inputs: tuple[object, ...] = (placements, window_models, gpu_models, used, index_uuid)
        memo = self._fractions_memo
        if memo is not None and all(a is b or a == b for a, b in zip(memo[0], inputs, strict=True)):
            return memo[1]
        version = memo[1].version + 1 if memo else 1
        models = {m for m, _v in window_models} - {m for m, _v in gpu_models}
        by_model = {
            m: gpu_fractions(placements[m], dict(index_uuid), used) for m in models if m in placements
        }
        fractions = Fractions(version, by_model)
        self._fractions_memo = (inputs, fractions)
        return fractions

    def _gpu_families(self, devices: dict[str, GpuReading]) -> Iterator[Metric]:
        by = [catalog.GPU_UUID]
        specs: list[tuple[str, str, str]] = [
            (catalog.GPU_UTILIZATION, "utilization", "Share of time the GPU was busy (0-1)."),
            (catalog.GPU_MEMORY_USED_RATIO, "memory_used_ratio", "Share of the GPU's memory in use (0-1)."),
            (catalog.GPU_POWER, "power_watts", "GPU power draw in watts."),
            (catalog.GPU_TEMPERATURE, "temperature_celsius", "GPU temperature in degrees Celsius (DCGM)."),
            (catalog.GPU_SM_CLOCK, "sm_clock_hertz", "SM clock in hertz (DCGM)."),
            (catalog.GPU_XID, "last_xid", "Code of the last XID error the GPU reported, 0 for none (DCGM)."),
        ]
        for name, attr, help_text in specs:
            fam = _gauge(name, help_text, by)
            for uuid, r in sorted(devices.items()):
                value = getattr(r, attr)
                if value is not None:
                    fam.add_metric([uuid], float(value))
            yield fam
        info = _gauge(catalog.GPU_INFO, "The GPU (or MIG instance) behind each gpu_uuid; 1.", INFO_LABELS)
        for uuid, r in sorted(devices.items()):
            info.add_metric(
                [uuid, r.index, r.model_name, r.hostname, r.mig_instance, r.mig_profile, r.source], 1.0
            )
        yield info

    def _model_families(self, watts: dict[str, float], fractions: Fractions) -> Iterator[Metric]:
        # Built once per Triton scrape and power reading, not per render of /metrics: the reason
        # family has a sample for every CPU-only model (2,000 of them were 80% of a render's time).
        if not self.snapshots.latest.up:
            return  # Triton is down: nothing current to join
        with self.triton.lock:
            key = (
                self.triton.generation,
                sorted(watts.items()),
                fractions.version,
            )
            cached = self._model_cache
            if cached is None or cached[0] != key:
                increases = self.triton.increases()
                span = self.triton.exec.span()
                models = self.triton.models
                gpu_models = self.triton.gpu_models
                counters = self.triton.config_counters
                counters.settle(counters.take(), fractions.by_model)  # once per scrape (generation)
                counter_families = list(counters.families())
                cached = None
        if cached is None:
            built = list(
                self._build_model_families(watts, increases, span, models, gpu_models, fractions.by_model)
            )
            built += counter_families
            cached = self._model_cache = (key, built)
        yield from cached[1]

    def _build_model_families(
        self,
        watts: dict[str, float],
        increases: dict[ModelGpuKey, ExecIncrease],
        span: float,
        models: frozenset[ModelKey],
        gpu_models: frozenset[ModelKey],
        fractions: dict[str, dict[str, float] | str],
    ) -> Iterator[Metric]:
        increases = split_by_config(increases, fractions)
        shares = busy_shares(increases)

        def how(model: str) -> str:
            return (
                catalog.ATTRIBUTION_CONFIG
                if isinstance(fractions.get(model), dict)
                else catalog.ATTRIBUTION_COUNTERS
            )

        busy = _gauge(
            catalog.MODEL_GPU_BUSY,
            "The model's share of the GPU's busy time over the window (compute time / batch size); "
            "attribution: counters (gpu_uuid on its counters) or config (its instance groups).",
            [*catalog.MODEL_KEY, catalog.GPU_UUID, catalog.ATTRIBUTION],
        )
        for (model, version, gpu), share in sorted(shares.items()):
            busy.add_metric([model, version, gpu, how(model)], share)
        yield busy
        energy = _gauge(
            catalog.MODEL_ENERGY_PER_INFERENCE,
            "GPU energy per inference over the window: each GPU's energy split by busy share.",
            [*catalog.MODEL_KEY, catalog.ATTRIBUTION],
        )
        joules = {u: w * span for u, w in watts.items()}
        per_inference = energy_per_inference(shares, increases, joules)
        for (model, version), value in sorted(per_inference.items()):
            energy.add_metric([model, version, how(model)], value)
        yield energy
        # Absent for a stated reason, not silently (a model with no traffic in the window has none:
        # absence for lack of data is the rule everywhere).
        why = TextFamily(
            catalog.MODEL_GPU_ATTRIBUTION,
            catalog.MODEL_GPU_ATTRIBUTION_HELP,
            [*catalog.MODEL_KEY, catalog.REASON],
            texts=self.texts,
        )
        reasons = [
            (model, version, reason)
            for model, version in sorted(models - gpu_models)
            if isinstance(reason := fractions.get(model, NO_CONFIG), str)
        ]
        reasons += [
            (model, version, "no_gpu_energy")
            for model, version in sorted({k[:2] for k in shares} - set(per_inference))
        ]
        why.add_many(reasons, [1.0] * len(reasons))
        yield why


def make_part(context: PartContext) -> list[tuple[GpuPart, Source | None]]:
    """The GPU part (always: busy shares need only Triton) and, with ``--dcgm``, its DCGM source."""
    cfg = context.config
    window = TritonGpuWindow(cfg.window, context.api_state)
    context.snapshots.subscribe(window.observe)
    dcgm = (
        DcgmSource(cfg.dcgm, cfg.window, cfg.interval, cfg.scrape_timeout, cfg.max_payload_bytes)
        if cfg.dcgm
        else None
    )
    return [(GpuPart(context.snapshots, window, dcgm, own_pod(), context.texts), dcgm)]
