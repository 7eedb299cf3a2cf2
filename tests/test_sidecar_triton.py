"""The sidecar against the real local Triton: derived values equal Triton's own statistics API exactly.

Both sides are read over the same two snapshots: Triton is quiet (no request in flight, two reads of
its statistics alike and equal to its /metrics), the statistics API is read and the sidecar has
scraped that state; load runs (with cache hits and failures); Triton is quiet again, both are read
again. The sidecar's clock is held at 0 s until the load is over and then set to 100 s, so its window
spans exactly 100 s from the first snapshot to the second: its rate is the statistics API's increase
/ 100 s, exactly. Counts and ratios of counts are exact; mean latencies are bounded exactly (Triton's
/metrics counters take each request's duration in whole microseconds, the statistics API in ns).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
import support.clocked

from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse
from tritonwatch.local.load import LoadDriver
from tritonwatch.local.procs import wait_until

MODEL = "fraud_detector"
SPAN = 100.0  # the sidecar's fake clock: 0 s at the first snapshot, SPAN at the second
PHASES = {  # our phase -> the statistics API's duration pair
    "request": "success",
    "queue": "queue",
    "compute_input": "compute_input",
    "compute_infer": "compute_infer",
    "compute_output": "compute_output",
}


def model_value(values: Samples, name: str, **labels: str) -> float | None:
    want = {"model": MODEL, "version": "1", **labels}
    for labelset, v in values.get(name, {}).items():
        if dict(labelset) == want:
            return float(v)
    return None


def up(values: Samples, target: str) -> float | None:
    return values.get(catalog.UP, {}).get(((catalog.TARGET, target),))


@dataclass(frozen=True)
class Stats:
    """One model's cumulative statistics (counts and ns) as the statistics API gives them."""

    count: dict[str, int]  # pair name -> count
    ns: dict[str, int]  # pair name -> ns
    inferences: int
    executions: int
    batches: dict[str, int]  # batch size -> executions

    @classmethod
    def read(cls, base: str) -> Stats:
        s = requests.get(f"{base}/v2/models/{MODEL}/stats", timeout=5).json()["model_stats"][0]
        pairs = s["inference_stats"]
        return cls(
            {k: int(v["count"]) for k, v in pairs.items()},
            {k: int(v["ns"]) for k, v in pairs.items()},
            int(s["inference_count"]),
            int(s["execution_count"]),
            {str(b["batch_size"]): int(b["compute_infer"]["count"]) for b in s["batch_stats"]},
        )

    def minus(self, before: Stats) -> Stats:
        return Stats(
            {k: v - before.count.get(k, 0) for k, v in self.count.items()},
            {k: v - before.ns.get(k, 0) for k, v in self.ns.items()},
            self.inferences - before.inferences,
            self.executions - before.executions,
            {k: v - before.batches.get(k, 0) for k, v in self.batches.items()},
        )

    def plus(self, other: Stats) -> Stats:
        keys = set(self.batches) | set(other.batches)
        return Stats(
            {k: v + other.count.get(k, 0) for k, v in self.count.items()},
            {k: v + other.ns.get(k, 0) for k, v in self.ns.items()},
            self.inferences + other.inferences,
            self.executions + other.executions,
            {k: self.batches.get(k, 0) + other.batches.get(k, 0) for k in keys},
        )


def triton_successes(samples: Samples) -> float:
    return sum(
        v for ls, v in samples.get(catalog.TRITON_SUCCESS, {}).items() if dict(ls).get("model") == MODEL
    )


def quiet_stats(triton: Any) -> Stats:
    """The statistics once Triton is quiet: two reads alike, and its /metrics saying the same."""
    got: list[Stats] = []

    def settled() -> bool:
        first = Stats.read(triton.http_url)
        metrics = parse(requests.get(triton.metrics_url, timeout=5).text, catalog.TRITON_FAMILIES)
        second = Stats.read(triton.http_url)
        got[:] = [second]
        return first == second and triton_successes(metrics) == second.count["success"]

    wait_until(settled, 30, "Triton to be quiet (statistics and /metrics at rest and alike)", interval=0.1)
    return got[0]


class Clocked(support.clocked.Clocked):
    """A sidecar on the real Triton whose clock the test sets (SPAN-second window from snapshot to snapshot)."""

    def __init__(self, triton: Any) -> None:
        super().__init__(triton, triton_successes)

    def seen(self, want: object) -> Samples:
        """Wait until the sidecar has scraped the state ``want`` (a ``Stats``) was read in, then read it."""
        assert isinstance(want, Stats)
        return super().seen(want.count["success"])


@pytest.fixture
def clocked(triton: Any) -> Iterator[Clocked]:
    c = Clocked(triton)
    try:
        yield c
    finally:
        c.sidecar.stop()


