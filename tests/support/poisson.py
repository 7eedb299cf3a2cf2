"""Open-loop Poisson load on one Triton model over HTTP (bench/advise.py, tests/test_advise_triton.py).

Requests are sent at pre-drawn exponential gaps (a fixed seed) whatever the server does, so a slow
server meets the same arrivals as a fast one; a request's latency runs from its scheduled send time to
its answer, so lateness of the sender counts against the server as a real client's would.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass

import aiohttp

BODY = {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}]}


@dataclass(frozen=True)
class Run:
    rate: float
    seconds: float
    latencies: tuple[float, ...]  # sent to answered, of the answered requests, in schedule order
    failed: int
    late_s: float  # the sender's worst lateness against the schedule

    def quantile(self, q: float) -> float:
        s = sorted(self.latencies)
        return s[max(1, math.ceil(q * len(s))) - 1] if s else math.inf


async def _drive(url: str, rate: float, seconds: float, seed: int, warmup: float) -> Run:
    rng = random.Random(seed)
    gaps: list[float] = []
    t = 0.0
    while t < seconds + warmup:
        t += rng.expovariate(rate)
        gaps.append(t)
    results: list[tuple[float, float, float | None]] = []
    late = 0.0
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(at: float) -> None:
            sent = time.perf_counter()
            try:
                async with session.post(url, json=BODY) as resp:
                    await resp.read()
                    ok = resp.status == 200
            except (aiohttp.ClientError, asyncio.TimeoutError):
                ok = False
            results.append((at, sent, time.perf_counter() if ok else None))

        start = time.perf_counter()
        tasks = []
        for g in gaps:
            at = start + g
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            late = max(late, time.perf_counter() - at)
            tasks.append(asyncio.create_task(one(at)))
        await asyncio.gather(*tasks)
    cut = start + warmup  # requests sent in the warm-up are not measured
    kept = sorted(r for r in results if r[0] >= cut)
    lat = tuple(done - sent for _, sent, done in kept if done is not None)
    return Run(rate, seconds, lat, sum(1 for *_, d in kept if d is None), late)


def drive(base: str, model: str, rate: float, seconds: float, seed: int = 1, warmup: float = 2.0) -> Run:
    """Poisson arrivals at ``rate`` per second for ``warmup + seconds``; latencies of the last ``seconds``."""
    return asyncio.run(_drive(f"{base}/v2/models/{model}/infer", rate, seconds, seed, warmup))
