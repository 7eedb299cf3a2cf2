"""The sidecar's Collector: builds every family from the sources' latest state, the derived ones once
per Triton scrape (``prepare``, from the sidecar's render thread).

It never calls Triton on Prometheus's request path. Emits (labels ``model``, ``version`` unless noted):

    tritonwatch_up{target}                      1/0 per configured target (triton_api: index and stats)
    tritonwatch_scrape_duration_seconds{target} fetch + parse + derive of the last scrape
    tritonwatch_scrape_errors_total{target,reason}
    tritonwatch_models_dropped_total            models over --max-models, summed over scrapes
    tritonwatch_model_ready                     1/0 from the repository index
    tritonwatch_model_max_batch_size            from the model config
    tritonwatch_model_uncounted_errors_info{reason}  1 where Triton may not count the model's errors
    tritonwatch_model_request_rate, _error_ratio, _latency_seconds{phase}, _queue_time_ratio,
    tritonwatch_model_batch_size, _batch_efficiency_ratio, _cache_hit_ratio, _pending_requests
    tritonwatch_model_batch_executions_total{batch_size}, _batch_compute_seconds_total{batch_size}
    tritonwatch_model_batching_info{config}     1; config: the batching part of the model config (JSON)
    tritonwatch_model_role_info{role}           1: ensemble, step, bls or model (READY models)
    tritonwatch_ensemble_step_info{step,position}  1 per step of an ensemble (READY ensembles)

An ensemble's error ratio and queue share take their ensemble formulas and it has no batch size
(``catalog.ENSEMBLE_VARIANTS``).

A value that is undefined over the window (no traffic, no cache) is absent, never 0 or NaN; when the
``triton`` target is down, the derived families are absent rather than stale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from itertools import compress

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tritonwatch import catalog
from tritonwatch.catalog import Signal
from tritonwatch.exporters.derive import evaluate_many
from tritonwatch.exporters.exposition import TextFamily, Texts
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.source import Health
from tritonwatch.exporters.triton import ApiState, TritonApi, TritonMetrics
from tritonwatch.exporters.window import CounterWindow, ModelKey

# The window's values for one update: the models, and per signal its value for each (None: undefined).
_Columns = tuple[list[ModelKey], list[tuple[Signal, list[float | None]]]]


def health_families(healths: Sequence[Health]) -> Iterator[Metric]:
    up = GaugeMetricFamily(
        catalog.UP,
        "1 if the last scrape of the target succeeded, else 0 (triton_api: the last repository index "
        "and statistics reads; a model config that cannot be read is only counted in scrape_errors_total).",
        labels=[catalog.TARGET],
    )
    dur = GaugeMetricFamily(
        catalog.SCRAPE_DURATION,
        "Seconds the last scrape of the target took (fetch, parse, derive).",
        labels=[catalog.TARGET],
    )
    errors = CounterMetricFamily(
        catalog.SCRAPE_ERRORS.removesuffix("_total"),
        "Failed scrapes of the target, by reason.",
        labels=[catalog.TARGET, "reason"],
    )
    for h in healths:
        up.add_metric([h.target], h.up)
        dur.add_metric([h.target], h.duration)
        for reason, n in sorted(h.errors.items()):
            errors.add_metric([h.target, reason], n)
    yield up
    yield dur
    yield errors


def pipeline_families(
    st: ApiState, bls: frozenset[str] = frozenset(), texts: Texts | None = None
) -> Iterator[Metric]:
    """``tritonwatch_model_role_info`` and ``tritonwatch_ensemble_step_info`` from the READY models'
    configs (and the BLS callers the traces saw)."""
    labels = list(catalog.MODEL_KEY)
    roles = TextFamily(
        catalog.MODEL_ROLE_INFO, catalog.MODEL_ROLE_INFO_HELP, labels + [catalog.ROLE], texts=texts
    )
    steps = TextFamily(
        catalog.ENSEMBLE_STEP_INFO,
        catalog.ENSEMBLE_STEP_INFO_HELP,
        labels + [catalog.STEP, catalog.POSITION],
        texts=texts,
    )
    named = {step for chain in st.ensembles.values() for step in chain}
    for (model, version), ok in sorted(st.ready.items()):
        if not ok or model not in st.max_batch_size:
            continue  # no config read (yet): its role is not known
        if model in st.ensembles:
            role = catalog.ROLE_ENSEMBLE
            for position, step in enumerate(st.ensembles[model], start=1):
                steps.add_metric([model, version, step, str(position)], 1.0)
        elif model in named:
            role = catalog.ROLE_STEP
        elif model in bls:
            role = catalog.ROLE_BLS
        else:
            role = catalog.ROLE_MODEL
        roles.add_metric([model, version, role], 1.0)
    yield roles
    yield steps


class SidecarCollector(Collector):
    """The families of the two Triton targets, then each part's.

    ``prepared``: the render thread calls ``prepare()`` after each update (``PartContext.prepared``),
    and ``collect()`` serves the derived families last prepared, at most one update behind, instead
    of building them on a request's time. ``bls``: the models seen calling others (role ``bls``).
    """

    def __init__(
        self,
        metrics: TritonMetrics,
        api: TritonApi | None,
        parts: Sequence[Part] = (),
        prepared: bool = False,
        bls: Callable[[], frozenset[str]] = frozenset,
        texts: Texts | None = None,
    ) -> None:
        self.metrics = metrics
        self.api = api
        self.parts = list(parts)
        self.prepared = prepared
        self.bls_models = bls
        self.texts = texts or Texts()
        self.sources = [metrics] + ([api] if api else [])
        self._derived_cache: tuple[int, list[Metric], dict[tuple[str, str], float]] | None = None
        # Families rebuilt only when their input changes (the same objects are yielded again until
        # then, and the exposition keeps their text by identity).
        self._api_cache: tuple[object, list[Metric]] | None = None
        # per signal's constant label values: (models, each model's label set) of the last update
        self._label_columns: dict[tuple[str, ...], tuple[list[ModelKey], list[tuple[str, ...]]]] = {}
        self._efficiency_cache: tuple[tuple[int, object], Metric] | None = None

    def healths(self) -> list[Health]:
        return [s.health for s in self.sources] + [p.health for p in self.parts if p.health is not None]

    def collect(self) -> Iterator[Metric]:
        yield from health_families(self.healths())
        dropped = CounterMetricFamily(
            catalog.MODELS_DROPPED.removesuffix("_total"),
            "Models left out of the sidecar's output over --max-models, summed over scrapes.",
        )
        dropped.add_metric([], self.metrics.dropped_models)
        yield dropped
        yield from self._api_families()
        yield from self._derived_families()
        for part in self.parts:
            yield from part.collect()

    def _api_families(self) -> Iterator[Metric]:
        if self.api is None:
            return
        st = self.api.state  # replaced whole by each API scrape: its identity is its version
        cached = self._api_cache
        if cached is None or cached[0] is not st:
            cached = self._api_cache = (st, list(self._build_api_families(st)))
        yield from cached[1]

    def _build_api_families(self, st: ApiState) -> Iterator[Metric]:
        labels = list(catalog.MODEL_KEY)
        texts = self.texts
        ready = TextFamily(catalog.MODEL_READY, catalog.MODEL_READY_HELP, labels, texts=texts)
        mbs = TextFamily(catalog.MAX_BATCH_SIZE, catalog.MAX_BATCH_SIZE_HELP, labels, texts=texts)
        blind = TextFamily(
            catalog.MODEL_UNCOUNTED_ERRORS,
            catalog.MODEL_UNCOUNTED_ERRORS_HELP,
            [*labels, catalog.REASON],
            texts=texts,
        )
        for (model, version), ok in sorted(st.ready.items()):
            ready.add_metric([model, version], 1.0 if ok else 0.0)
            if ok and model in st.max_batch_size:
                mbs.add_metric([model, version], float(st.max_batch_size[model]))
            for reason in st.uncounted.get(model, ()) if ok else ():
                blind.add_metric([model, version, reason], 1.0)
        execs = TextFamily(
            catalog.BATCH_EXECUTIONS.removesuffix("_total"),
            "Executions by batch size, from the statistics API's batch_stats (resets with Triton).",
            labels + [catalog.BATCH_SIZE],
            "counter",
            texts,
        )
        compute = TextFamily(
            catalog.BATCH_COMPUTE.removesuffix("_total"),
            "Compute time (input + infer + output) of executions by batch size, from batch_stats.",
            labels + [catalog.BATCH_SIZE],
            "counter",
            texts,
        )
        for (model, version), per in sorted(st.batch_stats.items()):
            for size, stat in sorted(per.items()):
                execs.add_metric([model, version, str(size)], stat.executions)
                compute.add_metric([model, version, str(size)], stat.compute_seconds)
        # issue 27: the batching config for advise --prometheus (exporters/batching.py)
        batching = TextFamily(
            catalog.MODEL_BATCHING_INFO,
            catalog.MODEL_BATCHING_INFO_HELP,
            [*labels, catalog.CONFIG],
            texts=texts,
        )
        for (model, version), ok in sorted(st.ready.items()):
            if ok and model in st.batching:
                batching.add_metric([model, version, st.batching[model]], 1.0)
        yield from (ready, mbs, blind, execs, compute, batching)
        yield from pipeline_families(st, self.bls_models(), texts)

    def prepare(self) -> bool:
        """Build the derived families of the latest Triton scrape if not yet built; True if it did.

        The sidecar calls it from its render thread after each update, so that with
        ``prepared`` a request never waits for this (the costly part at thousands of models)."""
        with self.metrics.lock:
            window = self.metrics.window
            generation = window.generation
            if self.prepared_generation == generation:
                return False
            # Only the window's reads under the scrape's lock (the scrape's ingest waits on it);
            # the families are written from them after.
            columns = self._read(window)
        self._derived_cache = (generation, *self._families(columns))
        return True

    @property
    def prepared_generation(self) -> int | None:
        """The window generation the derived families now served were built from; None before the
        first. With ``prepared`` it can trail the window's while the render thread works."""
        cached = self._derived_cache
        return None if cached is None else cached[0]

    def _derived_families(self) -> Iterator[Metric]:
        metrics = self.metrics
        # Served as last prepared, without the scrape's lock: prepare() holds it while it evaluates
        # (up to a second on a loaded machine at thousands of models), and a request waiting for it
        # held every other request behind the render lock (the slow GETs of issue 17). The latest
        # snapshot is one attribute read (Snapshots.serving: values never outrun up 1). Not
        # prepared (yet): built here, under the lock.
        served = self.prepared and self._derived_cache is not None
        with nullcontext() if served else metrics.lock:
            if metrics.snapshots.serving() is None:
                return
            cached = self._derived_cache
            if not served:
                window = metrics.window
                if cached is None or (cached[0] != window.generation and not self.prepared):
                    # Built once per Triton scrape, whatever the number of Prometheus scrapes.
                    cached = self._derived_cache = (window.generation, *self._families(self._read(window)))
            assert cached is not None
            generation, families, sizes = cached
        yield from families
        state = self.api.state if self.api else None
        eff = self._efficiency_cache
        if eff is None or eff[0][0] != generation or eff[0][1] is not state:
            eff = self._efficiency_cache = ((generation, state), self._efficiency(sizes))
        yield eff[1]

    def _read(self, window: CounterWindow) -> _Columns:
        """Every signal's value for every model (in model order), read under the scrape's lock; an
        ensemble's by its ensemble formula, or None where the signal is undefined for one."""
        models = sorted(window.models)
        ensembles = self.api.state.ensembles if self.api else {}
        at = [i for i, (m, _v) in enumerate(models) if m in ensembles]
        columns = []
        for sig in window.signals:
            column = evaluate_many(window, sig, models)
            variant = catalog.ensemble_variant(sig) if at else sig
            if variant is not sig:
                keys = [models[i] for i in at]
                values = evaluate_many(window, variant, keys) if variant else [None] * len(keys)
                for i, v in zip(at, values, strict=True):
                    column[i] = v
            columns.append((sig, column))
        return models, columns

    def _families(self, columns: _Columns) -> tuple[list[Metric], dict[tuple[str, str], float]]:
        models, values_of = columns
        families: dict[str, TextFamily] = {}
        sizes: dict[tuple[str, str], float] = {}
        for sig, column in values_of:
            fam = families.get(sig.name)
            if fam is None:
                const = [k for k, _ in sig.labels]
                fam = families[sig.name] = TextFamily(
                    sig.name, sig.help, list(catalog.MODEL_KEY) + const, texts=self.texts
                )
            extra = tuple(v for _, v in sig.labels)
            all_labels = self._label_column(extra, models)
            # Undefined (None), NaN and negative values are left out: "not v >= 0" is the last two.
            keep = [v is not None and v >= 0.0 for v in column]
            values = list(compress(column, keep))
            fam.add_many(list(compress(all_labels, keep)), values)  # type: ignore[arg-type]  # no None kept
            if sig.name == catalog.BATCH_SIZE_MEAN:
                sizes.update(zip(compress(models, keep), values, strict=True))  # type: ignore[arg-type]
        return list(families.values()), sizes

    def _label_column(self, extra: tuple[str, ...], models: list[ModelKey]) -> list[tuple[str, ...]]:
        """Each model's label set with ``extra`` appended: the same tuples every update while the
        models are the same (a new tuple per sample and update is garbage for the collector to walk,
        and the exposition's text cache finds the same tuples faster)."""
        cached = self._label_columns.get(extra)
        if cached is not None and cached[0] == models:
            return cached[1]
        labels = [key + extra for key in models]
        self._label_columns[extra] = (models, labels)
        return labels

    def _efficiency(self, sizes: dict[tuple[str, str], float]) -> Metric:
        eff = TextFamily(
            catalog.BATCH_EFFICIENCY, catalog.BATCH_EFFICIENCY_HELP, list(catalog.MODEL_KEY), texts=self.texts
        )
        mbs = self.api.state.max_batch_size if self.api else {}
        for (model, version), size in sorted(sizes.items()):
            value = catalog.BATCH_EFFICIENCY_SIGNAL.value(size, mbs.get(model))
            if value is not None:
                eff.add_metric([model, version], value)
        return eff
