"""The two Triton targets: ``/metrics`` (target ``triton``) and the HTTP API (target ``triton_api``).

``TritonMetrics`` feeds the counter window the per-model signals are derived from. ``TritonApi`` reads
the repository index (readiness), each model's configuration (``max_batch_size``) and the statistics
API (``batch_stats``, the real batch-size distribution). Losing the API costs only what needs it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import quote

from tritonwatch import catalog
from tritonwatch.expfmt import Parser, Samples, per_layout
from tritonwatch.exporters import memory
from tritonwatch.exporters.http import Fetcher, ScrapeError
from tritonwatch.exporters.placement import Placement, placement
from tritonwatch.exporters.source import Partial, Source
from tritonwatch.exporters.window import CounterWindow, ModelKey, model_key


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
        max_models: int = 5000,
    ) -> None:
        super().__init__(interval, clock)
        self.url = url
        self.window = window
        self._scrapes = 0
        self.parser = Parser(families, exact=True)  # remembers label parsing across scrapes
        self.max_models = max_models
        self.tracked: frozenset[ModelKey] = frozenset()
        self.dropped_models = 0.0  # models left out over --max-models, summed over scrapes
        self.fetcher = Fetcher(timeout, max_bytes)
        self.lock = threading.Lock()
        self.fresh = False  # False after a failed scrape: derived values are dropped, not served stale
        self.samples: Samples = {}

    def describe(self) -> str:
        return self.url

    def scrape(self) -> None:
        payload = self.fetcher.get(self.url)
        now = self.clock()
        samples = self._cap_models(self.parser.parse(payload))
        with self.lock:
            self.window.ingest(now, samples)
            self.samples = samples
            self.fresh = True
        self._scrapes += 1
        if self._scrapes % TRIM_EVERY == 0:
            memory.trim()

    def on_failure(self) -> None:
        with self.lock:
            self.fresh = False

    def _cap_models(self, samples: Samples) -> Samples:
        """Keep at most ``max_models`` (model, version) keys: those already tracked first, then by name.

        Bounds the sidecar's label cardinality whatever Triton serves; what is left out is counted.
        """
        present = per_layout(samples, _models_named)
        if len(present) <= self.max_models:
            self.tracked = present
            return samples
        keep = sorted(present & self.tracked)[: self.max_models]
        keep += sorted(present - self.tracked)[: self.max_models - len(keep)]
        kept = frozenset(keep)
        self.tracked = kept
        self.dropped_models += len(present) - len(kept)
        return {
            name: {labels: v for labels, v in series.items() if (k := model_key(labels)) is None or k in kept}
            for name, series in samples.items()
        }


def _models_named(samples: Samples) -> frozenset[ModelKey]:
    # Every loaded model has these series: reading them, not all ~50 families, keeps this cheap.
    return frozenset(
        k for family in _ANCHOR_FAMILIES for labels in samples.get(family, ()) if (k := model_key(labels))
    )


TRIM_EVERY = 10  # scrapes between handing freed memory back (see exporters/memory.py)
_ANCHOR_FAMILIES = (catalog.TRITON_SUCCESS, catalog.TRITON_PENDING, catalog.TRITON_INFERENCE_COUNT)


@dataclass(frozen=True)
class BatchStat:
    executions: float
    compute_seconds: float  # compute_input + compute_infer + compute_output, per execution summed


@dataclass
class ApiState:
    ready: dict[ModelKey, bool] = field(default_factory=dict)
    # by model name (config is per model); only models the last good index lists as READY
    max_batch_size: dict[str, int] = field(default_factory=dict)
    batch_stats: dict[ModelKey, dict[int, BatchStat]] = field(default_factory=dict)
    placement: dict[str, Placement] = field(default_factory=dict)  # by model name, like max_batch_size


@dataclass(frozen=True)
class ConfigEntry:
    """A model's configuration as last read: its value (kept over a failed refresh) and when to ask again."""

    max_batch_size: int | None
    retry_at: float
    failures: int = 0  # consecutive failed reads: the backoff doubles with each
    placement: Placement | None = None  # its instance groups (GPU attribution without gpu_uuid)


