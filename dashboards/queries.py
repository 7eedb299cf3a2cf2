"""Every PromQL expression the dashboards show, rendered from the signal catalog.

Panels never spell a metric name or a formula: they call these helpers, which call
``tritonwatch.catalog``. Queries aggregate by ``model``/``version`` (plus the labels a panel splits
by), never by job, so they work behind any scrape configuration; the dashboard variables enter as
label matchers (``model=~"$model"``), and windows are Grafana's ``$__rate_interval``.
"""

from __future__ import annotations

from tritonwatch import catalog

RATE = "$__rate_interval"
RANGE = "$__range"

# Raw series (Triton's and the sidecar's) carry the scrape target's instance; recording rules and
# the SLO series are aggregated and do not, so they take only the model/version matchers.
# The instance variable holds hosts, not host:port: Triton's /metrics and its sidecar are two scrape
# targets on one host (one pod), so matching the host keeps both sides of every panel together.
MODEL_SELECTOR = 'model=~"$model",version=~"$version"'
INSTANCE_MATCHER = 'instance=~"($instance)(:[0-9]+)?"'
SELECTOR = f"{MODEL_SELECTOR},{INSTANCE_MATCHER}"
# Grafana keeps the first capture group of a variable's regex: the host without the port.
HOST_REGEX = "/^(.+?)(?::[0-9]+)?$/"
GPU_SELECTOR = 'gpu_uuid=~"$gpu"'
SLO_SELECTOR = 'slo=~"$slo",model=~"$model"'
TRITON_TARGET = f'{catalog.TARGET}="triton"'

MODEL_LEGEND = "{{model}} v{{version}}"


def _with(family: str, *matchers: str) -> str:
    joined = ",".join(m for m in matchers if m)
    return f"{family}{{{joined}}}" if joined else family


def signal(name: str, selector: str = SELECTOR, **labels: str) -> str:
    """A catalog signal across replicas, per model and version (``labels`` pick e.g. a phase)."""
    return catalog.promql(catalog.signal(name, **labels), window=RATE, selector=selector)


def batch_efficiency(selector: str = SELECTOR) -> str:
    return catalog.batch_efficiency_promql(window=RATE, selector=selector)


def of(name: str, selector: str = SELECTOR) -> str:
    """A signal by exported name (batch efficiency, defined apart, included)."""
    return batch_efficiency(selector) if name == catalog.BATCH_EFFICIENCY else signal(name, selector)


def quantile(q: str, phase: str = "request", selector: str = SELECTOR) -> str:
    """A latency percentile across replicas from the sidecar's trace histogram."""
    return catalog.histogram_quantile_promql(q, phase=phase, window=RATE, selector=selector)


def latency_buckets(phase: str = "request", selector: str = SELECTOR) -> str:
    """Per-bucket request rate for a heatmap (all selected models together)."""
    return catalog.bucket_rate_promql(phase=phase, window=RATE, by="le", selector=selector)


def counter_rate(family: str, by: tuple[str, ...] = (), selector: str = SELECTOR) -> str:
    """Per-second rate of a counter, summed per model and version (and ``by``)."""
    return f"sum by ({catalog.by_clause(by)}) (rate({_with(family, selector)}[{RATE}]))"


def batch_distribution(selector: str = SELECTOR) -> str:
    """Executions per batch size over the dashboard's time range, all replicas together."""
    family = _with(catalog.BATCH_EXECUTIONS, selector)
    return f"sum by ({catalog.BATCH_SIZE}) (increase({family}[{RANGE}]))"


def max_batch_size(selector: str = SELECTOR) -> str:
    return f"max by ({catalog.by_clause()}) ({_with(catalog.MAX_BATCH_SIZE, selector)})"


def per_model(family: str, how: str = "max", by: tuple[str, ...] = (), selector: str = SELECTOR) -> str:
    """A sidecar gauge per model and version: ``max`` across replicas for states, ``sum`` for counts."""
    return f"{how} by ({catalog.by_clause(by)}) ({_with(family, selector)})"


