"""``Forwarder``: received OTLP bodies passed on, unchanged, to ``--otlp-forward`` from a bounded queue."""

from __future__ import annotations

import logging
import queue
import threading
import time

from tritonwatch.exporters.traces.counters import Counters

log = logging.getLogger(__name__)


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
