"""The sidecar CPU that SLO-bound headroom (``--slo``, exporters/headroom.py) adds per model (issue 39).

A ``Headroom`` part over the API state of ``--models`` model versions, each with a latency objective,
a dynamic-batching config (half with a queue delay, a quarter with two instances) and ``batch_stats`` of
a known line (5 batch sizes, executions that move a little between refreshes as live counters do, so
no refresh is a repeat), refreshed ``--refreshes`` times back to back in this thread. It reports the
thread CPU per model per refresh (median and worst), and the share of one core that costs at the
default ``--headroom-interval`` (30 s): the part runs in its own thread, never on a scrape's time.

Run: ``python -m bench.headroom [--models 20 --refreshes 5]`` (about 20 s on 2 cores); writes
bench/results/headroom.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

from tritonwatch import modelconfig
from tritonwatch.exporters import headroom
from tritonwatch.exporters.batching import batching_config
from tritonwatch.exporters.config import SidecarConfig
from tritonwatch.exporters.triton import ApiState, BatchStat

ROOT = Path(__file__).resolve().parent.parent
OBJECTIVE = headroom.Objective(0.25, 0.99)


def state(models: int, refresh: int) -> ApiState:
    batch: dict[tuple[str, str], dict[int, BatchStat]] = {}
    configs: dict[str, str] = {}
    for i in range(models):
        name = f"model_{i:03d}"
        fixed, per_item = 0.02 + 0.001 * (i % 7), 0.004 + 0.0005 * (i % 5)
        cfg = {
            "max_batch_size": 16,
            "dynamic_batching": {"max_queue_delay_microseconds": 2000 if i % 2 else 0},
            "instance_group": [{"count": 2 if i % 4 == 0 else 1, "kind": "KIND_GPU"}],
        }
        configs[name] = batching_config(modelconfig.parse(cfg)) or ""
        grown = 100 * refresh
        batch[(name, "1")] = {
            b: BatchStat(n + grown, (n + grown) * (fixed + per_item * b) * (1 + 0.01 * (b % 3)))
            for b, n in ((1, 4000), (2, 2500), (4, 1200), (8, 400), (16, 90))
        }
    return ApiState(ready={k: True for k in batch}, batch_stats=batch, batching=configs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.headroom", description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=int, default=20)
    ap.add_argument("--refreshes", type=int, default=5)
    args = ap.parse_args(argv)
    current = {"state": state(args.models, 0)}
    objectives = {f"model_{i:03d}": OBJECTIVE for i in range(args.models)}
    part = headroom.Headroom(objectives, lambda: current["state"], lambda: None, 30.0)
    per_model: list[float] = []
    load_before = os.getloadavg()
    for r in range(args.refreshes):
        current["state"] = state(args.models, r + 1)
        before = time.thread_time()
        part.refresh()
        per_model.append((time.thread_time() - before) / args.models)
    estimated = sum(1 for e in part.estimates.values() if e.capacity_rps is not None)
    interval = SidecarConfig().headroom_interval
    result = {
        "generated_by": "python -m bench.headroom " + " ".join(argv or []),
        "machine": f"{platform.machine()} {platform.system()}, shared 2-core CPU",
        "load_average_before": load_before,
        "models": args.models,
        "estimated": estimated,
        "refreshes": args.refreshes,
        "simulated_requests_per_step": headroom.SIMULATED_REQUESTS,
        "cpu_seconds_per_model_per_refresh": {
            "median": statistics.median(per_model),
            "max": max(per_model),
        },
        "headroom_interval_seconds": interval,
        "core_share_per_model_at_default_interval": statistics.median(per_model) / interval,
    }
    out = ROOT / "bench" / "results" / "headroom.json"
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    med = result["cpu_seconds_per_model_per_refresh"]["median"]  # type: ignore[index]
    print(
        f"{args.models} models ({estimated} estimated), {args.refreshes} refreshes: {med * 1e3:.0f} ms CPU per "
        f"model per refresh (median), {med / interval * 100:.2f} % of a core per model at {interval:g} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