def histogram_mean(family: str, by: tuple[str, ...], selector: str, window: str = "$__rate_interval") -> str:
    """Mean of a histogram's observations over the window: rate of _sum over rate of _count."""
    labels = ", ".join(by)
    return (
        f"sum by ({labels}) (rate({_with(family + '_sum', selector)}[{window}]))"
        f" / sum by ({labels}) (rate({_with(family + '_count', selector)}[{window}]))"
    )


def sidecar_quantile(quantile: str, phase: str = "request", selector: str = SELECTOR) -> str:
    """One sidecar's own percentile gauge, per replica (not aggregatable across replicas)."""
    sel = f'{selector},{catalog.PHASE}="{phase}",{catalog.QUANTILE}="{quantile}"'
    return per_model(catalog.LATENCY_QUANTILE, "max", ("instance",), sel)


def per_gpu(family: str, selector: str = GPU_SELECTOR) -> str:
    """A per-GPU gauge; ``max`` folds the same GPU seen by two sidecars on one node into one series."""
    return f"max by ({catalog.GPU_UUID}) ({_with(family, selector)})"


def sidecar_health(family: str) -> str:
    """The sidecar's own health series per scrape target and instance."""
    return f"max by ({catalog.TARGET}, instance) ({family})"


def servers_up() -> str:
    """Triton servers whose /metrics the sidecars scrape successfully."""
    return f"sum({_with(catalog.UP, TRITON_TARGET)})"


def servers_down() -> str:
    up = _with(catalog.UP, TRITON_TARGET)
    return f"count({up} == 0) or vector(0)"


def alerts_firing(selector: str = "") -> str:
    return _with(catalog.ALERTS_SERIES, 'alertstate="firing"', selector)


def alerts_firing_count(selector: str = "") -> str:
    return f"count({alerts_firing(selector)}) or vector(0)"


# --- SLOs (recording rules generated by alerts/) ------------------------------------------------
def slo_objective(selector: str = SLO_SELECTOR) -> str:
    return catalog.recorded(catalog.SLO_OBJECTIVE_RECORD, selector=selector)


def slo_sli(window: str, selector: str = SLO_SELECTOR) -> str:
    """The SLI (share of good events) over ``window``: one minus the recorded error ratio."""
    return f"1 - {catalog.recorded(catalog.slo_sli_error_record(window), selector=selector)}"


def slo_budget_remaining(selector: str = SLO_SELECTOR) -> str:
    return catalog.recorded(catalog.SLO_ERROR_BUDGET_REMAINING_RECORD, selector=selector)


def slo_burn_rate(window: str, selector: str = SLO_SELECTOR) -> str:
    """Error-budget burn rate over ``window``: error ratio / (1 - objective)."""
    err = catalog.recorded(catalog.slo_sli_error_record(window), selector=selector)
    obj = catalog.recorded(catalog.SLO_OBJECTIVE_RECORD, selector=selector)
    return f"{err} / on ({catalog.SLO}, {catalog.MODEL}) group_left () (1 - {obj})"


# --- errors Triton does not count (docs/uncounted-errors.md) ------------------------------------
# slo.py names an availability objective "<model>-availability": the SLO series that read requests.
AVAILABILITY_SLO = 'slo=~".+-availability"'
MODEL_ONLY = 'model=~"$model"'


def time_split(part: str, offset: str = "", selector: str = MODEL_ONLY) -> str:
    """Per model, the share of Triton's request time ``part`` ("computing" or "queued") over the last
    hour (``offset``: the same hour a week before): what a latency page's description says."""
    share = catalog.compute_share_promql(selector, "1h", offset, by=catalog.MODEL)
    return share if part == "computing" else f"1 - ({share})"


def uncounted_errors(selector: str = SELECTOR) -> str:
    """Per model, version and reason: 1 where Triton may not count the model's errors."""
    return f"max by ({catalog.MODEL}, {catalog.VERSION}, {catalog.REASON}) ({_with(catalog.MODEL_UNCOUNTED_ERRORS, selector)})"


