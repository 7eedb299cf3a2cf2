"""A synthetic week of Triton, sidecar and GPU series with known figures, in OpenMetrics text.

Used by the report's tests (backfilled into a real Prometheus with ``promtool tsdb
create-blocks-from openmetrics``) and handy for trying the report without a fleet; a test fixture, so
it lives with the tests and the wheel does not ship it (run it from a checkout). Every series is
sampled every ``step_s`` seconds; traffic follows a daily cycle (peak at 14:00 UTC, trough at a fifth of
it), optionally lower at weekends (``weekend``), and grows by ``growth_per_day`` each day: linearly (of the
first day's level) or compounding (``compound``), so the weekday peaks lie on a known curve. A model
with a ``knee_rate`` has a latency that rises sharply once its request rate passes that rate. The file
holds, per Triton instance and model::

    nv_inference_request_success{model,version,instance,job,gpu_uuid}
    nv_inference_request_failure{model,version,instance,job,reason="OTHER"|"CANCELED"}
    nv_inference_count / nv_inference_exec_count / nv_inference_<phase>_duration_us{...,gpu_uuid}
    nv_cache_num_hits_per_model / nv_cache_num_misses_per_model   (models with the cache on)
    tritonwatch_model_max_batch_size{model,version,instance}      (the sidecar)
    tritonwatch_request_duration_seconds_bucket{model,version,phase="request",le}  (+ _sum, _count)
    nv_gpu_utilization{gpu_uuid,instance} and, where the sidecar runs, tritonwatch_gpu_utilization_ratio
    nv_energy_consumption{gpu_uuid,instance}   (J, power = idle + (max - idle) * utilisation)

One Triton restarts mid-week (its counters, and its sidecar's, start again from 0), as after a crash or
an upgrade. ``truth()`` recomputes the figures the report must find from the same per-step traffic,
without the reset: a reset-aware report loses at most the one step around the restart.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from statistics import NormalDist

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
    # Past this request rate (req/s, all instances together) the median latency grows as
    # (rate / knee_rate) ** knee_exponent: the model is overloaded. None: latency does not depend on load.
    knee_rate: float | None = None
    knee_exponent: float = 8.0


@dataclass(frozen=True)
class Gpu:
    uuid: str
    instance: str
    peak_utilization: float  # at the first day's daily peak
    sidecar: bool  # also exported as tritonwatch_gpu_utilization_ratio
    idle_watts: float = 60.0
    max_watts: float = 300.0


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
    compound: bool = False  # growth compounds: (1 + growth_per_day) ** days instead of 1 + growth * days
    weekend: float = 1.0  # Saturday's and Sunday's traffic as a share of a weekday's

    @property
    def end(self) -> datetime:
        return self.start + timedelta(days=self.days)

    def times(self) -> np.ndarray:
        t0 = self.start.timestamp()
        return t0 + np.arange(0, self.days * DAY + 1, self.step_s, dtype=np.float64)

    def growth(self, days: np.ndarray | float) -> np.ndarray | float:
        """The weekday peak after ``days`` relative to the first day's: the envelope a forecast must find."""
        if self.compound:
            return (1.0 + self.growth_per_day) ** days
        return 1.0 + self.growth_per_day * days

    def shape(self, t: np.ndarray) -> np.ndarray:
        """Traffic relative to the first day's peak: daily cycle, weekly cycle, growth."""
        days = (t - self.start.timestamp()) / DAY
        hour = (t % DAY) / 3600.0
        amp = (1.0 - self.trough) / 2.0
        daily = 1.0 - amp + amp * np.cos(2 * math.pi * (hour - self.peak_hour) / 24.0)
        # 1970-01-01 was a Thursday: day 2 and 3 of each 7 since then are Saturday and Sunday.
        weekday = np.floor(t / DAY + 3) % 7
        weekly = np.where(weekday >= 5, self.weekend, 1.0)
        return daily * weekly * self.growth(days)


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