class TritonApi(Source):
    """Target ``triton_api``: three endpoints, each on its own interval, each failing on its own.

    * repository index (``POST /v2/repository/index``) every ``index_interval``: readiness;
    * statistics (``GET /v2/models/stats``) every ``stats_interval``: the batch-size distribution;
    * each READY model's config (``GET /v2/models/<m>/config``) every ``config_interval``: its
      ``max_batch_size``. A failed read is retried after ``interval`` x 2^(failures-1), at most
      ``config_interval``, not at every tick; the last good value is kept meanwhile.

    A failure is counted in ``tritonwatch_scrape_errors_total{target="triton_api"}`` with the
    endpoint in the reason (``index_<reason>``, ``stats_<reason>``, ``config_<reason>``, where
    ``<reason>`` is the fetch's: timeout, connection, http_status, bad_json, ...) and drops only what
    that endpoint feeds. ``tritonwatch_up{target="triton_api"}`` is 1 while the last attempt at the
    index and at the statistics both succeeded; a model whose config cannot be read is counted and
    loses its ``max_batch_size``, but does not mark the whole API down.
    """

    target = "triton_api"

    def __init__(
        self,
        base_url: str,
        interval: float,
        timeout: float,
        config_refresh: float = 300.0,
        clock: Callable[[], float] = time.time,
        max_models: int = 5000,
        index_interval: float = 0.0,
        stats_interval: float = 0.0,
    ) -> None:
        self.index_interval = index_interval or interval
        self.stats_interval = stats_interval or interval
        # The loop ticks at the shortest endpoint interval; each endpoint runs when it is due.
        super().__init__(min(self.index_interval, self.stats_interval), clock)
        self.max_models = max_models
        self.base = base_url.rstrip("/")
        self.fetcher = Fetcher(timeout)
        self.config_refresh = config_refresh
        self.state = ApiState()
        self._configs: dict[str, ConfigEntry] = {}
        self._next: dict[str, float] = {}  # endpoint -> when it is next due
        self._failed: dict[str, tuple[str, str]] = {}  # endpoint -> its last failure, while it lasts

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
        if len(ready) > self.max_models:  # the same cardinality cap as /metrics (counted there)
            ready = dict(sorted(ready.items())[: self.max_models])
        return ready

    def _config(self, model: str) -> tuple[int, Placement]:
        url = f"{self.base}/v2/models/{quote(model, safe='')}/config"
        cfg = self.fetcher.json("GET", url)
        try:
            mbs = int(cfg.get("max_batch_size", 0)) if isinstance(cfg, dict) else -1
        except (TypeError, ValueError):
            mbs = -1
        if mbs < 0:
            raise ScrapeError("bad_json", f"{url}: no valid max_batch_size")
        try:
            return mbs, placement(cfg)
        except ValueError as exc:
            raise ScrapeError("bad_json", f"{url}: {exc}") from None

    def _batch_stats(self) -> dict[ModelKey, dict[int, BatchStat]]:
        url = f"{self.base}/v2/models/stats"
        stats = self.fetcher.json("GET", url)
        try:
            return _parse_batch_stats(stats)
        except (AttributeError, KeyError, TypeError, ValueError):
            # The whole answer or nothing: a half-read distribution would be a guess.
            raise ScrapeError("bad_json", f"{url}: not the statistics API's shape") from None

    def _due(self, endpoint: str, now: float, every: float) -> bool:
        if now < self._next.get(endpoint, -math.inf):
            return False
        self._next[endpoint] = now + every
        return True

    def _configs_for(
        self, ready: dict[ModelKey, bool], now: float, errors: list[tuple[str, str]]
    ) -> dict[str, ConfigEntry]:
        models = sorted({m for (m, _v), ok in ready.items() if ok})
        self._configs = {m: e for m, e in self._configs.items() if m in models}  # unloaded: forgotten
        for model in models:
            entry = self._configs.get(model)
            if entry is not None and now < entry.retry_at:
                continue
            try:
                mbs, place = self._config(model)
                self._configs[model] = ConfigEntry(mbs, now + self.config_refresh, placement=place)
            except ScrapeError as exc:
                failures = entry.failures + 1 if entry else 1
                backoff = min(self.config_refresh, self.interval * 2 ** (failures - 1))
                kept = entry.max_batch_size if entry else None
                kept_place = entry.placement if entry else None
                self._configs[model] = ConfigEntry(kept, now + backoff, failures, kept_place)
                errors.append((f"config_{exc.reason}", str(exc)))
        return dict(self._configs)

    def scrape(self) -> Partial:
        now = self.clock()
        errors: list[tuple[str, str]] = []
        ready, batch = self.state.ready, self.state.batch_stats
        if self._due("index", now, self.index_interval):
            try:
                ready = self._index()
                self._failed.pop("index", None)
            except ScrapeError as exc:
                ready = {}  # dropped, not served stale; max_batch_size goes with it
                self._failed["index"] = (f"index_{exc.reason}", str(exc))
                errors.append(self._failed["index"])
        if self._due("stats", now, self.stats_interval):
            try:
                batch = self._batch_stats()
                self._failed.pop("stats", None)
            except ScrapeError as exc:
                batch = {}
                self._failed["stats"] = (f"stats_{exc.reason}", str(exc))
                errors.append(self._failed["stats"])
        configs = self._configs_for(ready, now, errors)
        mbs = {m: e.max_batch_size for m, e in configs.items() if e.max_batch_size is not None}
        place = {m: e.placement for m, e in configs.items() if e.placement is not None}
        if ready:  # the index's cap and unloaded models apply to the statistics too
            batch = {k: v for k, v in batch.items() if k in ready}
        elif len(batch) > self.max_models:
            batch = dict(sorted(batch.items())[: self.max_models])
        self.state = ApiState(ready=ready, max_batch_size=mbs, batch_stats=batch, placement=place)  # one swap
        return Partial(tuple(errors), up=not self._failed)

    def on_failure(self) -> None:
        self.state = ApiState()
        self._next.clear()  # read every endpoint again at the next tick


def _count(value: object) -> float:
    n = float(value)  # type: ignore[arg-type]  # anything else raises, and the caller says bad_json
    if not math.isfinite(n) or n < 0:
        raise ValueError(f"not a count: {value!r}")
    return n


def _parse_batch_stats(stats: object) -> dict[ModelKey, dict[int, BatchStat]]:
    out: dict[ModelKey, dict[int, BatchStat]] = {}
    if stats is None:
        return out
    if not isinstance(stats, dict):
        raise TypeError("expected an object")
    for m in stats.get("model_stats") or []:
        per: dict[int, BatchStat] = {}
        for b in m.get("batch_stats") or []:
            execs = _count(b.get("compute_infer", {}).get("count", 0))
            ns = sum(
                _count(b.get(p, {}).get("ns", 0))
                for p in ("compute_input", "compute_infer", "compute_output")
            )
            size = int(b["batch_size"])
            if size < 1:
                raise ValueError(f"batch_size {size}")
            per[size] = BatchStat(execs, ns / 1e9)
        out[(str(m.get("name")), str(m.get("version", "")))] = per
    return out
