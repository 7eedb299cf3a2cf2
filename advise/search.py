"""The recommendation: the candidate configuration with the most SLO-bound capacity.

Candidates vary what the dynamic batcher lets an operator change without touching the model:
``max_queue_delay_microseconds`` (0, the current value, and fractions of the latency threshold),
``preferred_batch_size`` (none, the current list, or one power of two up to ``max_batch_size``) and the
instance count (1 up to ``max_instances``; the current count only, unless the operator allows more:
the statistics cannot show how instances sharing one GPU slow each other; and only for a config with
one instance group). ``max_batch_size`` stays.

A candidate must keep the objective at the load observed now. Among those within ``TIE`` of the best
capacity the advisor prefers fewer instances, then fewer changed settings, then the lower predicted
latency at today's load, so that it never recommends a change for a gain the simulation cannot tell
from noise.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonwatch.advise import simulate
from tritonwatch.advise.observed import Batching, Fit
from tritonwatch.advise.simulate import Objective as Objective  # search.Objective: what callers name it

# Delays tried, as fractions of the latency threshold.
DELAY_FRACTIONS = (0.02, 0.05, 0.1, 0.2, 0.4)
TIE = 0.02


@dataclass(frozen=True)
class Outcome:
    config: Batching
    capacity_rps: float
    now: simulate.Prediction  # at the load observed


def candidates(current: Batching, objective: Objective, max_instances: int) -> list[Batching]:
    delays = {0, current.delay_us} | {round(objective.threshold_s * f * 1e4) * 100 for f in DELAY_FRACTIONS}
    sizes = [p for p in (2, 4, 8, 16, 32, 64, 128, 256) if p < current.max_batch_size]
    prefs = {(), current.preferred, (current.max_batch_size,)} | {(p,) for p in sizes}
    counts: list[int] = [current.instances]
    if max_instances and len(current.groups) <= 1:
        # a group with a gpus list runs its count on each listed GPU: totals in steps of that many
        step = current.groups[0].devices if current.groups else 1
        counts = list(range(step, max(max_instances, current.instances) + 1, step))
    return [current.with_(d, p, k) for k in counts for d in sorted(delays) for p in sorted(prefs)]


def evaluate(
    cfg: Batching, fit: Fit, objective: Objective, rate: float, overhead_s: float, n: int = simulate.REQUESTS
) -> Outcome:
    return Outcome(
        config=cfg,
        capacity_rps=simulate.slo_capacity(
            cfg, fit, objective.threshold_s, objective.quantile, overhead_s, n=n
        ),
        now=simulate.run(cfg, fit, rate, objective.quantile, overhead_s, n),
    )


def _changes(cfg: Batching, current: Batching) -> int:
    return sum((cfg.delay_us != current.delay_us, cfg.preferred != current.preferred))


def recommend(
    current: Batching, fit: Fit, objective: Objective, rate: float, overhead_s: float, max_instances: int
) -> tuple[Outcome, Outcome]:
    """(the current configuration's outcome, the recommended one's); the two are equal for no change.

    Candidates go from the highest maximum throughput down; one that misses the objective at the
    best capacity found so far (less the tie margin) cannot be near the best and is not bisected.
    """
    now = evaluate(current, fit, objective, rate, overhead_s)
    good = [now] if now.now.quantile_s <= objective.threshold_s else []
    best = now.capacity_rps if good else 0.0
    others = [c for c in candidates(current, objective, max_instances) if c != current]
    for cfg in sorted(others, key=lambda c: -simulate.max_throughput(c, fit)):
        at_rate = simulate.run(cfg, fit, rate, objective.quantile, overhead_s)
        if at_rate.quantile_s > objective.threshold_s:
            continue
        floor = best * (1 - TIE)
        if (
            floor > 0
            and simulate.run(cfg, fit, floor, objective.quantile, overhead_s).quantile_s
            > objective.threshold_s
        ):
            continue
        o = Outcome(
            cfg,
            simulate.slo_capacity(cfg, fit, objective.threshold_s, objective.quantile, overhead_s),
            at_rate,
        )
        good.append(o)
        best = max(best, o.capacity_rps)
    if not good:
        # Nothing keeps the objective at today's load: the most capacity is the best there is.
        most = max((c.instances for c in others), default=current.instances)
        widest = [evaluate(c, fit, objective, rate, overhead_s) for c in others if c.instances == most]
        return now, max([now, *widest], key=lambda o: (o.capacity_rps, -o.now.quantile_s))
    if now in good and now.capacity_rps >= best * (1 - TIE):
        return now, now
    # Near the best, a smaller gain is noise: fewer instances, then fewer changes, then lower latency
    # today. A batcher change inside the tie buys no capacity the simulation can show, and where the
    # simulation's knee is sharper than the real one it cannot rank them past it (bench/advise.py
    # measured a queue delay losing there: docs/advise.md).
    near = [o for o in good if o.capacity_rps >= best * (1 - TIE)]
    return now, min(
        near,
        key=lambda o: (
            o.config.instances,
            _changes(o.config, current),
            o.now.quantile_s,
            o.config.delay_us,
            o.config.preferred,
        ),
    )
