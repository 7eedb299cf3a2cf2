"""The two Triton targets: ``/metrics`` (target ``triton``) and the HTTP API (target ``triton_api``).

``TritonMetrics`` feeds the counter window the per-model signals are derived from. ``TritonApi`` reads
the repository index (readiness), each model's configuration (``max_batch_size``) and the statistics
API (``batch_stats``, the real batch-size distribution). Losing the API costs only what needs it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from exporters.http import Fetcher, ScrapeError
from exporters.source import Source
from exporters.window import CounterWindow, ModelKey
from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse


class TritonMetrics(Source):
    target = "triton"

    def __init__(
        self,
        url: str,
        window: CounterWindow,
        interval: float,
        timeout: float,
        max_bytes: int,
        clock: Callable[[], float] = time.time,
        families: frozenset[str] = catalog.TRITON_FAMILIES,
    ) -> None:
        super().__init__(interval, clock)
        self.url = url
        self.window = window
        self.families = families
        self.fetcher = Fetcher(timeout, max_bytes)
        self.lock = threading.Lock()
        self.fresh = False  # False after a failed scrape: derived values are dropped, not served stale
        self.samples: Samples = {}

    def describe(self) -> str:
        return self.url

    def scrape(self) -> None:
        payload = self.fetcher.get(self.url)
        now = self.clock()
        samples = parse(payload, self.families)
        with self.lock:
            self.window.ingest(now, samples)
            self.samples = samples
            self.fresh = True

    def on_failure(self) -> None:
        with self.lock:
            self.fresh = False


@dataclass(frozen=True)
class BatchStat:
    executions: float
    compute_seconds: float  # compute_input + compute_infer + compute_output, per execution summed


@dataclass
class ApiState:
    ready: dict[ModelKey, bool] = field(default_factory=dict)
    max_batch_size: dict[str, int] = field(default_factory=dict)  # by model name (config is per model)
    batch_stats: dict[ModelKey, dict[int, BatchStat]] = field(default_factory=dict)


class TritonApi(Source):
    target = "triton_api"

    def __init__(
        self,
        base_url: str,
        interval: float,
        timeout: float,
        config_refresh: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(interval, clock)
        self.base = base_url.rstrip("/")
        self.fetcher = Fetcher(timeout)
        self.config_refresh = config_refresh
        self.state = ApiState()
        self._configs: dict[str, tuple[float, int]] = {}  # model -> (fetched at, max_batch_size)

    def describe(self) -> str:
        return self.base

    def _index(self) -> dict[ModelKey, bool]:
        index = self.fetcher.json("POST", f"{self.base}/v2/repository/index", {})
        if not isinstance(index, list):
            raise ScrapeError("bad_json", f"{self.base}/v2/repository/index: expected a list")
        ready: dict[ModelKey, bool] = {}
        for entry in index:
            if not isinstance(entry, dict) or "name" not in entry:
                continue
            version = str(entry.get("version", ""))
            if not version:
                continue  # an unloaded model lists no version: nothing to report
            ready[(str(entry["name"]), version)] = entry.get("state") == "READY"
        return ready

    def _max_batch_size(self, model: str, now: float) -> int | None:
        cached = self._configs.get(model)
        if cached and now - cached[0] < self.config_refresh:
            return cached[1]
        try:
            cfg = self.fetcher.json("GET", f"{self.base}/v2/models/{quote(model, safe='')}/config")
        except ScrapeError:
            return cached[1] if cached else None  # unloaded between index and config
        mbs = int(cfg.get("max_batch_size", 0)) if isinstance(cfg, dict) else 0
        self._configs[model] = (now, mbs)
        return mbs

    def _batch_stats(self) -> dict[ModelKey, dict[int, BatchStat]]:
        stats = self.fetcher.json("GET", f"{self.base}/v2/models/stats")
        out: dict[ModelKey, dict[int, BatchStat]] = {}
        for m in (stats or {}).get("model_stats", []):
            per: dict[int, BatchStat] = {}
            for b in m.get("batch_stats", []) or []:
                execs = float(b.get("compute_infer", {}).get("count", 0))
                ns = sum(
                    float(b.get(p, {}).get("ns", 0))
                    for p in ("compute_input", "compute_infer", "compute_output")
                )
                per[int(b["batch_size"])] = BatchStat(execs, ns / 1e9)
            out[(str(m.get("name")), str(m.get("version", "")))] = per
        return out

    def scrape(self) -> None:
        now = self.clock()
        ready = self._index()
        mbs: dict[str, int] = {}
        for model in sorted({m for (m, _v), ok in ready.items() if ok}):
            value = self._max_batch_size(model, now)
            if value is not None:
                mbs[model] = value
        self._configs = {m: v for m, v in self._configs.items() if m in mbs}
        batch = self._batch_stats()
        self.state = ApiState(ready=ready, max_batch_size=mbs, batch_stats=batch)  # one atomic swap

    def on_failure(self) -> None:
        self.state = ApiState()
