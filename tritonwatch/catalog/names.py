"""Names: labels, the input series tritonwatch reads (Triton, dcgm-exporter) and the series it exports.

Every metric and label name the project spells is a constant here (the rest of the catalog, the
sidecar, the rules, the dashboards and the report import them); the help texts of the exported
families that are not derived signals sit beside their names.
"""

from __future__ import annotations

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


# --- tritonwatch advise (issue 27) ---------------------------------------------------------------
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


# --- SLO-bound headroom (issue 39; exporters/headroom.py, docs/headroom.md) ------------------------
# With --slo, the highest request rate at which the model's latency objective would hold with the
# configuration it runs now, from its own batch_stats and the advise simulation.
CAPACITY = "tritonwatch_model_capacity_requests_per_second"
CAPACITY_HELP = (
    "Highest request rate (requests/s) at which the model's latency objective (its quantile and threshold "
    "in the SLO file) would hold with the configuration it runs now: the advise simulation of Triton's "
    "dynamic batcher on compute = a + b x batch fitted to batch_stats since the model loaded. Absent where "
    "the data cannot support one (tritonwatch_model_capacity_info says why)."
)
CAPACITY_INFO = "tritonwatch_model_capacity_info"
CAPACITY_STATE = "state"  # label: estimated, or the refusal reason
CAPACITY_BATCH_SIZES = "batch_sizes"  # label: the batch sizes the fit used, e.g. "1,2,3"
CAPACITY_ESTIMATED = "estimated"
CAPACITY_REFUSALS_TOTAL = "tritonwatch_model_capacity_refusals_total"
CAPACITY_SAMPLES = "tritonwatch_model_capacity_basis_executions"
CAPACITY_FIT_ERROR = "tritonwatch_model_capacity_fit_error_ratio"
# Why a model has no capacity value: the info series' state, and the refusal counter's reason.
CAPACITY_REFUSAL_REASONS: dict[str, str] = {
    "no_config": "the model's config has not been read yet (or cannot be)",
    "ensemble": "an ensemble does not batch: its steps have capacities of their own",
    "sequence_batcher": "a sequence batcher is not modelled (only the dynamic batcher)",
    "no_dynamic_batching": "max_batch_size 0 or no dynamic_batching: not modelled",
    "unmodelled": "a batcher setting the simulation does not model (priority levels, a rejecting queue policy)",
    "too_little_data": "fewer than 3 batch sizes with at least 20 executions each since the model loaded",
    "single_batch_size": "every execution so far ran one batch size: no line can be fitted",
    "bad_fit": "the fitted compute line is not physical (a negative fixed or per-item cost, or no time at all)",
}
CAPACITY_INFO_HELP = (
    "1 per model version with a latency objective: state estimated (batch_sizes: the sizes fitted), or "
    "why there is no capacity: " + "; ".join(f"{k}: {v}" for k, v in CAPACITY_REFUSAL_REASONS.items()) + "."
)
CAPACITY_REFUSALS_HELP = (
    "Capacity estimates refused since the sidecar started, by reason (see the info series)."
)
CAPACITY_SAMPLES_HELP = "Executions (batch_stats, since the model loaded) behind the capacity estimate's fit."
CAPACITY_FIT_ERROR_HELP = (
    "RMS relative error of the fitted compute line against each fitted batch size's mean compute time."
)
# The objective each capacity is bound by, and what the autoscalers' tail-latency signal divides a
# model's percentile by (deploy/scaling.py): from the SLO file, which the sidecar reloads when it changes.
CAPACITY_OBJECTIVE = "tritonwatch_model_latency_objective_seconds"
CAPACITY_OBJECTIVE_HELP = (
    "Latency threshold (seconds) of the model's objective in the SLO file (--slo); label quantile: the "
    "share of requests that must be within it (an objective of 99 % is 0.99). Follows the file when it changes."
)
SLO_RELOAD_FAILURES_TOTAL = "tritonwatch_slo_reload_failures_total"
SLO_RELOAD_FAILURES_HELP = (
    "Times the SLO file (--slo) changed into one that does not load; the last good one stays in use."
)
SLO_RELOAD_SUCCESS = "tritonwatch_slo_last_reload_successful"
SLO_RELOAD_SUCCESS_HELP = "1 if the SLO file (--slo) as it is now is the one in use, 0 if it failed to load."
