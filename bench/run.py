"""``make bench``: every benchmark, one after the other (about 23 minutes on 2 cores, plus the report at
fleet scale: about 25 minutes the first time, while it loads its stores, a few minutes after).

* ``bench.scrape``: the scrape path at 50, 500 and 2,000 models, side by side with a real Prometheus
  scraping the same payload and with prometheus_client's parser, while 4 clients scrape the sidecar;
  the largest size for ``--seconds`` (default 600: memory must stay flat over 10 minutes; ``make bench
  BENCH_SECONDS=60`` for a quick look) (writes bench/results/scrape.json);
* ``bench.trace_accuracy``: trace quantile accuracy at trace rates 1, 10 and 100 and the CPU cost per
  1,000 spans (writes bench/results/traces.json);
* ``bench.trace_path``: the whole trace path as Triton drives it, sidecar CPU per traced request end
  to end from recorded OTLP bodies, from trace files and from the real local Triton, and the overload
  shedding at twice what one core handles, about 5 minutes (writes bench/results/trace_path.json);
* ``bench.hostile``: hostile inputs against a real sidecar, about a minute: peak RSS and /metrics GET
  medians per phase (writes bench/results/hostile.json; docs/hostile-inputs.md);
* ``bench.report_scale``: the weekly report against VictoriaMetrics holding 50, 200 and 500 models x 4
  weeks at 15 s: wall time and peak RSS of the report process (writes bench/results/report_scale.json;
  the loaded stores are kept under bench/.cache, ignored by git; docs/scaling.md).

Benchmarks are not tests: they measure and report ratios, they do not pass or fail.
"""

from __future__ import annotations

import argparse
import sys

from bench import hostile, report_scale, scrape, trace_accuracy, trace_path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=600.0, help="measured seconds at 2,000 models")
    args = ap.parse_args(argv)
    return (
        scrape.main(["--seconds", f"{args.seconds:g}"])
        or trace_accuracy.main([])
        or trace_path.main(["--real"])
        or hostile.main([])
        or report_scale.main([])
    )


if __name__ == "__main__":
    sys.exit(main())
