"""Findings a person can act on, each with a stable ``code`` (tests and tickets key on it).

=======================  ==================================================================================
code                     when
=======================  ==================================================================================
saturation               weeks to saturation (the date the report leads with) under ``SATURATION_WEEKS``
                         (action under ``URGENT_WEEKS``): a GPU, naming its models, or a model with a
                         latency-bound or declared capacity; both growth models are named
low_headroom             the period's peak within ``LOW_HEADROOM`` of capacity
availability_missed      availability below the SLO file's objective
latency_missed           p99 above the SLO file's latency threshold
batching_delay           batch efficiency low while little time is spent queued: batches leave half empty
queueing                 a large share of request time is queueing: more instances or GPUs
cache_ineffective        the response cache is on but rarely hits
=======================  ==================================================================================

Thresholds come from the SLO file's operational objectives (``batch_efficiency.min``,
``queue_time_ratio.max``, ``cache_hit_ratio.min``) when it sets them, else from the catalog's
(``OperationalObjective.report_default``, ``BATCHING_DELAY_QUEUE_MAX``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from tritonwatch import catalog
from tritonwatch.reports.capacity import MODEL_NAMES, Forecast, Saturation
from tritonwatch.reports.figures import BY_RATE, GpuFigures, ModelFigures, lead_weeks
from tritonwatch.reports.formats import percent
from tritonwatch.slo import SLO

SATURATION_WEEKS = 8.0
URGENT_WEEKS = 4.0
LOW_HEADROOM = 0.2
# Thresholds: the SLO file's, else the catalog's operational objectives' report defaults (their one home).
_QUEUE = catalog.operational_objective(catalog.QUEUE_TIME_HIGH_ALERT)
_BATCH = catalog.operational_objective(catalog.BATCH_EFFICIENCY_LOW_ALERT)
_CACHE = catalog.operational_objective(catalog.CACHE_HIT_RATIO_LOW_ALERT)

SEVERITIES = ("action", "watch")


MODEL, GPU = "model", "gpu"  # a finding's kind
NEW, ONGOING, RESOLVED = "new", "ongoing", "resolved"  # against the newest earlier archived week


@dataclass(frozen=True)
class Finding:
    """``text`` leads with what to do (and by when), then the figures that say why."""

    code: str
    severity: str  # "action" or "watch"
    kind: str  # MODEL or GPU
    subject: str  # "resnet:1" (model:version, as the report names it) or the GPU's uuid
    text: str
    model: str = ""  # the model and version of a model's finding (the CSV's model, version columns)
    version: str = ""
    status: str = ""  # NEW, ONGOING or RESOLVED with an archive; empty without one

    @property
    def key(self) -> tuple[str, str, str]:
        """What makes a finding the same one next week: its code and what it is about."""
        return (self.code, self.kind, self.subject)

    @property
    def label(self) -> str:
        """``model resnet:1`` or ``GPU GPU-...``: how a reader sees the subject."""
        return f"{'GPU' if self.kind == GPU else 'model'} {self.subject}"


def _range(s: Saturation) -> str:
    if s.weeks_low is None or s.weeks == 0.0:
        return ""
    if s.weeks_high is not None:
        return f", 95 % range {s.weeks_low:.1f}–{s.weeks_high:.1f}"
    return f", at the earliest {s.weeks_low:.1f}"


def _date(end: datetime, weeks: float) -> str:
    return (end + timedelta(weeks=weeks)).strftime("%Y-%m-%d")


def saturation_text(fc: Forecast, end: datetime) -> tuple[str, str]:
    """When it saturates: the date the report leads with (``2026-12-23 (in 2.3 weeks)``), and which
    growth model says so, with the other's answer where the two disagree. How the fit was chosen (AIC,
    R²) is the method note's."""
    lead, best, other = fc.lead, fc.best, fc.other
    assert lead is not None and lead.weeks is not None and best is not None
    when = f"{_date(end, lead.weeks)} (in {lead.weeks:.1f} weeks)"
    said = f"{MODEL_NAMES[lead.fit.kind]} growth{_range(lead)}"
    if lead is best:
        why = f"{said}, the better fit"
        if other is not None and fc.disagree:
            alt = f"{other.weeks:.1f} weeks" if other.weeks is not None else "no date"
            why += f"; {MODEL_NAMES[other.fit.kind]} growth says {alt}"
        return when, why
    alt = f"{best.weeks:.1f} weeks ({_date(end, best.weeks)})" if best.weeks is not None else "no date"
    return when, (
        f"{said}; {MODEL_NAMES[best.fit.kind]} growth, the better fit, says {alt}: plan for the earlier date"
    )


def _capacity(f: ModelFigures) -> str:
    fc = f.forecast
    assert fc is not None
    if f.capacity_source == "headroom":
        return (
            f"its SLO-bound capacity of {fc.capacity:.3g} req/s (the sidecars' estimate from batch_stats, "
            "docs/headroom.md)"
        )
    if f.capacity_source == "latency":
        return f"its latency-bound capacity of {fc.capacity:.3g} req/s (where its latency objective stops being met)"
    return f"its declared capacity of {fc.capacity:g} req/s"


def _where_errors(f: ModelFigures) -> str:
    if f.slo is not None and f.slo.availability is not None and f.slo.availability.source is not None:
        # Triton does not count these errors (docs/uncounted-errors.md): its reasons would show none.
        return f"the errors the front answered ({f.slo.availability.source.errors.promql()})"
    return f"the failure reasons ({catalog.TRITON_FAILURE} by reason)"


