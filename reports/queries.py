"""What the report asks Prometheus, every expression built from ``tritonwatch.catalog``.

Weekly figures are one instant query at the report's end over a ``[<days>d]`` range of the raw
counters: ratios of summed increases, never averages of 5-minute ratios. Time series for peaks and
charts use the recording rule's series where they exist in the period (``sig.record``), else the same
formula over the raw Triton series.
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.fronthistogram import FrontHistogram
from tritonwatch.slo import FrontCounters

BY = catalog.by_clause()  # "model, version"
GPU_BY = catalog.GPU_UUID

# Windows for the time series: 5 minutes for peaks (the "highest 5-minute rate"), an hour for
# the ratio and percentile charts, where 5-minute values of sampled traces would be noise.
PEAK_WINDOW = "5m"
CHART_WINDOW = "1h"


def _increase(term: catalog.Term, window: str) -> str:
    return f"sum by ({BY}) (increase({term.matcher()}[{window}]))"


def successes(window: str) -> str:
    return _increase(catalog.signal(catalog.REQUEST_RATE).numerator[0], window)


def server_failures(window: str) -> str:
    """Failures other than client cancellations (the error ratio's numerator), each failed request of
    an ensemble once."""
    plain = _increase(catalog.signal(catalog.ERROR_RATIO).numerator[0], window)
    return catalog.ensemble_aware(plain, f"{plain} / {catalog.ENSEMBLE_FAILURES_PER_REQUEST}")


def error_ratio(window: str) -> str:
    return catalog.promql(catalog.signal(catalog.ERROR_RATIO), window)


def front_error_ratio(front: FrontCounters, window: str) -> str:
    """An SLO's error ratio from the front's counters (``availability.from``), as its rules read it."""
    return front.error_ratio_promql(window, fn="increase")


def mean_batch_size(window: str) -> str:
    return catalog.promql(catalog.signal(catalog.BATCH_SIZE_MEAN), window)


def max_batch_size(window: str) -> str:
    # max_over_time: the sidecar may have been scraped at any point of the period, not only at its end.
    return f"max by ({BY}) (max_over_time({catalog.MAX_BATCH_SIZE}[{window}]))"


def batch_efficiency(window: str) -> str:
    return catalog.batch_efficiency_promql(window)


def cache_hit_ratio(window: str) -> str:
    return figure(catalog.signal(catalog.CACHE_HIT_RATIO), window)


def figure(entry: catalog.Signal, window: str) -> str:
    """A reported signal (``catalog.REPORTED``) over the window: its formula across replicas (the
    config ratio, batch efficiency, is worked out in ``week`` from two of these)."""
    return catalog.promql(entry, window)


def mean_latency(window: str, phase: str = "request") -> str:
    return catalog.promql(catalog.signal(catalog.LATENCY, phase=phase), window)


def latency_quantile(q: float, window: str, phase: str = "request") -> str:
    """A percentile from the sidecar's aggregatable histogram, across replicas."""
    bucket = f'{catalog.REQUEST_DURATION}_bucket{{{catalog.PHASE}="{phase}"}}'
    return f"histogram_quantile({q:g}, sum by ({BY}, le) (rate({bucket}[{window}])))"


def model_gpus(window: str) -> str:
    """Which GPUs run each model: Triton's execution-side counters carry ``gpu_uuid`` for GPU instances;
    for models placed by their config, the sidecar's attributed busy-seconds counters do."""
    config = f'{catalog.MODEL_GPU_BUSY_SECONDS}{{{catalog.ATTRIBUTION}="{catalog.ATTRIBUTION_CONFIG}"}}'
    return (
        f'count by ({BY}, {GPU_BY}) (last_over_time({catalog.TRITON_EXEC_COUNT}{{{GPU_BY}!=""}}[{window}]) '
        f"or last_over_time({config}[{window}]))"
    )


def request_rate(recorded: bool, window: str = PEAK_WINDOW) -> str:
    """Successful requests/s per model summed across replicas (and any grouping label such as cluster)."""
    sig = catalog.signal(catalog.REQUEST_RATE)
    if recorded:
        return f"sum by ({BY}) ({catalog.recorded(sig.record)})"
    return catalog.promql(sig, window)


def sidecar_capacity(window: str = "1h") -> str:
    """The sidecars' SLO-bound capacity at the end, summed over replicas (each averaged over ``window``:
    its estimate moves with every refresh)."""
    return f"sum by ({BY}) (avg_over_time({catalog.CAPACITY}[{window}]))"


def request_rate_record() -> str:
    return catalog.REQUEST_RATE_RECORD


def gpu_utilization(window: str = PEAK_WINDOW) -> str:
    """Per GPU, the mean utilisation (0-1) over each window: the sidecar's series, else Triton's own."""
    parts = [
        f"avg by ({GPU_BY}) (avg_over_time({name}[{window}]))"
        for name in (catalog.GPU_UTILIZATION, catalog.TRITON_GPU_UTILIZATION)
    ]
    return " or ".join(parts)


def latency_within(threshold: float, window: str = PEAK_WINDOW, phase: str = "request") -> str:
    """Sampled requests/s within ``threshold`` (the latency SLI's good events), across replicas."""
    bucket = f'{catalog.REQUEST_DURATION}_bucket{{{catalog.PHASE}="{phase}",{catalog.le_matcher(threshold)}}}'
    return f"sum by ({BY}) (rate({bucket}[{window}]))"


def latency_sampled(window: str = PEAK_WINDOW, phase: str = "request") -> str:
    """Sampled requests/s (the latency SLI's valid events), across replicas."""
    return f'sum by ({BY}) (rate({catalog.REQUEST_DURATION}_count{{{catalog.PHASE}="{phase}"}}[{window}]))'


def front_latency(front: FrontHistogram, threshold: float | None, window: str = PEAK_WINDOW) -> str:
    """Requests/s the front timed within ``threshold`` (None: all of them), as its SLO rules read them
    (``latency.from``): the front's series do not name the model, so nothing is kept but the sum."""
    bucket = front.total() if threshold is None else front.under(threshold)
    return f"sum(rate({bucket}[{window}]))"


def gpu_busy_seconds(window: str) -> str:
    """GPU-seconds per second each model kept its GPUs busy over the window, all GPUs together."""
    return f"sum by ({BY}) ({catalog.gpu_busy_seconds_promql(window)})"


def attributed_watts(window: str) -> str:
    """Each model's share of its GPUs' mean power over the window (power split by busy share), in W."""
    on = catalog.GPU_UUID
    share = catalog.gpu_busy_ratio_promql(window)
    return f"sum by ({BY}) (({share}) * on ({on}) group_left () {catalog.gpu_energy_watts_promql(window)})"


def history_probe(step: str = "1d") -> str:
    """One value per ``step`` where any Triton request series holds samples: finds the oldest data."""
    return f"count(count_over_time({catalog.TRITON_SUCCESS}[{step}]) >= 2)"
