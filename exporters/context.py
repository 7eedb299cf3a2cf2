"""All a sidecar part is given of the sidecar: ``PartContext``.

A part module exposes ``make_part(context) -> list[tuple[Part, Source | None]]`` (empty when its
flags leave it off). It reads Triton through the scrape's snapshots, Triton's API through
``api_state`` and the per-request timings through ``timings``; it never holds the sidecar, another
part or their locks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from tritonwatch.exporters.config import SidecarConfig
from tritonwatch.exporters.exposition import Texts
from tritonwatch.exporters.snapshot import Feed, Snapshots
from tritonwatch.exporters.source import Health, Updates
from tritonwatch.exporters.traces.timing import Timings
from tritonwatch.exporters.triton import ApiState
from tritonwatch.exporters.window import ModelKey

if TYPE_CHECKING:
    from tritonwatch.exporters.webconfig import Authorize, Wrap


class RequestRates(Protocol):
    """Successful requests/s over the counter window of ``keys`` (default: the models of the last
    scrape), where known; empty while Triton is down."""

    def __call__(self, keys: Sequence[ModelKey] | None = None) -> Mapping[ModelKey, float]: ...


def no_request_rates(keys: Sequence[ModelKey] | None = None) -> Mapping[ModelKey, float]:
    return {}


class BlsModels:
    """Models seen calling other models from their own code (role ``bls``), from every part that sees them."""

    def __init__(self) -> None:
        self._providers: list[Callable[[], frozenset[str]]] = []

    def provide(self, provider: Callable[[], frozenset[str]]) -> None:
        self._providers.append(provider)

    def __call__(self) -> frozenset[str]:
        found: frozenset[str] = frozenset()
        for provider in self._providers:
            found |= provider()
        return found


@dataclass
class PartContext:
    """What the sidecar gives its parts."""

    config: SidecarConfig
    snapshots: Snapshots  # the Triton scrape's: ``latest``, ``subscribe``
    api_state: Callable[[], ApiState]  # the triton_api target's latest state (replaced whole)
    request_rates: RequestRates  # the counter window's request rate (TritonMetrics.request_rates)
    # Told when what a part shows changes outside a source's step (spans arriving)
    updates: list[Updates] = field(default_factory=list)
    # True where the render thread calls prepare() after each update: collect() then serves what
    # prepare() last built (at most one update behind) instead of building on a request's time.
    prepared: bool = False
    timings: Feed[Timings] = field(default_factory=Feed)  # every recorded batch of traced requests
    bls: BlsModels = field(default_factory=BlsModels)
    texts: Texts = field(default_factory=Texts)  # label texts kept across builds, this sidecar's
    # --web-config's basic auth and TLS, loaded once by the sidecar: /metrics and the OTLP receiver share them
    web: tuple[Authorize | None, Wrap | None] = (None, None)


def standalone(config: SidecarConfig | None = None, health: Health | None = None) -> PartContext:
    """A context of no sidecar (a part tried on its own): no Triton scrape, empty API state."""
    return PartContext(
        config or SidecarConfig(),
        Snapshots(health or Health("triton")),
        ApiState,
        no_request_rates,
    )
