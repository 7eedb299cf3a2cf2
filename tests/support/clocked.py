"""A sidecar on a real Triton whose clock the test sets: its window spans exactly what the test says.

The clock stands at 0 s at the test's first snapshot and at the span it chooses at the second, so
rates are increases / span exactly. ``seen(want)`` waits until the sidecar has scraped the state the
test read (``count(samples) == want``, e.g. the success counts) and serves values derived from a later
scrape (and, where ``ready`` says more is needed, e.g. the model configs read), then reads /metrics.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import requests

from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.procs import wait_until


class Clocked:
    def __init__(
        self,
        triton: Any,
        count: Callable[[Samples], object],
        ready: Callable[[Sidecar], bool] = lambda _sidecar: True,
    ) -> None:
        self.now = 0.0
        self.count = count
        self.ready = ready
        self.sidecar = Sidecar.local(triton.http_url, triton.metrics_url, interval=0.5, window=3600.0)
        self.sidecar.metrics.clock = lambda: self.now

    def values(self) -> Samples:
        resp = requests.get(f"http://127.0.0.1:{self.sidecar.port}/metrics", timeout=2)
        resp.raise_for_status()
        return parse(resp.text)

    def seen(self, want: object) -> Samples:
        """Wait until the sidecar has scraped the state where ``count`` gives ``want``, then read it."""
        m = self.sidecar.metrics

        def scraped() -> bool:
            snapshot = m.snapshots.latest
            return snapshot.up and self.count(snapshot.samples) == want

        wait_until(scraped, 15, f"the sidecar to scrape {want}", interval=0.05)
        generation = m.window.generation
        collector = self.sidecar.collector
        # Derived values are served as last prepared by the render thread, which may trail the
        # window's scrapes on a loaded machine: wait until what is served is built from a later one.
        wait_until(
            lambda: (collector.prepared_generation or 0) > generation and self.ready(self.sidecar),
            15,
            "derived values from a later sidecar scrape",
            interval=0.05,
        )
        return self.values()
