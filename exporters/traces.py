"""Latency distributions from Triton's sampled traces (OTLP/HTTP JSON or protobuf, or trace files), summaries as fallback.

Parts (each a ``Part`` for the collector; the receiver, settings and file reader also run as sources):

* ``OtlpReceiver`` (``--otlp-listen``): ``POST /v1/traces`` with an OTLP JSON (``application/json``)
  or protobuf (``application/x-protobuf``) body, gzip or not; answers 200 with an empty
  ``ExportTraceServiceResponse`` in the request's encoding, 400 with a one-line message on a
  malformed body (a ``google.rpc.Status`` for protobuf, as OTLP/HTTP asks). Received bodies are passed on unchanged to ``--otlp-forward`` from a bounded background
  queue, so a slow or failing backend never blocks Triton's exporter. Emits

      tritonwatch_spans_received_total
      tritonwatch_spans_dropped_total{reason}   malformed, orphan, duplicate, pending_full, incomplete,
                                                forward_queue_full, forward_error, busy (a body over
                                                MAX_CONCURRENT_BODIES at once: 503), unknown_model
                                                (a model Triton does not report: not made a label),
                                                unauthorized (--web-config's basic auth: 401),
                                                too_large (a body over --otlp-max-body-bytes, at
                                                most 4 MiB by default, once inflated: 413, never
                                                decoded)

  It binds 127.0.0.1 unless ``--otlp-listen`` names a host, and takes ``--web-config``'s TLS and basic
  auth as /metrics does.

* ``LatencyPart``: joined spans -> phase durations ->

      tritonwatch_request_duration_seconds_bucket{model,version,phase,le}, _sum, _count
                                        phases request, queue, compute_infer (catalog.HISTOGRAM_PHASES);
                                        a key with no trace over --quantile-window is forgotten
      tritonwatch_model_latency_quantile_seconds{model,version,phase,quantile,source}
                                        quantile 0.5 0.9 0.95 0.99 over --quantile-window; source "trace",
                                        or "summary" (Triton's *_summary_us) where no trace covers the key
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

import functools
import json
import logging
import os
import queue
import re
import socket
import threading
import time
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler
from itertools import compress
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.exporters.config import SidecarConfig, parse_listen
from tritonwatch.exporters.context import PartContext, RequestRates, Timings
from tritonwatch.exporters.exposition import TextFamily, Texts
from tritonwatch.exporters.http import Fetcher, ScrapeError
from tritonwatch.exporters.latency import Histograms, SampleStore, quantiles_of
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.server import MetricsHTTPServer
from tritonwatch.exporters.snapshot import Feed, Snapshots
from tritonwatch.exporters.source import Source, Updates
from tritonwatch.exporters.spans import RequestTiming, SpanJoiner, TraceFileError, trace_file_timings
from tritonwatch.exporters.steps import StepPart
from tritonwatch.exporters.summaries import Row, SummaryReader, SummaryRows
from tritonwatch.otlp import CONTENT_TYPES, JSON, PROTOBUF, OtlpError, Span, decode_body

log = logging.getLogger(__name__)

TRACES_PATH = "/v1/traces"
# Triton's batch exporter sends at most 512 spans a body (OpenTelemetry's default), about 0.6-1.3 KB
# each in JSON (tests/data/triton_otlp_traces.json): under 1 MB. A JSON body decodes to about ten times
# its size in objects, so the cap (--otlp-max-body-bytes) bounds the receiver's memory.
MAX_BODY_BYTES = SidecarConfig.otlp_max_body_bytes  # 4 MiB
# Triton's exporter sends one batch at a time; more at once is a flood, answered 503 (OTLP: retry later).
MAX_CONCURRENT_BODIES = 1
# A body sent without valid credentials is read (and dropped) up to this size; a larger one is cut.
UNAUTHORIZED_DRAIN = 1024 * 1024
# Triton 2.51 crashed (signal 11, issue #7795) with OpenTelemetry tracing at rates below this under load.
MIN_SAFE_OTEL_RATE = 10
MAX_TRACE_RATE = 1_000_000
BUDGET_TOLERANCE = 0.15  # the rate moves only when it is off by more than this share: no flapping
SOURCE_TRACE = "trace"
SOURCE_SUMMARY = "summary"


class Counters:
    """Spans received and dropped by reason; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.received = 0
        self.dropped: dict[str, int] = {}

    def receive(self, n: int) -> None:
        with self._lock:
            self.received += n

    def drop(self, reason: str, n: int = 1) -> None:
        with self._lock:
            self.dropped[reason] = self.dropped.get(reason, 0) + n

    def snapshot(self) -> tuple[int, dict[str, int]]:
        with self._lock:
            return self.received, dict(self.dropped)