def _model(f: ModelFigures, end: datetime) -> list[Finding]:
    m, out = f.week, []
    fc = f.forecast
    weeks = lead_weeks(fc)
    # A model judged by its GPUs is named in that GPU's own saturation finding instead.
    by_rate = f.capacity_source in BY_RATE
    if by_rate and fc is not None and weeks == 0.0:
        out.append(
            Finding(
                "saturation",
                "action",
                MODEL,
                f.name,
                f"Add instances or GPUs now, or shed load: its peak of {fc.peak:.3g} req/s is already at or "
                f"past {_capacity(f)}.",
            )
        )
    elif by_rate and fc is not None and weeks is not None and weeks < SATURATION_WEEKS:
        when, why = saturation_text(fc, end)
        out.append(
            Finding(
                "saturation",
                "action" if weeks < URGENT_WEEKS else "watch",
                MODEL,
                f.name,
                f"Plan more instances or GPUs before {when}: at the fitted growth of daily peaks it reaches "
                f"{_capacity(f)} then; {why}.",
            )
        )
    elif f.headroom is not None and f.headroom < LOW_HEADROOM and by_rate:
        out.append(
            Finding(
                "low_headroom",
                "watch",
                MODEL,
                f.name,
                f"Watch its growth: the period's peak used {percent(1 - f.headroom)} of {_capacity(f)}.",
            )
        )
    if f.availability is not None and f.availability_objective is not None:
        if f.availability < f.availability_objective:
            out.append(
                Finding(
                    "availability_missed",
                    "action",
                    MODEL,
                    f.name,
                    f"Look at {_where_errors(f)} and the error budget alerts this week: availability "
                    f"{percent(f.availability, 3)} is below its objective "
                    f"{percent(f.availability_objective, 3)} (error ratio {percent(1 - f.availability)}, "
                    f"{(1 - f.availability) / (1 - f.availability_objective):.1f}× the error budget).",
                )
            )
    threshold = f.latency_threshold
    if threshold is not None and m.p99_latency_seconds is not None and m.p99_latency_seconds > threshold:
        out.append(
            Finding(
                "latency_missed",
                "action",
                MODEL,
                f.name,
                "Find where request time goes (queue or compute: the latency dashboards) this week: p99 "
                f"latency {m.p99_latency_seconds * 1000:.0f} ms is above the SLO threshold {threshold * 1000:g} ms.",
            )
        )
    slo = f.slo
    eff_min, q_max, hit_min = (_threshold(slo, o) for o in (_BATCH, _QUEUE, _CACHE))
    q = m.queue_share
    if (
        m.batch_efficiency is not None
        and m.batch_efficiency < eff_min
        and q is not None
        and q < catalog.BATCHING_DELAY_QUEUE_MAX
    ):
        out.append(
            Finding(
                "batching_delay",
                "watch",
                MODEL,
                f.name,
                "Raise dynamic_batching max_queue_delay_microseconds so batches fill (fewer executions per "
                f"request): batches run {percent(m.batch_efficiency)} full (mean {m.mean_batch_size:.1f} of "
                f"{m.max_batch_size:g}) while requests spend only {percent(q)} of their time queued.",
            )
        )
    if q is not None and q > q_max:
        out.append(
            Finding(
                "queueing",
                "action",
                MODEL,
                f.name,
                "Add model instances (instance_group count) or GPUs, or raise max_batch_size if the model "
                f"allows it: requests spend {percent(q)} of their time queued.",
            )
        )
    if m.cache_hit_ratio is not None and m.cache_hit_ratio < hit_min:
        out.append(
            Finding(
                "cache_ineffective",
                "watch",
                MODEL,
                f.name,
                "Consider turning response_cache off for this model: it hits "
                f"{percent(m.cache_hit_ratio)} of lookups, for a lookup per request and its memory.",
            )
        )
    return out


def _threshold(slo: SLO | None, objective: catalog.OperationalObjective) -> float:
    """The SLO file's limit for the model, else the catalog's report default."""
    limit = slo.limit(objective) if slo else None
    return objective.report_default if limit is None else limit


def _gpu(g: GpuFigures, end: datetime) -> list[Finding]:
    fc = g.forecast
    weeks = lead_weeks(fc)
    if weeks is None or weeks >= SATURATION_WEEKS:
        return []
    serving = f" (serving {', '.join(g.models)})" if g.models else ""
    peak = f"peak utilisation {percent(fc.peak)}{serving}"
    if weeks == 0.0:
        text = f"Add GPUs or move models now: {peak} is already at 100 %."
    else:
        when, why = saturation_text(fc, end)
        text = (
            f"Plan more GPUs or move models before {when}: {peak} reaches 100 % then at the fitted "
            f"growth of daily peaks; {why}."
        )
    return [Finding("saturation", "action" if weeks < URGENT_WEEKS else "watch", GPU, g.uuid, text)]


def findings(models: list[ModelFigures], gpus: list[GpuFigures], end: datetime) -> list[Finding]:
    out = [replace(x, model=f.week.model, version=f.week.version) for f in models for x in _model(f, end)] + [
        x for g in gpus for x in _gpu(g, end)
    ]
    return sorted(out, key=lambda x: SEVERITIES.index(x.severity))
