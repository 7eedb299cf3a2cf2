"""A scrape source: one target, its own thread and interval, its own health.

A source that fails (unreachable, hanging, malformed) marks only itself down: ``tritonwatch_up{target}``
goes to 0, its error counter rises by reason, and the families it feeds are dropped by its owner rather
than served stale. Other sources keep going.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tritonwatch.expfmt import ExpositionError
from tritonwatch.fetch import ScrapeError

log = logging.getLogger(__name__)


class Updates(Protocol):
    """Told when a change to what /metrics shows begins and when it ends (``CachedExposition``)."""

    def begin(self) -> None: ...

    def end(self) -> None: ...


class Health:
    """up / last duration / errors by reason for one target; written by one thread, read by the collector."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.up = 0.0
        self.duration = 0.0
        self.last_success = 0.0
        self.errors: dict[str, float] = {}
        self.last_error = ""
        self._failing: frozenset[str] = frozenset()  # messages of the last failed scrape

    def success(self, duration: float) -> None:
        self._failing = frozenset()
        self.up = 1.0
        self.duration = duration
        self.last_success = time.time()

    def failure(self, reason: str, message: str, duration: float) -> None:
        self.partial(Partial(((reason, message),), up=False), duration)

    def partial(self, result: Partial, duration: float) -> None:
        """Count each failed endpoint of one scrape by its reason; up as ``result.up`` says."""
        errors = dict(self.errors)
        for reason, message in result.errors:
            if message not in self._failing:  # a warning when a failure starts, not every interval
                log.warning("%s scrape failed: %s", self.target, message)
            errors[reason] = errors.get(reason, 0.0) + 1
            self.last_error = message
        if result.errors or result.up:  # a tick that retried nothing keeps what is still failing
            self._failing = frozenset(m for _r, m in result.errors)
        # Replaced, not mutated: the collector iterates it from another thread.
        self.errors = errors
        self.up = 1.0 if result.up else 0.0
        self.duration = duration
        if result.up:
            self.last_success = time.time()


@dataclass(frozen=True)
class Partial:
    """What a scrape of several endpoints returns (``TritonApi``): the ones that failed, and up.

    Each ``(reason, message)`` is counted in ``tritonwatch_scrape_errors_total{reason}``; ``up`` is
    the target's ``tritonwatch_up``. The source has already dropped what the failed endpoints fed.
    """

    errors: Sequence[tuple[str, str]]
    up: bool


def skipped_lines(url: str, fetched: Sequence[str], parsed: Sequence[str]) -> Partial | None:
    """A payload kept whole but for lines too long to read (``Fetcher.skipped``) or to decode
    (``Parsed.skipped``): the target stays up and each skipped line is counted by its reason."""
    errors = [("line_too_long", m) for m in fetched] + [("labels_too_long", f"{url}: {m}") for m in parsed]
    return Partial(errors, up=True) if errors else None


class Source:
    """Runs ``scrape()`` every ``interval`` seconds in a daemon thread and records its health."""

    target = ""

    def __init__(self, interval: float, clock: Callable[[], float] = time.time) -> None:
        self.interval = interval
        self.clock = clock
        self.health = Health(self.target)
        # Told when each step begins and ends, good or failed (the sidecar renders /metrics again).
        self.updates: list[Updates] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def scrape(self) -> Partial | None:
        """Read the target; raise to mark it down, or return a ``Partial`` when only some endpoints failed."""
        raise NotImplementedError

    def on_failure(self) -> None:
        """Called after a failed scrape: drop what would otherwise be served stale."""

    def step(self) -> bool:
        for u in self.updates:
            u.begin()
        try:
            return self._step()
        finally:
            for u in self.updates:
                u.end()

    def _step(self) -> bool:
        start = time.monotonic()
        try:
            partial = self.scrape()
        except ScrapeError as exc:
            reason, message = exc.reason, str(exc)
        except ExpositionError as exc:
            reason, message = exc.reason, f"{self.describe()}: {exc}"
        except Exception as exc:  # never let one bad payload kill the loop
            reason, message = "internal", f"{type(exc).__name__}: {exc}"
            if message != self.health.last_error:  # a traceback once, not every interval
                log.exception("%s scrape crashed", self.target)
        else:
            if partial is not None:  # some endpoints failed now, or are still failed from before
                self.health.partial(partial, time.monotonic() - start)
                return partial.up
            self.health.success(time.monotonic() - start)
            return True
        # Drop what would be served stale *before* saying so: a reader that sees up 0 must never
        # also see the values of the last good scrape.
        self.on_failure()
        self.health.failure(reason, message, time.monotonic() - start)
        return False

    def describe(self) -> str:
        return self.target

    def _loop(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.step()
            next_at += self.interval
            now = time.monotonic()
            if next_at < now:  # a slow scrape: skip missed ticks instead of bursting
                next_at = now + self.interval
            self._stop.wait(next_at - now)

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=f"source-{self.target}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=10)
