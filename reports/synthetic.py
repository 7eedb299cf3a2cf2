"""A synthetic week of Triton, sidecar and GPU series with known figures, in OpenMetrics text.

Used by the report's tests (backfilled into a real Prometheus with ``promtool tsdb
create-blocks-from openmetrics``) and handy for trying the report without a fleet. Every series is
sampled every ``step_s`` seconds; traffic follows a daily cycle (peak at 14:00 UTC, trough at a fifth of
it) and grows linearly by ``growth_per_day`` of its first day's level each day, so the daily peaks lie on
a known straight line. The file holds, per Triton instance and model::

    nv_inference_request_success{model,version,instance,job,gpu_uuid}
    nv_inference_request_failure{model,version,instance,job,reason="OTHER"|"CANCELED"}
    nv_inference_count / nv_inference_exec_count / nv_inference_<phase>_duration_us{...,gpu_uuid}
    nv_cache_num_hits_per_model / nv_cache_num_misses_per_model   (models with the cache on)
    tritonwatch_model_max_batch_size{model,version,instance}      (the sidecar)
    tritonwatch_request_duration_seconds_bucket{model,version,phase="request",le}  (+ _sum, _count)
    nv_gpu_utilization{gpu_uuid,instance} and, where the sidecar runs, tritonwatch_gpu_utilization_ratio

One Triton restarts mid-week (its counters, and its sidecar's, start again from 0), as after a crash or
an upgrade. ``truth()`` recomputes the figures the report must find from the same per-step traffic,
without the reset: a reset-aware report loses at most the one step around the restart.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from tritonwatch import catalog

DAY = 86400.0


@dataclass(frozen=True)
class Instance:
    triton: str  # the Prometheus instance label of Triton's /metrics
    sidecar: str  # the sidecar's instance label
    gpu_uuid: str
    restart_day: float | None = None  # Triton restarts then: every counter of this instance starts again at 0


@dataclass(frozen=True)
class Model:
    name: str
    instances: tuple[Instance, ...]
    peak_rate: float  # successful req/s per instance at the first day's daily peak
    error_ratio: float  # server failures / (successes + server failures)
    canceled_ratio: float  # client cancellations / successes (not errors)
    batch_size: float  # inferences per execution
    max_batch_size: int
    cache_hit_ratio: float | None  # None: the cache is off, no cache series
    request_latency_s: float
    queue_share: float  # queue time / request time
    histogram: bool  # the sidecar exports the request-duration histogram
    latency_sigma: float = 0.5  # lognormal spread of per-request latency
    version: str = "1"


@dataclass(frozen=True)
class Gpu:
    uuid: str
    instance: str
    peak_utilization: float  # at the first day's daily peak
    sidecar: bool  # also exported as tritonwatch_gpu_utilization_ratio


@dataclass(frozen=True)
class Week:
    start: datetime
    models: tuple[Model, ...]
    gpus: tuple[Gpu, ...]
    days: int = 7
    step_s: int = 60
    growth_per_day: float = 0.05
    noise: float = 0.03
    seed: int = 7
    peak_hour: float = 14.0
    trough: float = 0.2  # the daily low as a share of the daily peak

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.days)

    def times(self) -> np.ndarray:
        t0 = self.start.timestamp()
        return t0 + np.arange(0, self.days * DAY + 1, self.step_s, dtype=np.float64)

    def shape(self, t: np.ndarray) -> np.ndarray:
        """Traffic relative to the first day's peak: daily cycle times linear growth."""
        days = (t - self.start.timestamp()) / DAY
        hour = (t % DAY) / 3600.0
        amp = (1.0 - self.trough) / 2.0
        daily = 1.0 - amp + amp * np.cos(2 * math.pi * (hour - self.peak_hour) / 24.0)
        return daily * (1.0 + self.growth_per_day * days)


def default_week(start: datetime | None = None) -> Week:
    """Two Tritons (one GPU each, the second restarting mid-week), a batching model with the cache on
    both, a non-batching one on the first."""
    t0 = Instance("triton-0:8002", "triton-0:9450", "GPU-00000000-0000-0000-0000-000000000000")
    t1 = Instance(
        "triton-1:8002", "triton-1:9450", "GPU-11111111-1111-1111-1111-111111111111", restart_day=3.5
    )
    return Week(
        start=start or datetime(2026, 11, 2, tzinfo=timezone.utc),
        models=(
            Model(
                name="resnet",
                instances=(t0, t1),
                peak_rate=60.0,
                error_ratio=0.004,
                canceled_ratio=0.02,
                batch_size=3.0,
                max_batch_size=16,
                cache_hit_ratio=0.3,
                request_latency_s=0.040,
                queue_share=0.05,
                histogram=True,
            ),
            Model(
                name="bert",
                instances=(t0,),
                peak_rate=20.0,
                error_ratio=0.02,
                canceled_ratio=0.0,
                batch_size=1.0,
                max_batch_size=0,
                cache_hit_ratio=None,
                request_latency_s=0.120,
                queue_share=0.6,
                histogram=False,
            ),
        ),
        gpus=(
            Gpu(t0.gpu_uuid, t0.triton, 0.45, sidecar=True),
            Gpu(t1.gpu_uuid, t1.triton, 0.30, sidecar=False),
        ),
    )


