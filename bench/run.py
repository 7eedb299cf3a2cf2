"""``make bench``: every benchmark, one after the other (about 6 minutes on 2 cores).

* ``bench.scrape``: the scrape path at 50, 500 and 2,000 models, side by side with a real Prometheus
  scraping the same payload and with prometheus_client's parser (writes bench/results/scrape.json);
* ``bench.trace_accuracy``: trace quantile accuracy at trace rates 1, 10 and 100 and the CPU cost per
  1,000 spans (writes bench/results/traces.json).

Benchmarks are not tests: they measure and report ratios, they do not pass or fail.
"""

from __future__ import annotations

import sys

from bench import scrape, trace_accuracy


def main() -> int:
    return scrape.main([]) or trace_accuracy.main([])


if __name__ == "__main__":
    sys.exit(main())