def slo_error_ratio(selector: str = MODEL_ONLY, window: str = "5m") -> str:
    """The availability SLO's error ratio per model, from the front where the SLO file says so."""
    rec = catalog.recorded(catalog.slo_sli_error_record(window), selector=f"{selector},{AVAILABILITY_SLO}")
    return f"max by ({catalog.MODEL}) ({rec})"


def triton_error_ratio(selector: str = MODEL_ONLY, window: str = "5m") -> str:
    """Triton's own error ratio per model over the SLO record's window, the catalog's formula."""
    return f"max by ({catalog.MODEL}) ({catalog.promql(catalog.signal(catalog.ERROR_RATIO), window, selector=selector)})"


def error_ratio_gap(slo_selector: str = MODEL_ONLY, model_selector: str = MODEL_ONLY) -> str:
    """What the SLO's source saw fail and Triton did not count (0 where the SLO reads Triton)."""
    return f"{slo_error_ratio(slo_selector)} - on ({catalog.MODEL}) {triton_error_ratio(model_selector)}"


# --- variable values ----------------------------------------------------------------------------
# Models, versions and instances come from a Triton series every loaded model has (at 0 before its
# first request), so a model with no traffic is still selectable.
MODEL_VALUES = f"label_values({catalog.TRITON_SUCCESS}, {catalog.MODEL})"
VERSION_VALUES = f'label_values({catalog.TRITON_SUCCESS}{{model=~"$model"}}, {catalog.VERSION})'
INSTANCE_VALUES = f'label_values({catalog.TRITON_SUCCESS}{{model=~"$model"}}, instance)'
GPU_VALUES = f"label_values({catalog.GPU_UTILIZATION}, {catalog.GPU_UUID})"
GPU_MODEL_VALUES = f"label_values({catalog.MODEL_GPU_BUSY}, {catalog.MODEL})"
SLO_VALUES = f"label_values({catalog.SLO_OBJECTIVE_RECORD}, {catalog.SLO})"
SLO_MODEL_VALUES = f'label_values({catalog.SLO_OBJECTIVE_RECORD}{{slo=~"$slo"}}, {catalog.MODEL})'


# --- LLM serving (streaming models; dashboards/llm.py) ----------------------------------------------
# An LLM model may have no nv_inference_* series at all (a vLLM model only reports vllm:*): its
# variables list the models the sidecar exports LLM families for.
LLM_ANY_MODEL_VALUES = f'label_values({{__name__=~"tritonwatch_llm_.+"}}, {catalog.MODEL})'
LLM_VERSION_VALUES = f'label_values({{__name__=~"tritonwatch_llm_.+",model=~"$model"}}, {catalog.VERSION})'
LLM_INSTANCE_VALUES = 'label_values({__name__=~"tritonwatch_llm_.+",model=~"$model"}, instance)'


def llm_signal(name: str, selector: str = SELECTOR) -> str:
    """An LLM signal across replicas, per model and version, from the backends' own series."""
    return catalog.llm_promql(catalog.llm_signal(name), window=RATE, selector=selector)


def llm_quantile(histogram: str, quantile: str, selector: str = SELECTOR) -> str:
    """A TTFT or inter-token percentile across replicas from the sidecar's LLM histogram."""
    return catalog.llm_quantile_promql(catalog.llm_histogram(histogram), quantile, RATE, selector=selector)


def llm_buckets(histogram: str, selector: str = SELECTOR) -> str:
    """Per-bucket rate of an LLM latency histogram for a heatmap (all selected models together)."""
    return f"sum by (le) (rate({_with(histogram + '_bucket', selector)}[{RATE}]))"


def llm_sidecar_quantile(histogram: str, quantile: str, selector: str = SELECTOR) -> str:
    """One sidecar's own TTFT/ITL percentile gauge per replica (exact over traces, or interpolated)."""
    gauge = catalog.llm_histogram(histogram).quantile_name
    return per_model(gauge, "max", ("instance",), f'{selector},{catalog.QUANTILE}="{quantile}"')
