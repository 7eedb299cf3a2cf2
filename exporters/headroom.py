"""SLO-bound headroom (``--slo FILE``): how many requests/s each model can take before its latency
objective breaks, with the configuration it runs now (docs/headroom.md). Emits

    tritonwatch_model_capacity_requests_per_second{model,version}     the estimate; absent when refused
    tritonwatch_model_capacity_info{model,version,state,batch_sizes}  1; state estimated or the reason
    tritonwatch_model_capacity_basis_executions{model,version}        executions behind the fit
    tritonwatch_model_capacity_fit_error_ratio{model,version}         the fit's RMS relative error
    tritonwatch_model_capacity_refusals_total{model,version,reason}   refused estimates, by reason
    tritonwatch_model_latency_objective_seconds{model,quantile}       the objective it is bound by
    tritonwatch_slo_reload_failures_total, tritonwatch_slo_last_reload_successful

The SLO file is read again before each refresh (``SloWatch``): a changed file (a ConfigMap update, where
Kubernetes swaps the mounted ``..data`` link) takes effect without a restart; one that does not load
is counted and the last good one stays in use.

Each refresh (``--headroom-interval``, default 30 s, in this part's own thread: never on a scrape's
time) takes, for every model version with a latency objective in the SLO file, what the sidecar
already reads: the config (``ApiState.batching``, exporters/batching.py), ``batch_stats`` since the
model loaded (``ApiState.batch_stats``) and Triton's cumulative duration counters (the overhead
outside queue and compute, from the last /metrics scrape). It fits compute = a + b x batch and
bisects the advise simulation of the dynamic batcher (``exporters/advise_model.py``) for the highest
Poisson rate whose objective quantile stays within the threshold. A reload shows as a new config or
as ``batch_stats`` starting again: the next refresh estimates from those alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch import slo as slo_model
from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.exporters import advise_model as advise
from tritonwatch.exporters.context import PartContext
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.snapshot import TritonSnapshot
from tritonwatch.exporters.source import Source
from tritonwatch.exporters.triton import ApiState, BatchStat
from tritonwatch.exporters.window import ModelKey, model_key

log = logging.getLogger(__name__)

# Simulated requests per bisection step: the same seed every time (common random numbers), so an
# unchanged fit gives the same capacity; 20,000 put the knee within about ±3 % of the seed-free value
# (docs/advise.md measured ±4-5 % at 5,500 and ±2 % at 40,000) for ~0.1 s of CPU per model per refresh.
SIMULATED_REQUESTS = 20000
Objective = advise.Objective  # the latency objective a capacity is bound by, as advise judges it


@dataclass(frozen=True)
class Estimate:
    """One model version's answer: a capacity, or the reason there is none."""

    state: str  # catalog.CAPACITY_ESTIMATED or a key of catalog.CAPACITY_REFUSAL_REASONS
    capacity_rps: float | None = None
    batch_sizes: tuple[int, ...] = ()
    executions: int = 0
    fit_error: float | None = None


def objectives(slos: slo_model.SLOFile) -> dict[str, Objective]:
    """Per model: the latency objective (threshold, quantile) the capacity is bound by."""
    return {
        s.model: Objective(s.latency.threshold, float(s.latency.objective) / 100.0)
        for s in slos.slos
        if s.latency is not None
    }


def objective_labels(slos: slo_model.SLOFile) -> dict[str, tuple[str, float]]:
    """Per model: the quantile label and threshold (s) of its latency objective, as CAPACITY_OBJECTIVE."""
    return {
        s.model: (catalog.objective_quantile(s.latency.objective), s.latency.threshold)
        for s in slos.slos
        if s.latency is not None
    }


