"""``TraceSettings``: Triton's trace rate in force, set once or held to a traced-requests budget."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch.exporters.source import Source
from tritonwatch.fetch import ScrapeError
from tritonwatch.tritonapi import TritonClient

log = logging.getLogger(__name__)

# Triton 2.51 crashed (signal 11, issue #7795) with OpenTelemetry tracing at rates below this under load.
MIN_SAFE_OTEL_RATE = 10
MAX_TRACE_RATE = 1_000_000
BUDGET_TOLERANCE = 0.15  # the rate moves only when it is off by more than this share: no flapping


class TraceSettings(Source):
    """Reads Triton's trace settings (the rate in force); sets the rate once when asked, or holds a
    traced-requests budget by moving it with the request rate (``request_rate``: requests/s, or None
    while unknown)."""

    target = "triton_trace"

    def __init__(
        self,
        triton: str,
        interval: float,
        timeout: float,
        set_rate: int = 0,
        budget: float = 0.0,
        request_rate: Callable[[], float | None] = lambda: None,
    ) -> None:
        super().__init__(interval)
        self.client = TritonClient(triton, timeout)
        self.base = self.client.base
        self.set_rate = set_rate
        self.budget = budget
        self.request_rate = request_rate
        self.rate: float | None = None
        self.mode = ""

    def budget_rate(self, requests_per_second: float) -> int:
        """The trace rate (one in N) that traces about ``budget`` requests a second."""
        return max(MIN_SAFE_OTEL_RATE, min(MAX_TRACE_RATE, round(requests_per_second / self.budget)))

    def _hold_budget(self) -> None:
        rps = self.request_rate()
        if not self.budget or rps is None or not self.rate:  # tracing off, or no rate seen yet
            return
        want = self.budget_rate(rps)
        if abs(want - self.rate) <= BUDGET_TOLERANCE * self.rate:
            return
        settings = self.client.trace_settings({"trace_rate": str(want)})
        log.info(
            "trace budget %g/s at %.1f requests/s: Triton's trace rate %g -> %d",
            self.budget,
            rps,
            self.rate,
            want,
        )
        self.rate = float(settings.get("trace_rate", want))

    def describe(self) -> str:
        return self.client.trace_url()

    def _apply(self) -> None:
        rate = self.set_rate
        settings = self.client.trace_settings({"trace_rate": str(rate)})
        mode = str(settings.get("trace_mode", ""))
        log.info("set Triton's trace rate to %d (one request in %d traced; mode %s)", rate, rate, mode or "?")
        if mode != "triton" and rate < MIN_SAFE_OTEL_RATE:
            log.warning(
                "--set-trace-rate %d: Triton 2.51 crashed (signal 11, issue #7795) with OpenTelemetry "
                "tracing at rates below %d under load; use %d or more",
                rate,
                MIN_SAFE_OTEL_RATE,
                MIN_SAFE_OTEL_RATE,
            )
        self.set_rate = 0

    def scrape(self) -> None:
        if self.set_rate:
            self._apply()
        settings = self.client.trace_settings()
        self.mode = str(settings.get("trace_mode", ""))
        levels = settings.get("trace_level") or []
        try:
            rate = float(settings.get("trace_rate", 0))
        except (TypeError, ValueError):
            raise ScrapeError("bad_json", f"{self.describe()}: trace_rate is not a number") from None
        self.rate = 0.0 if "OFF" in levels or not levels else rate
        self._hold_budget()

    def on_failure(self) -> None:
        self.rate = None

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            catalog.TRACE_RATE,
            "Triton's trace sampling rate in force: one request in N is traced (0: tracing off).",
        )
        if self.rate is not None:
            g.add_metric([], self.rate)
        yield g
        if self.budget:
            b = GaugeMetricFamily(
                catalog.TRACE_BUDGET,
                "Traced requests per second the sidecar holds by moving Triton's trace rate (--trace-budget).",
            )
            b.add_metric([], self.budget)
            yield b
