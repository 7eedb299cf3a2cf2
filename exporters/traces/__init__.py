"""Latency distributions from Triton's sampled traces (OTLP/HTTP JSON or protobuf, or trace files), summaries as fallback.

Parts (each a ``Part`` for the collector; the receiver, settings and file reader also run as sources):

* ``OtlpReceiver`` (``--otlp-listen``): ``POST /v1/traces`` with an OTLP JSON (``application/json``)
  or protobuf (``application/x-protobuf``) body, gzip or not; answers 200 with an empty
  ``ExportTraceServiceResponse`` in the request's encoding, 400 with a one-line message on a
  body that is not JSON or protobuf (a ``google.rpc.Status`` for protobuf, as OTLP/HTTP asks).
  Bodies go through a bounded intake (``intake.py``) to one worker that decodes, joins and records
  them in batches; under overload a body is shed whole before decoding. Received bodies are passed
  on unchanged to ``--otlp-forward`` from a bounded background queue, so a slow or failing backend
  never blocks Triton's exporter. Emits

      tritonwatch_spans_received_total
      tritonwatch_spans_dropped_total{reason}   malformed, orphan, duplicate, pending_full, incomplete,
                                                forward_queue_full, forward_error, busy (a body over
                                                MAX_CONCURRENT_BODIES at once: 503), unknown_model
                                                (a model Triton does not report: not made a label),
                                                unauthorized (--web-config's basic auth: 401),
                                                too_large (a body over --otlp-max-body-bytes, at
                                                most 4 MiB by default, once inflated: 413, never
                                                decoded), overload (the intake full: shed whole,
                                                each span counted)

  It binds 127.0.0.1 unless ``--otlp-listen`` names a host, and takes ``--web-config``'s TLS and basic
  auth as /metrics does.

* ``LatencyPart``: joined spans -> phase durations ->

      tritonwatch_request_duration_seconds_bucket{model,version,phase,le}, _sum, _count
                                        phases request, queue, compute_infer (catalog.HISTOGRAM_PHASES);
                                        a key with no trace over --quantile-window is forgotten
      tritonwatch_model_latency_quantile_seconds{model,version,phase,quantile,source}
                                        quantile 0.5 0.9 0.95 0.99 over --quantile-window; source "trace",
                                        or "summary" (Triton's *_summary_us) where no trace covers the key;
                                        phase request of a non-decoupled model with Triton's own
                                        first-response histogram: source "histogram" (native_latency.py),
                                        and the request histogram is Triton's
      tritonwatch_model_latency_samples{model,version,phase}   requests behind the "trace" quantiles

* ``TraceSettings``: ``tritonwatch_trace_rate`` (Triton's trace rate in force, 0 when tracing is off),
  read from ``GET /v2/trace/setting``; ``--set-trace-rate N`` posts it once at start. With
  ``--trace-budget N`` it moves the rate as load changes so that about N requests a second are
  traced (``tritonwatch_trace_budget_requests_per_second``): rate = request rate / N, never below
  ``MIN_SAFE_OTEL_RATE``, changed only when off by more than ``BUDGET_TOLERANCE``.
* ``TraceFileReader`` (``--trace-file PATH``): reads the JSON files Triton writes in mode=triton
  (``PATH`` and its rotations ``PATH.0``, ``PATH.1``, ...), each file once it is complete.
"""

from __future__ import annotations

from tritonwatch.exporters.traces.body import (
    GRPC_INVALID_ARGUMENT,
    MAX_BODY_BYTES,
    MAX_CONCURRENT_BODIES,
    TRACES_PATH,
    UNAUTHORIZED_DRAIN,
)
from tritonwatch.exporters.traces.counters import Counters
from tritonwatch.exporters.traces.files import RACY_SECONDS, TraceFileReader
from tritonwatch.exporters.traces.forward import Forwarder
from tritonwatch.exporters.traces.part import SOURCE_SUMMARY, SOURCE_TRACE, LatencyPart
from tritonwatch.exporters.traces.receiver import OtlpReceiver
from tritonwatch.exporters.traces.settings import (
    BUDGET_TOLERANCE,
    MAX_TRACE_RATE,
    MIN_SAFE_OTEL_RATE,
    TraceSettings,
)

__all__ = [
    "BUDGET_TOLERANCE",
    "GRPC_INVALID_ARGUMENT",
    "MAX_BODY_BYTES",
    "MAX_CONCURRENT_BODIES",
    "MAX_TRACE_RATE",
    "MIN_SAFE_OTEL_RATE",
    "RACY_SECONDS",
    "SOURCE_SUMMARY",
    "SOURCE_TRACE",
    "TRACES_PATH",
    "UNAUTHORIZED_DRAIN",
    "Counters",
    "Forwarder",
    "LatencyPart",
    "OtlpReceiver",
    "TraceFileReader",
    "TraceSettings",
]