def forecast_weeks(end: datetime | None = None, days: int = 14) -> list[Week]:
    """The forecast's test bed: one model and one GPU per week, each week its own growth law, all
    with quiet weekends (80 %), ending together; plus a flat week whose latency rises sharply past a
    known request rate (``knee``, 60 req/s: its SLO-bound capacity is ``slo_capacity``).

    ======== ============================================ ============================
    model    traffic                                      GPU peak on the first day
    ======== ============================================ ============================
    linear   grows 5 % of the first day's peak a day      40 %
    compound grows 5 % a day, compounding                 30 %
    flat     no growth                                    50 %
    falling  falls 3 % of the first day's peak a day      60 %
    knee     no growth, 20-100 req/s, knee at 60 req/s    50 %
    ======== ============================================ ============================
    """
    end = end or datetime(2026, 11, 9, tzinfo=timezone.utc)
    start = end - timedelta(days=days)
    laws = {
        "linear": (0.05, False, 0.40),
        "compound": (0.05, True, 0.30),
        "flat": (0.0, False, 0.50),
        "falling": (-0.03, False, 0.60),
        "knee": (0.0, False, 0.50),
    }
    out = []
    for i, (name, (growth, compound, util)) in enumerate(laws.items()):
        inst = Instance(
            f"triton-{name}:8002", f"triton-{name}:9450", f"GPU-{i:08d}-0000-0000-0000-{name:0>12}"
        )
        knee = name == "knee"
        model = Model(
            name=name,
            instances=(inst,),
            peak_rate=100.0 if knee else 50.0,
            error_ratio=0.001,
            canceled_ratio=0.0,
            batch_size=2.0,
            max_batch_size=8,
            cache_hit_ratio=None,
            request_latency_s=0.03,
            # Off the batching-delay finding's 10 % edge: a share on it fired or not with the last
            # digit of an extrapolated increase (it did on Prometheus 2.42, not on 3.16).
            queue_share=0.2,
            histogram=knee,
            latency_sigma=0.3,
            knee_rate=60.0 if knee else None,
        )
        out.append(
            Week(
                start=start,
                models=(model,),
                gpus=(Gpu(inst.gpu_uuid, inst.triton, util, sidecar=False),),
                days=days,
                step_s=120,
                growth_per_day=growth,
                compound=compound,
                noise=0.01,
                seed=11 + i,
                weekend=0.8,
            )
        )
    return out


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
    # Every successful request is a cache lookup; the misses execute (the catalog entry's inverse).
    lookups = None
    if model.cache_hit_ratio is not None:
        lookups = catalog.signal(catalog.CACHE_HIT_RATIO).inverse(model.cache_hit_ratio, ok)
    hits = lookups[catalog.TRITON_CACHE_HITS] if lookups is not None else None
    executed = lookups[catalog.TRITON_CACHE_MISSES] if lookups is not None else ok
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