class LatencyPart(Part):
    """Per-request phase durations -> histograms and windowed quantiles; summary fallback at scrape time.

    Every recorded batch is published to ``timings`` (the LLM and step parts subscribe); ``updates``
    are told before and after it; ``prepared`` as ``PartContext.prepared``; ``snapshots``: the
    Triton scrape's, for its summaries."""

    def __init__(
        self,
        quantile_window: float,
        buckets: Sequence[float] = catalog.DEFAULT_BUCKETS,
        snapshots: Snapshots | None = None,
        max_keys: int = 2000,
        clock: Callable[[], float] = time.time,
        per_slice: int = 1024,
        timings: Feed[Timings] | None = None,
        updates: Sequence[Updates] = (),
        prepared: bool = False,
        texts: Texts | None = None,
    ) -> None:
        self.quantile_window = quantile_window
        self.store = SampleStore(quantile_window, per_slice=per_slice, max_keys=max_keys)
        self.histograms = Histograms(buckets, max_keys=max_keys)
        self.snapshots = snapshots
        self.clock = clock
        # One request lands in the store and the histograms together: a scrape never sees it in one only.
        self._lock = threading.Lock()
        self._summary_cache: tuple[int, SummaryRows] | None = None
        self._summary_reader = SummaryReader()
        self._labels_cache: tuple[list[Row], list[tuple[str, ...]]] | None = None
        self.timings: Feed[Timings] = timings or Feed()
        self._recorded = 0  # batches recorded: with the Triton scrape and the time slice, the cache key
        self._families: tuple[tuple[object, ...], list[Metric]] | None = None
        self.updates = list(updates)
        self.prepared = prepared
        self.texts = texts

    def record(self, timings: Iterable[RequestTiming], now: float | None = None) -> int:
        now = self.clock() if now is None else now
        timings = list(timings)
        self.timings.publish((timings, now))
        n = 0
        for u in self.updates:
            u.begin()
        try:
            with self._lock:
                for t in timings:
                    n += 1
                    for phase, seconds in t.phases.items():
                        key = (t.model, t.version, phase)
                        self.store.add(key, seconds, now)
                        if phase in catalog.HISTOGRAM_PHASES:
                            self.histograms.observe(key, seconds, now)
                if n:
                    self._recorded += 1
        finally:
            for u in self.updates:
                u.end()
        return n

    def _key(self, now: float) -> tuple[object, ...]:
        snapshot = None if self.snapshots is None else self.snapshots.latest
        return (
            self._recorded,
            None if snapshot is None else (snapshot.generation, snapshot.up),
            self.store.slice_of(now),
        )

    def prepare(self) -> bool:
        """Build the families if traces, Triton's summaries or the time slice moved; True if it did."""
        now = self.clock()
        key = self._key(now)
        if self._families is not None and self._families[0] == key:
            return False
        self._families = (key, self._build(now))
        return True

    def collect(self) -> Iterator[Metric]:
        """The families, built again only when traces, Triton's summaries or the time slice moved
        (with ``prepared``: as last prepared)."""
        cached = self._families
        # Spans recorded since are built now: a reader who sent them must see them. A new Triton
        # scrape or time slice may wait for the render thread (at most one update behind).
        if cached is None or not self.prepared or cached[0][0] != self._recorded:
            self.prepare()
            cached = self._families
        assert cached is not None
        yield from cached[1]

    def _build(self, now: float) -> list[Metric]:
        key_labels = [*catalog.MODEL_KEY, catalog.PHASE]
        hist = HistogramMetricFamily(
            catalog.REQUEST_DURATION,
            "Per-request latency by phase from sampled Triton traces (cumulative since sidecar start).",
            labels=key_labels,
        )
        with self._lock:  # copies only: the receiver waits on this lock
            self.histograms.expire(now - self.quantile_window)
            snapshot = self.histograms.snapshot()
            held = {k: self.store.held(k, now) for k in self.store.keys(now)}
        found = {k: quantiles_of(h, catalog.QUANTILES) for k, h in held.items()}
        for key, buckets, total, _n in snapshot:
            hist.add_metric(list(key), buckets, total)
        quant = TextFamily(
            catalog.LATENCY_QUANTILE,
            "Latency quantile by phase: exact over sampled traces in the quantile window (source=trace), "
            "else Triton's own 60 s summary (source=summary).",
            [*key_labels, catalog.QUANTILE, catalog.SOURCE],
            texts=self.texts,
        )
        samples = TextFamily(
            catalog.LATENCY_SAMPLES,
            "Traced requests behind the source=trace latency quantiles (in the quantile window).",
            key_labels,
            texts=self.texts,
        )
        traced: set[tuple[str, ...]] = set()
        for key, q in found.items():
            if q is None:
                continue
            traced.add(key)
            for label, value in q.values.items():
                quant.add_metric([*key, label, SOURCE_TRACE], value)
            samples.add_metric(list(key), float(q.count))
        summary = self._summaries()  # in Triton's order: no sort of 10,000 keys
        labels = self._summary_labels(summary.rows)
        found_values = summary.seconds
        if traced:  # one source per model and phase: traces win
            keep = [row[:3] not in traced for row in summary.rows]
            labels, found_values = list(compress(labels, keep)), list(compress(found_values, keep))
        quant.add_many(labels, found_values)
        return [hist, quant, samples]

    def _summary_labels(self, rows: list[Row]) -> list[tuple[str, ...]]:
        """The rows' label sets (source "summary"), the same tuples while the rows are the same."""
        cached = self._labels_cache
        if cached is not None and cached[0] == rows:
            return cached[1]
        labels: list[tuple[str, ...]] = [(*row, SOURCE_SUMMARY) for row in rows]
        self._labels_cache = (rows, labels)
        return labels

    def _summaries(self) -> SummaryRows:
        """Triton's summary quantiles (``exporters/summaries.py``), read once per Triton scrape.

        A snapshot is replaced whole, never changed: the scrape loop and requests rendering /metrics
        never wait for the read.
        """
        snapshot = None if self.snapshots is None else self.snapshots.latest
        if snapshot is None or not snapshot.up:
            return SummaryRows()
        generation, samples = snapshot.generation, snapshot.samples
        cached = self._summary_cache
        if cached is not None and cached[0] == generation:
            return cached[1]  # read once per Triton scrape, not per Prometheus scrape
        rows = self._summary_reader.rows(samples)
        self._summary_cache = (generation, rows)
        return rows


