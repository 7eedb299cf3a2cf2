"""The one catalog of tritonwatch signals.

Every derived signal is defined here once: its exported name, unit, help text, the Triton series it
reads and its formula. The sidecar (``exporters/``) evaluates the formula over reset-aware counter
increases between its own scrapes; ``promql()`` renders the same formula as a Prometheus expression
that aggregates across replicas (``sum by (model, version, <grouping>)`` of rates, then divided);
the recording rules (``alerts/``), the dashboards and the capacity report all take their queries
from here. Nothing else in the project spells a metric name.

What people see of a signal is here too: its ``View`` (the panel title and description the dashboards
use, the capacity report's column), and the operational alerts (``OPERATIONAL_ALERTS``, among them the
per-model ``OPERATIONAL_OBJECTIVES``) with their ``for`` and texts, which the rules and the promtool
cases render.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

# --- label names ------------------------------------------------------------------------------
MODEL = "model"
VERSION = "version"
PHASE = "phase"
QUANTILE = "quantile"
GPU_UUID = "gpu_uuid"
BATCH_SIZE = "batch_size"
TARGET = "target"
SOURCE = "source"
MODEL_KEY = (MODEL, VERSION)
ROLE = "role"
STEP = "step"
POSITION = "position"

# --- Triton's own series (inputs) ---------------------------------------------------------------
TRITON_SUCCESS = "nv_inference_request_success"
TRITON_FAILURE = "nv_inference_request_failure"
TRITON_INFERENCE_COUNT = "nv_inference_count"
TRITON_EXEC_COUNT = "nv_inference_exec_count"
TRITON_PENDING = "nv_inference_pending_request_count"
TRITON_CACHE_HITS = "nv_cache_num_hits_per_model"
TRITON_CACHE_MISSES = "nv_cache_num_misses_per_model"
TRITON_GPU_UTILIZATION = "nv_gpu_utilization"
TRITON_GPU_MEMORY_USED = "nv_gpu_memory_used_bytes"
TRITON_GPU_MEMORY_TOTAL = "nv_gpu_memory_total_bytes"
TRITON_GPU_POWER = "nv_gpu_power_usage"
TRITON_GPU_POWER_LIMIT = "nv_gpu_power_limit"
TRITON_ENERGY = "nv_energy_consumption"

# --- dcgm-exporter's series (inputs; its default counters) ---------------------------------------
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent (not served for MIG instances)
DCGM_GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0-1 (served for MIG instances)
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
DCGM_POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
DCGM_ENERGY = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"  # mJ since boot (counter)
DCGM_GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"  # degrees C
DCGM_SM_CLOCK = "DCGM_FI_DEV_SM_CLOCK"  # MHz
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"  # code of the last XID error (0: none)
DCGM_FAMILIES: frozenset[str] = frozenset(
    {DCGM_GPU_UTIL, DCGM_GR_ENGINE_ACTIVE, DCGM_FB_USED, DCGM_FB_FREE, DCGM_POWER, DCGM_ENERGY}
    | {DCGM_GPU_TEMP, DCGM_SM_CLOCK, DCGM_XID}
)
# dcgm-exporter's label names: UUID joins Triton's gpu_uuid; the host label was renamed in May 2026.
DCGM_UUID = "UUID"
DCGM_GPU_INDEX = "gpu"
DCGM_MODEL_NAME = "modelName"
DCGM_HOSTNAME_LABELS = ("Hostname", "hostname")
DCGM_MIG_INSTANCE = "GPU_I_ID"
DCGM_MIG_PROFILE = "GPU_I_PROFILE"
DCGM_POD = "pod"
# Failures Triton counts that are the client's doing, not the server's: excluded from error ratios.
CLIENT_FAILURE_REASONS = ("CANCELED",)

PHASES = ("request", "queue", "compute_input", "compute_infer", "compute_output")
COMPUTE_PHASES = ("compute_input", "compute_infer", "compute_output")
# Histogram phases: the ones an SLO or an operator reads as a distribution.
HISTOGRAM_PHASES = ("request", "queue", "compute_infer")
QUANTILES = ("0.5", "0.9", "0.95", "0.99")


def triton_duration(phase: str) -> str:
    """Triton's cumulative duration counter (microseconds) for a phase."""
    return f"nv_inference_{phase}_duration_us"


def triton_summary(phase: str) -> str:
    """Triton's opt-in latency summary (``summary_latencies=true``) for a phase."""
    return f"nv_inference_{phase}_summary_us"


def triton_summary_count(phase: str) -> str:
    """The observation count of ``triton_summary(phase)`` (cumulative since the series appeared)."""
    return triton_summary(phase) + "_count"


