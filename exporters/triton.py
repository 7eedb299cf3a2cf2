"""The two Triton targets: ``/metrics`` (target ``triton``) and the HTTP API (target ``triton_api``).

``TritonMetrics`` feeds the counter window the per-model signals are derived from. ``TritonApi`` reads
the repository index (readiness), each model's configuration (``max_batch_size``) and the statistics
API (``batch_stats``, the real batch-size distribution). Losing the API costs only what needs it.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tritonwatch import catalog, uncounted
from tritonwatch.expfmt import Parser, Samples, per_layout
from tritonwatch.exporters import memory
from tritonwatch.exporters.batching import batching_config
from tritonwatch.exporters.derive import evaluate_many
from tritonwatch.exporters.placement import Placement, placement
from tritonwatch.exporters.snapshot import Snapshots, TritonSnapshot
from tritonwatch.exporters.source import Partial, Source, skipped_lines
from tritonwatch.exporters.window import CounterWindow, ModelKey, model_key
from tritonwatch.fetch import MAX_LINE_BYTES, Fetcher, ScrapeError
from tritonwatch.modelconfig import MAX_INT32
from tritonwatch.tritonapi import TritonClient


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
        # --max-models bounds what is served; this bounds what a scrape costs before the cap applies.
        self.max_lines = max_models * LINES_PER_MODEL + LINES_FIXED
        self._check_models_over = 0  # line count above which the models are counted before parsing
        self.tracked: frozenset[ModelKey] = frozenset()
        self.dropped_models = 0.0  # models left out over --max-models, summed over scrapes
        self.fetcher = Fetcher(timeout, max_bytes, max_line=MAX_LINE_BYTES, max_lines=self.max_lines)
        self.lock = threading.Lock()  # the counter window's: only this source and its collector read it
        # Each good scrape, published whole; up False after a failed one (derived values are then
        # dropped, not served stale)
        self.snapshots = Snapshots(self.health)

    def describe(self) -> str:
        return self.url

    def scrape(self) -> Partial | None:
        try:
            payload = self.fetcher.get(self.url)
        except ScrapeError as exc:  # the line budget holds as lines arrive: the flood is never held
            if exc.reason != "too_many_lines":
                raise
            raise ScrapeError(
                exc.reason,
                f"{self.url}: over {self.max_lines} lines (--max-models {self.max_models} "
                f"x {LINES_PER_MODEL} + {LINES_FIXED}): refused as they arrived",
            ) from None
        lines = payload.count(b"\n")  # in C
        if lines > self._check_models_over:  # far more lines than last time: count the models first
            limit = max(MODELS_REFUSED_OVER * self.max_models, MODELS_REFUSED_FLOOR)
            if _models_over(payload, limit):
                raise ScrapeError(
                    "too_many_models",
                    f"{self.url}: over {limit} models (2 x --max-models, at least "
                    f"{MODELS_REFUSED_FLOOR}): refused before parsing",
                )
        now = self.clock()
        parsed = self.parser.parse(payload)
        samples = self._cap_models(parsed)
        with self.lock:
            window = self.window
            window.ingest(now, samples)
            snapshot = TritonSnapshot(window.generation, now, samples, window.models, self.tracked, True)
        self.snapshots.publish(snapshot)
        self._check_models_over = 2 * lines + LINES_FIXED
        self._scrapes += 1
        if self._scrapes % TRIM_EVERY == 0:
            memory.trim()
        return skipped_lines(self.url, self.fetcher.skipped, parsed.skipped)

    def on_failure(self) -> None:
        self.snapshots.down()

    def request_rates(self, keys: Sequence[ModelKey] | None = None) -> dict[ModelKey, float]:
        """Successful requests/s over the window of ``keys`` (default: the models of the last scrape),
        where known; empty while Triton is down."""
        with self.lock:
            if not self.snapshots.latest.up:
                return {}
            models = sorted(self.window.models) if keys is None else list(keys)
            rates = evaluate_many(self.window, _REQUEST_RATE, models)
        return {k: r for k, r in zip(models, rates, strict=True) if r is not None}

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
# Lines of Triton's /metrics per model, generously: ~90 with every summary, failure reason and
# metric tag on (tests/data: 188 lines for 2 models with summaries), times a GPU split; plus the
# server-wide families (GPU, CPU, pinned memory, cache).
LINES_PER_MODEL = 200
LINES_FIXED = 10_000
# A payload naming more than this many times --max-models (and more than the floor) is refused whole
# before it is parsed; up to that, the cap keeps --max-models of them and counts the rest.
# 1,000,000 one-line models fit in the payload and line budgets, and would cost ~17 s and 1.4 GB to
# parse only to be cut. Counting them costs ~0.8 s, and only when the line count jumps.
MODELS_REFUSED_OVER = 2
MODELS_REFUSED_FLOOR = 10_000
_MODEL_LABEL = re.compile(rb'[{,]model="([^"\\]*(?:\\.[^"\\]*)*)"')


def _models_over(payload: bytes | bytearray, limit: int) -> bool:
    """Whether ``payload`` names more than ``limit`` models; stops at the first past it, so a million
    names cost a set of ``limit``, not a list and a set of a million."""
    seen: set[bytes] = set()
    for match in _MODEL_LABEL.finditer(payload):
        seen.add(match.group(1))
        if len(seen) > limit:
            return True
    return False


# Distinct batch sizes one model may report: each becomes a series of
# tritonwatch_model_batch_executions_total. Triton's own limit on max_batch_size is far above what
# any model batches; a model reporting more is dropped from the distribution and counted.
MAX_BATCH_SIZES = 1024
_REQUEST_RATE = catalog.signal(catalog.REQUEST_RATE)
_ANCHOR_FAMILIES = (catalog.TRITON_SUCCESS, catalog.TRITON_PENDING, catalog.TRITON_INFERENCE_COUNT)


@dataclass(frozen=True)
class BatchStat:
    executions: float
    compute_seconds: float  # compute_input + compute_infer + compute_output, per execution summed


@dataclass(frozen=True)
class ConfigReading:
    """What the sidecar keeps of a model's configuration (``tritonwatch.modelconfig``), derived once
    per read: not at every tick."""

    max_batch_size: int
    steps: tuple[str, ...] | None = None  # an ensemble's step models in order; None: not an ensemble
    shape: uncounted.ModelShape | None = None  # what decides whether Triton counts its errors
    placement: Placement | None = None  # its instance groups (GPU attribution without gpu_uuid)
    batching: str | None = None  # exporters/batching.py: the config's batching part, for advise
    decoupled: bool = False  # model_transaction_policy.decoupled: the first response is not the whole one


@dataclass
class ApiState:
    ready: dict[ModelKey, bool] = field(default_factory=dict)
    # by model name (config is per model); only models the last good index lists as READY
    max_batch_size: dict[str, int] = field(default_factory=dict)
    batch_stats: dict[ModelKey, dict[int, BatchStat]] = field(default_factory=dict)
    # by model name: why Triton may not count its errors (tritonwatch/uncounted.py), from the configs
    uncounted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    ensembles: dict[str, tuple[str, ...]] = field(default_factory=dict)  # ensemble -> its step models
    placement: dict[str, Placement] = field(default_factory=dict)  # by model name, like max_batch_size
    batching: dict[str, str] = field(default_factory=dict)  # by model name: exporters/batching.py
    # by model name, only models whose config was read: decides what Triton's first-response
    # histogram is (exporters/native_latency.py): request latency, or time to first token
    decoupled: dict[str, bool] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigEntry:
    """A model's configuration as last read: its value (kept over a failed refresh) and when to ask again."""

    config: ConfigReading | None
    retry_at: float
    failures: int = 0  # consecutive failed reads: the backoff doubles with each


