"""``OtlpReceiver``: the OTLP/HTTP trace receiver (``--otlp-listen``), JSON and protobuf.

A POST is read and parsed in its handler thread (a body that is not JSON is answered 400), then it
goes to the bounded ``Intake``; decoding, the join and the recording run in the intake's worker, one
batch for whatever queued meanwhile. The answer waits for the body's processing while the intake
keeps up, and goes at once when the exporter is waiting on us (``intake.py``); a full intake sheds the
body before decoding it, with a counted drop (reason ``overload``). ``ingest`` does the whole path in
the caller's thread.
"""

from __future__ import annotations

import functools
import json
import logging
import socket
import threading
import time
from collections.abc import Callable, Collection, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.exporters.config import parse_listen
from tritonwatch.exporters.server import MetricsHTTPServer
from tritonwatch.exporters.source import Source
from tritonwatch.exporters.traces.body import (
    GRPC_INVALID_ARGUMENT,
    MAX_BODY_BYTES,
    MAX_CONCURRENT_BODIES,
    TRACES_PATH,
    UNAUTHORIZED_DRAIN,
    _read_body,
    _status_proto,
)
from tritonwatch.exporters.traces.counters import Counters
from tritonwatch.exporters.traces.forward import Forwarder
from tritonwatch.exporters.traces.intake import BACKPRESSURE_GAP, MAX_QUEUED_SPANS, SYNC_TIMEOUT, Intake
from tritonwatch.exporters.traces.join import SpanJoiner
from tritonwatch.exporters.traces.otlp import (
    CONTENT_TYPES,
    JSON,
    PROTOBUF,
    OtlpError,
    Span,
    count_spans,
    decode_body,
    decode_request,
    parse_json,
)
from tritonwatch.exporters.traces.timing import TimingSink

log = logging.getLogger(__name__)


