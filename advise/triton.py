"""Read a live Triton for the advisor: the statistics twice, ``interval`` seconds apart, and each config.

The two reads give the arrival rate (requests between them); the second gives the compute costs per
batch size (``batch_stats``, cumulative since the model was loaded). Every answer is checked before use.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import requests

from tritonwatch.errors import TritonwatchError

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
        self.base = base.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()

    def _get(self, path: str) -> Any:
        url = self.base + path
        try:
            resp = self.session.get(url, timeout=self.timeout, stream=True)
            body = resp.raw.read(MAX_BYTES + 1, decode_content=True)
        except requests.RequestException as exc:
            raise TritonwatchError(f"{url}: cannot read ({type(exc).__name__})") from None
        if resp.status_code != 200:
            raise TritonwatchError(f"{url}: HTTP {resp.status_code}{_reason(body)}")
        if len(body) > MAX_BYTES:
            raise TritonwatchError(f"{url}: answer larger than {MAX_BYTES} bytes")
        try:
            return json.loads(body)
        except ValueError:
            raise TritonwatchError(f"{url}: not JSON") from None

    def stats(self, model: str | None) -> dict[tuple[str, str], Mapping[str, Any]]:
        path = f"/v2/models/{quote(model, safe='')}/stats" if model else "/v2/models/stats"
        answer = self._get(path)
        entries = answer.get("model_stats") if isinstance(answer, dict) else None
        if not isinstance(entries, list):
            raise TritonwatchError(f"{self.base}{path}: no model_stats list")
        out: dict[tuple[str, str], Mapping[str, Any]] = {}
        for i, e in enumerate(entries):
            if not (
                isinstance(e, dict) and isinstance(e.get("name"), str) and isinstance(e.get("version"), str)
            ):
                raise TritonwatchError(f"{self.base}{path}: model_stats[{i}] has no name and version strings")
            out[(e["name"], e["version"])] = e
        return out

    def config(self, model: str, version: str) -> Mapping[str, Any]:
        path = f"/v2/models/{quote(model, safe='')}/versions/{quote(version, safe='')}/config"
        answer = self._get(path)
        if not isinstance(answer, dict):
            raise TritonwatchError(f"{self.base}{path}: not a JSON object")
        return answer

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


def _reason(body: bytes) -> str:
    """Triton's own words for a refusal (``{"error": "..."}``), on one line and short."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    return f": {' '.join(error.split())[:200]}" if isinstance(error, str) and error.strip() else ""
