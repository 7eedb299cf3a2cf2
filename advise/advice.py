"""One model's advice from a reading: the contract entry of ``tritonwatch advise --format json``.

``{"model", "version", "refusal", "current": {"config", "p99_seconds", "slo_capacity_rps"},
"recommended": {...} | null, "details": {...}}``; ``details`` holds the evidence (read span, requests,
arrival rate, the fit and its error per batch size) and the predictions beyond the contract's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from tritonwatch import modelconfig
from tritonwatch import slo as slo_model
from tritonwatch.advise import observed, search, simulate
from tritonwatch.advise.observed import Refusal
from tritonwatch.advise.triton import Reading
from tritonwatch.errors import TritonwatchError

# Requests carrying batches of their own are not modelled: each simulated request is one item.
MAX_ITEMS_PER_REQUEST = 1.05


@dataclass(frozen=True)
class Observation:
    """What the advisor knows of one model version, from whichever source read it.

    ``--triton`` fills it from two statistics reads, ``--prometheus`` from the series the sidecar and
    Triton export; the advice is a function of this alone, so both sources give the same answer on
    the same figures.
    """

    model: str
    version: str
    config: Mapping[str, Any]  # Triton's model-config JSON (at least the fields ``observed.batching`` reads)
    seconds: float  # how long the load was read over
    requests: int  # that reached the batcher in those seconds (successes + failures - cache hits)
    rate_rps: float  # the load: requests/s that reached the batcher
    items: float  # inferences in those seconds (one item per request is modelled)
    costs: tuple[tuple[int, int, int], ...]  # (batch size, executions, compute ns), since the model loaded
    overhead_s: float  # mean request time outside queue and compute, since the model loaded
    refusal: str | None = None  # the read itself cannot support advice (a reload during it, ...)
    replicas: int = 1  # servers the load was summed over: each gets rate_rps


def _counter(stats: Mapping[str, Any], key: str, model: str) -> tuple[int, int]:
    infer = stats.get("inference_stats", {}) if stats else {}
    if not isinstance(infer, Mapping):
        raise TritonwatchError(f"model {model!r}: inference_stats: expected an object")
    return observed.pair(infer, key, model, "inference_stats")


def from_reading(reading: Reading) -> Observation:
    """The observation of two statistics reads of a live Triton (``--triton``)."""
    m = reading.model

    def refused(why: str) -> Observation:
        return Observation(
            m, reading.version, reading.config, reading.seconds, 0, 0.0, 0.0, (), 0.0, refusal=why
        )

    if not reading.first:
        return refused("the model was loaded during the read: read again")
    delta = {
        key: _counter(reading.second, key, m)[0] - _counter(reading.first, key, m)[0]
        for key in ("success", "fail", "cache_hit")
    }
    if min(delta.values()) < 0:
        return refused("the counters went back during the read (model reloaded): read again")
    items = observed.integer(
        reading.second.get("inference_count", 0), m, "inference_count"
    ) - observed.integer(reading.first.get("inference_count", 0), m, "inference_count")
    requests = delta["success"] + delta["fail"] - delta["cache_hit"]
    return Observation(
        model=m,
        version=reading.version,
        config=reading.config,
        seconds=reading.seconds,
        requests=requests,
        rate_rps=requests / reading.seconds if reading.seconds > 0 else 0.0,
        items=float(items),
        costs=tuple(observed.batch_costs(reading.second, m)),
        overhead_s=overhead_s(reading.second, m),
    )


def load_now(obs: Observation) -> tuple[float, int]:
    """(requests/s that reached the batcher during the read, how many); Refusal if none or unmodelled."""
    if obs.refusal:
        raise Refusal(obs.refusal)
    if obs.requests <= 0 or obs.rate_rps <= 0:
        raise Refusal(f"no requests reached the batcher in the {obs.seconds:.1f} s read: no load to tune for")
    if obs.items > obs.requests * MAX_ITEMS_PER_REQUEST:
        raise Refusal(
            f"requests carry {obs.items / obs.requests:.2f} items each on average: the model simulates one item per request"
        )
    return obs.rate_rps, obs.requests


def overhead_s(stats: Mapping[str, Any], model: str) -> float:
    """Mean request time outside queue and compute (the server's own handling), since the model loaded."""
    success, hit = _counter(stats, "success", model), _counter(stats, "cache_hit", model)
    inner = sum(
        _counter(stats, k, model)[1] for k in ("queue", "compute_input", "compute_infer", "compute_output")
    )
    n = success[0] - hit[0]
    return max(0.0, (success[1] - hit[1] - inner) / n / 1e9) if n > 0 else 0.0


def objective_of(slos: slo_model.SLOFile, model: str, source: str) -> search.Objective:
    s = next((s for s in slos.slos if s.model == model), None)
    if s is None or s.latency is None:
        raise Refusal(f"no latency objective for this model in {source}")
    return search.Objective(s.latency.threshold, float(s.latency.objective) / 100.0)


def advise(reading: Reading, slos: slo_model.SLOFile, slo_source: str, max_instances: int) -> dict[str, Any]:
    """The contract entry for a model read from a live Triton."""
    return advise_observed(from_reading(reading), slos, slo_source, max_instances)


def advise_observed(
    obs: Observation, slos: slo_model.SLOFile, slo_source: str, max_instances: int
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "model": obs.model,
        "version": obs.version,
        "refusal": None,
        "current": {
            "config": modelconfig.tuned_fields(obs.config),
            "p99_seconds": None,
            "slo_capacity_rps": None,
        },
        "recommended": None,
        "details": {"read_seconds": round(obs.seconds, 3)},
    }
    try:
        if not obs.config and obs.refusal:
            raise Refusal(obs.refusal)  # no config to read (--prometheus: the sidecar exports none)
        current = observed.batching(obs.config, obs.model)
        entry["current"]["config"] = current.to_config()
        objective = objective_of(slos, obs.model, slo_source)
        rate, requests = load_now(obs)
        fit = observed.fit(obs.costs, current.max_batch_size)
    except Refusal as why:
        entry["refusal"] = str(why)
        return entry
    extra = obs.overhead_s
    now, best = search.recommend(current, fit, objective, rate, extra, max_instances)
    # The two reported sides again, simulated longer: the search compares candidates on the same
    # arrivals, but the figures printed must not carry one short run's luck (simulate.PRECISE_REQUESTS).
    precise = simulate.PRECISE_REQUESTS
    now_p = search.evaluate(now.config, fit, objective, rate, extra, precise)
    best = now_p if best == now else search.evaluate(best.config, fit, objective, rate, extra, precise)
    now = now_p
    # "Keep as it is": one outcome on both sides, and its pessimistic capacity (seconds of CPU) once.
    current_more = _more(now, fit, objective, extra)
    recommended_more = dict(current_more) if best is now else _more(best, fit, objective, extra)
    entry["current"] = _side(now)
    entry["recommended"] = _side(best)
    entry["details"] = {
        "read_seconds": round(obs.seconds, 3),
        "requests_in_read": requests,
        "replicas": obs.replicas,
        "arrival_rps": rate,
        "objective": {"threshold_seconds": objective.threshold_s, "quantile": objective.quantile},
        # False when no candidate keeps the objective at today's load: the recommendation is then
        # the one with the most capacity
        "keeps_objective_now": best.now.quantile_s <= objective.threshold_s,
        "overhead_seconds": extra,
        "fit": {
            "fixed_seconds": fit.fixed_s,
            "per_item_seconds": fit.per_item_s,
            "fixed_stderr_seconds": fit.fixed_se,
            "per_item_stderr_seconds": fit.per_item_se,
            "rms_relative_error": fit.rms_relative_error,
            "batch_sizes": [
                {
                    "batch_size": c.batch_size,
                    "executions": c.executions,
                    "mean_seconds": c.mean_s,
                    "fitted_seconds": fit.compute_s(c.batch_size),
                }
                for c in fit.costs
            ],
        },
        "predicted": {"current": current_more, "recommended": recommended_more},
    }
    return entry


def _side(o: search.Outcome) -> dict[str, Any]:
    return {"config": o.config.to_config(), "p99_seconds": o.now.p99_s, "slo_capacity_rps": o.capacity_rps}


# The capacity again with both coefficients this many standard errors higher: what the prediction
# is worth if the line is as steep and as high as the data allow.
PESSIMISTIC_SE = 2.0


def _more(o: search.Outcome, fit: observed.Fit, objective: search.Objective, extra: float) -> dict[str, Any]:
    worse = replace(
        fit,
        fixed_s=fit.fixed_s + PESSIMISTIC_SE * fit.fixed_se,
        per_item_s=fit.per_item_s + PESSIMISTIC_SE * fit.per_item_se,
    )
    return {
        "slo_capacity_rps_pessimistic": simulate.slo_capacity(
            o.config, worse, objective.threshold_s, objective.quantile, extra, n=simulate.PRECISE_REQUESTS
        ),
        "objective_quantile_seconds": o.now.quantile_s,
        "mean_batch": o.now.mean_batch,
        "batch_executions": {str(b): n for b, n in o.now.batch_counts},
        "compute_seconds_per_1000_requests": o.now.compute_s_per_request * 1000,
    }
