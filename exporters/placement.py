"""Where a model's instances run, from its config: GPU attribution for counters without ``gpu_uuid``.

Python-backend models on ``KIND_GPU`` (vLLM's backend, BLS pipelines, TensorRT-LLM's pre/post
processing) export execution counters with no ``gpu_uuid`` (Triton 2.51 on an H200, see
``../shared/data/h200/``). Their GPU time can still be placed from the config's instance groups:
Triton starts ``count`` instances on each GPU a ``KIND_GPU`` group lists (every GPU when it lists
none), so each GPU gets the model's executions in proportion to its instances. That is exact when
the model has instances on one GPU only, and an even split by instances otherwise (Triton's
scheduler hands batches to whichever instance is free, so a split by instances is an estimate).

``placement(config)`` reads the typed config's instance groups (``tritonwatch.modelconfig``); ``gpu_fractions``
turns a placement and the GPUs this Triton reports into ``{gpu_uuid: fraction}``, or a reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tritonwatch import modelconfig
from tritonwatch.catalog.gpu import ExecIncrease, ModelGpuKey
from tritonwatch.modelconfig import KIND_GPU, KIND_MODEL, ModelConfig

# Reasons a model without gpu_uuid counters gets no config attribution (catalog.GPU_ATTRIBUTION_REASONS).
CPU_INSTANCES = "cpu_instances"
KIND_MODEL_INSTANCES = "kind_model"
MIXED_KINDS = "mixed_kinds"
GPU_INDEX_UNKNOWN = "gpu_index_unknown"
NO_CONFIG = "no_gpu_uuid"  # no readable instance groups: the counters alone, as before


@dataclass(frozen=True)
class Placement:
    """A model's instances: on GPUs (device index -> instances; ``all_gpus`` when a group lists
    none), or why they cannot be placed on a GPU."""

    gpus: tuple[tuple[int, int], ...] = ()  # (CUDA device index, instances), sorted
    all_gpus: int = 0  # instances per GPU of groups that list no GPU
    reason: str = ""


def placement(config: ModelConfig | object) -> Placement:
    """The placement of a model's instances from its config (typed, or its JSON: ValueError on a
    malformed group)."""
    cfg = modelconfig.typed(config)
    if not cfg.instance_groups:
        return Placement(reason=NO_CONFIG)
    kinds: set[str] = set()
    per_gpu: dict[int, int] = {}
    all_gpus = 0
    for group in cfg.instance_groups:
        kinds.add(group.kind)
        if group.kind != KIND_GPU:
            continue
        if not group.gpus:
            all_gpus += group.count
        for g in group.gpus:
            per_gpu[g] = per_gpu.get(g, 0) + group.count
    if KIND_MODEL in kinds:
        return Placement(reason=KIND_MODEL_INSTANCES)
    if kinds != {KIND_GPU}:
        # KIND_AUTO is resolved by Triton before it serves the config; left unresolved, it is unknown.
        return Placement(reason=CPU_INSTANCES if KIND_GPU not in kinds else MIXED_KINDS)
    return Placement(tuple(sorted(per_gpu.items())), all_gpus)


def gpu_fractions(
    place: Placement, index_uuid: Mapping[int, str], reported: frozenset[str]
) -> dict[str, float] | str:
    """Each GPU's share of the model's instances, by ``gpu_uuid``; or the reason there is none.

    ``index_uuid`` maps device indices to UUIDs (DCGM's ``gpu`` label); with none and a single GPU
    reported by Triton, index 0 is that GPU. A listed index that cannot be mapped makes the whole
    model unattributed rather than partly guessed.
    """
    if place.reason:
        return place.reason
    mapping = dict(index_uuid)
    if not mapping and len(reported) == 1:
        mapping = {0: next(iter(reported))}
    instances: dict[str, float] = {}
    for index, n in place.gpus:
        uuid = mapping.get(index)
        if uuid is None:
            return GPU_INDEX_UNKNOWN
        instances[uuid] = instances.get(uuid, 0.0) + n
    if place.all_gpus:
        if not reported:
            return GPU_INDEX_UNKNOWN
        for uuid in reported:
            instances[uuid] = instances.get(uuid, 0.0) + place.all_gpus
    total = sum(instances.values())
    if total <= 0:
        return CPU_INSTANCES
    return {u: n / total for u, n in sorted(instances.items()) if n > 0}


def split_by_config(
    increases: Mapping[ModelGpuKey, ExecIncrease], fractions: Mapping[str, dict[str, float] | str]
) -> dict[ModelGpuKey, ExecIncrease]:
    """Counters without ``gpu_uuid`` (key gpu "") spread over the GPUs of the model's instances.

    Every counter of the model is scaled by the GPU's share of its instances, so the busy time
    (compute x executions / inferences) and the inferences split in the same proportion. A model
    with no placement (a reason instead) is dropped here: it has no GPU attribution.
    """
    out: dict[ModelGpuKey, ExecIncrease] = {}
    for (model, version, gpu), inc in increases.items():
        if gpu:
            out[(model, version, gpu)] = inc
            continue
        shares = fractions.get(model)
        if not isinstance(shares, dict):
            continue
        for uuid, f in shares.items():
            busy = None if inc.busy is None else inc.busy * f
            out[(model, version, uuid)] = ExecIncrease(
                inc.compute_seconds * f, inc.inferences * f, inc.executions * f, busy
            )
    return out
