"""The OTLP/HTTP receiver on a real socket: recorded Triton bodies in, histograms and quantiles out."""

from __future__ import annotations

import gzip
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from conftest import DATA
from prometheus_client import CollectorRegistry, generate_latest
from support.fake_triton import FakeTriton

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.exporters.snapshot import scraped
from tritonwatch.exporters.traces import LatencyPart, OtlpReceiver, TraceFileReader
from tritonwatch.local.procs import free_port, wait_until

RAW = (DATA / "otlp_sleeper.json").read_text()
BODY = json.dumps(json.loads(RAW)[0]).encode()  # one real export: all 48 spans of the recording


def post(url: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method="POST")
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


class Capture(BaseHTTPRequestHandler):
    got: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.got.append((dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def backend() -> Iterator[str]:
    Capture.got = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Capture)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


def receiver(forward: str = "") -> OtlpReceiver:
    return OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), forward=forward, interval=1.0)


class _Only:
    """A part as a registry collector (a Source's describe() is not prometheus_client's)."""

    def __init__(self, part: Any) -> None:
        self.part = part

    def collect(self) -> Any:
        return self.part.collect()


def L(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def by_labels(text: bytes | str) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    return {name: {frozenset(k): v for k, v in series.items()} for name, series in parse(text).items()}


def families(part: Any) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    reg = CollectorRegistry()
    reg.register(_Only(part))
    return by_labels(generate_latest(reg))


def test_plain_and_gzip_bodies_feed_the_histogram_once_per_request(backend: str) -> None:
    r = receiver(forward=backend)
    r.start()
    try:
        assert post(r.url, BODY) == (200, b"{}")
        assert post(r.url, gzip.compress(BODY), {"Content-Encoding": "gzip"}) == (200, b"{}")
        # Bodies are forwarded in order from one queue; the capture sees them in that order.
        assert r.forwarder is not None and r.forwarder.drain(5)
        wait_until(lambda: len(Capture.got) == 2, 5, "both bodies forwarded")
    finally:
        r.stop()
    # Forwarded unchanged: the same bytes, content type and encoding.
    plain, zipped = Capture.got
    assert plain[1] == BODY and "Content-Encoding" not in plain[0]
    assert gzip.decompress(zipped[1]) == BODY and zipped[0]["Content-Encoding"] == "gzip"
    assert all(h["Content-Type"] == "application/json" for h, _b in Capture.got)
    own = families(r)
    assert own[catalog.SPANS_RECEIVED][L()] == 96
    # The second body repeats every model span: not counted again.
    assert own[catalog.SPANS_DROPPED][L(reason="duplicate")] == 17
    lat = families(r.latency)
    count = lat[catalog.REQUEST_DURATION + "_count"]
    assert count[L(model="sleeper", version="1", phase="compute_infer")] == 11
    assert count[L(model="fraud_detector", version="1", phase="request")] == 6
    assert count[L(model="fraud_detector", version="1", phase="compute_infer")] == 3
    # compute_input is not a histogram phase, but has quantiles.
    assert L(model="sleeper", version="1", phase="compute_input") not in count
    buckets = lat[catalog.REQUEST_DURATION + "_bucket"]
    key = L(model="sleeper", version="1", phase="compute_infer")
    assert buckets[key | L(le="0.025")] == 10  # 4 warm-ups near 20 ms, 4 x 1 ms, 2 x 20 ms
    assert buckets[key | L(le="0.05")] == 10
    assert buckets[key | L(le="0.1")] == 11  # the 50 ms one
    assert buckets[key | L(le="+Inf")] == 11
    q = lat[catalog.LATENCY_QUANTILE]
    p99 = q[key | L(quantile="0.99", source="trace")]
    assert 0.050 <= p99 < 0.055
    assert lat[catalog.LATENCY_SAMPLES][key] == 11


def test_malformed_and_foreign_bodies_are_refused_and_counted() -> None:
    r = receiver()
    r.start()
    try:
        assert post(r.url, b"{not json")[0] == 400
        assert post(r.url, b"\x1f\x8bnot gzip", {"Content-Encoding": "gzip"})[0] == 400
        assert post(r.url, BODY, {"Content-Encoding": "br"})[0] == 415
        assert post(r.url, BODY, {"Content-Type": "text/plain"})[0] == 415
        assert post(r.url.replace("/v1/traces", "/v1/metrics"), BODY)[0] == 404
        assert post(r.url, BODY)[0] == 200  # still serving
    finally:
        r.stop()
    own = families(r)
    assert own[catalog.SPANS_DROPPED][L(reason="malformed")] == 4
    assert own[catalog.SPANS_RECEIVED][L()] == 48


def test_a_dead_forward_target_never_blocks_receiving() -> None:
    r = receiver(forward=f"http://127.0.0.1:{free_port()}/v1/traces")
    r.start()
    try:
        t0 = time.monotonic()
        for _ in range(5):
            assert post(r.url, BODY)[0] == 200
        assert time.monotonic() - t0 < 2.0
        wait_until(
            lambda: families(r)[catalog.SPANS_DROPPED].get(L(reason="forward_error")) == 5 * 48,
            10,
            "forward errors counted",
        )
    finally:
        r.stop()


def test_summaries_fill_in_where_no_trace_covers_the_model_and_phase() -> None:
    samples = parse((DATA / "triton_metrics_load_2.txt").read_text(), catalog.TRITON_FAMILIES)
    part = LatencyPart(300.0, snapshots=scraped(samples))
    q = families(part)[catalog.LATENCY_QUANTILE]
    fd = L(model="fraud_detector", version="1")
    # Triton's queue summary (us) -> seconds, source=summary; 0.999 is not one of ours.
    assert q[fd | L(phase="queue", quantile="0.9", source="summary")] == 430e-6
    assert not any(dict(k)["quantile"] == "0.999" for k in q)
    # The request summary is NaN (response cache on): absent, not NaN.
    assert not any(dict(k)["phase"] == "request" and dict(k)["model"] == "fraud_detector" for k in q)
    # Once traces cover fraud_detector's compute_infer, that key switches to source=trace only.
    from tritonwatch.exporters.traces.timing import RequestTiming

    part.record([RequestTiming("fraud_detector", "1", "t1", "", {"compute_infer": 0.002})])
    q = families(part)[catalog.LATENCY_QUANTILE]
    infer = [
        dict(k)["source"]
        for k in q
        if dict(k)["phase"] == "compute_infer" and dict(k)["model"] == "fraud_detector"
    ]
    assert set(infer) == {"trace"} and len(infer) == 4
    assert any(dict(k)["phase"] == "queue" and dict(k)["source"] == "summary" for k in q)


def test_trace_files_and_their_rotations_are_read_once(tmp_path: Path) -> None:
    files: list[Any] = json.loads((DATA / "trace_file_sleeper.json").read_text())
    part = LatencyPart(300.0)
    reader = TraceFileReader(str(tmp_path / "trace.json"), part, 1.0, skip_older_than=300.0)
    (tmp_path / "trace.json.0").write_text(json.dumps(files[0]))
    (tmp_path / "trace.json.1").write_text(json.dumps(files[1])[:50])  # half written
    (tmp_path / "other.json.2").write_text(json.dumps(files[2]))  # not ours
    assert reader.step()
    count = families(part)[catalog.REQUEST_DURATION + "_count"]
    key = L(model="sleeper", version="1", phase="request")
    assert count[key] == 4
    (tmp_path / "trace.json.1").write_text(json.dumps(files[1]))
    (tmp_path / "trace.json.2").write_text(json.dumps(files[2]))
    reader.step()
    reader.step()
    count = families(part)[catalog.REQUEST_DURATION + "_count"]
    assert count[key] == 11  # all 11 sleeper requests are in the first three files
    assert reader.files_read == 3


def test_the_sidecar_serves_the_trace_families(backend: str) -> None:
    fake = FakeTriton()
    fake.index = [{"name": "sleeper", "state": "READY", "version": "1"}]  # only Triton's models count
    fake.start()
    sidecar = Sidecar.local(
        fake.base_url,
        f"http://127.0.0.1:{free_port()}/metrics",  # no /metrics: the trace families stand alone
        otlp_listen="127.0.0.1:0",
        otlp_forward=backend,
        interval=1.0,
        window=10.0,
    )
    [rcv] = [s for s in sidecar.sources if isinstance(s, OtlpReceiver)]
    sidecar.start()
    try:
        wait_until(lambda: bool(sidecar.api.state.ready), 10, "the repository index read")
        assert post(rcv.url, BODY)[0] == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as resp:
            text = resp.read().decode()
    finally:
        sidecar.stop()
        fake.stop()
    values = by_labels(text)
    assert values[catalog.SPANS_RECEIVED][L()] == 48
    assert values[catalog.REQUEST_DURATION + "_count"][L(model="sleeper", version="1", phase="request")] == 11
    # The receiver is not a scrape target: tritonwatch_up keeps its fixed set of targets.
    assert {dict(k)["target"] for k in values[catalog.UP]} <= set(catalog.TARGETS)
    assert catalog.TRACE_RATE not in values  # no trace settings API: the rate is unknown, not 0


def test_stop_closes_the_exporters_keep_alive_connections() -> None:
    import http.client

    r = receiver()
    r.start()
    conn = http.client.HTTPConnection("127.0.0.1", r.port, timeout=5)
    try:
        conn.request("POST", "/v1/traces", BODY, {"Content-Type": "application/json"})
        assert conn.getresponse().read() == b"{}"
        r.stop()
        # Otherwise Triton keeps exporting into the stopped receiver and a new one gets nothing.
        assert conn.sock is not None and conn.sock.recv(1) == b""
    finally:
        conn.close()


def test_protobuf_bodies_are_forwarded_unchanged_with_their_type(backend: str) -> None:
    from test_traces_protobuf import PROTO_BODY

    r = receiver(forward=backend)
    r.start()
    try:
        zipped = gzip.compress(PROTO_BODY)
        headers = {"Content-Type": "application/x-protobuf", "Content-Encoding": "gzip"}
        assert post(r.url, zipped, headers)[0] == 200
        assert r.forwarder is not None and r.forwarder.drain(5)
        wait_until(lambda: len(Capture.got) == 1, 5, "the body forwarded")
    finally:
        r.stop()
    ((sent_headers, body),) = Capture.got
    assert body == zipped
    assert sent_headers["Content-Type"] == "application/x-protobuf"
    assert sent_headers["Content-Encoding"] == "gzip"


def test_trace_files_are_listed_again_only_when_the_folder_changes(tmp_path: Path) -> None:
    files: list[Any] = json.loads((DATA / "trace_file_sleeper.json").read_text())
    part = LatencyPart(300.0)
    reader = TraceFileReader(str(tmp_path / "trace.json"), part, 1.0, skip_older_than=300.0)
    key = L(model="sleeper", version="1", phase="request")
    settled = time.time() - 60  # a folder mtime well in the past: no change can hide behind it
    (tmp_path / "trace.json.0").write_text(json.dumps(files[0]))
    os.utime(tmp_path, (settled, settled))
    reader.step()
    reader.step()
    assert (reader.listings, reader.files_read) == (1, 1)  # the second tick only stat'ed trace.json.0
    assert families(part)[catalog.REQUEST_DURATION + "_count"][key] == 4
    # a new rotation moves the folder's mtime: listed and read
    (tmp_path / "trace.json.1").write_text(json.dumps(files[1]))
    reader.step()
    assert (reader.listings, reader.files_read) == (2, 2)
    # a file rewritten in place (a restarted Triton) does not move the folder: seen by its stat
    os.utime(tmp_path, (settled + 1, settled + 1))
    reader.step()
    listed = reader.listings
    (tmp_path / "trace.json.0").write_text(json.dumps(files[2]))
    os.utime(tmp_path, (settled + 1, settled + 1))
    reader.step()
    assert reader.listings == listed and reader.files_read == 3
    # read files are left where Triton wrote them (Triton's files; the operator prunes them)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json.0", "trace.json.1"]
