"""What a sidecar part declares: ``Part``.

A part module exposes ``make_part(context) -> list[tuple[Part, Source | None]]``
(``exporters/context.py``); the sidecar registers each part's ``collect`` and ``prepare`` and
reports its ``health``, and asks nothing else of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client.core import Metric

from tritonwatch.exporters.source import Health


class Part(Protocol):
    """Contributes families to /metrics. Parts subclass it to take the defaults.

    ``prepare()`` builds costly families ahead of a render (the sidecar's render thread calls it after
    each update) and says whether it built anything; ``health`` is the part's scrape target, if it
    has one of the contract's (``tritonwatch_up{target}``)."""

    health: Health | None = None

    def collect(self) -> Iterable[Metric]: ...

    def prepare(self) -> bool:
        return False