class Forwarder:
    """Posts received bodies, unchanged, to the operator's OTLP endpoint from a bounded queue."""

    def __init__(self, url: str, counters: Counters, max_queue: int = 256, timeout: float = 5.0) -> None:
        self.url = url
        self.counters = counters
        self.timeout = timeout
        self._queue: queue.Queue[tuple[bytes, dict[str, str], int] | None] = queue.Queue(max_queue)
        self._thread: threading.Thread | None = None
        self.sent = 0

    def submit(self, body: bytes, headers: dict[str, str], spans: int) -> None:
        try:
            self._queue.put_nowait((body, headers, spans))
        except queue.Full:
            self.counters.drop("forward_queue_full", spans)

    def _run(self) -> None:
        import requests

        session = requests.Session()
        failing = False
        while True:
            item = self._queue.get()
            if item is None:
                self._queue.task_done()
                return
            body, headers, spans = item
            try:
                resp = session.post(self.url, data=body, headers=headers, timeout=self.timeout)
                ok = 200 <= resp.status_code < 300
                reason = f"HTTP {resp.status_code}"
            except requests.RequestException as exc:
                ok, reason = False, type(exc).__name__
            if ok:
                self.sent += 1
                if failing:
                    log.info("--otlp-forward %s: forwarding again", self.url)
                failing = False
            else:
                self.counters.drop("forward_error", spans)
                if not failing:
                    log.warning("--otlp-forward %s: %s; dropping spans until it recovers", self.url, reason)
                failing = True
            self._queue.task_done()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="otlp-forward", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread:
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                pass  # daemon thread: it dies with the process
            self._thread.join(timeout=self.timeout + 1)

    def drain(self, timeout: float) -> bool:
        """Wait until the queue is empty (tests); True when it is."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.02)
        return False


def _status_proto(code: int, message: str) -> bytes:
    """A serialized ``google.rpc.Status`` {code, message}: OTLP/HTTP's error body for protobuf clients.

    Two scalar fields (1: int32 code, 2: string message), written directly rather than pulling in
    googleapis-common-protos for one message."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    text = message.encode()
    return b"\x08" + varint(code) + b"\x12" + varint(len(text)) + text


