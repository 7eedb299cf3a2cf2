"""Spans received and dropped by reason: the receiver's self-metrics, shared with its helpers."""

from __future__ import annotations

import threading


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
