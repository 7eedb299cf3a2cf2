"""GPU joined to models, both engines of each formula side by side (docs/gpu.md).

A model's busy time on a GPU is its compute duration over its mean batch size (Triton adds a batch's
compute time once per request in it); its share of the GPU is its busy time over every model's on
that GPU; its energy per inference is each GPU's energy split by those shares, over its inferences.
``busy_seconds`` / ``busy_shares`` / ``energy_per_inference`` compute them per Triton process from
increases (the sidecar); the ``*_promql`` functions render the same formulas across processes (the
recording rules, where processes sharing a GPU split it). ``GPU_COMPUTE`` is the compute input both
read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tritonwatch.catalog.names import (
    ATTRIBUTION,
    ATTRIBUTION_CONFIG,
    COMPUTE_PHASES,
    DCGM_ENERGY,
    DCGM_MIG_INSTANCE,
    DCGM_UUID,
    GPU_UUID,
    MODEL,
    MODEL_GPU_BUSY_SECONDS,
    MODEL_GPU_INFERENCES,
    TRITON_ENERGY,
    TRITON_EXEC_COUNT,
    TRITON_INFERENCE_COUNT,
    VERSION,
    triton_duration,
)
from tritonwatch.catalog.render import by_clause
from tritonwatch.catalog.signals import Term

# --- GPU joined to models (recording rules; the sidecar computes the same per Triton process) ------
# Record names (level:metric:operations); the ``level`` lists the labels kept besides grouping ones.
GPU_BUSY_SECONDS_RECORD = "model_gpu:tritonwatch_gpu_busy_seconds:rate5m"
MODEL_GPU_BUSY_RECORD = "model_gpu:tritonwatch_gpu_busy_ratio:rate5m"
GPU_ENERGY_WATTS_RECORD = "gpu:tritonwatch_energy_watts:rate5m"
MODEL_ENERGY_PER_INFERENCE_RECORD = "model:tritonwatch_energy_per_inference_joules:rate5m"


ModelGpuKey = tuple[str, str, str]  # (model, version, gpu_uuid)
# The compute time a model's executions spend on its GPU: the three compute phases' duration counters
# (microseconds), in seconds.
GPU_COMPUTE: tuple[Term, ...] = tuple(Term(triton_duration(p), scale=1e-6) for p in COMPUTE_PHASES)


@dataclass(frozen=True)
class ExecIncrease:
    """A model's execution counters on one GPU, increased over a window."""

    compute_seconds: float  # compute_input + compute_infer + compute_output duration counters
    inferences: float  # nv_inference_count
    executions: float  # nv_inference_exec_count
    # Busy seconds measured batch by batch (the statistics API's batch_stats), where known: exact
    # where compute time per batch varies with its size, which the mean-batch formula assumes not.
    busy: float | None = None


def busy_seconds(inc: ExecIncrease) -> float | None:
    """Time the GPU spent executing the model: compute duration / mean batch size.

    Triton adds a batch's compute time once per request in it, so the duration counters hold
    batch time x batch size; dividing by inferences / executions leaves time x executions.
    """
    if inc.busy is not None:
        return inc.busy if inc.busy > 0 and inc.inferences > 0 else None
    if inc.inferences <= 0 or inc.executions <= 0 or inc.compute_seconds <= 0:
        return None
    return inc.compute_seconds * inc.executions / inc.inferences


def busy_shares(increases: Mapping[ModelGpuKey, ExecIncrease]) -> dict[ModelGpuKey, float]:
    """Each model's share of the busy time of each GPU (shares on one GPU sum to 1)."""
    busy = {k: b for k, inc in increases.items() if (b := busy_seconds(inc)) is not None}
    per_gpu: dict[str, float] = {}
    for (_m, _v, gpu), b in busy.items():
        per_gpu[gpu] = per_gpu.get(gpu, 0.0) + b
    return {k: b / per_gpu[k[2]] for k, b in busy.items() if per_gpu[k[2]] > 0}


def energy_per_inference(
    shares: Mapping[ModelGpuKey, float],
    increases: Mapping[ModelGpuKey, ExecIncrease],
    energy_joules: Mapping[str, float],
) -> dict[tuple[str, str], float]:
    """Joules per inference per model: each GPU's energy split by busy share, over the inferences.

    Only GPUs with a known energy increase count, on both sides of the division, so a GPU without
    an energy source neither dilutes nor inflates the model's value.
    """
    joules: dict[tuple[str, str], float] = {}
    inferences: dict[tuple[str, str], float] = {}
    for key, share in shares.items():
        model, version, gpu = key
        energy = energy_joules.get(gpu)
        if energy is None or energy < 0:
            continue
        mk = (model, version)
        joules[mk] = joules.get(mk, 0.0) + share * energy
        inferences[mk] = inferences.get(mk, 0.0) + increases[key].inferences
    return {mk: j / inferences[mk] for mk, j in joules.items() if inferences[mk] > 0}