GRPC_INVALID_ARGUMENT = 3


def _read_body(handler: BaseHTTPRequestHandler, max_bytes: int) -> tuple[bytes, bytes, str]:
    """(raw body, decoded body, encoding): gunzipped when so encoded; ValueError with an HTTP status in args[1]."""
    length = handler.headers.get("Content-Length")
    if length is None or not length.isdigit():
        raise ValueError("Content-Length required", 411)
    if int(length) > max_bytes:
        raise ValueError(f"body over {max_bytes} bytes", 413)
    raw = handler.rfile.read(int(length))
    encoding = (handler.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding == "identity":
        return raw, raw, encoding
    if encoding != "gzip":
        raise ValueError(f"Content-Encoding {encoding} not supported", 415)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, max_bytes + 1)
    except zlib.error:
        raise ValueError("body is not valid gzip", 400) from None
    if len(out) > max_bytes:
        raise ValueError(f"body over {max_bytes} bytes once inflated", 413)
    return raw, out, encoding


class OtlpReceiver(Source):
    """OTLP/HTTP receiver (JSON and protobuf); its loop expires compute spans whose parent never came."""

    target = "otlp"

    def __init__(
        self,
        listen: str,
        latency: LatencyPart,
        forward: str = "",
        interval: float = 5.0,
        joiner: SpanJoiner | None = None,
        max_body: int = MAX_BODY_BYTES,
        max_concurrent: int = MAX_CONCURRENT_BODIES,
        known_models: Callable[[], Collection[str]] | None = None,
        authorize: Callable[[str | None], bool] | None = None,
        wrap: Callable[[MetricsHTTPServer], None] | None = None,
    ) -> None:
        super().__init__(interval)
        self.listen = listen
        # Span attributes are the sender's to choose: only models Triton itself reports become labels.
        self.known_models = known_models
        self.latency = latency
        self.joiner = joiner or SpanJoiner()
        self.counters = Counters()
        self.forwarder = Forwarder(forward, self.counters) if forward else None
        self.max_body = max_body
        # Bodies read at once: memory is bounded by max_concurrent x max_body, not by the senders.
        self._reading = threading.BoundedSemaphore(max_concurrent)
        host, port = parse_listen(listen, "--otlp-listen")
        handler = self._handler_class()
        try:
            # Loopback unless a host is given: spans become labels, so who may send them is a choice.
            self.server = MetricsHTTPServer((host or "127.0.0.1", port), handler)
        except OSError as exc:
            raise TritonwatchError(f"--otlp-listen {listen}: cannot bind ({exc.strerror})") from None
        # --web-config's TLS and basic auth, as for /metrics (Triton's exporter can send both).
        self.authorize = authorize
        if wrap is not None:
            wrap(self.server)
        # Exporters keep their connection open between batches: stop() must close those too, or a
        # stopped receiver keeps taking spans on them while a new one on the same port gets none.
        self._conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._server_thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        bound = str(self.server.server_address[0])
        host = "127.0.0.1" if bound in ("0.0.0.0", "") else bound
        scheme = "https" if self.server.tls_context is not None else "http"
        return f"{scheme}://{host}:{self.port}{TRACES_PATH}"

    def ingest(self, body: bytes, headers: dict[str, str], now: float, raw: bytes | None = None) -> int:
        """Decode, forward and record one export body; returns the spans in it (OtlpError if malformed).

        ``headers["Content-Type"]`` says JSON or protobuf (JSON when absent); ``raw`` is the body as it
        came over the wire (gzip) when that differs from the decoded ``body``."""
        try:
            spans: list[Span] = decode_body(body, headers.get("Content-Type", JSON))
        except OtlpError:
            self.counters.drop("malformed")
            raise
        self.counters.receive(len(spans))
        if self.forwarder:
            self.forwarder.submit(body if raw is None else raw, headers, len(spans))
        timings = self.joiner.add(spans, now)
        if self.known_models is not None and timings:
            known = self.known_models()
            kept = [t for t in timings if t.model in known]
            if len(kept) < len(timings):
                self.counters.drop("unknown_model", len(timings) - len(kept))
            timings = kept
        self.latency.record(timings, now)
        return len(spans)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 120  # an idle keep-alive connection is closed after this

            def setup(self) -> None:
                super().setup()
                with receiver._conn_lock:
                    receiver._conns.add(self.connection)

            def finish(self) -> None:
                with receiver._conn_lock:
                    receiver._conns.discard(self.connection)
                super().finish()

            def _answer(self, status: int, body: bytes = b"{}", ctype: str = JSON) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _error(self, status: int, message: str, ctype: str) -> None:
                if ctype == PROTOBUF:
                    self._answer(status, _status_proto(GRPC_INVALID_ARGUMENT, message), PROTOBUF)
                else:
                    self._answer(status, json.dumps({"message": message}).encode())

            def do_POST(self) -> None:
                for u in receiver.updates:  # its counters move: /metrics is rendered again
                    u.begin()
                try:
                    self._post()
                finally:
                    for u in receiver.updates:
                        u.end()

            def _post(self) -> None:
                if self.path.split("?", 1)[0] != TRACES_PATH:
                    self._answer(404, json.dumps({"message": f"POST {TRACES_PATH}"}).encode())
                    return
                ctype = (self.headers.get("Content-Type") or JSON).split(";")[0].strip().lower()
                if receiver.authorize is not None and not receiver.authorize(
                    self.headers.get("Authorization")
                ):
                    receiver.counters.drop("unauthorized")
                    self.close_connection = True
                    length = self.headers.get("Content-Length", "")
                    if length.isdigit() and int(length) <= UNAUTHORIZED_DRAIN:
                        self.rfile.read(int(length))  # so that the client reads the 401, not a reset
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="tritonwatch"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if not receiver._reading.acquire(blocking=False):
                    receiver.counters.drop("busy")
                    self.close_connection = True
                    self._error(503, f"over {MAX_CONCURRENT_BODIES} bodies at once: retry later", ctype)
                    return
                try:
                    answer = self._read_and_ingest(ctype)
                finally:
                    receiver._reading.release()
                # Answered once the slot is free: an exporter that sends its next batch as soon as it
                # has the answer (Triton's does) must not find its own last body still holding it.
                answer()

            def _read_and_ingest(self, ctype: str) -> Callable[[], None]:
                """Read and take one body; the answer to send, as a call made after the slot is freed."""
                try:
                    raw, body, encoding = _read_body(self, receiver.max_body)
                except ValueError as exc:
                    receiver.counters.drop("too_large" if exc.args[1] == 413 else "malformed")
                    self.close_connection = True
                    return functools.partial(self._error, int(exc.args[1]), str(exc.args[0]), ctype)
                if ctype not in CONTENT_TYPES:
                    receiver.counters.drop("malformed")
                    return functools.partial(
                        self._error, 415, f"Content-Type {ctype}: expected {JSON} or {PROTOBUF}", JSON
                    )
                # Forwarded as received: the same bytes, type and encoding.
                headers = {"Content-Type": ctype}
                if encoding != "identity":
                    headers["Content-Encoding"] = encoding
                try:
                    receiver.ingest(body, headers, time.time(), raw=raw)
                except OtlpError as exc:
                    return functools.partial(self._error, 400, str(exc), ctype)
                # An empty ExportTraceServiceResponse: "{}" in JSON, no bytes in protobuf.
                return functools.partial(self._answer, 200, b"" if ctype == PROTOBUF else b"{}", ctype)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def scrape(self) -> None:
        self.joiner.expire(time.time())

    def collect(self) -> Iterator[Metric]:
        received, dropped = self.counters.snapshot()
        for reason, n in list(self.joiner.stats.dropped.items()):
            dropped[reason] = dropped.get(reason, 0) + n
        rec = CounterMetricFamily(
            catalog.SPANS_RECEIVED.removesuffix("_total"), "Trace spans received over OTLP/HTTP."
        )
        rec.add_metric([], float(received))
        drop = CounterMetricFamily(
            catalog.SPANS_DROPPED.removesuffix("_total"),
            "Trace spans received but not used or not forwarded, by reason.",
            labels=["reason"],
        )
        for reason, n in sorted(dropped.items()):
            drop.add_metric([reason], float(n))
        yield rec
        yield drop

    def start(self) -> None:
        if self.forwarder:
            self.forwarder.start()
        self._server_thread = threading.Thread(
            target=self.server.serve_forever, name="otlp-receiver", daemon=True
        )
        self._server_thread.start()
        log.info("OTLP/HTTP trace receiver on %s", self.url)
        super().start()

    def stop(self) -> None:
        super().stop()
        if self._server_thread:
            self.server.shutdown()
            self._server_thread.join(timeout=5)
        self.server.server_close()
        with self._conn_lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by the peer
        if self.forwarder:
            self.forwarder.stop()


