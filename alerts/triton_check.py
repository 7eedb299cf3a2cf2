"""``tritonwatch rules --triton URL``: warn where an availability SLO rests on counters Triton leaves blind.

The rules come from the SLO file alone, which cannot say how a model runs. Given Triton's HTTP API,
this reads the config of every model whose availability objective reads Triton's counters, and logs one warning line per model whose errors Triton may not count
(``tritonwatch.uncounted``): its availability would read 100 % while clients get HTTP 500. The
output files do not change; ``availability.from`` is the fix (docs/uncounted-errors.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from tritonwatch import uncounted
from tritonwatch.errors import UsageError
from tritonwatch.slo import SLOFile
from tritonwatch.tritonapi import ScrapeError, TritonClient, check_base_url

log = logging.getLogger(__name__)
TIMEOUT = 10.0
MAX_BYTES = 1 << 20  # a model config is a few KB


def check_url(url: str) -> str:
    if check_base_url(url):
        raise UsageError(f"--triton {url!r}: must be Triton's HTTP API base URL, e.g. http://127.0.0.1:8000")
    return url.rstrip("/")


class ConfigMissing(Exception):
    """Triton answered, but not with this model's config (not loaded, not known)."""


def read_config(client: TritonClient, model: str) -> Mapping[str, Any]:
    try:
        return client.config_json(model)
    except ScrapeError as exc:
        if exc.reason == "http_status":
            raise ConfigMissing(f"HTTP {exc.status}") from None
        if exc.reason == "too_large":
            raise ConfigMissing(f"config over {MAX_BYTES} bytes") from None
        if exc.unreachable:
            raise UsageError(f"--triton {client.config_url(model)}: cannot read ({exc.reason})") from None
        raise ConfigMissing("not JSON") from None


def shapes_of(base: str, models: list[str]) -> tuple[dict[str, uncounted.ModelShape], dict[str, str]]:
    """The shapes of ``models``; and why a model has none."""
    client = TritonClient(base, TIMEOUT, MAX_BYTES)
    shapes: dict[str, uncounted.ModelShape] = {}
    missing: dict[str, str] = {}
    try:
        for model in dict.fromkeys(models):
            try:
                shapes[model] = uncounted.shape(read_config(client, model))
            except ConfigMissing as exc:
                missing[model] = str(exc)
            except ValueError as exc:
                missing[model] = f"config: {exc}"
    finally:
        client.close()
    return shapes, missing


def warn(spec: SLOFile, url: str) -> list[str]:
    """Log (and return) one line per model whose availability SLO reads counters Triton leaves blind."""
    base = check_url(url)
    on_triton = [
        (i, s.model) for i, s in enumerate(spec.slos) if s.availability and s.availability.source is None
    ]
    shapes, missing = shapes_of(base, [m for _, m in on_triton])
    blind = uncounted.reasons(shapes)
    lines = []
    for i, model in on_triton:
        where = f"spec.slos[{i}].availability ({model})"
        if model in blind:
            lines.append(
                f"{where}: reads Triton's counters, which do not count this model's errors "
                f"({', '.join(blind[model])}): set availability.from (docs/uncounted-errors.md)"
            )
        elif model in missing:
            lines.append(f"{where}: not checked: {base} gave no config ({missing[model]})")
    for line in lines:
        log.warning("%s", line)
    return lines
