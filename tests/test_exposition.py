"""The sidecar's exposition writer says exactly what prometheus_client's generate_latest says, and the
served body is rendered once per update (gzip once, when asked for), not once per request."""

from __future__ import annotations

import gzip

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from tritonwatch.exporters.exposition import CachedExposition, TextFamily, accepts_gzip, exposition
from tritonwatch.local.procs import wait_until


class Families:
    def collect(self):  # type: ignore[no-untyped-def]
        g = GaugeMetricFamily("tw_gauge", "help with \\ backslash\nand newline", labels=["model", "v"])
        g.add_metric(["a", 'quote " back \\ nl \n'], 0.5)
        g.add_metric(["b", "x"], float("nan"))
        g.add_metric(["c", "x"], float("inf"))
        g.add_metric(["d", "x"], 12.0)
        g.add_metric(["e", "x"], 1e-7)
        g.add_metric(["f", "x"], 123456789012345678.0)
        yield g
        c = CounterMetricFamily("tw_things", "counter", labels=["reason"])
        c.add_metric(["x"], 3)
        yield c
        h = HistogramMetricFamily("tw_seconds", "histogram", labels=["phase"])
        h.add_metric(["request"], [("0.005", 1), ("0.01", 3), ("+Inf", 4)], 0.03)
        yield h
        yield GaugeMetricFamily("tw_plain", "no labels", value=-2.5)
        t = TextFamily("tw_text", "written as added", ["model", "q"])
        t.add_metric(["a", "x"], 1.5)
        t.add_many([("b", 'q"uote'), ("c", "new\nline"), ("d", "x")], [float("nan"), 3, 1e-7])
        t.add_many([("e", "x"), ("f", "x")], [float("-inf"), 123456789012345678.0])
        yield t
        tc = TextFamily("tw_text_things", "a counter written as added", ["reason"], "counter")
        tc.add_many([("x",), ("y",)], [2.0, 0.25])
        yield tc


def samples(text: str) -> list[tuple[str, tuple[tuple[str, str], ...], str]]:
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append((s.name, tuple(sorted(s.labels.items())), repr(float(s.value))))
    return sorted(out)


def test_same_samples_as_generate_latest() -> None:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(Families())  # type: ignore[arg-type]
    ours, theirs = exposition(reg).decode(), generate_latest(reg).decode()
    assert samples(ours) == samples(theirs)
    assert [ln for ln in ours.splitlines() if ln.startswith("#")] == [
        ln for ln in theirs.splitlines() if ln.startswith("#")
    ]


class Counting:
    """A collector that counts its collect() calls; ``big`` is yielded as the same object each time."""

    def __init__(self) -> None:
        self.calls = 0
        self.value = 1.0
        self.big = GaugeMetricFamily("tw_big", "kept by identity", labels=["model"])
        for i in range(3):
            self.big.add_metric([f"m{i}"], float(i))

    def collect(self):  # type: ignore[no-untyped-def]
        self.calls += 1
        yield GaugeMetricFamily("tw_small", "rebuilt each time", value=self.value)
        yield self.big


def cached() -> tuple[CachedExposition, Counting, CollectorRegistry]:
    reg = CollectorRegistry(auto_describe=False)
    source = Counting()
    reg.register(source)  # type: ignore[arg-type]
    return CachedExposition(reg), source, reg


def test_rendered_once_per_update_whatever_the_requests() -> None:
    cache, source, reg = cached()
    first = cache.body()
    for _ in range(5):
        assert cache.body() is first
        assert gzip.decompress(cache.body(gzipped=True)) == first
    assert cache.body(gzipped=True) is cache.body(gzipped=True)  # compressed once
    assert source.calls == 1
    assert first == exposition(reg)
    source.value = 2.0
    cache.changed()
    second = cache.body()
    assert source.calls == 3  # one render for the update (exposition() above was the other call)
    assert b"tw_small 2.0" in second and second == exposition(reg)


