"""Prometheus HTTP API queries into pandas, with progress on stderr and one-line errors.

``instant(expr, at)`` gives a ``{labels: value}`` mapping (a negative value is refused: every query of
the report is a count, a rate or a ratio of them); ``range(expr, start, end, step)`` gives
``{labels: pd.Series}`` indexed by UTC timestamps. Labels are a sorted tuple of (name, value) pairs
(``__name__`` dropped). A long range is fetched one day at a time so that progress can be shown and no
query exceeds Prometheus's 11,000 points per series. A query asked ``per_model`` is split by model too,
``models_per_query`` models at a time (``tritonwatch.reports.batching``), once ``discover_models()`` has
listed the fleet: no query's work or answer grows with the fleet past that bound.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import IO, Any

import pandas as pd
import requests

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.reports.batching import DEFAULT_MODELS_PER_QUERY, batches, restrict

Labels = tuple[tuple[str, str], ...]

# Prometheus refuses a range query with more points than this per series.
_MAX_POINTS = 11000
_UNIT_SECONDS = {"y": 365 * 86400, "w": 7 * 86400, "d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


def labels_of(metric: Mapping[str, str]) -> Labels:
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


def label(labels: Labels, name: str) -> str:
    for k, v in labels:
        if k == name:
            return v
    return ""


class Progress:
    """Progress of a multi-query job on stderr: one line per step, or one updated line on a terminal."""

    def __init__(self, stream: IO[str] | None = None, prefix: str = "report") -> None:
        self.stream = stream or sys.stderr
        self.prefix = prefix
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._started = time.monotonic()

    def step(self, what: str, part: int = 0, parts: int = 0) -> None:
        if parts > 1 and not self.tty and part not in (1, parts):
            return  # on a log, the first and last chunk of a long query are enough
        where = f" [{part}/{parts}]" if parts > 1 else ""
        text = f"{self.prefix}: {time.monotonic() - self._started:6.1f}s {what}{where}"
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


class PromClient:
    """A small client for ``/api/v1/query``, ``/api/v1/query_range`` and ``/api/v1/series``."""

    def __init__(
        self,
        url: str,
        timeout: float = 120.0,
        progress: Progress | None = None,
        models_per_query: int = DEFAULT_MODELS_PER_QUERY,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.progress = progress
        self.session = requests.Session()
        self.models_per_query = models_per_query
        self.fleet: list[str] = []  # the models per-model queries are split over (none: not split)

    def discover_models(self, start: datetime, end: datetime) -> list[str]:
        """The models with Triton request series between ``start`` and ``end`` (the label values API);
        per-model queries are split over them from now on. A store without that API (or with match[]
        unsupported) answers each query whole."""
        try:
            data = self._get(
                f"/api/v1/label/{catalog.MODEL}/values",
                {"match[]": catalog.TRITON_SUCCESS, "start": start.timestamp(), "end": end.timestamp()},
            )
        except TritonwatchError:
            data = None
        names = data if isinstance(data, list) and all(isinstance(x, str) for x in data) else []
        self.fleet = sorted(set(names))
        return self.fleet

    def _split(self, expr: str, per_model: bool) -> list[str]:
        size = self.models_per_query
        if not per_model or size <= 0 or len(self.fleet) <= size:
            return [expr]
        return [restrict(expr, b) for b in batches(self.fleet, size)]

    def _get(self, path: str, params: Mapping[str, Any]) -> Any:
        try:
            resp = self.session.get(f"{self.url}{path}", params=params, timeout=self.timeout)
        except requests.ConnectionError:
            raise TritonwatchError(f"cannot reach Prometheus at {self.url} (--prometheus)") from None
        except requests.Timeout:
            raise TritonwatchError(
                f"Prometheus at {self.url} did not answer within {self.timeout:.0f}s ({path})"
            ) from None
        except requests.RequestException as exc:
            raise TritonwatchError(f"bad Prometheus URL {self.url} (--prometheus): {exc}") from None
        try:
            body = resp.json()
        except ValueError:
            raise TritonwatchError(
                f"{self.url}{path} answered HTTP {resp.status_code} without a Prometheus API body "
                "(is --prometheus the server's base URL?)"
            ) from None
        if not isinstance(body, dict):
            raise TritonwatchError(f"{self.url}{path} answered JSON that is not a Prometheus API body")
        if body.get("status") != "success":
            raise TritonwatchError(
                f"Prometheus at {self.url} refused a query: {body.get('error', resp.status_code)}"
            )
        if "data" not in body:
            raise TritonwatchError(f"{self.url}{path} answered success without data")
        return body["data"]

    def instant(
        self, expr: str, at: datetime, what: str = "", per_model: bool = False
    ) -> dict[Labels, float]:
        """``per_model``: every result depends on its own model's series only, so the query may be split
        by model (``--models-per-query``)."""
        out: dict[Labels, float] = {}
        parts = self._split(expr, per_model)
        for i, part in enumerate(parts, 1):
            if self.progress and what:
                self.progress.step(what, i, len(parts))
            data = self._get("/api/v1/query", {"query": part, "time": at.timestamp()})
            with _shape("/api/v1/query", self.url):
                if data["resultType"] == "scalar":
                    out[()] = float(data["result"][1])
                else:
                    out.update((labels_of(r["metric"]), float(r["value"][1])) for r in data["result"])
        if any(v < 0 for v in out.values()):
            raise _negative(self.url, "/api/v1/query", expr)
        return out

    def range(
        self,
        expr: str,
        start: datetime,
        end: datetime,
        step: timedelta,
        what: str = "",
        per_model: bool = False,
    ) -> dict[Labels, pd.Series]:
        chunks = [(e, a, b) for e in self._split(expr, per_model) for a, b in _chunks(start, end, step)]
        parts: dict[Labels, list[pd.Series]] = {}
        for i, (part, a, b) in enumerate(chunks, 1):
            if self.progress and what:
                self.progress.step(what, i, len(chunks))
            params = {
                "query": part,
                "start": a.timestamp(),
                "end": b.timestamp(),
                "step": step.total_seconds(),
            }
            data = self._get("/api/v1/query_range", params)
            with _shape("/api/v1/query_range", self.url):
                for r in data["result"]:
                    values = r["values"]
                    idx = pd.to_datetime([float(t) for t, _ in values], unit="s", utc=True)
                    parts.setdefault(labels_of(r["metric"]), []).append(
                        pd.Series([float(v) for _, v in values], index=idx, dtype="float64")
                    )
        out = {k: pd.concat(v).sort_index() for k, v in parts.items()}
        if any(bool((series < 0).any()) for series in out.values()):
            raise _negative(self.url, "/api/v1/query_range", expr)
        return out

    def retention(self) -> timedelta | None:
        """The server's time-based retention (``storageRetention`` of ``/api/v1/status/runtimeinfo``,
        e.g. ``"30d"`` or ``"15d or 10GiB"``); None where the API does not say (Thanos, Mimir, ...)."""
        try:
            data = self._get("/api/v1/status/runtimeinfo", {})
        except TritonwatchError:
            return None
        text = str(data.get("storageRetention", "")) if isinstance(data, dict) else ""
        m = re.match(r"\s*((?:\d+(?:y|w|d|h|m|s|ms))+)", text)
        if not m:
            return None
        parts = re.findall(r"(\d+)(y|w|d|h|ms|m|s)", m.group(1))
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in parts)
        return timedelta(seconds=seconds) if seconds > 0 else None

    def has_series(self, match: str, start: datetime, end: datetime) -> bool:
        data = self._get(
            "/api/v1/series", {"match[]": match, "start": start.timestamp(), "end": end.timestamp()}
        )
        return bool(data)


def _negative(url: str, path: str, expr: str) -> TritonwatchError:
    # Every query of the report is a count, a rate or a ratio of them: a negative one is a broken or
    # hostile server, and a report built on it would be wrong (an availability above 100%).
    return TritonwatchError(f"{url}{path}: a negative value for {expr[:120]} (counts and rates cannot be)")


@contextmanager
def _shape(path: str, url: str) -> Iterator[None]:
    """An answer that is JSON but not the shape Prometheus gives becomes one line, not a traceback."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise TritonwatchError(
            f"{url}{path}: the answer is not a Prometheus query result ({type(exc).__name__}: {exc})"
        ) from None


def _chunks(start: datetime, end: datetime, step: timedelta) -> Iterator[tuple[datetime, datetime]]:
    """Day-long pieces on the step grid from ``start``; consecutive pieces share no point."""
    # A day a piece (progress to show); a step of a day or more fits in one piece.
    span = timedelta(days=1) if step < timedelta(days=1) else step * (_MAX_POINTS - 1)
    span = min(span, step * (_MAX_POINTS - 1))
    a = start
    while a <= end:
        b = min(a + span - step, end)
        yield a, b
        a = b + step
