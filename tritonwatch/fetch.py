"""Fetching from scrape targets, with a deadline, a size cap and errors that name a reason.

Reasons (the ``reason`` label of ``tritonwatch_scrape_errors_total``): ``timeout`` (no answer, or the
whole answer not in time), ``connection`` (refused, reset, gone), ``http_status`` (not 200),
``too_large`` (over ``--max-payload-bytes``, counted after decompression), ``line_too_long`` (a
text payload's line over ``MAX_LINE_BYTES``: that line skipped to its end as it arrives, the rest
kept; ``Fetcher.skipped`` lists them for the source to count), ``too_many_lines`` (more
lines than the source's budget, stopped as they arrive), ``bad_json``,
``bad_number`` (JSON with Infinity, NaN or a number out of range), ``too_deep`` (JSON nested past the
recursion limit), ``http``.
The Triton API source prefixes them with the endpoint that failed (``index_``, ``stats_``, ``config_``).
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# The longest line of an exposition payload read at all: a longer one is skipped (the parser also
# skips a line whose labels are over 64 KiB).
MAX_LINE_BYTES = 1024 * 1024


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


class _Watchdog:
    """One thread for every fetch in the process: cuts a response's connection at its deadline.

    Socket timeouts bound each read, not the body: a target that trickles its payload must still not
    hold the scrape loop past its deadline. (A timer thread per request cost a thread start per scrape.)
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._watched: dict[int, requests.Response] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: float, resp: requests.Response) -> int:
        with self._cond:
            if self._thread is None or not self._thread.is_alive():  # (none yet, or forked)
                self._thread = threading.Thread(target=self._run, name="fetch-watchdog", daemon=True)
                self._thread.start()
            token = next(self._tokens)
            self._watched[token] = resp
            heapq.heappush(self._heap, (deadline, token))
            self._cond.notify()
            return token

    def cancel(self, token: int) -> None:
        with self._cond:
            self._watched.pop(token, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    while self._heap and self._heap[0][1] not in self._watched:
                        heapq.heappop(self._heap)  # finished in time
                    if not self._heap:
                        self._cond.wait()
                        continue
                    deadline, token = self._heap[0]
                    wait = deadline - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        resp = self._watched.pop(token)
                        break
                    self._cond.wait(wait)
            _cut(resp)


_WATCHDOG = _Watchdog()


class ScrapeError(Exception):
    """A target could not be read. ``reason`` is a short label value for the error counter."""

    def __init__(self, reason: str, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = status  # the HTTP status of an ``http_status`` refusal

    @property
    def unreachable(self) -> bool:
        """No answer came at all (``connection``, ``timeout``, ``http``): the server, not what it
        said, is the problem."""
        return self.reason in ("connection", "timeout", "http")


# Triton's counters are uint64 and its settings int32/int64: a longer integer is not Triton's, and
# Python would carry it into float() (OverflowError) or arithmetic of any size.
MAX_INT_DIGITS = 20


class JsonLimitError(ValueError):
    """A JSON number no Triton answer holds: Infinity, NaN, a float that overflows, a huge integer."""


def _refuse(text: str) -> Any:
    raise JsonLimitError(f"number {text[:40]} out of range")


def bounded_json(raw: bytes | bytearray | str, out_of_range: Callable[[str], Any] = _refuse) -> Any:
    """``json.loads`` where every number is finite and every integer at most ``MAX_INT_DIGITS`` digits.

    Any other number (Infinity, NaN, 1e400, a 401-digit integer) is ``out_of_range(text)``: by default
    a ``JsonLimitError``; a reader that judges each entry on its own passes ``lambda _t: math.nan``, which
    its own checks then refuse for that entry only. Nesting deeper than the interpreter's recursion
    limit raises ``RecursionError`` (the C decoder checks it).
    """

    def whole(text: str) -> Any:
        return int(text) if len(text) - text.startswith("-") <= MAX_INT_DIGITS else out_of_range(text)

    def real(text: str) -> Any:
        value = float(text)
        return value if math.isfinite(value) else out_of_range(text)

    return json.loads(raw, parse_int=whole, parse_float=real, parse_constant=out_of_range)


MAX_REFUSAL_BYTES = 4096  # of a refusal's body, read for the server's own words


def _refusal(resp: requests.Response) -> str:
    """The server's own words for a refusal (Triton's ``{"error": "..."}``), on one line and short."""
    try:
        error = json.loads(resp.raw.read(MAX_REFUSAL_BYTES, decode_content=True)).get("error")
    except Exception:  # not JSON, not an object, a body cut short: the status alone says enough
        return ""
    return f": {' '.join(error.split())[:200]}" if isinstance(error, str) and error.strip() else ""


class Fetcher:
    """One HTTP session per source (sources run in their own threads; sessions are not shared).

    ``timeout`` bounds the whole exchange, not only each socket read: a target that trickles its
    payload a byte at a time must not hold the scrape loop past its deadline.
    """

    def __init__(
        self, timeout: float, max_bytes: int = DEFAULT_MAX_BYTES, max_line: int = 0, max_lines: int = 0
    ) -> None:
        self.timeout = timeout
        self.max_bytes = max_bytes
        # Text formats: a line longer than this is skipped to its end as it arrives (0: no limit), so
        # a 50 MB label value costs a few chunks of memory and the rest of the payload is kept.
        self.max_line = max_line
        # What the last read skipped (one message per line): the source counts them as line_too_long.
        self.skipped: list[str] = []
        # Text formats: more lines than this stop the read as they arrive (0: no limit).
        self.max_lines = max_lines
        self.session = requests.Session()

    def _read(self, resp: requests.Response, url: str, deadline: float) -> bytearray:
        if resp.status_code != 200:
            raise ScrapeError(
                "http_status", f"{url}: HTTP {resp.status_code}{_refusal(resp)}", resp.status_code
            )
        declared = resp.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > self.max_bytes and "Content-Encoding" not in resp.headers:
            raise ScrapeError("too_large", f"{url}: payload of {declared} bytes over {self.max_bytes}")
        # One buffer that grows in place (realloc): the payload is held once, never as chunks and
        # their join, so a payload at the cap costs the cap and a chunk.
        payload = bytearray()
        self.skipped = []
        received = 0  # counted as read, kept or skipped: a target streaming one endless line is too_large
        run = 0  # bytes of the current line kept so far; -1 while skipping a long line to its end
        lines = 0
        for chunk in resp.iter_content(chunk_size=1 << 20):
            received += len(chunk)
            if received > self.max_bytes:
                raise ScrapeError("too_large", f"{url}: payload over {self.max_bytes} bytes")
            if self.max_lines:
                lines += chunk.count(b"\n")
                if lines > self.max_lines:
                    raise ScrapeError(
                        "too_many_lines", f"{url}: over {self.max_lines} lines, refused as read"
                    )
            if self.max_line:
                chunk, run = self._keep_lines(url, payload, chunk, run)
            payload += chunk
            if time.monotonic() > deadline:
                raise ScrapeError("timeout", f"{url}: payload not complete within {self.timeout:g}s")
        return payload

    def _keep_lines(self, url: str, payload: bytearray, chunk: bytes, run: int) -> tuple[bytes, int]:
        """``chunk`` less any part of a line over ``max_line``, and the kept run after it.

        A line found too long is cut from ``payload`` where it began and its rest dropped as it
        arrives (up to its newline), so it costs at most ``max_line`` and a chunk, and is listed in
        ``skipped``. Only a line that crosses a chunk boundary can be longer than a chunk: those
        that begin and end inside one (at most its size) are left to the parser's own limit.
        Constant Python work per chunk: the newline searches run in C.
        """
        if run < 0:  # the rest of a skipped line
            end = chunk.find(b"\n")
            if end < 0:
                return b"", -1
            chunk, run = chunk[end + 1 :], 0
        first = chunk.find(b"\n")
        if (run + len(chunk) if first < 0 else run + first) <= self.max_line:
            return chunk, run + len(chunk) if first < 0 else len(chunk) - 1 - chunk.rfind(b"\n")
        del payload[len(payload) - run :]
        self.skipped.append(f"{url}: a line over {self.max_line} bytes, skipped")
        if first < 0:
            return b"", -1
        rest = chunk[first + 1 :]
        return rest, len(rest) - 1 - rest.rfind(b"\n")

    def request(self, method: str, url: str, body: Any = None) -> bytearray:
        """The payload, in the one buffer it was read into (bytes-like: decode, count, regex, JSON)."""
        deadline = time.monotonic() + self.timeout
        try:
            with self.session.request(
                method, url, json=body, timeout=self.timeout, stream=True, headers={"Accept-Encoding": "gzip"}
            ) as resp:
                # Socket timeouts bound each read, not the body: the watchdog cuts the connection at
                # the deadline so that a trickling target cannot hold the scrape loop.
                token = _WATCHDOG.watch(deadline, resp)
                try:
                    payload = self._read(resp, url, deadline)
                finally:
                    _WATCHDOG.cancel(token)
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

    def get(self, url: str) -> bytearray:
        return self.request("GET", url)

    def json(
        self, method: str, url: str, body: Any = None, out_of_range: Callable[[str], Any] = _refuse
    ) -> Any:
        raw = self.request(method, url, body)
        try:
            return bounded_json(raw, out_of_range) if raw else None
        except JsonLimitError as exc:
            raise ScrapeError("bad_number", f"{url}: {exc}") from None
        except RecursionError:
            raise ScrapeError("too_deep", f"{url}: JSON nested too deeply") from None
        except ValueError:
            raise ScrapeError("bad_json", f"{url}: response is not JSON") from None

    def close(self) -> None:
        self.session.close()