class TraceSettings(Source):
    """Reads Triton's trace settings (the rate in force); sets the rate once when asked, or holds a
    traced-requests budget by moving it with the request rate (``request_rate``: requests/s, or None
    while unknown)."""

    target = "triton_trace"

    def __init__(
        self,
        triton: str,
        interval: float,
        timeout: float,
        set_rate: int = 0,
        budget: float = 0.0,
        request_rate: Callable[[], float | None] = lambda: None,
    ) -> None:
        super().__init__(interval)
        self.base = triton.rstrip("/")
        self.fetcher = Fetcher(timeout)
        self.set_rate = set_rate
        self.budget = budget
        self.request_rate = request_rate
        self.rate: float | None = None
        self.mode = ""

    def budget_rate(self, requests_per_second: float) -> int:
        """The trace rate (one in N) that traces about ``budget`` requests a second."""
        return max(MIN_SAFE_OTEL_RATE, min(MAX_TRACE_RATE, round(requests_per_second / self.budget)))

    def _hold_budget(self) -> None:
        rps = self.request_rate()
        if not self.budget or rps is None or not self.rate:  # tracing off, or no rate seen yet
            return
        want = self.budget_rate(rps)
        if abs(want - self.rate) <= BUDGET_TOLERANCE * self.rate:
            return
        settings = self.fetcher.json("POST", self.describe(), {"trace_rate": str(want)})
        log.info(
            "trace budget %g/s at %.1f requests/s: Triton's trace rate %g -> %d",
            self.budget,
            rps,
            self.rate,
            want,
        )
        self.rate = float((settings or {}).get("trace_rate", want))

    def describe(self) -> str:
        return f"{self.base}/v2/trace/setting"

    def _apply(self) -> None:
        rate = self.set_rate
        settings = self.fetcher.json("POST", self.describe(), {"trace_rate": str(rate)})
        mode = str((settings or {}).get("trace_mode", ""))
        log.info("set Triton's trace rate to %d (one request in %d traced; mode %s)", rate, rate, mode or "?")
        if mode != "triton" and rate < MIN_SAFE_OTEL_RATE:
            log.warning(
                "--set-trace-rate %d: Triton 2.51 crashed (signal 11, issue #7795) with OpenTelemetry "
                "tracing at rates below %d under load; use %d or more",
                rate,
                MIN_SAFE_OTEL_RATE,
                MIN_SAFE_OTEL_RATE,
            )
        self.set_rate = 0

    def scrape(self) -> None:
        if self.set_rate:
            self._apply()
        settings = self.fetcher.json("GET", self.describe())
        if not isinstance(settings, dict):
            raise ScrapeError("bad_json", f"{self.describe()}: expected an object")
        self.mode = str(settings.get("trace_mode", ""))
        levels = settings.get("trace_level") or []
        try:
            rate = float(settings.get("trace_rate", 0))
        except (TypeError, ValueError):
            raise ScrapeError("bad_json", f"{self.describe()}: trace_rate is not a number") from None
        self.rate = 0.0 if "OFF" in levels or not levels else rate
        self._hold_budget()

    def on_failure(self) -> None:
        self.rate = None

    def collect(self) -> Iterator[Metric]:
        g = GaugeMetricFamily(
            catalog.TRACE_RATE,
            "Triton's trace sampling rate in force: one request in N is traced (0: tracing off).",
        )
        if self.rate is not None:
            g.add_metric([], self.rate)
        yield g
        if self.budget:
            b = GaugeMetricFamily(
                catalog.TRACE_BUDGET,
                "Traced requests per second the sidecar holds by moving Triton's trace rate (--trace-budget).",
            )
            b.add_metric([], self.budget)
            yield b


