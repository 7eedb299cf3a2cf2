"""Signals: each derived per-model signal once, with its formula as data (``Term`` lists).

The sidecar evaluates a ``Signal`` over reset-aware counter increases (``exporters/window.py``);
``tritonwatch.catalog.render`` renders the same entry as PromQL; ``Signal.inverse`` gives the input
increases that make it read a value (the promtool cases and the synthetic weeks write those).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TypeVar

from tritonwatch.catalog.names import (
    BATCH_EFFICIENCY,
    BATCH_SIZE_MEAN,
    CACHE_HIT_RATIO,
    CLIENT_FAILURE_REASONS,
    COMPUTE_PHASES,
    ENSEMBLE_FAILURES_PER_REQUEST,
    ERROR_RATIO,
    LATENCY,
    MAX_BATCH_SIZE,
    PENDING_REQUESTS,
    PHASE,
    PHASES,
    QUEUE_TIME_RATIO,
    REQUEST_RATE,
    TRITON_CACHE_HITS,
    TRITON_CACHE_MISSES,
    TRITON_EXEC_COUNT,
    TRITON_FAILURE,
    TRITON_INFERENCE_COUNT,
    TRITON_PENDING,
    TRITON_SUCCESS,
    triton_duration,
)

# A value the inverses work in: Decimal for the promtool cases (exact text), float for the synthetic
# weeks (numpy arrays of floats pass as float).
_N = TypeVar("_N", float, Decimal)


# --- formulas -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Term:
    """A Triton counter, optionally restricted by label values, optionally scaled."""

    family: str
    exclude: tuple[tuple[str, tuple[str, ...]], ...] = ()
    scale: float = 1.0

    def matcher(self) -> str:
        if not self.exclude:
            return self.family
        parts = [f'{label}!~"{"|".join(values)}"' for label, values in self.exclude]
        return f"{self.family}{{{','.join(parts)}}}"

    def accepts(self, labels: dict[str, str]) -> bool:
        return not any(labels.get(label, "") in values for label, values in self.exclude)


@dataclass(frozen=True)
class View:
    """How people see a signal: the dashboard panels that show it alone take their title and
    description from here (their unit is the signal's), the capacity report's model table its
    column header ("" where the report has no column for it) and ``field``, the name of its figure in
    the report (the CSV column, the ``ModelWeek`` attribute; "" where it has none). ``drilldown``: the
    model drill-down gives it a time-series panel of its own after the hand-placed ones, so a new signal
    needs no dashboard code to be seen (the hand-placed panels leave it False)."""

    title: str
    description: str
    column: str = ""
    field: str = ""
    drilldown: bool = False


@dataclass(frozen=True)
class Signal:
    """One derived per-model signal.

    ``kind``:
      * ``rate``  -- increase(numerator) / seconds;
      * ``ratio`` -- increase(numerator) / increase(denominator) (each a sum of terms);
      * ``gauge`` -- the latest value of ``numerator``'s single term, summed over the model's series.
    ``record`` is the recording rule that computes the same thing in Prometheus.
    """

    name: str
    help: str
    unit: str  # Grafana unit id; also documents the Prometheus unit suffix
    kind: str
    numerator: tuple[Term, ...]
    denominator: tuple[Term, ...] = ()
    record: str = ""
    labels: tuple[tuple[str, str], ...] = ()  # constant labels, e.g. (("phase", "queue"),)
    subtract: tuple[Term, ...] = ()  # removed from the denominator (cache hits from executed requests)
    view: View | None = None  # None: no panel of its own (the phases share one stacked panel)
    minus: tuple[Term, ...] = ()  # removed from the numerator (an ensemble's compute from its request time)

    def terms(self) -> tuple[Term, ...]:
        return self.numerator + self.denominator + self.subtract + self.minus

    def all_families(self) -> tuple[str, ...]:
        return tuple(t.family for t in self.terms())

    def inverse(self, value: _N, total: _N) -> dict[str, _N]:
        """Increases of the ratio's inputs over a window that make it read ``value``, the denominator's
        increase being ``total``: what the promtool cases and the synthetic weeks write.

        In the denominator's order, then the numerator where it is not among them: the numerator is
        value x total; a denominator term that is not the numerator is the rest of total where the
        numerator is one of its terms (cache hits of hits + misses), else total.
        """
        num = self.numerator[0] if len(self.numerator) == 1 else None
        den = self.denominator
        plain = num is not None and num.scale == 1.0 and all(t.scale == 1.0 for t in den)
        if self.kind != "ratio" or self.subtract or self.minus or num is None or not plain:
            raise ValueError(f"{self.name} has no inverse")
        part = value * total
        if num in den and len(den) == 2:
            return {t.family: part if t == num else total - part for t in den}
        if num not in den and len(den) == 1:
            return {den[0].family: total, num.family: part}
        raise ValueError(f"{self.name} has no inverse")


_SUCCESS = Term(TRITON_SUCCESS)
_SERVER_FAILURE = Term(TRITON_FAILURE, exclude=(("reason", CLIENT_FAILURE_REASONS),))
_CACHE_HITS = Term(TRITON_CACHE_HITS)


def _latency(phase: str) -> Signal:
    # Queue and request durations include cache hits; compute durations do not, so their mean is
    # per executed request (successes less cache hits).
    compute = phase.startswith("compute")
    return Signal(
        name=LATENCY,
        help="Mean time per request in a phase over the window (Triton duration counters / requests).",
        unit="s",
        kind="ratio",
        numerator=(Term(triton_duration(phase), scale=1e-6),),
        denominator=(_SUCCESS,),
        subtract=(_CACHE_HITS,) if compute else (),
        record="model:tritonwatch_latency_seconds:mean5m",
        labels=((PHASE, phase),),
    )


SIGNALS: tuple[Signal, ...] = (
    Signal(
        name=REQUEST_RATE,
        help="Successful inference requests per second over the window.",
        unit="reqps",
        kind="rate",
        numerator=(_SUCCESS,),
        record="model:tritonwatch_request_rate:rate5m",
        view=View(
            "Request rate",
            "Successful inference requests per second, per model and version, summed across replicas.",
        ),
    ),
    Signal(
        name=ERROR_RATIO,
        help="Failed requests (reason other than CANCELED) over all requests in the window.",
        unit="percentunit",
        kind="ratio",
        numerator=(_SERVER_FAILURE,),
        denominator=(_SUCCESS, _SERVER_FAILURE),
        record="model:tritonwatch_error_ratio:rate5m",
        view=View(
            "Error ratio",
            "Failed requests (reason other than CANCELED) over all requests, per model and version.",
            column="error ratio",
            field="error_ratio",
        ),
    ),
    *(_latency(p) for p in PHASES),
    Signal(
        name=QUEUE_TIME_RATIO,
        help="Share of request time spent queued (queue duration / request duration) over the window.",
        unit="percentunit",
        kind="ratio",
        numerator=(Term(triton_duration("queue")),),
        denominator=(Term(triton_duration("request")),),
        record="model:tritonwatch_queue_time_ratio:rate5m",
        view=View(
            "Queue share",
            "Share of request time spent waiting in Triton's queue (queue duration / request duration); "
            "above ~50% the model needs more instances or batching.",
            column="queue share",
            field="queue_share",
        ),
    ),
    Signal(
        name=BATCH_SIZE_MEAN,
        help="Mean executed batch size (inferences per execution, cache hits excluded) over the window.",
        unit="short",
        kind="ratio",
        numerator=(Term(TRITON_INFERENCE_COUNT),),
        denominator=(Term(TRITON_EXEC_COUNT),),
        record="model:tritonwatch_batch_size:mean5m",
        view=View(
            "Mean batch vs max_batch_size",
            "Mean executed batch size (inferences / executions) against the configured max_batch_size.",
            column="mean batch",
            field="mean_batch_size",
        ),
    ),
    Signal(
        name=CACHE_HIT_RATIO,
        help="Response cache hits over cache lookups over the window.",
        unit="percentunit",
        kind="ratio",
        numerator=(Term(TRITON_CACHE_HITS),),
        denominator=(Term(TRITON_CACHE_HITS), Term(TRITON_CACHE_MISSES)),
        record="model:tritonwatch_cache_hit_ratio:rate5m",
        view=View(
            "Cache hit ratio",
            "Response cache hits over cache lookups (models with the response cache on).",
            column="cache hits",
            field="cache_hit_ratio",
        ),
    ),
    Signal(
        name=PENDING_REQUESTS,
        help="Requests received by Triton and not yet executing (queued), summed over GPUs.",
        unit="short",
        kind="gauge",
        numerator=(Term(TRITON_PENDING),),
        record="model:tritonwatch_pending_requests:sum",
        view=View(
            "Pending requests",
            "Requests received and not yet executing (queued), summed across replicas and GPUs.",
        ),
    ),
)


@dataclass(frozen=True)
class ConfigRatio:
    """A signal over a value only the model config knows: ``of`` (a signal's value over the window)
    divided by ``by`` (the sidecar's gauge of the config value), defined where ``by`` is above 0.

    ``value`` is the sidecar's formula, ``render.config_ratio_promql`` the rules' and panels' (the
    same division, ``> 0`` on the config gauge), ``inverse`` the ``of`` value that makes it read a
    given value (the promtool cases write inputs for that).
    """

    name: str
    help: str
    unit: str
    of: str  # the exported signal divided
    by: str  # the config gauge it is divided by
    record: str
    view: View

    def value(self, of: float | None, by: float | None) -> float | None:
        return of / by if of is not None and by is not None and by > 0 else None

    def inverse(self, value: _N, by: _N) -> _N:
        return value * by


# Batch efficiency needs the model config (max_batch_size), not only /metrics: defined apart.
BATCH_EFFICIENCY_SIGNAL = ConfigRatio(
    name=BATCH_EFFICIENCY,
    help="Mean executed batch size over the model's max_batch_size, over the window.",
    unit="percentunit",
    of=BATCH_SIZE_MEAN,
    by=MAX_BATCH_SIZE,
    record="model:tritonwatch_batch_efficiency_ratio:mean5m",
    view=View(
        "Batch efficiency",
        "Mean executed batch size over the model's max_batch_size: how full the batches Triton runs are "
        "(models that batch).",
        column="batch efficiency",
        field="batch_efficiency",
    ),
)
BATCH_EFFICIENCY_RECORD = BATCH_EFFICIENCY_SIGNAL.record
BATCH_EFFICIENCY_HELP = BATCH_EFFICIENCY_SIGNAL.help
BATCH_EFFICIENCY_UNIT = BATCH_EFFICIENCY_SIGNAL.unit
BATCH_EFFICIENCY_VIEW = BATCH_EFFICIENCY_SIGNAL.view


def signal(name: str, **labels: str) -> Signal:
    """Look a signal up by exported name and constant labels (e.g. ``phase="queue"``)."""
    want = tuple(sorted(labels.items()))
    for s in SIGNALS:
        if s.name == name and tuple(sorted(s.labels)) == want:
            return s
    raise KeyError(f"no signal {name} {labels}")


def entry(name: str) -> Signal | ConfigRatio:
    """A signal without constant labels by exported name, batch efficiency (defined apart) included."""
    return BATCH_EFFICIENCY_SIGNAL if name == BATCH_EFFICIENCY_SIGNAL.name else signal(name)


def view(name: str) -> tuple[View, str]:
    """A signal's view and unit, by exported name (batch efficiency, defined apart, included)."""
    sig = entry(name)
    if sig.view is None:
        raise KeyError(f"signal {name} has no panel of its own")
    return sig.view, sig.unit


# The capacity report's per-model ratio figures, in its column order: each is queried with its entry's
# formula over the period and shown under its view's ``column`` as ``field`` (a signal added here gets
# its report column and CSV field with nothing else to write).
REPORTED: tuple[Signal | ConfigRatio, ...] = (
    BATCH_EFFICIENCY_SIGNAL,
    signal(CACHE_HIT_RATIO),
    signal(QUEUE_TIME_RATIO),
)

REQUEST_RATE_RECORD = signal(REQUEST_RATE).record
ERROR_RATIO_RECORD = signal(ERROR_RATIO).record


# --- ensembles: signals whose formula differs for a model whose role is ensemble ------------------
# An ensemble's counters: its failures are counted ENSEMBLE_FAILURES_PER_REQUEST times; its queue
# duration is its own scheduling only (microseconds) while its compute durations are the sums over
# its steps, so the time its requests wait in its steps' queues (and hand-overs) is request - compute;
# it executes nothing itself, so it has no batch size.
_ENSEMBLE_FAILURE = Term(
    TRITON_FAILURE, exclude=(("reason", CLIENT_FAILURE_REASONS),), scale=1.0 / ENSEMBLE_FAILURES_PER_REQUEST
)
# None: the signal is not defined for an ensemble (absent, as any undefined value).
ENSEMBLE_VARIANTS: dict[tuple[str, tuple[tuple[str, str], ...]], Signal | None] = {
    (ERROR_RATIO, ()): replace(
        signal(ERROR_RATIO), numerator=(_ENSEMBLE_FAILURE,), denominator=(_SUCCESS, _ENSEMBLE_FAILURE)
    ),
    (QUEUE_TIME_RATIO, ()): replace(
        signal(QUEUE_TIME_RATIO),
        numerator=(Term(triton_duration("request")),),
        minus=tuple(Term(triton_duration(p)) for p in COMPUTE_PHASES),
    ),
    (BATCH_SIZE_MEAN, ()): None,
}


ENSEMBLE_SIGNALS: tuple[Signal, ...] = tuple(v for v in ENSEMBLE_VARIANTS.values() if v is not None)


def ensemble_variant(sig: Signal) -> Signal | None:
    """The signal as computed for an ensemble: ``sig`` itself, its variant, or None (undefined)."""
    return ENSEMBLE_VARIANTS.get((sig.name, sig.labels), sig)
