"""Fetching from scrape targets, with a timeout, a size cap and errors that name a reason."""

from __future__ import annotations

import json
from typing import Any

import requests

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class ScrapeError(Exception):
    """A target could not be read. ``reason`` is a short label value for the error counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Fetcher:
    """One HTTP session per source (sources run in their own threads; sessions are not shared)."""

    def __init__(self, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.session = requests.Session()

    def _read(self, resp: requests.Response, url: str) -> bytes:
        if resp.status_code != 200:
            raise ScrapeError("http_status", f"{url}: HTTP {resp.status_code}")
        chunks = []
        size = 0
        for chunk in resp.iter_content(chunk_size=1 << 16):
            size += len(chunk)
            if size > self.max_bytes:
                raise ScrapeError("too_large", f"{url}: payload over {self.max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)

    def request(self, method: str, url: str, body: Any = None) -> bytes:
        try:
            with self.session.request(
                method, url, json=body, timeout=self.timeout, stream=True, headers={"Accept-Encoding": "gzip"}
            ) as resp:
                return self._read(resp, url)
        except requests.Timeout:
            raise ScrapeError("timeout", f"{url}: no answer within {self.timeout:g}s") from None
        except requests.ConnectionError as exc:
            raise ScrapeError("connection", f"{url}: cannot connect ({type(exc).__name__})") from None
        except requests.RequestException as exc:
            raise ScrapeError("http", f"{url}: {exc}") from None

    def get(self, url: str) -> bytes:
        return self.request("GET", url)

    def json(self, method: str, url: str, body: Any = None) -> Any:
        raw = self.request(method, url, body)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise ScrapeError("bad_json", f"{url}: response is not JSON") from None

    def close(self) -> None:
        self.session.close()