class SloWatch:
    """The SLO file (``--slo``), read again on every ``poll()``: its objectives as of the last good read.

    Compared by content, not by time: a ConfigMap update replaces the file through a link, whose own
    times say nothing. A change that does not load (bad YAML, an invalid field, unreadable) is counted
    and logged once; the objectives in use stay those of the last good file.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.slos = _load(path)
        self.digest = _digest(path)
        self.failures = 0
        self.ok = True

    def poll(self) -> slo_model.SLOFile:
        digest = _digest(self.path)
        if digest == self.digest:
            return self.slos
        self.digest = digest
        try:
            slos = _load(self.path)
        except UsageError as exc:
            self.failures += 1
            self.ok = False
            log.warning("SLO file changed but does not load, keeping the last good one: %s", exc)
            return self.slos
        self.slos, self.ok = slos, True
        log.info("SLO file %s reloaded: %d model(s)", self.path, len(slos.slos))
        return slos


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _load(path: str) -> slo_model.SLOFile:
    try:
        return slo_model.load(path)
    except TritonwatchError as exc:
        raise UsageError(f"--slo: {exc}") from None


def _refusal_state(message: str) -> str:
    # observed.batching() says why in words; the counter needs the reason as a label value.
    for needle, state in (
        ("ensemble", "ensemble"),
        ("sequence batcher", "sequence_batcher"),
        ("max_batch_size is 0", "no_dynamic_batching"),
        ("no dynamic_batching", "no_dynamic_batching"),
    ):
        if needle in message:
            return state
    return "unmodelled"


def estimate(
    model: str,
    config_json: str | None,
    stats: Mapping[int, BatchStat] | None,
    objective: Objective,
    overhead_s: float,
) -> Estimate:
    """The SLO-bound capacity of ``model`` from what the sidecar read of it (pure: tests call it)."""
    if config_json is None:
        return Estimate("no_config")
    try:
        cfg = advise.batching(json.loads(config_json), model)
    except advise.Refusal as exc:
        return Estimate(_refusal_state(str(exc)))
    except (TritonwatchError, ValueError):
        return Estimate("unmodelled")
    costs = [
        (size, int(s.executions), int(round(s.compute_seconds * 1e9)))
        for size, s in sorted((stats or {}).items())
        if s.executions > 0
    ]
    executions = sum(n for _, n, _ in costs)
    if len(costs) == 1:
        return Estimate("single_batch_size", batch_sizes=(costs[0][0],), executions=executions)
    try:
        fit = advise.fit(costs, cfg.max_batch_size)
    except advise.Refusal as exc:
        state = "too_little_data" if "too few batch sizes" in str(exc) else "bad_fit"
        return Estimate(state, batch_sizes=tuple(b for b, _, _ in costs), executions=executions)
    except ArithmeticError:  # sizes that took no time at all: no relative error, no line
        return Estimate("bad_fit", batch_sizes=tuple(b for b, _, _ in costs), executions=executions)
    if fit.compute_s(1) <= 0:  # no time at all per execution: nothing bounds the rate
        return Estimate("bad_fit", batch_sizes=tuple(b for b, _, _ in costs), executions=executions)
    capacity = advise.slo_capacity(
        cfg, fit, objective.threshold_s, objective.quantile, overhead_s, n=SIMULATED_REQUESTS
    )
    return Estimate(
        catalog.CAPACITY_ESTIMATED,
        capacity,
        tuple(c.batch_size for c in fit.costs),
        sum(c.executions for c in fit.costs),
        fit.rms_relative_error,
    )


_PHASES_INSIDE = ("queue", "compute_input", "compute_infer", "compute_output")


def overheads(snapshot: TritonSnapshot | None) -> dict[ModelKey, float]:
    """Per model version: mean request time outside queue and compute since it loaded (Triton's
    cumulative duration counters, µs), the server's own handling that every request adds."""
    if snapshot is None or not snapshot.up:
        return {}
    samples = snapshot.samples

    def totals(family: str) -> dict[ModelKey, float]:
        out: dict[ModelKey, float] = {}
        for labels, v in samples.get(family, {}).items():
            if (k := model_key(labels)) is not None:
                out[k] = out.get(k, 0.0) + v
        return out

    success = totals(catalog.TRITON_SUCCESS)
    request = totals(catalog.triton_duration("request"))
    inside = [totals(catalog.triton_duration(p)) for p in _PHASES_INSIDE]
    out = {}
    for k, n in success.items():
        if n > 0 and k in request:
            rest = request[k] - sum(t.get(k, 0.0) for t in inside)
            out[k] = max(0.0, rest / n / 1e6)
    return out


