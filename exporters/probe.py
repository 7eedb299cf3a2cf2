"""Canary probe (``--probe MODEL[,MODEL]``, ``--probe-interval S``): one synthetic request per model per round.

An availability signal that does not need real traffic (the SRE Workbook's remedy for low-traffic
SLOs). Each request is built from the model's config, as ``tritonwatch load`` builds it (fresh random
values, so a response cache does not answer it), and sent with tritonclient[http]. Emits

    tritonwatch_probe_success{model}                 1 if the last probe got a valid answer, else 0
    tritonwatch_probe_duration_seconds{model}        histogram of every probe's duration, failed ones too
    tritonwatch_probe_requests_total{model,result}   probes sent, by result: success, error, timeout

A probe that gets no answer within its timeout counts as a failed request (``result="timeout"``): it
is the liveness source that does not trust Triton's own endpoints, which a wedged Triton still
answers with frozen counters.

A model that is missing, not ready or failing reads 0; absent only before its first probe.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch.exporters.context import PartContext
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.source import Source
from tritonwatch.exporters.traces.store import Histograms

log = logging.getLogger(__name__)


class Probe(Source):
    target = "probe"

    def __init__(
        self,
        triton: str,
        models: tuple[str, ...],
        interval: float,
        timeout: float,
        buckets: tuple[float, ...] = catalog.DEFAULT_BUCKETS,
    ) -> None:
        super().__init__(interval)
        self.triton = triton.rstrip("/")
        self.models = models
        self.timeout = timeout
        self.histograms = Histograms(buckets, max_keys=max(len(models), 1))
        self._lock = threading.Lock()
        self.success: dict[str, float] = {}
        self.attempts: dict[str, int] = {}
        self.results: dict[tuple[str, str], int] = {}  # (model, result) -> probes
        self.last_error: dict[str, str] = {}
        self._specs: dict[str, Any] = {}  # model -> its input specs, read once from the model config
        self._client: Any = None
        self._rng: Any = None

    def describe(self) -> str:
        return f"probe {','.join(self.models)} at {self.triton}"

    def _inputs(self, model: str) -> list[Any]:
        from tritonwatch.inputs import fetch_config, input_specs, make_inputs

        specs = self._specs.get(model)
        if specs is None:
            # Reads the model config (a missing model fails here, as a failed probe).
            specs = self._specs[model] = input_specs(fetch_config(self.triton, model, self.timeout))
        return make_inputs(specs, self._rng)

    def probe(self, model: str) -> bool:
        """Send one request; True when Triton answered it without error."""
        import numpy as np
        import tritonclient.http as httpclient

        if self._client is None:
            # Created in the probe's own thread and used only there (tritonclient's gevent client).
            parsed = urllib.parse.urlparse(self.triton)
            self._client = httpclient.InferenceServerClient(
                parsed.netloc,
                ssl=parsed.scheme == "https",
                connection_timeout=self.timeout,
                network_timeout=self.timeout,
            )
            self._rng = np.random.default_rng()
        start = time.perf_counter()
        error = ""
        timed_out = False
        try:
            self._client.infer(model, self._inputs(model))
        except Exception as exc:  # any failure is a failed probe: missing model, refused, timeout, error
            error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            timed_out = _is_timeout(exc)
            self._specs.pop(model, None)  # the config may have changed: read it again next time
            if timed_out:
                # The unanswered request still holds the connection: the next probe (another model)
                # would wait behind it on the same keep-alive connection. Start a fresh one.
                self._close_client()
        elapsed = time.perf_counter() - start
        ok = not error
        result = "success" if ok else ("timeout" if timed_out else "error")
        with self._lock:
            self.results[model, result] = self.results.get((model, result), 0) + 1
            was = self.success.get(model)
            self.success[model] = 1.0 if ok else 0.0
            self.attempts[model] = self.attempts.get(model, 0) + 1
            self.histograms.observe((model, "", ""), elapsed)
            if not ok and (was != 0.0 or self.last_error.get(model) != error):
                log.warning("probe %s failed: %s", model, error)
            elif ok and was == 0.0:
                log.info("probe %s succeeds again", model)
            self.last_error[model] = error
        return ok

    def scrape(self) -> None:
        for model in self.models:
            if self._stop.is_set():
                return
            self.probe(model)

    def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a client whose connection already broke
                pass

    def stop(self) -> None:
        super().stop()
        self._close_client()

    def collect(self) -> Iterator[Metric]:
        success = GaugeMetricFamily(
            catalog.PROBE_SUCCESS,
            "1 if the last canary request to the model succeeded, else 0.",
            labels=[catalog.MODEL],
        )
        duration = HistogramMetricFamily(
            catalog.PROBE_DURATION,
            "Duration of canary requests to the model, failed ones included.",
            labels=[catalog.MODEL],
        )
        requests = CounterMetricFamily(
            catalog.PROBE_REQUESTS,
            "Canary requests sent to the model, by result: success, error, or timeout (no answer "
            "within the probe's timeout).",
            labels=[catalog.MODEL, catalog.PROBE_RESULT],
        )
        with self._lock:
            for model, value in sorted(self.success.items()):
                success.add_metric([model], value)
            for model in sorted({m for m, _ in self.results}):
                for result in catalog.PROBE_RESULTS:  # every result at 0 once the model was probed
                    requests.add_metric([model, result], self.results.get((model, result), 0))
        for (model, _v, _p), buckets, total, _n in self.histograms.snapshot():
            duration.add_metric([model], buckets, total)
        yield success
        yield duration
        yield requests


def _is_timeout(exc: BaseException) -> bool:
    """tritonclient's gevent client raises socket/gevent timeouts, or wraps them in its own exception."""
    import socket

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (TimeoutError, socket.timeout)) or "timeout" in type(seen).__name__.lower():
            return True
        if "timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class _View(Part):
    """The collector sees the probe's families only: the probe is not a scrape target of ``tritonwatch_up``."""

    def __init__(self, probe: Probe) -> None:
        self.probe = probe

    def collect(self) -> Iterator[Metric]:
        return self.probe.collect()


def make_part(context: PartContext) -> list[tuple[Part, Source | None]]:
    cfg = context.config
    models = cfg.probe_models
    if not models:
        return []
    probe = Probe(cfg.triton, models, cfg.probe_interval, min(cfg.probe_interval, 10.0))
    return [(_View(probe), probe)]