class TritonApi(Source):
    """Target ``triton_api``: three endpoints, each on its own interval, each failing on its own.

    * repository index every ``index_interval``: readiness;
    * statistics every ``stats_interval``: the batch-size distribution;
    * each READY model's config every ``config_interval``: its
      ``max_batch_size`` and, for an ensemble, its steps (a malformed ``ensemble_scheduling`` is a
      ``bad_json`` config). A failed read is retried after ``interval`` x 2^(failures-1), at most
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
        self.client = TritonClient(base_url, timeout)
        self.base = self.client.base
        self.config_refresh = config_refresh
        self.state = ApiState()
        self._configs: dict[str, ConfigEntry] = {}
        self._next: dict[str, float] = {}  # endpoint -> when it is next due
        self._failed: dict[str, tuple[str, str]] = {}  # endpoint -> its last failure, while it lasts

    def describe(self) -> str:
        return self.base

    def _index(self) -> dict[ModelKey, bool]:
        ready: dict[ModelKey, bool] = {}
        for entry in self.client.index():
            if not entry.version:
                continue  # an unloaded model lists no version: nothing to report
            ready[(entry.name, entry.version)] = entry.ready
        if len(ready) > self.max_models:  # the same cardinality cap as /metrics (counted there)
            ready = dict(sorted(ready.items())[: self.max_models])
        return ready

    def _config(self, model: str) -> ConfigReading:
        cfg = self.client.config(model)  # a malformed one (ensemble_scheduling too) is bad_json
        return ConfigReading(
            cfg.max_batch_size,
            cfg.steps,
            uncounted.shape(cfg),
            placement(cfg),
            batching_config(cfg),
            cfg.decoupled,
        )

    def _batch_stats(self, errors: list[tuple[str, str]]) -> dict[ModelKey, dict[int, BatchStat]]:
        url = self.client.stats_url()
        # A number out of range costs only the model whose entry holds it (NaN fails its checks).
        stats = self.client.stats(out_of_range=lambda _text: math.nan)
        out: dict[ModelKey, dict[int, BatchStat]] = {}
        for m in stats:
            try:
                key, per = _model_batch_stats(m)
            except _TooMany as exc:
                errors.append(("stats_too_many_batch_sizes", f"{url}: {exc}"))
                continue
            except (AttributeError, KeyError, TypeError, ValueError, OverflowError):
                # That model's whole distribution or nothing (a half-read one would be a guess);
                # the other models' stand.
                name = str(m.get("name"))[:80] if isinstance(m, dict) else "?"
                errors.append(("stats_bad_json", f"{url}: model {name!r}: not the statistics API's shape"))
                continue
            out[key] = per
        return out

    def _due(self, endpoint: str, now: float, every: float) -> bool:
        if now < self._next.get(endpoint, -math.inf):
            return False
        self._next[endpoint] = now + every
        return True

    def _configs_for(
        self, ready: dict[ModelKey, bool], now: float, errors: list[tuple[str, str]]
    ) -> dict[str, ConfigReading]:
        models = sorted({m for (m, _v), ok in ready.items() if ok})
        self._configs = {m: e for m, e in self._configs.items() if m in models}  # unloaded: forgotten
        # Config reads stop for this tick once they have taken an interval: 50 configs that hang must
        # not hold back readiness and the statistics. The models left are due first at the next tick.
        stop_at = time.monotonic() + self.interval
        for model in models:
            entry = self._configs.get(model)
            if entry is not None and now < entry.retry_at:
                continue
            if time.monotonic() >= stop_at:
                break  # (each read that timed out is counted; the rest are only later)
            try:
                self._configs[model] = ConfigEntry(self._config(model), now + self.config_refresh)
            except ScrapeError as exc:
                failures = entry.failures + 1 if entry else 1
                backoff = min(self.config_refresh, self.interval * 2 ** (failures - 1))
                kept = entry.config if entry else None
                self._configs[model] = ConfigEntry(kept, now + backoff, failures)
                errors.append((f"config_{exc.reason}", str(exc)))
        return {m: e.config for m, e in self._configs.items() if e.config is not None}

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
                batch = self._batch_stats(errors)
                self._failed.pop("stats", None)
            except ScrapeError as exc:
                batch = {}
                self._failed["stats"] = (f"stats_{exc.reason}", str(exc))
                errors.append(self._failed["stats"])
        configs = self._configs_for(ready, now, errors)
        mbs = {m: c.max_batch_size for m, c in configs.items()}
        ensembles = {m: c.steps for m, c in configs.items() if c.steps is not None}
        blind = uncounted.reasons({m: c.shape for m, c in configs.items() if c.shape is not None})
        place = {m: c.placement for m, c in configs.items() if c.placement is not None}
        batching = {m: c.batching for m, c in configs.items() if c.batching is not None}
        if ready:  # the index's cap and unloaded models apply to the statistics too
            batch = {k: v for k, v in batch.items() if k in ready}
        elif len(batch) > self.max_models:
            batch = dict(sorted(batch.items())[: self.max_models])
        # one atomic swap
        self.state = ApiState(
            ready=ready,
            max_batch_size=mbs,
            batch_stats=batch,
            uncounted=blind,
            ensembles=ensembles,
            placement=place,
            batching=batching,
            decoupled={m: c.decoupled for m, c in configs.items()},
        )
        return Partial(tuple(errors), up=not self._failed)

    def on_failure(self) -> None:
        self.state = ApiState()
        self._next.clear()  # read every endpoint again at the next tick


def _count(value: object) -> float:
    n = float(value)  # type: ignore[arg-type]  # anything else raises, and the caller says bad_json
    if not math.isfinite(n) or n < 0:
        raise ValueError(f"not a count: {value!r}")
    return n


class _TooMany(ValueError):
    """A model reports more batch sizes than ``MAX_BATCH_SIZES``."""


def _model_batch_stats(m: dict[str, Any]) -> tuple[ModelKey, dict[int, BatchStat]]:
    entries = m.get("batch_stats") or []
    if len(entries) > MAX_BATCH_SIZES:  # checked before any of them is read
        raise _TooMany(
            f"model {str(m.get('name'))[:80]!r}: {len(entries)} batch sizes, over {MAX_BATCH_SIZES}"
        )
    per: dict[int, BatchStat] = {}
    for b in entries:
        execs = _count(b.get("compute_infer", {}).get("count", 0))
        ns = sum(
            _count(b.get(p, {}).get("ns", 0)) for p in ("compute_input", "compute_infer", "compute_output")
        )
        size = b["batch_size"]
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_INT32:
            raise ValueError(f"batch_size {size}")
        per[size] = BatchStat(execs, ns / 1e9)
    return (str(m.get("name")), str(m.get("version", ""))), per
