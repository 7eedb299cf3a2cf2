"""Where the trace path's CPU goes, step by step, in this process: ``python -m bench.trace_steps``.

The recorded Triton OTLP bodies of ``bench/data/`` (ids rewritten per round, 20 rounds) through each
step of the receiver's worker in turn, ``time.process_time`` around each: ``json.loads``, the fast
decode (and the checked one it falls back to, for comparison), the join, the recording (histograms
and quantile store) and the rebuild of the latency families. Prints microseconds per traced request;
``cProfile`` of the same loop with ``--profile``. A complement to ``bench.trace_path``, which measures
the whole path end to end in a real sidecar process.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time

from bench.trace_path import MARK, otlp_templates
from tritonwatch.exporters.traces import LatencyPart, otlp
from tritonwatch.exporters.traces.join import SpanJoiner


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.trace_steps", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--profile", action="store_true", help="print cProfile's top functions as well")
    args = ap.parse_args(argv)
    templates, per_body = otlp_templates()
    bodies = [t.replace(MARK, f"{r:08x}").encode() for r in range(1, args.rounds + 1) for t in templates]
    steps = dict.fromkeys(
        ("json.loads", "decode (fast)", "decode (checked)", "join", "record", "rebuild"), 0.0
    )
    joiner, latency = SpanJoiner(), LatencyPart(300.0)
    now = 1000.0

    def run() -> None:
        nonlocal now
        for body in bodies:
            t = time.process_time()
            doc = json.loads(body)
            t1 = time.process_time()
            spans = otlp.decode_request(doc)
            t2 = time.process_time()
            otlp.checked_request(doc)
            t3 = time.process_time()
            timings = joiner.add(spans, now)
            t4 = time.process_time()
            latency.record(timings, now)
            t5 = time.process_time()
            latency.prepare()
            t6 = time.process_time()
            for key, a, b in zip(steps, (t, t1, t2, t3, t4, t5), (t1, t2, t3, t4, t5, t6), strict=True):
                steps[key] += b - a
            now += 0.5

    profile = cProfile.Profile(time.process_time) if args.profile else None
    if profile:
        profile.enable()
    run()
    if profile:
        profile.disable()
    requests = sum(per_body) * args.rounds
    print(f"{requests} traced requests ({len(bodies)} bodies); CPU per traced request:")
    for key, seconds in steps.items():
        print(f"  {key:<18} {seconds / requests * 1e6:6.1f} us")
    if profile:
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