class Headroom(Source):
    """Refreshes every model's estimate on its own thread; ``collect()`` serves the last one."""

    target = "headroom"

    def __init__(
        self,
        objectives: Mapping[str, Objective],
        api_state: Callable[[], ApiState],
        snapshot: Callable[[], TritonSnapshot | None],
        interval: float,
        clock: Callable[[], float] = time.time,
        watch: SloWatch | None = None,
    ) -> None:
        super().__init__(interval, clock)
        self.objectives = dict(objectives)
        self.watch = watch
        self.objective_labels: dict[str, tuple[str, float]] = (
            objective_labels(watch.slos) if watch is not None else {}
        )
        self.api_state = api_state
        self.snapshot = snapshot
        self._lock = threading.Lock()
        self.estimates: dict[ModelKey, Estimate] = {}
        self.refusals: dict[tuple[ModelKey, str], int] = {}
        self.cpu_seconds = 0.0  # spent estimating since start (bench/headroom.py reads it)
        self.refreshed_at: float | None = None
        # Per model version: the inputs of its last estimate and that estimate. The simulation is seeded,
        # so the same inputs give the same answer: an idle model's (nothing new in its stats or counters)
        # is not simulated again. Touched by the refresh thread only.
        self._last: dict[ModelKey, tuple[tuple[object, ...], Estimate]] = {}

    def scrape(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        start = time.thread_time()
        if self.watch is not None:
            slos = self.watch.poll()
            with self._lock:
                self.objectives = objectives(slos)
                self.objective_labels = objective_labels(slos)
        state = self.api_state()
        over = overheads(self.snapshot())
        keys = sorted({*state.batch_stats, *(k for k, ready in state.ready.items() if ready)})
        found: dict[ModelKey, Estimate] = {}
        last: dict[ModelKey, tuple[tuple[object, ...], Estimate]] = {}
        for key in keys:
            objective = self.objectives.get(key[0])
            if objective is None:
                continue  # no latency objective: nothing to bound a capacity by
            config, stats, overhead = (
                state.batching.get(key[0]),
                state.batch_stats.get(key),
                over.get(key, 0.0),
            )
            inputs = (config, tuple(sorted((stats or {}).items())), objective, overhead)
            before = self._last.get(key)
            if before is not None and before[0] == inputs:
                found[key] = before[1]
            else:
                found[key] = estimate(key[0], config, stats, objective, overhead)
            last[key] = (inputs, found[key])
        self._last = last
        with self._lock:
            self.estimates = found
            for key, e in found.items():
                if e.capacity_rps is None:
                    self.refusals[(key, e.state)] = self.refusals.get((key, e.state), 0) + 1
            self.refreshed_at = self.clock()
            self.cpu_seconds += time.thread_time() - start

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            estimates, refusals = dict(self.estimates), dict(self.refusals)
            objective_series = dict(self.objective_labels)
        mv = [catalog.MODEL, catalog.VERSION]
        capacity = GaugeMetricFamily(catalog.CAPACITY, catalog.CAPACITY_HELP, labels=mv)
        info = GaugeMetricFamily(
            catalog.CAPACITY_INFO,
            catalog.CAPACITY_INFO_HELP,
            labels=[*mv, catalog.CAPACITY_STATE, catalog.CAPACITY_BATCH_SIZES],
        )
        basis = GaugeMetricFamily(catalog.CAPACITY_SAMPLES, catalog.CAPACITY_SAMPLES_HELP, labels=mv)
        error = GaugeMetricFamily(catalog.CAPACITY_FIT_ERROR, catalog.CAPACITY_FIT_ERROR_HELP, labels=mv)
        refused = CounterMetricFamily(
            catalog.CAPACITY_REFUSALS_TOTAL, catalog.CAPACITY_REFUSALS_HELP, labels=[*mv, catalog.REASON]
        )
        for (model, version), e in sorted(estimates.items()):
            sizes = ",".join(str(b) for b in e.batch_sizes)
            info.add_metric([model, version, e.state, sizes], 1.0)
            basis.add_metric([model, version], float(e.executions))
            if e.capacity_rps is not None:
                capacity.add_metric([model, version], e.capacity_rps)
            if e.fit_error is not None:
                error.add_metric([model, version], e.fit_error)
        for ((model, version), reason), n in sorted(refusals.items()):
            refused.add_metric([model, version, reason], float(n))
        yield from (capacity, info, basis, error, refused)
        bound = GaugeMetricFamily(
            catalog.CAPACITY_OBJECTIVE,
            catalog.CAPACITY_OBJECTIVE_HELP,
            labels=[catalog.MODEL, catalog.QUANTILE],
        )
        for model, (quantile, threshold) in sorted(objective_series.items()):
            bound.add_metric([model, quantile], threshold)
        yield bound
        if self.watch is not None:
            yield CounterMetricFamily(
                catalog.SLO_RELOAD_FAILURES_TOTAL, catalog.SLO_RELOAD_FAILURES_HELP, value=self.watch.failures
            )
            yield GaugeMetricFamily(
                catalog.SLO_RELOAD_SUCCESS,
                catalog.SLO_RELOAD_SUCCESS_HELP,
                value=1.0 if self.watch.ok else 0.0,
            )


class _View(Part):
    """The collector sees the estimates only: headroom is not a scrape target of ``tritonwatch_up``."""

    def __init__(self, headroom: Headroom) -> None:
        self.headroom = headroom

    def collect(self) -> Iterator[Metric]:
        return self.headroom.collect()


def load_objectives(path: str) -> dict[str, Objective]:
    try:
        slos = slo_model.load(path)
    except TritonwatchError as exc:
        raise UsageError(f"--slo: {exc}") from None
    return objectives(slos)


def make_part(context: PartContext) -> list[tuple[Part, Source | None]]:
    cfg = context.config
    if not cfg.slo:
        return []
    watch = SloWatch(cfg.slo)
    headroom = Headroom(
        objectives(watch.slos),
        context.api_state,
        lambda: context.snapshots.latest,
        cfg.headroom_interval,
        watch=watch,
    )
    return [(_View(headroom), headroom)]