def model_series(week: Week, model: Model, rng: np.random.Generator) -> Iterator[_Series]:
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
        queued = catalog.signal(catalog.QUEUE_TIME_RATIO).inverse(model.queue_share, request_us)
        durations = {
            "request": queued[catalog.triton_duration("request")],
            "queue": queued[catalog.triton_duration("queue")],
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
            yield from _histogram(week, model, inst, side, c.success)


def median_latency(model: Model, rate: np.ndarray) -> np.ndarray:
    """Median request latency at each request rate (req/s, the model's total across instances)."""
    m0 = _latency_median(model)
    if model.knee_rate is None:
        return np.full(np.shape(rate), m0)
    over = np.maximum(np.asarray(rate, dtype=np.float64) / model.knee_rate, 1.0)
    return m0 * over**model.knee_exponent


def _histogram(
    week: Week, model: Model, inst: Instance, side: dict[str, str], success: np.ndarray
) -> Iterator[_Series]:
    """The sidecar's request-duration histogram: lognormal latency around ``median_latency``."""
    hist = {**side, catalog.PHASE: "request"}
    sigma = model.latency_sigma
    if model.knee_rate is None:
        # Load-independent: every bucket is a fixed share of the requests.
        mu = math.log(_latency_median(model))
        for le in (*catalog.DEFAULT_BUCKETS, math.inf):
            share = 1.0 if math.isinf(le) else _norm_cdf((math.log(le) - mu) / sigma)
            label = "+Inf" if math.isinf(le) else repr(le)
            yield _Series(
                f"{catalog.REQUEST_DURATION}_bucket", {**hist, "le": label}, np.floor(success * share)
            )
        yield _Series(f"{catalog.REQUEST_DURATION}_sum", hist, success * model.request_latency_s)
        yield _Series(f"{catalog.REQUEST_DURATION}_count", hist, success)
        return
    if inst.restart_day is not None:
        raise ValueError(f"{model.name}: a model with a knee_rate cannot restart (restart_day)")
    # Each step's requests at that step's latency, which depends on the model's offered load.
    per_step = np.diff(success, prepend=0.0)
    rate = model.peak_rate * len(model.instances) * week.shape(week.times())
    mu = np.log(median_latency(model, rate))
    for le in (*catalog.DEFAULT_BUCKETS, math.inf):
        shares = np.ones_like(mu) if math.isinf(le) else _norm_cdf_array((math.log(le) - mu) / sigma)
        label = "+Inf" if math.isinf(le) else repr(le)
        yield _Series(
            f"{catalog.REQUEST_DURATION}_bucket",
            {**hist, "le": label},
            np.floor(np.cumsum(per_step * shares)),
        )
    mean = np.exp(mu + sigma**2 / 2.0)
    yield _Series(f"{catalog.REQUEST_DURATION}_sum", hist, np.cumsum(per_step * mean))
    yield _Series(f"{catalog.REQUEST_DURATION}_count", hist, success)


def _norm_cdf_array(x: np.ndarray) -> np.ndarray:
    from scipy.special import ndtr

    return np.asarray(ndtr(x), dtype=np.float64)


def gpu_series(week: Week, gpu: Gpu, rng: np.random.Generator) -> Iterator[_Series]:
    t = week.times()
    util = np.clip(gpu.peak_utilization * week.shape(t) * _noise(rng, t.size, week.noise), 0.0, 1.0)
    labels = {catalog.GPU_UUID: gpu.uuid, "instance": gpu.instance, "job": "triton"}
    yield _Series(catalog.TRITON_GPU_UTILIZATION, labels, util)
    if gpu.sidecar:
        side = {catalog.GPU_UUID: gpu.uuid, "instance": gpu.instance.replace(":8002", ":9450")}
        yield _Series(catalog.GPU_UTILIZATION, {**side, "job": "tritonwatch"}, util)
    yield _Series(catalog.TRITON_ENERGY, labels, energy_joules(week, gpu, util))


def gpu_watts(gpu: Gpu, util: np.ndarray) -> np.ndarray:
    return gpu.idle_watts + (gpu.max_watts - gpu.idle_watts) * util


def energy_joules(week: Week, gpu: Gpu, util: np.ndarray) -> np.ndarray:
    """Triton's energy counter (J since start): each step's power times the step."""
    return _cumulative(gpu_watts(gpu, util) * week.step_s)


def series(week: Week) -> list[_Series]:
    rng = np.random.default_rng(week.seed)
    out: list[_Series] = []
    for m in week.models:
        out.extend(model_series(week, m, rng))
    for g in week.gpus:
        out.extend(gpu_series(week, g, rng))
    return out


def write_openmetrics(weeks: Week | Sequence[Week], path: Path) -> int:
    """Write one or more weeks (distinct models and GPUs each) as OpenMetrics text, families
    contiguous and each series in time order; returns the number of samples."""
    by_family: dict[str, list[tuple[_Series, list[str]]]] = {}
    for week in [weeks] if isinstance(weeks, Week) else weeks:
        stamps = [str(int(x)) for x in week.times()]
        for s in series(week):
            family = s.name.removesuffix("_bucket").removesuffix("_sum").removesuffix("_count")
            by_family.setdefault(family, []).append((s, stamps))
    n = 0
    with path.open("w") as f:
        for family_series in by_family.values():
            for s, stamps in family_series:
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
    # Over the whole steps in 5 minutes (a 120 s step: 240 s), not over 300 s.
    return (cumulative[lag:] - cumulative[:-lag]) / (lag * week.step_s)


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
    """Weeks after the week's end until the weekday peak envelope ``first_day_peak * growth`` reaches
    ``capacity`` (the envelope is continuous: weekday peaks lie on it)."""
    if week.compound:
        day = math.log(capacity / first_day_peak) / math.log1p(week.growth_per_day)
    else:
        day = (capacity / first_day_peak - 1.0) / week.growth_per_day
    return (day - week.days) / 7.0


def slo_capacity(model: Model, threshold: float, objective: float) -> float:
    """The request rate at which the share of requests within ``threshold`` falls to ``objective``
    (a ratio, e.g. 0.99): where the lognormal's ``objective`` quantile reaches the threshold."""
    if model.knee_rate is None:
        raise ValueError(f"{model.name}: no knee_rate, latency does not depend on load")
    z = NormalDist().inv_cdf(objective)
    median_at_limit = math.exp(math.log(threshold) - z * model.latency_sigma)
    ratio = median_at_limit / _latency_median(model)
    if ratio <= 1.0:
        raise ValueError(f"{model.name}: the objective is missed at any load")
    return model.knee_rate * ratio ** (1.0 / model.knee_exponent)


def main(argv: list[str] | None = None) -> int:
    """``python tests/support/synthetic.py [--forecast] FILE``: write the default week, or with
    ``--forecast`` the forecast weeks (both end 2026-11-09T00:00:00Z), to FILE."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    forecast = "--forecast" in args
    files = [a for a in args if a != "--forecast"]
    if len(files) != 1 or any(a.startswith("-") for a in files):
        print("usage: python tests/support/synthetic.py [--forecast] FILE.om", file=sys.stderr)
        return 2
    weeks = forecast_weeks() if forecast else [default_week()]
    n = write_openmetrics(weeks, Path(files[0]))
    print(f"{files[0]}: {n} samples, {weeks[0].start:%Y-%m-%d} to {weeks[0].end:%Y-%m-%d}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
