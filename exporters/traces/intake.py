"""``Intake``: a bounded queue between the OTLP receiver's handler and the span processing (issue 24).

The handler reads and parses a body (one that is not JSON is answered 400 there) and hands it to
``submit`` with its span count. One worker thread decodes, joins and records whatever has queued up
as one batch (one join, one record, one update of /metrics, however many bodies came meanwhile).
When more spans wait than ``max_spans`` (memory: the parsed bodies waiting), a new body is shed
whole and counted (``tritonwatch_spans_dropped_total{reason="overload"}``) rather than queued: under
overload the sidecar keeps serving /metrics with what it kept, Triton's exporter is not slowed, and
the quantiles stay exact over the requests kept.

While the intake keeps up (``idle``), the receiver answers a body once it is processed, as before:
whoever reads the sidecar after the answer finds the body's requests recorded. It answers at once
only when its exporter is waiting on it (the next body comes within ``BACKPRESSURE_GAP`` of the last
answer: Triton's batch exporter does that when its own queue holds a backlog) or when bodies are
already waiting; then the worker falls behind, the queue fills and sheds.

A reader never waits on the worker: what an answer waited for is recorded before the answer goes,
and what was answered at once (backpressure) is recorded when the worker gets to it.

    intake = Intake(process, on_shed)        # process(payloads, now) runs in the worker thread
    intake.start()
    intake.submit(body, spans, now)          # False (and on_shed(spans)) when the queue is full
    intake.flush(5.0)                        # wait until what was submitted is processed
    intake.stop()                            # processes what is queued, then ends the worker
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# Spans waiting at most: 16 of Triton's batches of 512, parsed JSON of about 2-3 KB a span (about
# 25 MB), and under a second of work for one core at 10,000 traced requests (30,000 spans) a second.
MAX_QUEUED_SPANS = 8_192
QUIET_AFTER_SHED = 5.0
FLUSH_TIMEOUT = 1.0
# A body that comes sooner than this after the last answer: the exporter has a backlog and waits on us.
BACKPRESSURE_GAP = 0.002
SYNC_TIMEOUT = 5.0  # an answer waits at most this long for its body's processing


class Intake:
    def __init__(
        self,
        process: Callable[[list[object], float], None],
        on_shed: Callable[[int], None],
        max_spans: int = MAX_QUEUED_SPANS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.process = process
        self.on_shed = on_shed
        self.max_spans = max_spans
        self.clock = clock
        self._cond = threading.Condition()
        self._items: list[tuple[float, object]] = []
        self._queued = 0  # spans in _items
        self._submitted = 0  # bodies taken, ever
        self._processed = 0  # bodies processed, ever
        self._shed_at = -QUIET_AFTER_SHED * 2
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.shed = 0  # spans shed, ever
        self.batches = 0  # worker rounds (each one join and one record)

    @property
    def queued(self) -> int:
        return self._queued

    def _full(self, n: int) -> bool:
        """Whether a body of ``n`` spans must be shed now."""
        return bool(self._items) and self._queued + n > self.max_spans

    def submit(self, payload: object, n: int, now: float) -> bool:
        """Queue one body (``n`` spans); False (counted through ``on_shed``) when the queue is full.

        A body is never split: an empty queue takes any body (its size is bounded by the
        receiver's --otlp-max-body-bytes), a busy one only what fits."""
        with self._cond:
            full = self._full(n)
            if not full:
                self._items.append((now, payload))
                self._queued += n
                self._submitted += 1
                self._cond.notify_all()
        if full:
            self.shed_body(n)
            return False
        if self._thread is None:  # not started (in-process use): processed here, as before
            self._drain_once()
        return True

    def shed_body(self, n: int) -> None:
        """Count a body of ``n`` spans shed (``submit`` when full, or the handler before decoding)."""
        with self._cond:
            self.shed += n
            self._shed_at = self.clock()
        self.on_shed(n)

    def idle(self) -> bool:
        """Nothing queued or being processed, and nothing shed lately: the intake keeps up."""
        with self._cond:
            return self._processed == self._submitted and self.clock() - self._shed_at >= QUIET_AFTER_SHED

    def flush(self, timeout: float = FLUSH_TIMEOUT) -> bool:
        """Wait until what was submitted before this call is processed; True when it is."""
        with self._cond:
            mark = self._submitted
            if self._processed >= mark:
                return True
            if self.clock() - self._shed_at < QUIET_AFTER_SHED:
                return False  # overloaded: serve what is there
            return self._cond.wait_for(lambda: self._processed >= mark, timeout)

    def _take(self) -> list[tuple[float, object]]:
        batch, self._items, self._queued = self._items, [], 0
        return batch

    def _run_batch(self, batch: list[tuple[float, object]]) -> None:
        try:
            self.process([payload for _now, payload in batch], batch[-1][0])
        except Exception:  # one bad batch must not end the worker: its spans are lost, logged
            log.exception("processing %d trace bodies failed", len(batch))
        finally:
            with self._cond:
                self._processed += len(batch)
                self.batches += 1
                self._cond.notify_all()

    def _drain_once(self) -> None:
        with self._cond:
            batch = self._take()
        if batch:
            self._run_batch(batch)

    def _worker(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._items) or self._stopping)
                batch = self._take()
                if not batch and self._stopping:
                    return
            if batch:
                self._run_batch(batch)

    def start(self) -> None:
        self._stopping = False
        self._thread = threading.Thread(target=self._worker, name="otlp-intake", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Process what is queued, then end the worker."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._drain_once()  # whatever came after the worker ended