class OtlpReceiver(Source):
    """OTLP/HTTP receiver (JSON and protobuf); its loop expires compute spans whose parent never came."""

    target = "otlp"

    def __init__(
        self,
        listen: str,
        latency: TimingSink,
        forward: str = "",
        interval: float = 5.0,
        joiner: SpanJoiner | None = None,
        max_body: int = MAX_BODY_BYTES,
        max_concurrent: int = MAX_CONCURRENT_BODIES,
        known_models: Callable[[], Collection[str]] | None = None,
        authorize: Callable[[str | None], bool] | None = None,
        wrap: Callable[[MetricsHTTPServer], None] | None = None,
        max_queued_spans: int = MAX_QUEUED_SPANS,
    ) -> None:
        super().__init__(interval)
        self.listen = listen
        # Span attributes are the sender's to choose: only models Triton itself reports become labels.
        self.known_models = known_models
        self.latency = latency
        self.joiner = joiner or SpanJoiner()
        self.counters = Counters()
        self.forwarder = Forwarder(forward, self.counters) if forward else None
        self.intake = Intake(
            self._process_bodies, lambda n: self.counters.drop("overload", n), max_queued_spans
        )
        self._last_answer = 0.0  # monotonic time the last body's answer went (BACKPRESSURE_GAP)
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
        self._process(spans, now)
        return len(spans)

    def accept(self, body: bytes, headers: dict[str, str], now: float, raw: bytes | None = None) -> bool:
        """As ``ingest``, but decoding, joining and recording are left to the intake's worker (or the
        body is shed when the intake is full); what the HTTP handler calls, so that Triton's exporter
        is not held while the sidecar falls behind. True when the answer should wait for the body's
        processing (``Intake.flush``: the intake keeps up and the exporter is not waiting on us).

        A JSON body is parsed here (one that is not JSON is a 400, as before); one that parses but
        is not an export is counted ``malformed`` by the worker, after its 200. A protobuf body is
        decoded here (the parse is C code; its spans are counted exactly)."""
        ctype = headers.get("Content-Type", JSON)
        try:
            if ctype.split(";", 1)[0].strip().lower() == JSON:
                doc = parse_json(body)
                n, payload = count_spans(doc), (True, doc)
            else:
                decoded = decode_body(body, ctype)
                n, payload = len(decoded), (False, decoded)
        except OtlpError:
            self.counters.drop("malformed")
            raise
        forward = (body if raw is None else raw, headers)
        self.counters.receive(n)  # as the body's lists count them: counted when the answer goes
        # Keeping up, and the exporter not waiting on us: answer once processed (read-your-writes).
        gap = time.monotonic() - self._last_answer
        wait = self.intake.idle() and gap > BACKPRESSURE_GAP
        if self.intake.submit((payload, forward), n, now):
            return wait
        # Shed (counted by the intake) before the worker decodes it: overload stays cheap. The
        # Collector behind us still gets the body.
        if self.forwarder:
            self.forwarder.submit(forward[0], headers, n)
        return False

    def _process_bodies(self, bodies: list[Any], now: float) -> None:
        """The intake's worker: decode the bodies queued meanwhile, forward them, record them as one."""
        spans: list[Span] = []
        for (is_json, payload), (fwd_body, headers) in bodies:
            if not is_json:
                got: list[Span] = payload
            else:
                try:
                    got = decode_request(payload)
                except OtlpError as exc:
                    self.counters.drop("malformed")
                    log.warning("OTLP body refused after its answer: %s", exc)
                    continue
            if self.forwarder:
                self.forwarder.submit(fwd_body, headers, len(got))
            spans += got
        self._process(spans, now)

    def _process(self, spans: list[Span], now: float) -> None:
        """Join spans into requests and record them (the intake's worker, or ``ingest``'s caller)."""
        for u in self.updates:  # the join's drop counters move
            u.begin()
        try:
            self._record(spans, now)
        finally:
            for u in self.updates:
                u.end()

    def _record(self, spans: list[Span], now: float) -> None:
        timings = self.joiner.add(spans, now)
        if self.known_models is not None and timings:
            known = self.known_models()
            kept = [t for t in timings if t.model in known]
            if len(kept) < len(timings):
                self.counters.drop("unknown_model", len(timings) - len(kept))
            timings = kept
        self.latency.record(timings, now)

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
                    answer, wait = self._read_and_ingest(ctype)
                finally:
                    receiver._reading.release()
                if wait:  # after the slot is free: another body may come meanwhile
                    receiver.intake.flush(SYNC_TIMEOUT)
                # Answered once the slot is free: an exporter that sends its next batch as soon as it
                # has the answer (Triton's does) must not find its own last body still holding it.
                answer()
                receiver._last_answer = time.monotonic()

            def _read_and_ingest(self, ctype: str) -> tuple[Callable[[], None], bool]:
                """Read and take one body; the answer to send, as a call made after the slot is freed,
                and whether it waits for the body's processing first."""
                try:
                    raw, body, encoding = _read_body(self, receiver.max_body)
                except ValueError as exc:
                    receiver.counters.drop("too_large" if exc.args[1] == 413 else "malformed")
                    self.close_connection = True
                    return functools.partial(self._error, int(exc.args[1]), str(exc.args[0]), ctype), False
                if ctype not in CONTENT_TYPES:
                    receiver.counters.drop("malformed")
                    message = f"Content-Type {ctype}: expected {JSON} or {PROTOBUF}"
                    return functools.partial(self._error, 415, message, JSON), False
                # Forwarded as received: the same bytes, type and encoding.
                headers = {"Content-Type": ctype}
                if encoding != "identity":
                    headers["Content-Encoding"] = encoding
                try:
                    wait = receiver.accept(body, headers, time.time(), raw=raw)
                except OtlpError as exc:
                    return functools.partial(self._error, 400, str(exc), ctype), False
                # An empty ExportTraceServiceResponse: "{}" in JSON, no bytes in protobuf.
                return functools.partial(self._answer, 200, b"" if ctype == PROTOBUF else b"{}", ctype), wait

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
        self.intake.start()
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
        self.intake.stop()  # what was accepted is recorded
        if self.forwarder:
            self.forwarder.stop()
