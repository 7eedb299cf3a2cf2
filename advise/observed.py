"""What the server says about one model, validated: its batching config and its observed compute costs.

Triton's model-config JSON and statistics API answers are hostile input: every field read here is
checked for its type and range, and a bad one is a one-line ``TritonwatchError`` naming the model and
field. The fit of compute time against batch size is weighted least squares over ``batch_stats``
(one mean per executed batch size, weighted by its executions): ``compute(b) = fixed + per_item * b``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tritonwatch import modelconfig
from tritonwatch.errors import TritonwatchError
from tritonwatch.modelconfig import KIND_CPU, InstanceGroup

# A batch size counts as observed once it has executed this often: fewer gives a mean too noisy to fit.
MIN_EXECUTIONS = 20
# A fit needs this many observed batch sizes: two points always fit a line exactly, so a third is the
# first that can show the line is wrong (fit error) and give the coefficients an uncertainty.
MIN_BATCH_SIZES = 3
_MAX_COUNT = 2**63


@dataclass(frozen=True)
class Batching:
    """The settings the advisor tunes, as Triton's model config holds them."""

    max_batch_size: int
    delay_us: int  # dynamic_batching.max_queue_delay_microseconds
    preferred: tuple[int, ...]  # dynamic_batching.preferred_batch_size, ascending
    instances: int  # model instances in all of instance_group
    # The instance groups as the server gave them; a recommendation changes only the fields above.
    groups: tuple[InstanceGroup, ...] = field(default=(), compare=False)
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False)  # dynamic_batching

    def with_(self, delay_us: int, preferred: tuple[int, ...], instances: int) -> Batching:
        return replace(self, delay_us=delay_us, preferred=preferred, instances=instances)

    def to_config(self) -> dict[str, Any]:
        """``dynamic_batching`` and ``instance_group`` as Triton's model-config JSON spells them."""
        groups = [dict(g.raw) for g in self.groups] or [{"kind": KIND_CPU, "count": self.instances}]
        if len(groups) == 1:
            groups[0]["count"] = self.instances // self.groups[0].devices if self.groups else self.instances
        return modelconfig.batching_settings(self.raw, groups, self.delay_us, self.preferred)


@dataclass(frozen=True)
class BatchCost:
    batch_size: int
    executions: int
    mean_s: float  # compute_input + compute_infer + compute_output per execution


@dataclass(frozen=True)
class Fit:
    """compute(b) = fixed_s + per_item_s * b, from the observed batch sizes."""

    fixed_s: float
    per_item_s: float
    fixed_se: float  # standard errors of the two coefficients
    per_item_se: float
    rms_relative_error: float  # of the fitted line against each size's observed mean, execution-weighted
    costs: tuple[BatchCost, ...]  # the batch sizes the fit used

    def compute_s(self, batch: int) -> float:
        return self.fixed_s + self.per_item_s * batch


class Refusal(Exception):
    """The data cannot support a recommendation for this model; the message says why."""


def _where(model: str, path: str) -> str:
    return f"model {model!r}: {path}"


def integer(value: object, model: str, path: str, lo: int = 0) -> int:
    # uint64 fields may come as JSON strings (protobuf's JSON mapping) or numbers
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value < _MAX_COUNT:
        raise TritonwatchError(f"{_where(model, path)}: expected an integer >= {lo} (got {value!r:.60})")
    return value


