"""The fetcher's budgets hold as a payload arrives (issue 23, the hostile-input benchmark's memory bound):
a payload over the line budget is refused before it is all sent, and an accepted one is held once."""

from __future__ import annotations

import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.static_endpoint import StaticEndpoint, serve, shutdown

from tritonwatch.fetch import MAX_LINE_BYTES, Fetcher, ScrapeError

LINE = b'nv_inference_count{model="m",version="1"} 1\n'  # 44 bytes


def _serving(send: Callable[[BaseHTTPRequestHandler], None]) -> ThreadingHTTPServer:
    """A loopback server answering every GET 200, then ``send(handler)`` (headers end, body)."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(200)
            send(self)

    return serve(Handler)


@pytest.fixture()
def stalling() -> Iterator[tuple[str, threading.Event]]:
    """Sends 100,000 lines (4.4 MB), then holds the response open until the test ends."""
    done = threading.Event()

    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.end_headers()
        try:
            handler.wfile.write(LINE * 100_000)
            handler.wfile.flush()
        except OSError:
            return
        done.wait(30)

    httpd = _serving(send)
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/metrics", done
    finally:
        done.set()
        shutdown(httpd)


def test_a_payload_over_the_line_budget_is_refused_while_it_streams(
    stalling: tuple[str, threading.Event],
) -> None:
    """Before: the lines were counted once the whole payload was held (chunks and their join)."""
    url, _done = stalling
    fetcher = Fetcher(timeout=20.0, max_lines=50_000)
    start = time.monotonic()
    with pytest.raises(ScrapeError) as refused:
        fetcher.get(url)  # the body never ends: only a refusal while streaming returns before 20 s
    took = time.monotonic() - start
    fetcher.close()
    assert refused.value.reason == "too_many_lines"
    assert str(refused.value) == f"{url}: over 50000 lines, refused as read"
    assert took < 10.0, took


def test_a_payload_within_budget_is_held_once() -> None:
    """Before: 30 MB arrived as chunks and were joined: 60 MB held at the peak."""
    size = 30 * 2**20
    payload = LINE * (size // len(LINE))

    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    httpd = _serving(send)
    fetcher = Fetcher(timeout=30.0, max_bytes=64 * 2**20, max_lines=1_000_000)
    tracemalloc.start()
    try:
        got = fetcher.get(f"http://127.0.0.1:{httpd.server_address[1]}/metrics")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        fetcher.close()
        shutdown(httpd)
    assert got == payload
    assert got.count(b"\n") == len(payload) // len(LINE)
    # one buffer (realloc grows it by an eighth) and a 1 MiB chunk in flight; joined chunks: 2x
    assert peak < 1.3 * len(payload), f"peak {peak / 2**20:.1f} MiB for {len(payload) / 2**20:.1f} MiB"


# --- a line over MAX_LINE_BYTES: skipped to its end as it arrives, the rest kept ---------------------
LONG = b'nv_inference_count{model="' + b"x" * (5 * 2**20) + b'",version="1"} 1\n'  # 5 MiB


@pytest.mark.parametrize(
    ("body", "kept", "skipped"),
    [
        (LINE * 1000 + LONG + LINE * 1000, LINE * 2000, 1),
        (LONG + LINE * 3, LINE * 3, 1),  # at the start
        (LINE * 3 + LONG[:-1], LINE * 3, 1),  # last, with no newline
        (LINE + LONG + LONG + LINE, LINE * 2, 2),  # two in a row
        (LINE * 3 + b"y" * (MAX_LINE_BYTES - 1) + b"\n" + LINE, None, 0),  # at the limit: kept
        # a short line that ends right where a chunk boundary falls, then a long one
        (b"z" * (2**20 - 1) + b"\n" + LONG + LINE, b"z" * (2**20 - 1) + b"\n" + LINE, 1),
    ],
    ids=["middle", "first", "last", "two", "at_limit", "at_chunk_boundary"],
)
def test_a_long_line_is_skipped_and_the_rest_of_the_payload_kept(
    body: bytes, kept: bytes | None, skipped: int
) -> None:
    endpoint = StaticEndpoint(body).start()
    try:
        fetcher = Fetcher(timeout=30.0, max_line=MAX_LINE_BYTES)
        tracemalloc.start()
        try:
            payload = fetcher.get(endpoint.url)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert bytes(payload) == (body if kept is None else kept)
        assert fetcher.skipped == [f"{endpoint.url}: a line over {MAX_LINE_BYTES} bytes, skipped"] * skipped
        if skipped:  # never the 5 MiB line whole: at most its first MiB and a chunk or two (~4 MiB)
            assert peak < 5 * 2**20 + 2 * len(payload), f"peak {peak / 2**20:.1f} MiB"
        assert fetcher.get(endpoint.url) == payload and len(fetcher.skipped) == skipped  # per read
    finally:
        endpoint.stop()


def test_an_endless_line_is_counted_against_the_payload_cap() -> None:
    """Skipped bytes still count as read: a target streaming one line for ever hits ``too_large``."""
    endpoint = StaticEndpoint(LINE + b"x" * (8 * 2**20)).start()
    try:
        with pytest.raises(ScrapeError) as err:
            Fetcher(timeout=30.0, max_bytes=4 * 2**20, max_line=MAX_LINE_BYTES).get(endpoint.url)
        assert err.value.reason == "too_large"
    finally:
        endpoint.stop()