def _extra_by(grouping: Sequence[str], *first: str) -> str:
    return ", ".join([*first, *(g for g in grouping if g not in first)])


def gpu_busy_seconds_promql(window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    """Seconds per second each GPU spends executing each model, summed across Triton processes.

    Per scraped series (all labels match one-to-one, whatever a scraper adds): compute duration
    rate / mean batch size (inference rate / execution rate), since Triton adds a batch's compute
    time once per request in it; then summed by model, version and gpu_uuid. Idle series drop out.
    Models placed by their config (no gpu_uuid on their counters) come from the sidecar's attributed
    busy-seconds counter instead (docs/gpu.md).
    """
    sel = ",".join(m for m in ('gpu_uuid!=""', selector) if m)

    def r(family: str) -> str:
        return f"rate({family}{{{sel}}}[{window}])"

    compute = " + ".join(r(t.family) for t in GPU_COMPUTE)
    scale = GPU_COMPUTE[0].scale  # one unit for the three phases
    per_series = f"({compute}) * {scale:g} * {r(TRITON_EXEC_COUNT)} / ({r(TRITON_INFERENCE_COUNT)} > 0)"
    config = _config_rate(MODEL_GPU_BUSY_SECONDS, window, selector)
    return f"sum by ({_extra_by(grouping, MODEL, VERSION, GPU_UUID)}) ({per_series} or {config})"


def _config_rate(family: str, window: str, selector: str = "") -> str:
    """The rate of a sidecar counter for models placed by their config (``attribution="config"``).

    Its series carry ``attribution`` and Triton's never do, so ``or`` adds them to Triton's own
    series instead of shadowing any: a GPU shared by both kinds of model sums them all.
    """
    sel = ",".join(m for m in (f'{ATTRIBUTION}="{ATTRIBUTION_CONFIG}"', selector) if m)
    return f"rate({family}{{{sel}}}[{window}])"


def gpu_busy_ratio_promql(window: str = "5m", grouping: Sequence[str] = ()) -> str:
    """Each model's share of a GPU's busy time (``tritonwatch_model_gpu_busy_ratio`` across hosts).

    The denominator sums every model on the GPU from every Triton process that reports it, so
    processes sharing a GPU split it between them here, where no single sidecar can.
    """
    busy = gpu_busy_seconds_promql(window, grouping)
    on = _extra_by(grouping, GPU_UUID)
    return f"{busy} / on ({on}) group_left sum by ({on}) ({busy})"


def gpu_energy_watts_promql(window: str = "5m", grouping: Sequence[str] = ()) -> str:
    """Mean power per GPU from its energy counter: DCGM's (mJ, UUID) or else Triton's (J, gpu_uuid).

    ``max`` merges the copies of one GPU (several Triton processes, a twice-scraped exporter);
    MIG instance rows (``GPU_I_ID`` set) are left out: their counter is the whole GPU's.
    """
    on = _extra_by(grouping, GPU_UUID)
    dcgm = (
        f'label_replace(rate({DCGM_ENERGY}{{{DCGM_MIG_INSTANCE}=""}}[{window}]), '
        f'"{GPU_UUID}", "$1", "{DCGM_UUID}", "(.+)")'
    )
    triton = f"rate({TRITON_ENERGY}[{window}])"
    return f"(max by ({on}) ({dcgm}) * 0.001 or max by ({on}) ({triton}))"


def energy_per_inference_promql(window: str = "5m", grouping: Sequence[str] = ()) -> str:
    """Joules per inference per model: each GPU's power split by busy share, over inferences/s.

    Only GPUs with an energy series count, in the numerator and in the denominator alike.
    """
    watts = gpu_energy_watts_promql(window, grouping)
    on = _extra_by(grouping, GPU_UUID)
    by = by_clause(grouping)
    model_gpu = _extra_by(grouping, MODEL, VERSION, GPU_UUID)
    attributed = (
        f"sum by ({by}) (({gpu_busy_ratio_promql(window, grouping)}) * on ({on}) group_left () {watts})"
    )
    inferences = (
        f'sum by ({by}) (sum by ({model_gpu}) (rate({TRITON_INFERENCE_COUNT}{{gpu_uuid!=""}}[{window}]) '
        f"or {_config_rate(MODEL_GPU_INFERENCES, window)}) and on ({on}) {watts})"
    )
    return f"{attributed} / ({inferences} > 0)"