# --- tritonwatch's exported names ---------------------------------------------------------------
UP = "tritonwatch_up"
SCRAPE_DURATION = "tritonwatch_scrape_duration_seconds"
SCRAPE_ERRORS = "tritonwatch_scrape_errors_total"
MODEL_READY = "tritonwatch_model_ready"
MAX_BATCH_SIZE = "tritonwatch_model_max_batch_size"
REQUEST_RATE = "tritonwatch_model_request_rate"
ERROR_RATIO = "tritonwatch_model_error_ratio"
# Models whose failed requests Triton may count as successes: 1 per (model, version, reason).
MODEL_UNCOUNTED_ERRORS = "tritonwatch_model_uncounted_errors_info"
LATENCY = "tritonwatch_model_latency_seconds"
QUEUE_TIME_RATIO = "tritonwatch_model_queue_time_ratio"
BATCH_SIZE_MEAN = "tritonwatch_model_batch_size"
BATCH_EFFICIENCY = "tritonwatch_model_batch_efficiency_ratio"
CACHE_HIT_RATIO = "tritonwatch_model_cache_hit_ratio"
PENDING_REQUESTS = "tritonwatch_model_pending_requests"
LATENCY_QUANTILE = "tritonwatch_model_latency_quantile_seconds"
LATENCY_SAMPLES = "tritonwatch_model_latency_samples"
REQUEST_DURATION = "tritonwatch_request_duration_seconds"
BATCH_EXECUTIONS = "tritonwatch_model_batch_executions_total"
BATCH_COMPUTE = "tritonwatch_model_batch_compute_seconds_total"
GPU_UTILIZATION = "tritonwatch_gpu_utilization_ratio"
GPU_MEMORY_USED_RATIO = "tritonwatch_gpu_memory_used_ratio"
GPU_POWER = "tritonwatch_gpu_power_watts"
GPU_TEMPERATURE = "tritonwatch_gpu_temperature_celsius"
GPU_SM_CLOCK = "tritonwatch_gpu_sm_clock_hertz"
GPU_XID = "tritonwatch_gpu_last_xid_error"
GPU_INFO = "tritonwatch_gpu_info"
MODEL_GPU_BUSY = "tritonwatch_model_gpu_busy_ratio"
MODEL_ENERGY_PER_INFERENCE = "tritonwatch_model_energy_per_inference_joules"
# Counters (since the sidecar started) of the GPU time and inferences the sidecar attributes to models
# placed by their config (attribution="config"): what the GPU rules need for them, since Prometheus
# never sees model configs. Labels model, version, gpu_uuid, attribution.
MODEL_GPU_BUSY_SECONDS = "tritonwatch_model_gpu_busy_seconds_total"
MODEL_GPU_BUSY_SECONDS_HELP = (
    "GPU busy seconds attributed to the model on the GPU since the sidecar started (models placed by "
    "their config: batch_stats compute time x the GPU's share of its instances)."
)
MODEL_GPU_INFERENCES = "tritonwatch_model_gpu_inferences_total"
MODEL_GPU_INFERENCES_HELP = (
    "Inferences attributed to the model on the GPU since the sidecar started (models placed by their "
    "config: nv_inference_count x the GPU's share of its instances)."
)
# Why a model has no GPU attribution (busy ratio / energy per inference): 1 per (model, version, reason)
MODEL_GPU_ATTRIBUTION = "tritonwatch_model_gpu_attribution_info"
REASON = "reason"
# How a model's GPU time was attributed: from gpu_uuid on its own counters, or from its config's
# instance groups where the counters have none (python-backend models on KIND_GPU; docs/gpu.md).
ATTRIBUTION = "attribution"
ATTRIBUTION_COUNTERS = "counters"
ATTRIBUTION_CONFIG = "config"
GPU_ATTRIBUTION_REASONS: dict[str, str] = {
    "no_gpu_uuid": "the model's execution counters carry no gpu_uuid and its config's instance groups "
    "are not known (not read yet, or unreadable): its GPU time cannot be told apart, so no busy ratio or energy",
    "cpu_instances": "no gpu_uuid on its counters and every instance group is KIND_CPU: it runs on the CPU",
    "kind_model": "no gpu_uuid on its counters and an instance group is KIND_MODEL: the model places "
    "itself, its GPUs cannot be known from the config",
    "mixed_kinds": "no gpu_uuid on its counters and instance groups on both CPU and GPU: the share of "
    "executions on the GPU cannot be known",
    "gpu_index_unknown": "no gpu_uuid on its counters and its config names GPU indices that cannot be "
    "mapped to a gpu_uuid (several GPUs and no DCGM gpu index)",
    "no_gpu_energy": "the model has GPU busy time, but none of its GPUs has an energy counter "
    "(DCGM and Triton both without one, or a MIG instance): no energy per inference",
}
MODEL_GPU_ATTRIBUTION_HELP = (
    "1 for each reason a model has no GPU attribution: "
    + "; ".join(f"{k}: {v}" for k, v in GPU_ATTRIBUTION_REASONS.items())
    + "."
)
PROBE_SUCCESS = "tritonwatch_probe_success"
PROBE_DURATION = "tritonwatch_probe_duration_seconds"
PROBE_REQUESTS = "tritonwatch_probe_requests_total"
PROBE_RESULT = "result"
PROBE_RESULTS = ("success", "error", "timeout")
TRACE_RATE = "tritonwatch_trace_rate"
TRACE_BUDGET = "tritonwatch_trace_budget_requests_per_second"
SPANS_RECEIVED = "tritonwatch_spans_received_total"
SPANS_DROPPED = "tritonwatch_spans_dropped_total"
MODELS_DROPPED = "tritonwatch_models_dropped_total"  # models over --max-models, summed over scrapes
# Pipelines: what each model is (from the model configs; ``bls`` from traces) and an ensemble's steps.
MODEL_ROLE_INFO = "tritonwatch_model_role_info"
ENSEMBLE_STEP_INFO = "tritonwatch_ensemble_step_info"
ENSEMBLE_STEP_LATENCY = "tritonwatch_ensemble_step_latency_seconds"
ENSEMBLE_STEP_QUANTILE = "tritonwatch_ensemble_step_latency_quantile_seconds"
# Aggregatable beside the mean: cumulative step time and traced requests (mean = ratio of their rates).
ENSEMBLE_STEP_SECONDS = "tritonwatch_ensemble_step_seconds_total"
ENSEMBLE_TRACED_REQUESTS = "tritonwatch_ensemble_traced_requests_total"
# Traced requests by the step their chain ended at: a chain that ends before the last step failed there.
ENSEMBLE_CHAIN_ENDS = "tritonwatch_ensemble_chain_ends_total"
STEP_PHASES = ("queue", "compute")  # a step's segment: up to its COMPUTE_START, and from there
ENSEMBLE_STEP_LATENCY_HELP = (
    "Mean time per traced request of the ensemble spent in each step over the quantile window, by phase "
    "(queue: hand-over and waiting in the step's queue; compute: from its COMPUTE_START to the next "
    "step's REQUEST_START). Steps add up to the ensemble's mean traced request duration."
)
ENSEMBLE_STEP_QUANTILE_HELP = (
    "Latency quantile of each step's segment of traced ensemble requests, by phase (exact nearest rank "
    "over the quantile window)."
)
ROLE_ENSEMBLE = "ensemble"  # platform "ensemble": Triton schedules its steps itself
ROLE_STEP = "step"  # named in an ensemble's ensemble_scheduling.step[]: its traffic is the ensemble's
ROLE_BLS = "bls"  # seen in traces calling other models from its own code
ROLE_MODEL = "model"  # none of the above
MODEL_ROLE_INFO_HELP = (
    "1 per model version with its role: ensemble (platform ensemble), step (named in an ensemble's "
    "steps), bls (seen in traces calling other models) or model."
)
ENSEMBLE_STEP_INFO_HELP = (
    "1 per step of an ensemble (model, version: the ensemble; step: the step's model; position: 1, 2, ...)."
)
# Triton 2.51 counts every failed ensemble request as two failures with reason OTHER (FinishEnsemble
# and the request tracker each count one; measured on the bundled Triton, docs/pipelines.md).
ENSEMBLE_FAILURES_PER_REQUEST = 2