def test_a_family_yielded_again_is_not_written_again() -> None:
    cache, source, _reg = cached()
    cache.body()
    source.big.add_metric(["late"], 9.0)  # mutating a yielded family: only a new object is news
    cache.changed()
    assert b"late" not in cache.body()
    source.big = GaugeMetricFamily("tw_big", "kept by identity", labels=["model"], value=None)
    source.big.add_metric(["late"], 9.0)
    cache.changed()
    assert b'tw_big{model="late"} 9.0' in cache.body()


def test_the_background_render_makes_requests_a_lookup() -> None:
    cache, source, _reg = cached()
    cache.start()
    try:
        cache.changed()
        wait_until(lambda: cache.renders == 1, 10, "the background render")
        calls = source.calls
        cache.body()
        assert source.calls == calls
    finally:
        cache.stop()


@pytest.mark.parametrize(
    ("header", "gzip_ok"),
    [
        (None, False),
        ("", False),
        ("gzip", True),
        ("deflate, gzip;q=1.0, *;q=0.5", True),
        ("gzip;q=0", False),
        ("gzip; q=0.0, identity", False),
        ("*", True),
        ("*;q=0", False),
        ("identity", False),
        ("br, x-gzip", True),
        ("GZIP;Q=0.3", True),
    ],
)
def test_accept_encoding(header: str | None, gzip_ok: bool) -> None:
    assert accepts_gzip(header) is gzip_ok


def test_the_endpoint_serves_the_cached_body_as_the_client_accepts() -> None:
    import urllib.request

    from tritonwatch.exporters.server import MetricsServer

    cache, source, _reg = cached()
    server = MetricsServer("127.0.0.1", 0, cache)
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        bodies = {}
        for accept in ("gzip", "gzip;q=0", "identity"):
            req = urllib.request.Request(url, headers={"Accept-Encoding": accept})
            with urllib.request.urlopen(req, timeout=5) as resp:
                bodies[accept] = (resp.headers.get("Content-Encoding"), resp.read())
        assert bodies["gzip"][0] == "gzip" and gzip.decompress(bodies["gzip"][1]) == cache.body()
        assert bodies["gzip;q=0"] == (None, cache.body()) == bodies["identity"]
        assert source.calls == 1
    finally:
        server.stop()


def test_a_request_during_an_update_sees_what_the_state_shows() -> None:
    # A source changes what /metrics shows between begin() and end(): a request in between must not be
    # served the bytes from before (a test that polls the state and then scrapes would see stale data).
    cache, source, _reg = cached()
    cache.body()
    cache.begin()
    source.value = 5.0
    assert b"tw_small 5.0" in cache.body()
    source.value = 6.0
    assert b"tw_small 6.0" in cache.body()
    cache.end()
    calls = source.calls
    assert b"tw_small 6.0" in cache.body()
    assert cache.body() is cache.body() and source.calls == calls + 1  # cached again once it ended


def test_a_body_goes_in_one_blocking_send_and_a_stalled_client_still_frees_the_thread() -> None:
    import socket
    import struct
    import threading

    from tritonwatch.exporters.server import _write

    body = b"x" * (8 << 20)  # larger than any socket buffer: the writer must wait for the reader
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(0.5)
        got = bytearray()

        def read() -> None:
            while len(got) < len(body):
                got.extend(b.recv(1 << 16))

        reader = threading.Thread(target=read)
        reader.start()
        _write(a, None, body)
        reader.join(timeout=10)
        assert bytes(got) == body
        assert a.gettimeout() == 0.5  # the handler's idle timeout is back for the next request
        # the send was the blocking one, bounded by the socket's send timeout (0.5 s)
        assert struct.unpack("ll", a.getsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, 16)) == (0, 500000)
        # a client that stops reading: the send fails once the timeout passes without progress
        failed: list[OSError] = []

        def stalled() -> None:
            try:
                _write(a, None, body)
            except OSError as exc:
                failed.append(exc)

        writer = threading.Thread(target=stalled, daemon=True)
        writer.start()
        writer.join(timeout=10)
        assert not writer.is_alive() and failed
        assert a.gettimeout() == 0.5
