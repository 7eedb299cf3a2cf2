"""One typed reading of a Triton model config (``GET /v2/models/<m>/config``), for every caller.

``parse(config)`` turns the config JSON Triton's HTTP API returns into a frozen ``ModelConfig``: its
batching (``max_batch_size``, ``dynamic_batching``, ``sequence_batching``), instance groups and their
placement, ensemble steps, backend shape (backend, platform, decoupled), response cache, inputs and
``model_metrics`` (histogram bucket options per metric family). The config is hostile input: every field
read is checked for its type and range, lists are bounded, and a bad one is a ``ValueError`` whose one
line names the field (the caller adds the URL or model). Fields absent from the config take Triton's
defaults. This is the only module that knows the config's keys; the others read the typed fields.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

_T = TypeVar("_T")

MAX_INT32 = 2**31 - 1
MAX_ENSEMBLE_STEPS = 64  # more in one config is not a pipeline anyone runs: the config is refused
MAX_GROUPS = 1024  # instance groups; real configs have one or a few
MAX_INSTANCES = 100_000  # per group
MAX_INPUTS = 1024
MAX_DIMS = 64
MAX_METRIC_CONTROLS = 256
MAX_BUCKETS = 1024  # per histogram family
MAX_NAME = 1024  # characters of a name (model, input, family)

KIND_GPU = "KIND_GPU"
KIND_CPU = "KIND_CPU"
KIND_MODEL = "KIND_MODEL"
KIND_AUTO = "KIND_AUTO"
ENSEMBLE = "ensemble"

# The config's batching part as Triton spells it (``batching_part``): copied as they are; the
# schedulers the advisor only needs to know of are reduced to their presence.
_BATCHING_KEPT = ("backend", "dynamic_batching", "instance_group", "max_batch_size", "platform")
_BATCHING_PRESENCE = ("ensemble_scheduling", "sequence_batching")
_TUNED = ("dynamic_batching", "instance_group")  # what advise changes


@dataclass(frozen=True)
class InstanceGroup:
    kind: str  # KIND_GPU, KIND_CPU, KIND_MODEL or KIND_AUTO (Triton resolves AUTO before serving)
    count: int  # instances on each listed GPU, or in all when no GPU is listed
    gpus: tuple[int, ...] = ()  # CUDA device indices; empty: every GPU (KIND_GPU)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)  # the entry as Triton gave it

    @property
    def devices(self) -> int:
        """The devices the group runs ``count`` instances on each of (1 unless a GPU group lists several)."""
        return len(self.gpus) if self.kind == KIND_GPU and self.gpus else 1


@dataclass(frozen=True)
class DynamicBatching:
    max_queue_delay_us: int = 0
    preferred: tuple[int, ...] = ()  # preferred_batch_size as given (not sorted)
    priority_levels: int = 0
    max_queue_size: int = 0  # default_queue_policy: 0 is unbounded
    default_timeout_us: int = 0  # default_queue_policy: 0 is no timeout
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)  # as Triton gave it


@dataclass(frozen=True)
class TensorSpec:
    name: str
    data_type: str  # as the config spells it: TYPE_FP32, TYPE_STRING, ...
    dims: tuple[int, ...]  # without the batch dimension; -1 is variable


@dataclass(frozen=True)
class ModelConfig:
    name: str = ""
    platform: str = ""
    backend: str = ""
    max_batch_size: int = 0
    dynamic_batching: DynamicBatching | None = None
    sequence_batching: bool = False
    ensemble_scheduling: bool = False  # the key is present (whatever the platform says)
    steps: tuple[str, ...] | None = None  # an ensemble's step models in order; None: not an ensemble
    instance_groups: tuple[InstanceGroup, ...] = ()
    decoupled: bool = False
    response_cache: bool = False
    inputs: tuple[TensorSpec, ...] = ()
    # model_metrics.metric_control[].histogram_options.buckets per metric family, ascending, distinct
    histogram_buckets: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ensemble(self) -> bool:
        return self.platform == ENSEMBLE

    @property
    def kind(self) -> str:
        """What runs the model: its platform, else its backend (``ensemble``, ``python``, ...)."""
        return self.platform or self.backend

    def buckets(self, family: str) -> tuple[float, ...] | None:
        """The histogram buckets (upper bounds, ascending) ``model_metrics`` sets for ``family``
        (e.g. ``nv_inference_first_response_histogram_ms``); None where it sets none (Triton's defaults)."""
        return self.histogram_buckets.get(family)

    def batching_part(self) -> dict[str, Any]:
        """What ``advise`` needs of the config, as Triton spells it: ``backend``, ``dynamic_batching``,
        ``instance_group``, ``max_batch_size``, ``platform`` where present, and the ensemble and
        sequence schedulers reduced to ``{}`` (their presence)."""
        part: dict[str, Any] = {k: self.raw[k] for k in _BATCHING_KEPT if k in self.raw}
        part.update({k: {} for k in _BATCHING_PRESENCE if k in self.raw})
        return part


def tuned_fields(config: Mapping[str, Any]) -> dict[str, Any]:
    """The fields ``advise`` tunes (``dynamic_batching``, ``instance_group``) of a config JSON, as given."""
    return {k: config[k] for k in _TUNED if k in config}


def batching_settings(
    dynamic: Mapping[str, Any], groups: list[dict[str, Any]], delay_us: int, preferred: tuple[int, ...]
) -> dict[str, Any]:
    """``dynamic_batching`` (``dynamic`` with the delay and preferred sizes set) and ``instance_group``
    as Triton's model-config JSON spells them, keys sorted: the config ``advise`` hands back."""
    tuned = {**dynamic, "max_queue_delay_microseconds": delay_us, "preferred_batch_size": list(preferred)}
    return {
        "dynamic_batching": {k: tuned[k] for k in sorted(tuned)},
        "instance_group": [{k: g[k] for k in sorted(g)} for g in groups],
    }


def _obj(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be an object (got {type(value).__name__})")
    return value


def _list(value: object, where: str, most: int) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{where} must be a list (got {type(value).__name__})")
    if len(value) > most:
        raise ValueError(f"{where}: {len(value)} entries, over {most}")
    return value


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME:
        raise ValueError(f"{where} must be a string of at most {MAX_NAME} characters")
    return value


def _int(value: object, where: str, low: int = 0, high: int = 2**63 - 1) -> int:
    # Triton's JSON writer quotes 64-bit integers ("1000"): a string of digits is a number here.
    if isinstance(value, str) and value.lstrip("-").isdigit() and len(value) <= 20:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{where}: not an integer in [{low}, {high}] (got {str(value)[:40]})")
    return value


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where} must be a boolean")
    return value


def _max_batch_size(value: object) -> int:
    # Triton's max_batch_size is an int32: anything else is not a config Triton wrote.
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_INT32:
        raise ValueError(f"no valid max_batch_size (got {str(value)[:40]})")
    return value


def _group(g: object, where: str) -> InstanceGroup:
    g = _obj(g, where)
    kind = _str(g.get("kind", KIND_AUTO), f"{where}.kind")
    count = g.get("count", 1)
    if isinstance(count, float) and count.is_integer():
        count = int(count)
    n = _int(count, f"{where}.count", 0, MAX_INSTANCES)
    gpus = []
    for i, d in enumerate(_list(g.get("gpus") or [], f"{where}.gpus", MAX_GROUPS)):
        if isinstance(d, bool) or not isinstance(d, (int, str)) or not str(d).isdigit():
            raise ValueError(f"{where}.gpus[{i}]: not a device index (got {str(d)[:40]})")
        gpus.append(int(d))
    return InstanceGroup(kind, n, tuple(gpus), g)


def _dynamic(db: object) -> DynamicBatching:
    where = "dynamic_batching"
    db = _obj(db, where)
    policy = _obj(db.get("default_queue_policy", {}), f"{where}.default_queue_policy")
    preferred = _list(db.get("preferred_batch_size", []), f"{where}.preferred_batch_size", MAX_BUCKETS)
    return DynamicBatching(
        max_queue_delay_us=_int(
            db.get("max_queue_delay_microseconds", 0), f"{where}.max_queue_delay_microseconds"
        ),
        preferred=tuple(
            _int(p, f"{where}.preferred_batch_size[{i}]", 1, MAX_INT32) for i, p in enumerate(preferred)
        ),
        priority_levels=_int(db.get("priority_levels", 0), f"{where}.priority_levels"),
        max_queue_size=_int(policy.get("max_queue_size", 0), f"{where}.default_queue_policy.max_queue_size"),
        default_timeout_us=_int(
            policy.get("default_timeout_microseconds", 0),
            f"{where}.default_queue_policy.default_timeout_microseconds",
        ),
        raw=db,
    )


def _steps(scheduling: object) -> tuple[str, ...]:
    """The step models of ``ensemble_scheduling`` in order."""
    steps = scheduling.get("step") if isinstance(scheduling, Mapping) else None
    if not isinstance(steps, list) or not 0 < len(steps) <= MAX_ENSEMBLE_STEPS:
        raise ValueError("ensemble_scheduling.step is not a list of model_name")
    names = [s.get("model_name") if isinstance(s, Mapping) else None for s in steps]
    if not all(isinstance(n, str) and 0 < len(n) <= MAX_NAME for n in names):
        raise ValueError("ensemble_scheduling.step is not a list of model_name")
    return tuple(str(n) for n in names)


def _input(item: object, where: str) -> TensorSpec:
    item = _obj(item, where)
    name = _str(item.get("name"), f"{where}.name")
    data_type = _str(item.get("data_type"), f"{where}.data_type")
    dims = _list(item.get("dims", []), f"{where}.dims", MAX_DIMS)
    return TensorSpec(name, data_type, tuple(_int(d, f"{where}.dims[{i}]", -1) for i, d in enumerate(dims)))


def _histograms(metrics: object) -> dict[str, tuple[float, ...]]:
    where = "model_metrics.metric_control"
    controls = _list(_obj(metrics, "model_metrics").get("metric_control", []), where, MAX_METRIC_CONTROLS)
    out: dict[str, tuple[float, ...]] = {}
    for i, c in enumerate(controls):
        c = _obj(c, f"{where}[{i}]")
        ident = _obj(c.get("metric_identifier", {}), f"{where}[{i}].metric_identifier")
        family = _str(ident.get("family", ""), f"{where}[{i}].metric_identifier.family")
        if "histogram_options" not in c:
            continue
        options = _obj(c["histogram_options"], f"{where}[{i}].histogram_options")
        raw = _list(options.get("buckets", []), f"{where}[{i}].histogram_options.buckets", MAX_BUCKETS)
        bounds = set()
        for j, b in enumerate(raw):
            if isinstance(b, bool) or not isinstance(b, (int, float)) or not math.isfinite(b):
                raise ValueError(f"{where}[{i}].histogram_options.buckets[{j}]: not a finite number")
            bounds.add(float(b))
        if family and bounds:
            out[family] = tuple(sorted(bounds))
    return out


def parse(config: object, lenient: bool = False) -> ModelConfig:
    """The typed config of one config JSON; ``ValueError`` (one line, naming the field) when it is not one.

    ``lenient``: a field of another shape reads as absent (Triton's default) instead of refusing the
    whole config, for a reader that proposes from whatever it can read (``tritonwatch init``). The
    bounds hold either way: nothing unbounded is kept.
    """
    if not isinstance(config, Mapping):
        raise ValueError("a model config must be an object")

    def read(compute: Callable[[], _T], default: _T) -> _T:
        try:
            return compute()
        except ValueError:
            if lenient:
                return default
            raise

    def backend() -> str:
        value = config.get("backend") or ""
        if not isinstance(value, str):
            raise ValueError("backend must be a string")
        return value

    def decoupled() -> bool:
        policy = config.get("model_transaction_policy") or {}
        if not isinstance(policy, Mapping) or not isinstance(policy.get("decoupled", False), bool):
            raise ValueError("model_transaction_policy.decoupled must be a boolean")
        return bool(policy.get("decoupled", False))

    def groups() -> tuple[InstanceGroup, ...]:
        entries = _list(config.get("instance_group", []), "instance_group", MAX_GROUPS)
        return tuple(_group(g, f"instance_group[{i}]") for i, g in enumerate(entries))

    def inputs() -> tuple[TensorSpec, ...]:
        entries = _list(config.get("input", []), "input", MAX_INPUTS)
        return tuple(_input(item, f"input[{i}]") for i, item in enumerate(entries))

    cache = config.get("response_cache") or {}
    platform = read(lambda: _str(config.get("platform") or "", "platform"), "")
    has_dynamic = "dynamic_batching" in config
    return ModelConfig(
        name=read(lambda: _str(config.get("name", ""), "name"), ""),
        platform=platform,
        backend=read(backend, ""),
        max_batch_size=read(lambda: _max_batch_size(config.get("max_batch_size", 0)), 0),
        dynamic_batching=read(lambda: _dynamic(config["dynamic_batching"]) if has_dynamic else None, None),
        sequence_batching="sequence_batching" in config,
        ensemble_scheduling="ensemble_scheduling" in config,
        steps=read(lambda: _steps(config.get("ensemble_scheduling")) if platform == ENSEMBLE else None, None),
        instance_groups=read(groups, ()),
        decoupled=read(decoupled, False),
        response_cache=isinstance(cache, Mapping) and cache.get("enable") is True,
        inputs=read(inputs, ()),
        histogram_buckets=read(lambda: _histograms(config.get("model_metrics") or {}), {}),
        raw=config,
    )


def typed(config: ModelConfig | object) -> ModelConfig:
    """``config`` itself when it is already typed, else ``parse(config)`` (its JSON as Triton gave it)."""
    return config if isinstance(config, ModelConfig) else parse(config)
