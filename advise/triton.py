"""Read a live Triton for the advisor: the statistics twice, ``interval`` seconds apart, and each config.

The two reads give the arrival rate (requests between them); the second gives the compute costs per
batch size (``batch_stats``, cumulative since the model was loaded). Every answer is checked before use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tritonwatch.errors import TritonwatchError
from tritonwatch.tritonapi import ScrapeError, TritonClient

_T = TypeVar("_T")

MAX_BYTES = 32 * 1024 * 1024  # a statistics answer for thousands of models stays far below this


@dataclass(frozen=True)
class Reading:
    """One model version as read: its config and its statistics at the start and end of the read."""

    model: str
    version: str
    config: Mapping[str, Any]
    first: Mapping[str, Any]
    second: Mapping[str, Any]
    seconds: float  # between the two statistics reads


class TritonReader:
    def __init__(self, base: str, timeout: float) -> None:
        self.client = TritonClient(base, timeout, MAX_BYTES)
        self.base = self.client.base

    def stats(self, model: str | None) -> dict[tuple[str, str], Mapping[str, Any]]:
        url = self.client.stats_url(model or "")
        entries = _checked(self.client.stats, model or "")
        out: dict[tuple[str, str], Mapping[str, Any]] = {}
        for i, e in enumerate(entries):
            if not (
                isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("version"), str)
            ):
                raise TritonwatchError(f"{url}: model_stats[{i}] has no name and version strings")
            out[(e["name"], e["version"])] = e
        return out

    def config(self, model: str, version: str) -> Mapping[str, Any]:
        return _checked(self.client.config_json, model, version)

    def read(
        self, model: str | None, interval: float, sleep: Callable[[float], None] = time.sleep
    ) -> list[Reading]:
        first = self.stats(model)
        started = time.monotonic()
        sleep(interval)
        second = self.stats(model)
        seconds = time.monotonic() - started
        return [
            Reading(name, version, self.config(name, version), first.get((name, version), {}), st, seconds)
            for (name, version), st in sorted(second.items())
        ]


def _checked(read: Callable[..., _T], *args: str) -> _T:
    """``read(*args)``, its failure one line naming the URL (the client's own words)."""
    try:
        return read(*args)
    except ScrapeError as exc:
        raise TritonwatchError(str(exc)) from None