TARGETS = ("triton", "triton_api", "dcgm")


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
    column header ("" where the report has no column for it)."""

    title: str
    description: str
    column: str = ""


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
    inputs: tuple[str, ...] = field(default=())
    view: View | None = None  # None: no panel of its own (the phases share one stacked panel)
    minus: tuple[Term, ...] = ()  # removed from the numerator (an ensemble's compute from its request time)

    def terms(self) -> tuple[Term, ...]:
        return self.numerator + self.denominator + self.subtract + self.minus

    def all_families(self) -> tuple[str, ...]:
        return tuple(t.family for t in self.terms())


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

# Batch efficiency needs the model config (max_batch_size), not only /metrics: defined apart.
BATCH_EFFICIENCY_RECORD = "model:tritonwatch_batch_efficiency_ratio:mean5m"
BATCH_EFFICIENCY_HELP = "Mean executed batch size over the model's max_batch_size, over the window."
BATCH_EFFICIENCY_UNIT = "percentunit"
BATCH_EFFICIENCY_VIEW = View(
    "Batch efficiency",
    "Mean executed batch size over the model's max_batch_size: how full the batches Triton runs are "
    "(models that batch).",
    column="batch efficiency",
)
MAX_BATCH_SIZE_HELP = "max_batch_size from the model configuration (0: the model does not batch)."
MODEL_READY_HELP = "1 when the model version is READY in Triton's repository index, else 0."
# Why Triton's failure counter may miss a model's errors (docs/uncounted-errors.md; server#7713, #8521).
UNCOUNTED_ERROR_REASONS: dict[str, str] = {
    "python_backend": "a python-based backend (python, vllm): an error response "
    "(InferenceResponse(error=...), HTTP 500 at the client) counts as a success",
    "decoupled": "a decoupled model: errors sent through the response sender count as successes",
}
MODEL_UNCOUNTED_ERRORS_HELP = (
    "1 for each reason Triton's nv_inference_request_failure may not count the model's errors, from its "
    "config: "
    + "; ".join(f"{k}: {v}" for k, v in UNCOUNTED_ERROR_REASONS.items())
    + ". Its error ratio then reads low: take availability from the front (availability.from)."
)


# Families the sidecar must keep from Triton's /metrics (everything else is skipped when parsing).
TRITON_FAMILIES: frozenset[str] = frozenset(
    {f for s in SIGNALS for f in s.all_families()}
    | {TRITON_FAILURE, TRITON_GPU_UTILIZATION, TRITON_GPU_MEMORY_USED, TRITON_GPU_MEMORY_TOTAL}
    | {TRITON_GPU_POWER, TRITON_ENERGY}
    | {triton_summary(p) for p in PHASES}
    | {triton_summary_count(p) for p in PHASES}
)


def signal(name: str, **labels: str) -> Signal:
    """Look a signal up by exported name and constant labels (e.g. ``phase="queue"``)."""
    want = tuple(sorted(labels.items()))
    for s in SIGNALS:
        if s.name == name and tuple(sorted(s.labels)) == want:
            return s
    raise KeyError(f"no signal {name} {labels}")


def view(name: str) -> tuple[View, str]:
    """A signal's view and unit, by exported name (batch efficiency, defined apart, included)."""
    if name == BATCH_EFFICIENCY:
        return BATCH_EFFICIENCY_VIEW, BATCH_EFFICIENCY_UNIT
    sig = signal(name)
    if sig.view is None:
        raise KeyError(f"signal {name} has no panel of its own")
    return sig.view, sig.unit


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


def ensemble_step_promql(window: str = "5m", selector: str = "") -> str:
    """Mean time per traced request of each ensemble in each step and phase, across replicas: summed
    step time over summed traced requests (never an average of the sidecars' means)."""
    by = by_clause()
    sel = f"{{{selector}}}" if selector else ""
    steps = f"sum by ({by}, {STEP}, {PHASE}) (rate({ENSEMBLE_STEP_SECONDS}{sel}[{window}]))"
    traced = f"sum by ({by}) (rate({ENSEMBLE_TRACED_REQUESTS}{sel}[{window}]))"
    return f"{steps} / on ({by}) group_left () ({traced} > 0)"


# --- PromQL rendering ---------------------------------------------------------------------------
def by_clause(grouping: Sequence[str] = ()) -> str:
    labels = list(MODEL_KEY) + [g for g in grouping if g not in MODEL_KEY]
    return ", ".join(labels)


def _sum_rate(terms: Sequence[Term], window: str, by: str, selector: str) -> str:
    parts = []
    for t in terms:
        m = t.matcher()
        if selector:
            m = m[:-1] + "," + selector + "}" if m.endswith("}") else f"{m}{{{selector}}}"
        rate = f"sum by ({by}) (rate({m}[{window}]))"
        if t.scale != 1.0:
            rate = f"{rate} * {t.scale:g}"
        parts.append(rate)
    return " + ".join(parts) if len(parts) == 1 else "(" + " + ".join(parts) + ")"


