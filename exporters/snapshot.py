"""What each Triton scrape publishes: an immutable ``TritonSnapshot``, swapped in whole.

Subscribers (the GPU and LLM parts' own windows) are called with each good scrape's snapshot, in the
scrape's thread, before it becomes ``latest``: a reader that sees a snapshot finds every subscriber
already past it. A reader takes ``latest`` once (one attribute read) and holds one scrape's view:
no lock of the Triton source is ever taken outside it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Generic, TypeVar

from tritonwatch.expfmt import Samples
from tritonwatch.exporters.source import Health
from tritonwatch.exporters.window import ModelKey

T = TypeVar("T")


class Feed(Generic[T]):
    """Values handed to every subscriber in subscription order, in the publisher's thread."""

    def __init__(self) -> None:
        self._subscribers: list[Callable[[T], None]] = []

    def subscribe(self, subscriber: Callable[[T], None]) -> None:
        self._subscribers.append(subscriber)

    def publish(self, value: T) -> None:
        for subscriber in self._subscribers:
            subscriber(value)


@dataclass(frozen=True)
class TritonSnapshot:
    """One Triton scrape as the sidecar took it. ``up`` is False after a failed scrape: what it holds
    is then the last good scrape's and must not be served as current."""

    generation: int  # the counter window's generation once this scrape was in it
    time: float  # when it was taken (the source's clock)
    samples: Samples  # the parsed payload, models over --max-models left out; never changed
    models: frozenset[ModelKey]  # the models the counter window holds after it
    tracked: frozenset[ModelKey]  # the models the --max-models cap kept
    up: bool


NO_SNAPSHOT = TritonSnapshot(0, 0.0, {}, frozenset(), frozenset(), False)


class Snapshots(Feed[TritonSnapshot]):
    """The Triton scrape's snapshots: ``latest``, and a subscription to each good one."""

    def __init__(self, health: Health) -> None:
        super().__init__()
        self.health = health
        self.latest = NO_SNAPSHOT

    def publish(self, value: TritonSnapshot) -> None:
        super().publish(value)
        self.latest = value  # one atomic swap, after every subscriber has taken it

    def down(self) -> None:
        """A failed scrape: the last good data is no longer current (subscribers are not called)."""
        self.latest = replace(self.latest, up=False)

    def serving(self) -> TritonSnapshot | None:
        """The latest snapshot where its values may be served beside ``tritonwatch_up{target="triton"}``
        1: the target's health is set just after a good scrape's data and dropped just after a
        failure's, so values never outrun up 1. None otherwise."""
        latest = self.latest
        return latest if latest.up and self.health.up else None


def scraped(samples: Samples, health: Health | None = None) -> Snapshots:
    """Snapshots holding one good scrape of ``samples`` (a part tried without a sidecar)."""
    if health is None:
        health = Health("triton")
        health.success(0.0)
    snapshots = Snapshots(health)
    snapshots.publish(TritonSnapshot(1, 0.0, samples, frozenset(), frozenset(), True))
    return snapshots
