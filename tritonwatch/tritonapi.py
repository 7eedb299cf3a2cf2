"""One client for Triton's HTTP API (port 8000), for every caller: the sidecar, init, rules, advise, load.

Endpoints: repository index (``POST /v2/repository/index``), model config (``GET /v2/models/<m>/config``,
read into ``tritonwatch.modelconfig``), statistics (``GET /v2/models[/<m>]/stats``), trace settings
(``GET``/``POST /v2/trace/setting``), health (``GET /v2/health/ready``) and model metadata
(``GET /v2/models/<m>``). One policy for all of them: the whole exchange within ``timeout``, answers
bounded in size, JSON numbers bounded (``tritonwatch.fetch``), and shapes checked here. A failure is a
``ScrapeError`` whose reason is a short label (``timeout``, ``connection``, ``http_status``,
``bad_json``, ...) and whose one line names the URL; with Triton's own words for a refusal
(``{"error": "..."}``) where it gave them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from tritonwatch import modelconfig
from tritonwatch.fetch import DEFAULT_MAX_BYTES, Fetcher, ScrapeError
from tritonwatch.modelconfig import ModelConfig

__all__ = ["IndexEntry", "ModelConfig", "ScrapeError", "TritonClient", "check_base_url"]

MAX_NAME = 1024  # characters of a model name or version the index may hold


def check_base_url(url: str) -> str | None:
    """Why ``url`` is not an http(s) base URL of Triton's API (None when it is one)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "not an http(s) base URL (e.g. http://127.0.0.1:8000)"
    if parts.query or parts.fragment or any(c.isspace() or not c.isprintable() for c in url):
        return "not an http(s) base URL (e.g. http://127.0.0.1:8000)"
    return None


@dataclass(frozen=True)
class IndexEntry:
    """One model version of the repository index; an unloaded model lists no version ("")."""

    name: str
    version: str
    state: str  # READY, UNAVAILABLE, LOADING, ...

    @property
    def ready(self) -> bool:
        return self.state == "READY"


class TritonClient:
    """Triton's HTTP API at ``base`` (e.g. ``http://127.0.0.1:8000``). One per thread: it holds a session."""

    def __init__(self, base: str, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.base = base.rstrip("/")
        self.fetcher = Fetcher(timeout, max_bytes)

    # -- URLs: the only place the API's paths are spelled
    def index_url(self) -> str:
        return f"{self.base}/v2/repository/index"

    def config_url(self, model: str, version: str = "") -> str:
        return f"{self._model_url(model, version)}/config"

    def stats_url(self, model: str = "") -> str:
        return f"{self._model_url(model)}/stats" if model else f"{self.base}/v2/models/stats"

    def trace_url(self) -> str:
        return f"{self.base}/v2/trace/setting"

    def ready_url(self) -> str:
        return f"{self.base}/v2/health/ready"

    def server_url(self) -> str:
        return f"{self.base}/v2"

    def _model_url(self, model: str, version: str = "") -> str:
        url = f"{self.base}/v2/models/{quote(model, safe='')}"
        return f"{url}/versions/{quote(version, safe='')}" if version else url

    # -- endpoints
    def index(self) -> list[IndexEntry]:
        """Every entry of the repository index that names a model (others are skipped)."""
        url = self.index_url()
        answer = self.fetcher.json("POST", url, {})
        if not isinstance(answer, list):
            raise ScrapeError("bad_json", f"{url}: expected a list")
        out = []
        for entry in answer:
            if not isinstance(entry, dict):
                continue
            name, version, state = entry.get("name"), entry.get("version", ""), entry.get("state", "")
            if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME:
                continue
            if (
                isinstance(version, bool)
                or not isinstance(version, (str, int))
                or len(str(version)) > MAX_NAME
            ):
                continue
            out.append(IndexEntry(name, str(version), state if isinstance(state, str) else ""))
        return out

    def config_json(self, model: str, version: str = "") -> Mapping[str, Any]:
        """The model's config JSON as Triton gave it (an object; its fields not yet checked)."""
        return self._object("GET", self.config_url(model, version))

    def config(self, model: str, version: str = "") -> ModelConfig:
        """The model's config, typed; a config that is not one Triton wrote is ``bad_json`` naming the field."""
        answer = self.config_json(model, version)
        try:
            return modelconfig.parse(answer)
        except ValueError as exc:
            raise ScrapeError("bad_json", f"{self.config_url(model, version)}: {exc}") from None

    def stats(self, model: str = "", out_of_range: Callable[[str], Any] | None = None) -> list[Any]:
        """The ``model_stats`` entries (each still to be checked by its reader: a reader that judges
        each entry on its own passes ``out_of_range=lambda _t: math.nan``). An empty body is []."""
        url = self.stats_url(model)
        answer = (
            self.fetcher.json("GET", url, out_of_range=out_of_range)
            if out_of_range
            else self.fetcher.json("GET", url)
        )
        if answer is None:
            return []
        entries = answer.get("model_stats") if isinstance(answer, dict) else None
        if not isinstance(entries, list):
            raise ScrapeError("bad_json", f"{url}: no model_stats list")
        return entries

    def trace_settings(self, update: Mapping[str, str] | None = None) -> Mapping[str, Any]:
        """The trace settings in force; with ``update`` (e.g. ``{"trace_rate": "10"}``) set first."""
        if update is None:
            return self._object("GET", self.trace_url())
        # set, and nothing said back: the next read says what is in force
        return self._object("POST", self.trace_url(), update, empty={})

    def ready(self) -> bool:
        """Whether the server says it is ready (``GET /v2/health/ready`` answers 200)."""
        try:
            self.fetcher.request("GET", self.ready_url())
        except ScrapeError as exc:
            if exc.reason == "http_status":
                return False
            raise
        return True

    def server_version(self) -> str:
        """The server's version from its metadata (``GET /v2``: name, version, extensions); "" where
        the answer names none."""
        version = self._object("GET", self.server_url()).get("version")
        return version if isinstance(version, str) else ""

    def metadata(self, model: str, version: str = "") -> Mapping[str, Any]:
        """The model's metadata (name, versions, platform, inputs, outputs) as Triton gave it."""
        return self._object("GET", self._model_url(model, version))

    def _object(
        self, method: str, url: str, body: Any = None, empty: Mapping[str, Any] | None = None
    ) -> Mapping[str, Any]:
        """The JSON object ``url`` answers; ``empty`` stands for an empty answer where one is allowed."""
        answer = self.fetcher.json(method, url, body)
        if answer is None and empty is not None:
            return empty
        if not isinstance(answer, dict):
            raise ScrapeError("bad_json", f"{url}: not a JSON object")
        return answer

    def close(self) -> None:
        self.fetcher.close()