def promql(sig: Signal, window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    """The signal as a PromQL expression aggregated across replicas.

    ``selector`` adds label matchers to every input (e.g. ``model="$model"`` in a dashboard).
    Missing cache families (models without a cache) make compute-phase means use successes alone.
    A signal computed otherwise for an ensemble (``ENSEMBLE_VARIANTS``) takes its ensemble formula
    where the sidecar's ``tritonwatch_model_role_info`` says ``role="ensemble"`` (none at all where
    the variant is None); without that series every model gets the plain formula.
    """
    plain = _formula(sig, window, grouping, selector)
    variant = ensemble_variant(sig)
    if variant is sig:
        return plain
    return ensemble_aware(plain, None if variant is None else _formula(variant, window, grouping, selector))


def ensemble_aware(plain: str, ensemble: str | None, on: Sequence[str] = MODEL_KEY) -> str:
    """``plain`` per model and version (``on``), but ``ensemble`` (None: nothing) for the ensembles."""
    ensembles = f'on ({", ".join(on)}) {MODEL_ROLE_INFO}{{{ROLE}="{ROLE_ENSEMBLE}"}}'
    expr = f"({plain} unless {ensembles})"
    return expr if ensemble is None else f"{expr} or ({ensemble} and {ensembles})"


def entries_only(expr: str) -> str:
    """``expr`` (per model and version) without ensemble steps: a fleet total of it counts each client
    request once, at the model the client called (the ensemble), not again at every step."""
    return f'({expr}) unless on ({", ".join(MODEL_KEY)}) {MODEL_ROLE_INFO}{{{ROLE}="{ROLE_STEP}"}}'


def _formula(sig: Signal, window: str, grouping: Sequence[str], selector: str) -> str:
    by = by_clause(grouping)
    num = _sum_rate(sig.numerator, window, by, selector)
    if sig.minus:
        num = f"({num} - {_sum_rate(sig.minus, window, by, selector)})"
    if sig.kind == "rate":
        return num
    if sig.kind == "gauge":
        m = sig.numerator[0].family + (f"{{{selector}}}" if selector else "")
        return f"sum by ({by}) ({m})"
    den = _sum_rate(sig.denominator, window, by, selector)
    if sig.subtract:
        sub = _sum_rate(sig.subtract, window, by, selector)
        den = f"({den} - ({sub} or {den} * 0))"
    return f"{num} / {den}"


def batch_efficiency_promql(window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    by = by_clause(grouping)
    sel = f"{{{selector}}}" if selector else ""
    mean = promql(signal(BATCH_SIZE_MEAN), window, grouping, selector)
    return f"({mean}) / on ({by}) group_left max by ({by}) ({MAX_BATCH_SIZE}{sel} > 0)"


def recorded(record: str, grouping: Sequence[str] = (), selector: str = "", phase: str = "") -> str:
    """A selector for a recording rule's output series (used by dashboards and the report)."""
    matchers = [m for m in (selector, f'phase="{phase}"' if phase else "") if m]
    return record + (f"{{{','.join(matchers)}}}" if matchers else "")


# --- latency histogram buckets ------------------------------------------------------------------
# Log-spaced from 100 us to 60 s (about 3 per decade, 1-2.5-5 steps) so that every usual SLO
# threshold (5, 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5 s) is a bucket boundary: a latency SLI
# "share of requests under T" is then exact, and PromQL percentiles are right to within one bucket.
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005,
    0.01, 0.025, 0.05,
    0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
)  # fmt: skip


def le_matcher(threshold: float) -> str:
    """Bucket ``le`` values as the Python (``0.05``, ``1.0``) and Go (``1``) clients print them.

    One matcher for the SLO's rules and the report's query of the share of requests under a threshold.
    """
    forms = dict.fromkeys([repr(float(threshold)), f"{threshold:g}"])
    return 'le=~"' + "|".join(f.replace(".", "\\\\.") for f in forms) + '"'


# --- latency distribution across replicas (from the sidecar's trace histogram) --------------------
def bucket_rate_promql(phase: str = "request", window: str = "5m", by: str = "le", selector: str = "") -> str:
    """Per-bucket rate of the trace histogram, summed ``by`` the given labels (``le`` must be among them)."""
    matchers = ",".join(m for m in (f'{PHASE}="{phase}"', selector) if m)
    return f"sum by ({by}) (rate({REQUEST_DURATION}_bucket{{{matchers}}}[{window}]))"


def histogram_quantile_promql(
    quantile: str,
    phase: str = "request",
    window: str = "5m",
    grouping: Sequence[str] = (),
    selector: str = "",
) -> str:
    """The ``quantile`` (e.g. "0.99") of a phase's latency across replicas, per model and version."""
    by = "le, " + by_clause(grouping)
    return f"histogram_quantile({quantile}, {bucket_rate_promql(phase, window, by, selector)})"


# --- SLO recording rules and alerts (generated by alerts/, read by dashboards and the report) --------
SLO = "slo"
ALERTS_SERIES = "ALERTS"  # Prometheus's own series of pending/firing alerts
SLO_BURN_ALERT = "TritonSLOErrorBudgetBurn"
SERVER_DOWN_ALERT = "TritonServerDown"
SLO_OBJECTIVE_RECORD = "slo:objective:ratio"
SLO_ERROR_BUDGET_REMAINING_RECORD = "slo:error_budget_remaining:ratio"
SLO_BURN_WINDOWS = ("5m", "30m", "1h", "2h", "6h", "1d", "3d")
# The other alerts alerts/ generates (each has docs/runbooks/<name>.md).
SLO_NO_DATA_ALERT = "TritonSLONoData"
MODEL_NOT_READY_ALERT = "TritonModelNotReady"
QUEUE_TIME_HIGH_ALERT = "TritonModelQueueTimeHigh"
BATCH_EFFICIENCY_LOW_ALERT = "TritonModelBatchEfficiencyLow"
CACHE_HIT_RATIO_LOW_ALERT = "TritonModelCacheHitRatioLow"
GPU_MEMORY_NEAR_FULL_ALERT = "TritonGPUMemoryNearFull"
GPU_XID_ALERT = "TritonGPUXidError"
SIDECAR_DOWN_ALERT = "TritonwatchSidecarDown"
SIDECAR_STALE_ALERT = "TritonwatchSidecarStale"
WATCHDOG_ALERT = "Watchdog"
MODEL_STALLED_ALERT = "TritonModelStalled"
SERVER_STALLED_ALERT = "TritonServerStalled"
TARGET_UP = "up"  # Prometheus's own series of a scrape target's health (Triton's, by the SLO file's job)


@dataclass(frozen=True)
class Alert:
    """An alert on a series: the rules write it with ``for: hold`` ("": fires at once) and these texts;
    the promtool cases expect the same texts rendered; docs/signals.md lists it under ``watches``.

    Texts are Python format strings over placeholders (``{model}``, ``{value_pct}``, ``{hold}``...):
    the rules fill them with Go template snippets, the promtool tests with the values they expect.
    """

    name: str
    watches: str  # the series (or recording rule) its expression compares
    hold: str
    summary: str
    description: str


@dataclass(frozen=True)
class OperationalObjective:
    """A per-model operational objective on one signal, and everything that follows from it.

    The SLO file sets it as ``<key>: {<bound>: ratio}``; the rule generator writes ``alert`` as
    ``<record> <op> <limit>``; the promtool cases test that alert; the capacity report flags the
    model past the SLO file's limit, or past ``report_default`` when the file sets none.
    """

    key: str  # SLO file field
    bound: str  # "max" or "min"
    signal: str  # the exported signal it bounds
    record: str  # the recording rule the alert compares
    alert: Alert
    report_default: float

    @property
    def op(self) -> str:
        return ">" if self.bound == "max" else "<"

    @property
    def field(self) -> str:
        """The SLO model's attribute: ``queue_time_ratio_max``."""
        return f"{self.key}_{self.bound}"


OPERATIONAL_OBJECTIVES: tuple[OperationalObjective, ...] = (
    OperationalObjective(
        key="queue_time_ratio",
        bound="max",
        signal=QUEUE_TIME_RATIO,
        record=signal(QUEUE_TIME_RATIO).record,
        alert=Alert(
            QUEUE_TIME_HIGH_ALERT,
            watches=QUEUE_TIME_RATIO,
            hold="15m",
            summary="{model} version {version} spends {value_pct} of request time queued",
            description="Requests to {model} version {version} spent {value_pct} of their time waiting in "
            "the queue over 5m for {hold} (objective: at most {limit}).",
        ),
        report_default=0.3,
    ),
    OperationalObjective(
        key="batch_efficiency",
        bound="min",
        signal=BATCH_EFFICIENCY,
        record=BATCH_EFFICIENCY_RECORD,
        alert=Alert(
            BATCH_EFFICIENCY_LOW_ALERT,
            watches=BATCH_EFFICIENCY,
            hold="30m",
            summary="{model} version {version} batch efficiency is {value_pct}",
            description="Executed batches of {model} version {version} filled {value_pct} of max_batch_size "
            "over 5m for {hold} (objective: at least {limit}).",
        ),
        report_default=0.5,
    ),
    OperationalObjective(
        key="cache_hit_ratio",
        bound="min",
        signal=CACHE_HIT_RATIO,
        record=signal(CACHE_HIT_RATIO).record,
        alert=Alert(
            CACHE_HIT_RATIO_LOW_ALERT,
            watches=CACHE_HIT_RATIO,
            hold="30m",
            summary="{model} version {version} cache hit ratio is {value_pct}",
            description="The response cache of {model} version {version} answered {value_pct} of lookups "
            "over 5m for {hold} (objective: at least {limit}).",
        ),
        report_default=0.2,
    ),
)

# --- stalls: requests pending, none completing (a wedged Triton answers /metrics with frozen counters) ---
# A model stalls when it has had requests pending at every scrape of a window and completed none
# (successes or failures) in it. The window is sized from the model's own latency: the first of
# STALL_WINDOWS at least STALL_LATENCY_FACTOR times the worst 5m mean request latency it showed over
# STALL_LATENCY_LOOKBACK (the record STALL_WINDOW_RECORD), so slow batches do not look like a stall;
# a model with no latency in that lookback (never served, or idle for longer) gets STALL_DEFAULT_WINDOW.
STALL_WINDOWS = ("2m", "10m", "1h")
STALL_DEFAULT_WINDOW = "10m"
STALL_LATENCY_FACTOR = 10
STALL_LATENCY_LOOKBACK = "6h"
STALL_WINDOW_RECORD = "model:tritonwatch_stall_window_seconds:max6h"
STALL_COMPLETIONS = (TRITON_SUCCESS, TRITON_FAILURE)  # every way a request ends, CANCELED included
MODEL_STALLED = Alert(
    MODEL_STALLED_ALERT,
    watches=TRITON_PENDING,
    hold="",
    summary="{model} version {version} on {instance} has {value} requests pending and none completing",
    description="Triton on {instance} has held at least {value} requests of {model} version {version} pending "
    "and completed none (no success, no failure) over the model's stall window: the first of {windows} at "
    "least {factor}x its worst 5m mean latency over {lookback} ({default} when it has none). Clients are "
    "waiting on a wedged model or server, even though /metrics answers.",
)
SERVER_STALLED = Alert(
    SERVER_STALLED_ALERT,
    watches=TRITON_PENDING,
    hold="",
    summary="Triton on {instance} is stalled: {value} models have requests pending and none completing",
    description="{value} models on {instance} have requests pending and none completing, and no model on it "
    "completed a request over {window}: the server is wedged (a crash that did not exit, a stuck backend) "
    "while its endpoints still answer.",
)

# The operational alerts on the servers, GPUs and sidecars (the per-model objectives' alerts above
# come with them). TritonServerDown has two rules, a target down and no target at all, with texts of
# their own: SERVER_ABSENT is the second.
SERVER_DOWN = Alert(
    SERVER_DOWN_ALERT,
    watches=TARGET_UP,
    hold="3m",
    summary="Triton target {instance} is down",
    description="Prometheus has failed to scrape Triton target {instance} (job {job}) for {hold}; its "
    "models are unavailable or unobserved.",
)
SERVER_ABSENT = Alert(
    SERVER_DOWN_ALERT,
    watches=TARGET_UP,
    hold=SERVER_DOWN.hold,
    summary="No Triton target is being scraped",
    description="Prometheus has had no up series matching {up_job} for {hold}: every Triton target is gone "
    "from service discovery, or the job matcher in the SLO file (spec.up_job) is wrong.",
)
OPERATIONAL_ALERTS: tuple[Alert, ...] = (
    SERVER_DOWN,
    SERVER_STALLED,
    MODEL_STALLED,
    Alert(
        MODEL_NOT_READY_ALERT,
        watches=MODEL_READY,
        hold="5m",
        summary="Model {model} version {version} is not ready on {instance}",
        description="Triton's repository index reports {model} version {version} as not READY on {instance} "
        "for {hold}; requests to it fail.",
    ),
    *(o.alert for o in OPERATIONAL_OBJECTIVES),
    Alert(
        GPU_MEMORY_NEAR_FULL_ALERT,
        watches=GPU_MEMORY_USED_RATIO,
        hold="10m",
        summary="GPU {gpu_uuid} on {instance} memory is {value_pct} used",
        description="GPU {gpu_uuid} on {instance} has used {value_pct} of its memory for {hold} (threshold "
        "{limit}); loading another model instance may fail.",
    ),
    Alert(
        GPU_XID_ALERT,
        watches=GPU_XID,
        hold="",
        summary="GPU {gpu_uuid} on {instance} reported XID error {value}",
        description="DCGM reports a new XID error {value} on GPU {gpu_uuid} ({instance}) within the last hour; "
        "the GPU may need a reset.",
    ),
    Alert(
        SIDECAR_DOWN_ALERT,
        watches=UP,
        hold="5m",
        summary="No tritonwatch sidecar is reporting",
        description="Prometheus holds no {up} series: no tritonwatch sidecar has been scraped for {hold}; "
        "derived signals, readiness and GPU alerts are blind.",
    ),
    Alert(
        SIDECAR_STALE_ALERT,
        watches=SCRAPE_DURATION,
        hold="5m",
        summary="tritonwatch sidecar {instance} has stale data for {target}",
        description="The sidecar at {instance} could not scrape its {target} target, or stopped scraping it "
        "(its scrape duration did not change over {stale_window}), for {hold}.",
    ),
    Alert(
        WATCHDOG_ALERT,
        watches="",
        hold="",
        summary="Alerting pipeline heartbeat",
        description="Always firing: proves that Prometheus evaluates rules and Alertmanager delivers. Route it "
        "to a dead man's switch that pages when it stops.",
    ),
)


def operational_objective(key: str) -> OperationalObjective:
    """Look an operational objective up by its SLO file key or its alert name."""
    for o in OPERATIONAL_OBJECTIVES:
        if key in (o.key, o.alert.name):
            return o
    raise KeyError(f"no operational objective {key}")


def slo_sli_error_record(window: str) -> str:
    """Recording rule of an SLI's error ratio over ``window`` (labels ``slo``, ``model``)."""
    return f"slo:sli_error:ratio_rate{window}"


# --- GPU joined to models (recording rules; the sidecar computes the same per Triton process) ------
# Record names (level:metric:operations); the ``level`` lists the labels kept besides grouping ones.
GPU_BUSY_SECONDS_RECORD = "model_gpu:tritonwatch_gpu_busy_seconds:rate5m"
MODEL_GPU_BUSY_RECORD = "model_gpu:tritonwatch_gpu_busy_ratio:rate5m"
GPU_ENERGY_WATTS_RECORD = "gpu:tritonwatch_energy_watts:rate5m"
MODEL_ENERGY_PER_INFERENCE_RECORD = "model:tritonwatch_energy_per_inference_joules:rate5m"


def _extra_by(grouping: Sequence[str], *first: str) -> str:
    return ", ".join([*first, *(g for g in grouping if g not in first)])


def gpu_busy_seconds_promql(window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    """Seconds per second each GPU spends executing each model, summed across Triton processes.

    Per scraped series (all labels match one-to-one, whatever a scraper adds): compute duration
    rate / mean batch size (inference rate / execution rate), since Triton adds a batch's compute
    time once per request in it; then summed by model, version and gpu_uuid. Idle series drop out.
    Models placed by their config (no gpu_uuid on their counters) come from the sidecar's attributed
    busy-seconds counter instead (docs/gpu.md).
    """
    sel = ",".join(m for m in ('gpu_uuid!=""', selector) if m)

    def r(family: str) -> str:
        return f"rate({family}{{{sel}}}[{window}])"

    compute = " + ".join(r(triton_duration(p)) for p in COMPUTE_PHASES)
    per_series = f"({compute}) * 1e-06 * {r(TRITON_EXEC_COUNT)} / ({r(TRITON_INFERENCE_COUNT)} > 0)"
    config = _config_rate(MODEL_GPU_BUSY_SECONDS, window, selector)
    return f"sum by ({_extra_by(grouping, MODEL, VERSION, GPU_UUID)}) ({per_series} or {config})"


def _config_rate(family: str, window: str, selector: str = "") -> str:
    """The rate of a sidecar counter for models placed by their config (``attribution="config"``).

    Its series carry ``attribution`` and Triton's never do, so ``or`` adds them to Triton's own
    series instead of shadowing any: a GPU shared by both kinds of model sums them all.
    """
    sel = ",".join(m for m in (f'{ATTRIBUTION}="{ATTRIBUTION_CONFIG}"', selector) if m)
    return f"rate({family}{{{sel}}}[{window}])"


def gpu_busy_ratio_promql(window: str = "5m", grouping: Sequence[str] = ()) -> str:
    """Each model's share of a GPU's busy time (``tritonwatch_model_gpu_busy_ratio`` across hosts).

    The denominator sums every model on the GPU from every Triton process that reports it, so
    processes sharing a GPU split it between them here, where no single sidecar can.
    """
    busy = gpu_busy_seconds_promql(window, grouping)
    on = _extra_by(grouping, GPU_UUID)
    return f"{busy} / on ({on}) group_left sum by ({on}) ({busy})"


def gpu_energy_watts_promql(window: str = "5m", grouping: Sequence[str] = ()) -> str:
    """Mean power per GPU from its energy counter: DCGM's (mJ, UUID) or else Triton's (J, gpu_uuid).

    ``max`` merges the copies of one GPU (several Triton processes, a twice-scraped exporter);
    MIG instance rows (``GPU_I_ID`` set) are left out: their counter is the whole GPU's.
    """
    on = _extra_by(grouping, GPU_UUID)
    dcgm = (
        f'label_replace(rate({DCGM_ENERGY}{{{DCGM_MIG_INSTANCE}=""}}[{window}]), '
        f'"{GPU_UUID}", "$1", "{DCGM_UUID}", "(.+)")'
    )
    triton = f"rate({TRITON_ENERGY}[{window}])"
    return f"(max by ({on}) ({dcgm}) * 0.001 or max by ({on}) ({triton}))"


def energy_per_inference_promql(window: str = "5m", grouping: Sequence[str] = ()) -> str:
    """Joules per inference per model: each GPU's power split by busy share, over inferences/s.

    Only GPUs with an energy series count, in the numerator and in the denominator alike.
    """
    watts = gpu_energy_watts_promql(window, grouping)
    on = _extra_by(grouping, GPU_UUID)
    by = by_clause(grouping)
    model_gpu = _extra_by(grouping, MODEL, VERSION, GPU_UUID)
    attributed = (
        f"sum by ({by}) (({gpu_busy_ratio_promql(window, grouping)}) * on ({on}) group_left () {watts})"
    )
    inferences = (
        f'sum by ({by}) (sum by ({model_gpu}) (rate({TRITON_INFERENCE_COUNT}{{gpu_uuid!=""}}[{window}]) '
        f"or {_config_rate(MODEL_GPU_INFERENCES, window)}) and on ({on}) {watts})"
    )
    return f"{attributed} / ({inferences} > 0)"


# --- LLM serving (decoupled models: vLLM and TensorRT-LLM backends, streaming traces) --------------
# Family and label names as the backends emit them into Triton's /metrics (tests/data/real/README-llm.md
# lists the sources): vLLM backend src/utils/metrics.py (labels model, version); TensorRT-LLM backend
# custom_metrics_reporter.cc (gauges keyed by a category label, plus token-length histograms).
VLLM_PROMPT_TOKENS = "vllm:prompt_tokens_total"  # counter
VLLM_GENERATION_TOKENS = "vllm:generation_tokens_total"  # counter
VLLM_PREEMPTIONS = "vllm:num_preemptions_total"  # counter
VLLM_RUNNING = "vllm:num_requests_running"  # gauge
VLLM_WAITING = "vllm:num_requests_waiting"  # gauge
VLLM_KV_CACHE = "vllm:kv_cache_usage_perc"  # gauge, a ratio despite the name (1 = 100 %); vLLM >= 0.9
VLLM_GPU_CACHE = "vllm:gpu_cache_usage_perc"  # its name before vLLM 0.9 (served beside it in 0.9-0.10)
VLLM_TTFT = "vllm:time_to_first_token_seconds"  # histogram, seconds
VLLM_ITL = "vllm:inter_token_latency_seconds"  # histogram, seconds: gap between output tokens (newer vLLM)
VLLM_TPOT = "vllm:time_per_output_token_seconds"  # the same, older vLLM and the Triton vllm_backend
TRT_LLM_REQUESTS = "nv_trt_llm_request_metrics"  # gauge by request_type: active, waiting, scheduled, ...
TRT_LLM_KV_CACHE = "nv_trt_llm_kv_cache_block_metrics"  # gauge by kv_cache_block_type: fraction, used, max
TRT_LLM_INFLIGHT = "nv_trt_llm_inflight_batcher_metrics"  # gauge by inflight_batcher_specific_metric
TRT_LLM_INPUT_TOKENS = "nv_llm_input_token_len"  # histogram of input tokens; _sum counts them
TRT_LLM_OUTPUT_TOKENS = "nv_llm_output_token_len"  # histogram of output tokens; _sum counts them
# Triton's own first-response histogram (ms; ``--metrics-config histogram_latencies=true``). Triton 2.51
# (the bundled local one) does not have it: its libtritonserver holds no such name and the flag is
# accepted silently. Read when a newer Triton serves it.
TRITON_FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"

LLM_TTFT = "tritonwatch_llm_time_to_first_token_seconds"  # histogram
LLM_ITL = "tritonwatch_llm_inter_token_latency_seconds"  # histogram
LLM_TTFT_QUANTILE = "tritonwatch_llm_time_to_first_token_quantile_seconds"
LLM_ITL_QUANTILE = "tritonwatch_llm_inter_token_latency_quantile_seconds"
LLM_PROMPT_TOKENS_RATE = "tritonwatch_llm_prompt_tokens_per_second"
LLM_GENERATION_TOKENS_RATE = "tritonwatch_llm_generation_tokens_per_second"
LLM_REQUESTS_RUNNING = "tritonwatch_llm_requests_running"
LLM_REQUESTS_WAITING = "tritonwatch_llm_requests_waiting"
LLM_KV_CACHE_UTILIZATION = "tritonwatch_llm_kv_cache_utilization_ratio"
LLM_PREEMPTIONS_RATE = "tritonwatch_llm_preemptions_per_second"
LLM_QUANTILES = ("0.5", "0.9", "0.99")
# Where a quantile came from: exact nearest rank over traced requests, or interpolated within the
# buckets of a backend's histogram over the window (as PromQL's histogram_quantile does).
LLM_SOURCE_TRACE = "trace"
LLM_SOURCE_HISTOGRAM = "histogram"


@dataclass(frozen=True)
class LlmInput:
    """One backend series feeding an LLM signal: a sample name, label values it must have, a scale."""

    sample: str
    match: tuple[tuple[str, str], ...] = ()
    scale: float = 1.0

    def accepts(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match)

    def selector(self, extra: str = "") -> str:
        parts = [f'{k}="{v}"' for k, v in self.match] + ([extra] if extra else [])
        return self.sample + (f"{{{','.join(parts)}}}" if parts else "")


@dataclass(frozen=True)
class LlmSignal:
    """One per-model LLM signal, fed by whichever backend's inputs the model has (one per model).

    ``kind``: ``rate`` -- reset-aware increase of the inputs per second over the window;
    ``sum`` -- the latest values summed over the model's series; ``mean`` -- their mean (a ratio
    gauge such as KV-cache use, which is averaged across replicas, never summed).
    """

    name: str
    help: str
    unit: str
    kind: str
    inputs: tuple[LlmInput, ...]
    record: str
    # The sidecar's own gauge, summed across replicas, for models no backend input covers (streaming
    # models measured from traces): the rule and the panels fall back on it with ``or``.
    fallback: str = ""


LLM_SIGNALS: tuple[LlmSignal, ...] = (
    LlmSignal(
        LLM_PROMPT_TOKENS_RATE,
        "Prompt (prefill) tokens processed per second over the window (vLLM, TensorRT-LLM).",
        "short",
        "rate",
        (
            LlmInput(VLLM_PROMPT_TOKENS),
            LlmInput(f"{TRT_LLM_INPUT_TOKENS}_sum", (("response_metric_type", "total_input_tokens"),)),
        ),
        "model:tritonwatch_llm_prompt_tokens:rate5m",
    ),
    LlmSignal(
        LLM_GENERATION_TOKENS_RATE,
        "Generated (output) tokens per second over the window (vLLM, TensorRT-LLM; for other "
        "decoupled models: successful requests/s times the mean responses per traced request).",
        "short",
        "rate",
        (
            LlmInput(VLLM_GENERATION_TOKENS),
            LlmInput(f"{TRT_LLM_OUTPUT_TOKENS}_sum", (("response_metric_type", "total_output_tokens"),)),
        ),
        "model:tritonwatch_llm_generation_tokens:rate5m",
        fallback=LLM_GENERATION_TOKENS_RATE,
    ),
    LlmSignal(
        LLM_REQUESTS_RUNNING,
        "Requests being generated now (vLLM running; TensorRT-LLM active), summed over the model's series.",
        "short",
        "sum",
        (LlmInput(VLLM_RUNNING), LlmInput(TRT_LLM_REQUESTS, (("request_type", "active"),))),
        "model:tritonwatch_llm_requests_running:sum",
    ),
    LlmSignal(
        LLM_REQUESTS_WAITING,
        "Requests queued for generation (vLLM waiting; TensorRT-LLM waiting), summed over the model's series.",
        "short",
        "sum",
        (LlmInput(VLLM_WAITING), LlmInput(TRT_LLM_REQUESTS, (("request_type", "waiting"),))),
        "model:tritonwatch_llm_requests_waiting:sum",
    ),
    LlmSignal(
        LLM_KV_CACHE_UTILIZATION,
        "Share of the KV cache in use (vLLM kv_cache_usage_perc, before 0.9 gpu_cache_usage_perc; "
        "TensorRT-LLM fraction of blocks used).",
        "percentunit",
        "mean",
        (
            LlmInput(VLLM_KV_CACHE),
            LlmInput(VLLM_GPU_CACHE),
            LlmInput(TRT_LLM_KV_CACHE, (("kv_cache_block_type", "fraction"),)),
        ),
        "model:tritonwatch_llm_kv_cache_utilization_ratio:avg",
    ),
    LlmSignal(
        LLM_PREEMPTIONS_RATE,
        "Requests preempted per second over the window (vLLM; TensorRT-LLM reports no such counter).",
        "short",
        "rate",
        (LlmInput(VLLM_PREEMPTIONS),),
        "model:tritonwatch_llm_preemptions:rate5m",
    ),
)


@dataclass(frozen=True)
class LlmHistogram:
    """A latency histogram the sidecar exports under one name, from the first source a model has."""

    name: str
    quantile_name: str
    help: str
    sources: tuple[tuple[str, float], ...]  # (backend histogram family, scale to seconds)
    trace_measure: str  # the key under which traced requests feed it
    quantile_record: str


LLM_HISTOGRAMS: tuple[LlmHistogram, ...] = (
    LlmHistogram(
        LLM_TTFT,
        LLM_TTFT_QUANTILE,
        "Time to first token (first response of a streaming request), cumulative: the backend's own "
        "histogram (vLLM, or Triton's first-response histogram) passed through, else sampled traces.",
        ((VLLM_TTFT, 1.0), (TRITON_FIRST_RESPONSE, 0.001)),
        "time_to_first_token",
        "model:tritonwatch_llm_time_to_first_token_seconds:quantile5m",
    ),
    LlmHistogram(
        LLM_ITL,
        LLM_ITL_QUANTILE,
        "Inter-token latency (gap between successive responses of a streaming request), cumulative: "
        "vLLM's inter-token (older: time-per-output-token) histogram passed through, else sampled traces.",
        ((VLLM_ITL, 1.0), (VLLM_TPOT, 1.0)),
        "inter_token",
        "model:tritonwatch_llm_inter_token_latency_seconds:quantile5m",
    ),
)

# Samples the sidecar keeps from Triton's /metrics for the LLM part (the parser takes sample names).
LLM_SAMPLES: frozenset[str] = frozenset(
    {i.sample for s in LLM_SIGNALS for i in s.inputs}
    | {
        f"{family}{suffix}"
        for h in LLM_HISTOGRAMS
        for family, _ in h.sources
        for suffix in ("_bucket", "_sum", "_count")
    }
)
TRITON_FAMILIES = TRITON_FAMILIES | LLM_SAMPLES


def llm_promql(sig: LlmSignal, window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    """The LLM signal across replicas: each backend's inputs joined with ``or`` (a model has one)."""
    by = by_clause(grouping)
    if sig.kind == "rate":
        parts = [f"rate({i.selector(selector)}[{window}])" for i in sig.inputs]
    else:
        parts = [i.selector(selector) for i in sig.inputs]
    joined = " or ".join(parts)
    agg = "avg" if sig.kind == "mean" else "sum"
    scaled = [i.scale for i in sig.inputs if i.scale != 1.0]
    assert not scaled, "scaled LLM inputs are not rendered"  # none today; keep the two engines equal
    expr = f"{agg} by ({by}) ({joined})"
    if sig.fallback:
        sel = f"{{{selector}}}" if selector else ""
        expr = f"{expr} or sum by ({by}) ({sig.fallback}{sel})"
    return expr


def llm_signal(name: str) -> LlmSignal:
    return next(s for s in LLM_SIGNALS if s.name == name)


def llm_histogram(name: str) -> LlmHistogram:
    return next(h for h in LLM_HISTOGRAMS if h.name == name)


def llm_quantile_promql(
    hist: LlmHistogram, quantile: str, window: str = "5m", grouping: Sequence[str] = (), selector: str = ""
) -> str:
    """A quantile of an LLM latency histogram across replicas, per model and version."""
    by = "le, " + by_clause(grouping)
    sel = f"{{{selector}}}" if selector else ""
    return f"histogram_quantile({quantile}, sum by ({by}) (rate({hist.name}_bucket{sel}[{window}])))"


# --- issue 27 ---------------------------------------------------------------------------------
# `tritonwatch advise --prometheus` reads a model's batching config from Prometheus: the sidecar
# exports the part of the config it needs (exporters/batching.py) as one label, 1 per model version.
MODEL_BATCHING_INFO = "tritonwatch_model_batching_info"
TRITON_CACHE_HIT_DURATION = "nv_cache_hit_duration_per_model"  # microseconds (the advisor's overhead)
CONFIG = "config"
MODEL_BATCHING_INFO_HELP = (
    "1 per model version; label config: max_batch_size, dynamic_batching and instance_group of the model "
    "config as Triton's config JSON spells them (compact, sorted keys), for tritonwatch advise --prometheus."
)
# `tritonwatch advise --textfile` writes the predicted batch-size distribution at today's load, per
# configuration (current, recommended): the model drill-down shows it beside the executed one.
ADVISED_BATCH_SHARE = "tritonwatch_model_advised_batch_executions_ratio"
ADVISED = "config"  # label: current | recommended
ADVISED_BATCH_SHARE_HELP = (
    "Predicted share of executions per batch size at the load observed, for the current and the "
    "recommended configuration (tritonwatch advise --textfile)."
)