def _obj(value: object, model: str, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TritonwatchError(f"{_where(model, path)}: expected an object (got {type(value).__name__})")
    return value


def _list(value: object, model: str, path: str) -> Sequence[Any]:
    if not isinstance(value, list):
        raise TritonwatchError(f"{_where(model, path)}: expected a list (got {type(value).__name__})")
    return value


def batching(config: object, model: str) -> Batching:
    """The batching settings of a model config (``tritonwatch.modelconfig``); Refusal if it cannot batch."""
    try:
        cfg = modelconfig.parse(config)
    except ValueError as exc:
        # An ensemble is refused whatever its other fields hold: what kind of model comes first.
        try:
            shape = modelconfig.parse(config, lenient=True)
        except ValueError:
            raise TritonwatchError(f"{_where(model, 'config')}: {exc}") from None
        if shape.ensemble or shape.ensemble_scheduling:
            raise Refusal("an ensemble does not batch: tune the models of its steps") from None
        raise TritonwatchError(f"model {model!r}: {exc}") from None
    if cfg.ensemble or cfg.ensemble_scheduling:
        raise Refusal("an ensemble does not batch: tune the models of its steps")
    if cfg.max_batch_size == 0:
        raise Refusal("max_batch_size is 0: the model cannot batch")
    if cfg.sequence_batching:
        raise Refusal("a sequence batcher is not modelled (only the dynamic batcher)")
    db = cfg.dynamic_batching
    if db is None:
        raise Refusal("no dynamic_batching: the default scheduler runs each request alone")
    if db.priority_levels > 1:
        raise Refusal("priority levels are not modelled")
    if db.max_queue_size or db.default_timeout_us:
        raise Refusal("a queue policy that rejects requests (max_queue_size, timeout) is not modelled")
    for i, g in enumerate(cfg.instance_groups):
        if g.count < 1:
            raise TritonwatchError(
                f"{_where(model, f'instance_group[{i}].count')}: expected an integer >= 1 (got 0)"
            )
    return Batching(
        max_batch_size=cfg.max_batch_size,
        delay_us=db.max_queue_delay_us,
        preferred=tuple(p for p in sorted(db.preferred) if p <= cfg.max_batch_size),
        instances=max(sum(g.count * g.devices for g in cfg.instance_groups), 1),
        groups=cfg.instance_groups,
        raw=db.raw,
    )


def pair(stats: Mapping[str, Any], key: str, model: str, path: str) -> tuple[int, int]:
    pair = _obj(stats.get(key, {"count": 0, "ns": 0}), model, f"{path}.{key}")
    return integer(pair.get("count", 0), model, f"{path}.{key}.count"), integer(
        pair.get("ns", 0), model, f"{path}.{key}.ns"
    )


def batch_costs(model_stats: object, model: str) -> list[tuple[int, int, int]]:
    """(batch size, executions, compute ns summed over them) per entry of ``batch_stats``."""
    st = _obj(model_stats, model, "stats")
    out = []
    for i, entry in enumerate(_list(st.get("batch_stats", []), model, "batch_stats")):
        path = f"batch_stats[{i}]"
        e = _obj(entry, model, path)
        size = integer(e.get("batch_size"), model, f"{path}.batch_size", 1)
        parts = [pair(e, k, model, path) for k in ("compute_input", "compute_infer", "compute_output")]
        out.append((size, parts[1][0], sum(ns for _, ns in parts)))
    return out


def fit(costs: Sequence[tuple[int, int, int]], max_batch_size: int) -> Fit:
    """Weighted least squares of compute time per execution against batch size; Refusal if too thin."""
    used = [
        BatchCost(b, n, ns / n / 1e9)
        for b, n, ns in sorted(costs)
        if n >= MIN_EXECUTIONS and b <= max_batch_size
    ]
    if len(used) < MIN_BATCH_SIZES:
        seen = ", ".join(f"{b}x{n}" for b, n, _ in sorted(costs) if n) or "none"
        raise Refusal(
            f"too few batch sizes observed: {len(used)} with at least {MIN_EXECUTIONS} executions, "
            f"{MIN_BATCH_SIZES} needed (batch size x executions: {seen})"
        )
    w = [float(c.executions) for c in used]
    x = [float(c.batch_size) for c in used]
    y = [c.mean_s for c in used]
    sw = sum(w)
    xm = sum(wi * xi for wi, xi in zip(w, x, strict=True)) / sw
    ym = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    sxx = sum(wi * (xi - xm) ** 2 for wi, xi in zip(w, x, strict=True))
    slope = sum(wi * (xi - xm) * (yi - ym) for wi, xi, yi in zip(w, x, y, strict=True)) / sxx
    intercept = ym - slope * xm
    if slope < 0:
        raise Refusal(f"compute time falls as batches grow ({slope * 1e3:.3f} ms per item): no line to trust")
    if intercept < 0:
        raise Refusal(f"the fitted fixed cost per execution is negative ({intercept * 1e3:.3f} ms)")
    resid = [yi - (intercept + slope * xi) for xi, yi in zip(x, y, strict=True)]
    # Residual variance of one execution-weighted mean; n - 2 degrees of freedom.
    s2 = sum(wi * r * r for wi, r in zip(w, resid, strict=True)) / (len(used) - 2)
    rel = math.sqrt(sum(wi * (r / yi) ** 2 for wi, r, yi in zip(w, resid, y, strict=True)) / sw)
    return Fit(
        fixed_s=intercept,
        per_item_s=slope,
        fixed_se=math.sqrt(s2 * (1 / sw + xm * xm / sxx)),
        per_item_se=math.sqrt(s2 / sxx),
        rms_relative_error=rel,
        costs=tuple(used),
    )