def load(triton: Any, seconds: float) -> None:
    # 8 clients, each sends every fresh input once and repeats it three times (cache hits), 5% with
    # a NaN input the model refuses (real failures). A fresh seed per run: no hits on older inputs.
    stats = LoadDriver(triton.http_url, model=MODEL, concurrency=8, repeat=3, error_ratio=0.05).run(seconds)
    assert stats.ok > 100 and stats.errors > 0, stats


def assert_equal_to_statistics(values: Samples, d: Stats) -> None:
    """The sidecar's derived values against the statistics API's increases ``d`` over SPAN seconds."""
    success, fail = d.count["success"], d.count["fail"]
    hits, misses = d.count["cache_hit"], d.count["cache_miss"]
    assert model_value(values, catalog.REQUEST_RATE) == success / SPAN
    assert model_value(values, catalog.ERROR_RATIO) == fail / (success + fail)
    assert model_value(values, catalog.BATCH_SIZE_MEAN) == d.inferences / d.executions
    assert model_value(values, catalog.BATCH_EFFICIENCY) == d.inferences / d.executions / 64
    assert model_value(values, catalog.CACHE_HIT_RATIO) == hits / (hits + misses)
    assert d.count["compute_infer"] == success - hits  # what the sidecar divides compute time by
    for phase, pair in PHASES.items():
        mean_ns = d.ns[pair] / d.count[pair]
        got = model_value(values, catalog.LATENCY, phase=phase)
        assert got is not None, phase
        # /metrics adds each request's duration truncated to whole microseconds: the sidecar's mean
        # is at most 1 us per request under the statistics API's (1e-12 s for float rounding).
        assert -1e-12 <= mean_ns / 1e9 - got < 1e-6 + 1e-12, (phase, mean_ns / 1e9, got)
    # Queue share = queue us / request us; each sum is up to 1 us per request under its ns / 1000.
    share = model_value(values, catalog.QUEUE_TIME_RATIO)
    queue_us, request_us = d.ns["queue"] / 1000, d.ns["success"] / 1000
    lo, hi = (queue_us - d.count["queue"]) / request_us, queue_us / (request_us - success)
    assert share is not None and lo - 1e-12 <= share <= hi + 1e-12, (lo, share, hi)


def batch_executions(values: Samples) -> dict[str, float]:
    fam = values.get(catalog.BATCH_EXECUTIONS, {})
    return {dict(k)[catalog.BATCH_SIZE]: v for k, v in fam.items() if dict(k)["model"] == MODEL}


def test_derived_signals_equal_the_statistics_api(triton: Any, clocked: Clocked) -> None:
    before = quiet_stats(triton)
    clocked.sidecar.start()
    clocked.seen(before)  # its first scrape: the window starts at this snapshot
    load(triton, 4)
    clocked.now = SPAN
    after = quiet_stats(triton)
    values = clocked.seen(after)
    assert up(values, "triton") == 1.0 and up(values, "triton_api") == 1.0
    assert model_value(values, catalog.MODEL_READY) == 1.0
    assert model_value(values, catalog.MAX_BATCH_SIZE) == 64.0
    assert_equal_to_statistics(values, after.minus(before))
    wait_until(
        lambda: batch_executions(clocked.values()) == {k: float(v) for k, v in after.batches.items()},
        10,
        "the sidecar's batch executions to equal batch_stats",
    )
    assert max(int(s) for s, n in after.minus(before).batches.items() if n) > 1, "no dynamic batching"
    # batch_stats counts every executed request, the refused NaN inputs too (the model fails them
    # after batching); inference_count counts only successes.
    assert sum(int(s) * n for s, n in after.batches.items()) == after.inferences + after.count["fail"]


def test_a_triton_restart_counts_from_zero_exactly(triton: Any, clocked: Clocked) -> None:
    before = quiet_stats(triton)
    clocked.sidecar.start()
    clocked.seen(before)
    load(triton, 2)
    killed_at = quiet_stats(triton)
    clocked.seen(killed_at)
    triton.kill()

    derived = {s.name for s in catalog.SIGNALS} | {catalog.BATCH_EFFICIENCY}

    def down() -> bool:
        values = clocked.values()
        # While Triton is down the derived values are absent, never stale, NaN or negative.
        return up(values, "triton") == 0.0 and not any(values.get(name) for name in derived)

    wait_until(down, 15, "the sidecar to report Triton down and drop derived values", interval=0.1)
    triton.start()
    triton.wait_ready(120)
    restarted = quiet_stats(triton)
    assert restarted.count["success"] == 0  # a new process: counters from 0
    clocked.seen(restarted)
    load(triton, 2)
    clocked.now = SPAN
    after = quiet_stats(triton)
    values = clocked.seen(after)
    # Over the window: what Triton counted before it died, plus everything since its restart.
    assert_equal_to_statistics(values, killed_at.minus(before).plus(after))