_ROTATED = re.compile(r"^\.(\d+)$")
# A folder changed within this many seconds of being listed may change again without its mtime
# moving (a filesystem's timestamps are coarser than some writes): it is listed again until then.
RACY_SECONDS = 2.0


class TraceFileReader(Source):
    """Reads Triton's mode=triton trace files: ``PATH`` and its rotations ``PATH.N``, each once complete.

    A file is read when it parses as a whole JSON list (Triton writes each rotation at once). ``PATH``
    growing in place is read again from the first trace not yet seen; a rotation that changes was
    rewritten by a restarted Triton and is read whole. Files older than the quantile window at start
    are history and are skipped.

    The folder is listed again only when its mtime moves (a file created, renamed or removed); each
    tick costs one ``stat`` per file of ours, which is how a file growing or rewritten in place is
    seen. Files are never deleted: they are Triton's, written where the operator pointed it, and
    other readers (an archive, a trace viewer, a test computing the truth from them) may need them.
    Triton never removes its rotations either, so pruning old ones (by age or count) is the
    operator's job; ``docs/architecture.md`` says so.
    """

    target = "trace_file"

    def __init__(self, path: str, latency: LatencyPart, interval: float, skip_older_than: float) -> None:
        super().__init__(interval)
        self.path = Path(path)
        self.latency = latency
        self.started = time.time()
        self.skip_before = self.started - skip_older_than
        # path -> (inode, size, mtime_ns, traces already recorded)
        self._seen: dict[str, tuple[int, int, int, int]] = {}
        self._names: list[str] = []  # our files in the folder, as last listed
        self._listed: int | None = None  # the folder's mtime_ns when listed
        self._racy = False
        self.files_read = 0
        self.bad_files = 0
        self.listings = 0

    def describe(self) -> str:
        return str(self.path)

    def _candidates(self) -> list[str]:
        """Our file names in the folder, listed again only when the folder changed."""
        folder = self.path.parent
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:
            self._listed = None
            return []
        if mtime == self._listed and not self._racy:
            return self._names
        try:
            names = os.listdir(folder)
        except OSError:
            self._listed = None
            return []
        base = self.path.name
        out = []
        for name in names:
            suffix = name[len(base) :] if name.startswith(base) else None
            if suffix == "" or (suffix is not None and _ROTATED.match(suffix)):
                out.append(name)
        self._names, self._listed = out, mtime
        self._racy = time.time() - mtime / 1e9 < RACY_SECONDS
        self.listings += 1
        return out

    def scrape(self) -> None:
        folder = self.path.parent
        live = set()
        changed: list[tuple[float, str, Path, os.stat_result]] = []
        for name in self._candidates():
            path = folder / name
            key = str(path)
            live.add(key)
            try:
                st = path.stat()
            except OSError:
                continue
            prev = self._seen.get(key)
            if prev and prev[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                continue
            changed.append((st.st_mtime, name, path, st))
        # Oldest first, so timings reach the window in the order Triton wrote them.
        for _mtime, _name, path, st in sorted(changed, key=lambda c: (c[0], c[1])):
            self._read(path, st)
        self._seen = {k: v for k, v in self._seen.items() if k in live}

    def _read(self, path: Path, st: os.stat_result) -> None:
        key = str(path)
        prev = self._seen.get(key)
        ident = (st.st_ino, st.st_size, st.st_mtime_ns)
        if prev is None and st.st_mtime < self.skip_before:
            self._seen[key] = (*ident, -1)  # history from before the sidecar: not in the window
            return
        try:
            entries = json.loads(path.read_bytes())
            timings = trace_file_timings(entries)
        except (OSError, ValueError, RecursionError):
            return  # still being written: try again next round
        except TraceFileError as exc:
            self.bad_files += 1
            log.warning("--trace-file %s: %s", path, exc)
            self._seen[key] = (*ident, 0)
            return
        # Only PATH itself grows in place; a rotation that changes was rewritten (Triton restarted).
        grew = path == self.path and prev and prev[0] == st.st_ino and prev[1] <= st.st_size
        done = prev[3] if prev and grew else 0
        if done < 0:
            done = len(timings)  # history file that changed: only what is new
        self.latency.record(timings[done:])
        self._seen[key] = (*ident, len(timings))
        self.files_read += 1

    def collect(self) -> Iterator[Metric]:
        return iter(())


class _View(Part):
    """What the collector sees of a source: its families only. Its health is not a scrape target
    (``tritonwatch_up`` has a fixed set of targets); failures show in the logs and the counters."""

    def __init__(self, source: OtlpReceiver | TraceSettings | TraceFileReader) -> None:
        self.source = source

    def collect(self) -> Iterator[Metric]:
        return self.source.collect()


def total_request_rate(rates: RequestRates) -> float | None:
    """Successful requests/s over the sidecar's window, every model together; None while unknown."""
    known = list(rates().values())
    return sum(known) if known else None


def make_part(context: PartContext) -> list[tuple[Part, Source | None]]:
    """The latency part always (Triton's summaries as fallback); receiver, settings, file reader by flag."""
    cfg = context.config
    buckets = cfg.latency_bucket_bounds or catalog.DEFAULT_BUCKETS
    max_keys = max(cfg.max_models * len(catalog.PHASES), 1)
    latency = LatencyPart(
        cfg.quantile_window,
        buckets,
        context.snapshots,
        max_keys=max_keys,
        timings=context.timings,
        updates=context.updates,
        prepared=context.prepared,
        texts=context.texts,
    )
    api_state, snapshots = context.api_state, context.snapshots

    def known_models() -> frozenset[str]:
        # Triton's repository index, and the models its /metrics names (while the index is unread).
        tracked = snapshots.latest.tracked
        return frozenset(m for m, _v in api_state().ready) | frozenset(m for m, _v in tracked)

    out: list[tuple[Part, Source | None]] = [(latency, None)]
    if cfg.otlp_listen:
        authorize, wrap = None, None
        if cfg.web_config:
            from tritonwatch.exporters.webconfig import load_web_config

            authorize, wrap = load_web_config(cfg.web_config)
        receiver = OtlpReceiver(
            cfg.otlp_listen,
            latency,
            cfg.otlp_forward,
            interval=cfg.interval,
            max_body=cfg.otlp_max_body_bytes,
            known_models=known_models,
            authorize=authorize,
            wrap=wrap,
        )
        out.append((_View(receiver), receiver))
    if cfg.trace_file:
        reader = TraceFileReader(cfg.trace_file, latency, min(cfg.interval, 1.0), cfg.quantile_window)
        out.append((_View(reader), reader))
        # Trace files link an ensemble's steps (and a BLS model's calls) to the client's request.
        steps = StepPart(cfg.quantile_window, max_keys=max_keys, texts=context.texts)
        context.timings.subscribe(lambda batch: steps.record(*batch))
        context.bls.provide(steps.bls_models)
        out.append((steps, None))
    if cfg.otlp_listen or cfg.trace_file or cfg.set_trace_rate or cfg.trace_budget:
        settings = TraceSettings(
            cfg.triton,
            # With a budget the rate follows the load: settings are read (and moved) every interval.
            cfg.interval if cfg.trace_budget else max(cfg.interval, 5.0),
            cfg.scrape_timeout,
            cfg.set_trace_rate,
            cfg.trace_budget,
            lambda: total_request_rate(context.request_rates),
        )
        out.append((_View(settings), settings))
    return out
