"""Fetching from scrape targets, with a deadline, a size cap and errors that name a reason.

Reasons (the ``reason`` label of ``tritonwatch_scrape_errors_total``): ``timeout`` (no answer, or the
whole answer not in time), ``connection`` (refused, reset, gone), ``http_status`` (not 200),
``too_large`` (over ``--max-payload-bytes``, counted after decompression), ``bad_json``, ``http``.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import requests

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


def _cut(resp: requests.Response) -> None:
    sock = getattr(getattr(resp.raw, "connection", None), "sock", None)
    if sock is None:  # a closing connection hands its socket to the http.client response
        fp = getattr(getattr(resp.raw, "_fp", None), "fp", None)
        sock = getattr(getattr(fp, "raw", None), "_sock", None)
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class ScrapeError(Exception):
    """A target could not be read. ``reason`` is a short label value for the error counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Fetcher:
    """One HTTP session per source (sources run in their own threads; sessions are not shared).

    ``timeout`` bounds the whole exchange, not only each socket read: a target that trickles its
    payload a byte at a time must not hold the scrape loop past its deadline.
    """

    def __init__(self, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        self.session = requests.Session()

    def _read(self, resp: requests.Response, url: str, deadline: float) -> bytes:
        if resp.status_code != 200:
            raise ScrapeError("http_status", f"{url}: HTTP {resp.status_code}")
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self.max_bytes and "Content-Encoding" not in resp.headers:
            raise ScrapeError("too_large", f"{url}: payload of {declared} bytes over {self.max_bytes}")
        chunks = []
        size = 0
        for chunk in resp.iter_content(chunk_size=1 << 16):
            size += len(chunk)
            if size > self.max_bytes:
                raise ScrapeError("too_large", f"{url}: payload over {self.max_bytes} bytes")
            chunks.append(chunk)
            if time.monotonic() > deadline:
                raise ScrapeError("timeout", f"{url}: payload not complete within {self.timeout:g}s")
        return b"".join(chunks)

    def request(self, method: str, url: str, body: Any = None) -> bytes:
        deadline = time.monotonic() + self.timeout
        try:
            with self.session.request(
                method, url, json=body, timeout=self.timeout, stream=True, headers={"Accept-Encoding": "gzip"}
            ) as resp:
                # Socket timeouts bound each read, not the body: a watchdog cuts the connection at
                # the deadline so that a trickling target cannot hold the scrape loop.
                watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), _cut, (resp,))
                watchdog.daemon = True
                watchdog.start()
                try:
                    payload = self._read(resp, url, deadline)
                finally:
                    watchdog.cancel()
                if time.monotonic() > deadline:
                    raise ScrapeError("timeout", f"{url}: payload not complete within {self.timeout:g}s")
                return payload
        except requests.Timeout:
            raise ScrapeError("timeout", f"{url}: no answer within {self.timeout:g}s") from None
        except requests.ConnectionError as exc:
            # A read that times out mid-body surfaces as a ConnectionError wrapping a ReadTimeout.
            if "timed out" in str(exc).lower() or time.monotonic() > deadline:
                raise ScrapeError("timeout", f"{url}: no answer within {self.timeout:g}s") from None
            raise ScrapeError("connection", f"{url}: cannot connect ({type(exc).__name__})") from None
        except (requests.RequestException, OSError) as exc:  # e.g. a body cut short by the watchdog
            if time.monotonic() > deadline:
                raise ScrapeError(
                    "timeout", f"{url}: payload not complete within {self.timeout:g}s"
                ) from None
            raise ScrapeError("http", f"{url}: {type(exc).__name__}") from None

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
