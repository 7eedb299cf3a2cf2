"""One model's advice from a reading: the contract entry of ``tritonwatch advise --format json``.

``{"model", "version", "refusal", "current": {"config", "p99_seconds", "slo_capacity_rps"},
"recommended": {...} | null, "details": {...}}``; ``details`` holds the evidence (read span, requests,
arrival rate, the fit and its error per batch size) and the predictions beyond the contract's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tritonwatch import slo as slo_model
from tritonwatch.errors import TritonwatchError
from tritonwatch.reports.advise import observed, search, simulate
from tritonwatch.reports.advise.observed import Refusal
from tritonwatch.reports.advise.triton import Reading

# Requests carrying batches of their own are not modelled: each simulated request is one item.
MAX_ITEMS_PER_REQUEST = 1.05


def _counter(stats: Mapping[str, Any], key: str, model: str) -> tuple[int, int]:
    infer = stats.get("inference_stats", {}) if stats else {}
    if not isinstance(infer, Mapping):
        raise TritonwatchError(f"model {model!r}: inference_stats: expected an object")
    return observed.pair(infer, key, model, "inference_stats")


def load_now(reading: Reading) -> tuple[float, int]:
    """(requests/s that reached the batcher during the read, how many); Refusal if none or unmodelled."""
    m = reading.model
    if not reading.first:
        raise Refusal("the model was loaded during the read: read again")
    delta = {}
    for key in ("success", "fail", "cache_hit"):
        before, after = _counter(reading.first, key, m)[0], _counter(reading.second, key, m)[0]
        if after < before:
            raise Refusal("the counters went back during the read (model reloaded): read again")
        delta[key] = after - before
    items = observed.integer(
        reading.second.get("inference_count", 0), m, "inference_count"
    ) - observed.integer(reading.first.get("inference_count", 0), m, "inference_count")
    requests = delta["success"] + delta["fail"] - delta["cache_hit"]
    if requests <= 0:
        raise Refusal(
            f"no requests reached the batcher in the {reading.seconds:.1f} s read: no load to tune for"
        )
    if items > requests * MAX_ITEMS_PER_REQUEST:
        raise Refusal(
            f"requests carry {items / requests:.2f} items each on average: the model simulates one item per request"
        )
    return requests / reading.seconds, requests


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


def _raw_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: config[k] for k in ("dynamic_batching", "instance_group") if k in config}


def advise(reading: Reading, slos: slo_model.SLOFile, slo_source: str, max_instances: int) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "model": reading.model,
        "version": reading.version,
        "refusal": None,
        "current": {"config": _raw_config(reading.config), "p99_seconds": None, "slo_capacity_rps": None},
        "recommended": None,
        "details": {"read_seconds": round(reading.seconds, 3)},
    }
    try:
        current = observed.batching(reading.config, reading.model)
        entry["current"]["config"] = current.to_config()
        objective = objective_of(slos, reading.model, slo_source)
        rate, requests = load_now(reading)
        fit = observed.fit(observed.batch_costs(reading.second, reading.model), current.max_batch_size)
    except Refusal as why:
        entry["refusal"] = str(why)
        return entry
    extra = overhead_s(reading.second, reading.model)
    now, best = search.recommend(current, fit, objective, rate, extra, max_instances)
    entry["current"] = _side(now)
    entry["recommended"] = _side(best)
    entry["details"] = {
        "read_seconds": round(reading.seconds, 3),
        "requests_in_read": requests,
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
        "predicted": {
            name: _more(o, fit, objective, extra) for name, o in (("current", now), ("recommended", best))
        },
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
            o.config, worse, objective.threshold_s, objective.quantile, extra
        ),
        "objective_quantile_seconds": o.now.quantile_s,
        "mean_batch": o.now.mean_batch,
        "batch_executions": {str(b): n for b, n in o.now.batch_counts},
        "compute_seconds_per_1000_requests": o.now.compute_s_per_request * 1000,
    }