# --- the series -------------------------------------------------------------------------------
@dataclass
class _Series:
    name: str
    labels: dict[str, str]
    values: np.ndarray

    def line_prefix(self) -> str:
        inner = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        return f"{self.name}{{{inner}}}"


@dataclass
class _Counters:
    """Cumulative counters of one model on one Triton instance."""

    success: np.ndarray
    failure: np.ndarray
    canceled: np.ndarray
    inferences: np.ndarray
    executions: np.ndarray
    hits: np.ndarray | None
    misses: np.ndarray | None
    extra: dict[str, np.ndarray] = field(default_factory=dict)


def _noise(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    return np.clip(1.0 + scale * rng.standard_normal(n), 0.5, 1.5)


def _cumulative(per_step: np.ndarray, restart: int | None = None) -> np.ndarray:
    out = np.floor(np.concatenate(([0.0], np.cumsum(per_step[1:]))))
    if restart is not None:
        out[restart:] -= out[restart]
    return out


def _counters(
    week: Week, model: Model, inst: Instance, rng: np.random.Generator, restarts: bool = True
) -> _Counters:
    """The instance's counters as Triton exposes them (``restarts``) or as the traffic really was."""
    t = week.times()
    restart = None
    if restarts and inst.restart_day is not None:
        restart = int(inst.restart_day * DAY // week.step_s)
    # Requests in each step, at the step's own rate (so 5-minute rates follow the shape closely).
    ok = model.peak_rate * week.shape(t) * week.step_s * _noise(rng, t.size, week.noise)
    failed = ok * model.error_ratio / (1.0 - model.error_ratio)
    canceled = ok * model.canceled_ratio
    hits = ok * model.cache_hit_ratio if model.cache_hit_ratio is not None else None
    executed = ok - hits if hits is not None else ok
    return _Counters(
        success=_cumulative(ok, restart),
        failure=_cumulative(failed, restart),
        canceled=_cumulative(canceled, restart),
        inferences=_cumulative(executed, restart),
        executions=_cumulative(executed / model.batch_size, restart),
        hits=_cumulative(hits, restart) if hits is not None else None,
        misses=_cumulative(executed, restart) if hits is not None else None,
    )


def _norm_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _latency_median(model: Model) -> float:
    # Lognormal whose mean is request_latency_s.
    return model.request_latency_s / math.exp(model.latency_sigma**2 / 2.0)


def _model_series(week: Week, model: Model, rng: np.random.Generator) -> Iterator[_Series]:
    t = week.times()
    for inst in model.instances:
        c = _counters(week, model, inst, rng)
        base = {catalog.MODEL: model.name, catalog.VERSION: model.version, "instance": inst.triton}
        base["job"] = "triton"
        gpu = {**base, catalog.GPU_UUID: inst.gpu_uuid}
        yield _Series(catalog.TRITON_SUCCESS, gpu, c.success)
        yield _Series(catalog.TRITON_FAILURE, {**base, "reason": "OTHER"}, c.failure)
        yield _Series(catalog.TRITON_FAILURE, {**base, "reason": "CANCELED"}, c.canceled)
        yield _Series(catalog.TRITON_INFERENCE_COUNT, gpu, c.inferences)
        yield _Series(catalog.TRITON_EXEC_COUNT, gpu, c.executions)
        request_us = c.success * model.request_latency_s * 1e6
        durations = {
            "request": request_us,
            "queue": request_us * model.queue_share,
            "compute_input": c.inferences * 100.0,
            "compute_infer": request_us * (1 - model.queue_share) * 0.8,
            "compute_output": c.inferences * 50.0,
        }
        for phase in catalog.PHASES:
            yield _Series(catalog.triton_duration(phase), gpu, np.floor(durations[phase]))
        if c.hits is not None and c.misses is not None:
            yield _Series(catalog.TRITON_CACHE_HITS, base, c.hits)
            yield _Series(catalog.TRITON_CACHE_MISSES, base, c.misses)
        side = {catalog.MODEL: model.name, catalog.VERSION: model.version, "instance": inst.sidecar}
        side["job"] = "tritonwatch"
        yield _Series(catalog.MAX_BATCH_SIZE, side, np.full(t.size, float(model.max_batch_size)))
        if model.histogram:
            hist = {**side, catalog.PHASE: "request"}
            mu, sigma = math.log(_latency_median(model)), model.latency_sigma
            for le in (*catalog.DEFAULT_BUCKETS, math.inf):
                share = 1.0 if math.isinf(le) else _norm_cdf((math.log(le) - mu) / sigma)
                label = "+Inf" if math.isinf(le) else repr(le)
                yield _Series(
                    f"{catalog.REQUEST_DURATION}_bucket", {**hist, "le": label}, np.floor(c.success * share)
                )
            yield _Series(f"{catalog.REQUEST_DURATION}_sum", hist, c.success * model.request_latency_s)
            yield _Series(f"{catalog.REQUEST_DURATION}_count", hist, c.success)


def _gpu_series(week: Week, gpu: Gpu, rng: np.random.Generator) -> Iterator[_Series]:
    t = week.times()
    util = np.clip(gpu.peak_utilization * week.shape(t) * _noise(rng, t.size, week.noise), 0.0, 1.0)
    labels = {catalog.GPU_UUID: gpu.uuid, "instance": gpu.instance, "job": "triton"}
    yield _Series(catalog.TRITON_GPU_UTILIZATION, labels, util)
    if gpu.sidecar:
        side = {catalog.GPU_UUID: gpu.uuid, "instance": gpu.instance.replace(":8002", ":9450")}
        yield _Series(catalog.GPU_UTILIZATION, {**side, "job": "tritonwatch"}, util)


def series(week: Week) -> list[_Series]:
    rng = np.random.default_rng(week.seed)
    out: list[_Series] = []
    for m in week.models:
        out.extend(_model_series(week, m, rng))
    for g in week.gpus:
        out.extend(_gpu_series(week, g, rng))
    return out


def write_openmetrics(week: Week, path: Path) -> int:
    """Write the week as OpenMetrics text (families contiguous, each series in time order); returns samples."""
    stamps = [str(int(x)) for x in week.times()]
    by_family: dict[str, list[_Series]] = {}
    for s in series(week):
        family = s.name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
        by_family.setdefault(family, []).append(s)
    n = 0
    with path.open("w") as f:
        for family_series in by_family.values():
            for s in family_series:
                prefix = s.line_prefix()
                values = [f"{v:.17g}" for v in s.values]
                f.write("\n".join(f"{prefix} {v} {ts}" for v, ts in zip(values, stamps, strict=True)))
                f.write("\n")
                n += len(values)
        f.write("# EOF\n")
    return n


# --- the figures the report must find -----------------------------------------------------------
@dataclass(frozen=True)
class ModelTruth:
    requests_total: float
    peak_request_rate: float
    error_ratio: float
    mean_batch_size: float
    cache_hit_ratio: float | None
    p99_latency_seconds: float | None


def _peak_5m(week: Week, cumulative: np.ndarray) -> np.ndarray:
    lag = int(300 // week.step_s)
    return (cumulative[lag:] - cumulative[:-lag]) / 300.0


def truth(week: Week) -> dict[str, ModelTruth]:
    """Per model, the week's figures computed directly from the counters written."""
    rng = np.random.default_rng(week.seed)
    out: dict[str, ModelTruth] = {}
    for m in week.models:
        # The true traffic: a restart loses no request, it only resets what Triton reports.
        per_inst = [_counters(week, m, inst, rng, restarts=False) for inst in m.instances]
        rate = sum(_peak_5m(week, c.success) for c in per_inst)
        succ = sum(c.success[-1] for c in per_inst)
        fail = sum(c.failure[-1] for c in per_inst)
        inf = sum(c.inferences[-1] for c in per_inst)
        exe = sum(c.executions[-1] for c in per_inst)
        hit_ratio = None
        if m.cache_hit_ratio is not None:
            hits = sum(c.hits[-1] for c in per_inst if c.hits is not None)
            misses = sum(c.misses[-1] for c in per_inst if c.misses is not None)
            hit_ratio = float(hits / (hits + misses))
        p99 = None
        if m.histogram:
            p99 = math.exp(math.log(_latency_median(m)) + 2.3263478740 * m.latency_sigma)
        out[m.name] = ModelTruth(
            requests_total=float(succ + fail),
            peak_request_rate=float(np.max(rate)),
            error_ratio=float(fail / (succ + fail)),
            mean_batch_size=float(inf / exe),
            cache_hit_ratio=hit_ratio,
            p99_latency_seconds=p99,
        )
    return out


def weeks_to_reach(week: Week, first_day_peak: float, capacity: float) -> float:
    """Weeks after the week's end until the peak envelope ``first_day_peak * shape`` reaches ``capacity``."""
    day = (capacity / first_day_peak - 1.0) / week.growth_per_day
    return (day - week.days) / 7.0


def main(argv: list[str] | None = None) -> int:
    """``python -m reports.synthetic FILE``: write the default week (ends 2026-11-09T00:00:00Z) to FILE."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m reports.synthetic FILE.om", file=sys.stderr)
        return 2
    n = write_openmetrics(default_week(), Path(args[0]))
    print(
        f"{args[0]}: {n} samples, {default_week().start:%Y-%m-%d} to {default_week().end:%Y-%m-%d}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
