"""The OTLP receiver against hostile senders (issue 23 case 3): span attributes become labels only for
models Triton reports, trace histograms expire with the quantile window, the receiver binds loopback
unless told otherwise, and bodies read at once are bounded.

Bodies are the real Triton 2.51 export recorded in ``tests/data/otlp_sleeper.json`` (11 ``sleeper`` and
6 ``fraud_detector`` requests), with the model name rewritten where a test needs a hostile one.
"""

from __future__ import annotations

import gzip
import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.fake_triton import FakeTriton, fake_triton
from test_webconfig import bcrypt_hash, certs, write_config  # noqa: F401 (certs: a fixture)

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.config import SidecarConfig
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.exporters.traces import MAX_CONCURRENT_BODIES, LatencyPart, OtlpReceiver
from tritonwatch.exporters.traces.timing import RequestTiming
from tritonwatch.exporters.webconfig import load_web_config
from tritonwatch.local.procs import free_port, wait_until

DATA = Path(__file__).resolve().parent / "data"
BODY = json.dumps(json.loads((DATA / "otlp_sleeper.json").read_text())[0])
REQUEST = (("phase", "request"),)


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:  # its index: fail_always and fraud_detector, not sleeper
        yield server


def _renamed(name: str) -> bytes:
    """BODY with ``sleeper`` called ``name`` and new span ids (the same ids would be duplicates)."""
    doc = json.loads(BODY.replace('"sleeper"', json.dumps(name)))
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = "f" + span[key][1:]
    return json.dumps(doc).encode()


def _post(url: str, body: bytes) -> int:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return int(resp.status)


def test_spans_of_models_triton_does_not_report_become_no_labels(fake: FakeTriton) -> None:
    """Before: one 4 MB POST whose model name was 4 MB made /metrics 332 MB; 1,000 spans with 1 KB
    names added 83,000 samples, until restart."""
    sidecar = Sidecar.local(
        fake.base_url, f"http://127.0.0.1:{free_port()}/metrics", otlp_listen="127.0.0.1:0", interval=0.5
    ).start()
    try:
        wait_until(lambda: bool(sidecar.api.state.ready), 10, "the repository index read")
        receiver = next(s for s in sidecar.sources if isinstance(s, OtlpReceiver))
        assert _post(receiver.url, BODY.encode()) == 200
        huge = "m" * 150_000  # 22 times in the body (span names, attributes): under the 4 MiB body cap
        assert _post(receiver.url, _renamed(huge)) == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as r:
            text = r.read()
    finally:
        sidecar.stop()
    assert len(text) < 200_000, len(text)
    got = parse(text)
    counts = got[catalog.REQUEST_DURATION + "_count"]
    # Only models Triton serves have series (those with no traced request yet at zero).
    assert {dict(ls)["model"] for ls in counts} == {"fraud_detector", "fail_always"}
    assert {dict(ls)["model"] for ls, n in counts.items() if n} == {"fraud_detector"}
    assert counts[(("model", "fraud_detector"), ("version", "1"), *REQUEST)] == 12  # 6 in each body
    assert got[catalog.SPANS_DROPPED][(("reason", "unknown_model"),)] == 22  # 11 sleeper + 11 huge
    assert got[catalog.SPANS_RECEIVED][()] == 96


def _post_gzip(url: str, body: bytes) -> int:
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    return requests.post(url, data=gzip.compress(body), headers=headers, timeout=10).status_code


def test_a_body_over_the_cap_is_refused_with_413_before_it_is_decoded(fake: FakeTriton) -> None:
    """Before: the cap was 32 MiB, and one 31 MB JSON body decoded to ~300 MB of objects. Triton's
    batches (512 spans at most) are under 1 MB; ``--otlp-max-body-bytes`` bounds the rest."""
    assert SidecarConfig().otlp_max_body_bytes == 4 * 2**20
    cap = 3 * len(BODY)  # the recorded body fits; one with a padded model name does not
    sidecar = Sidecar.local(
        fake.base_url,
        f"http://127.0.0.1:{free_port()}/metrics",
        otlp_listen="127.0.0.1:0",
        otlp_max_body_bytes=cap,
        interval=0.5,
    ).start()
    try:
        wait_until(lambda: bool(sidecar.api.state.ready), 10, "the repository index read")
        receiver = next(s for s in sidecar.sources if isinstance(s, OtlpReceiver))
        over = _renamed("m" * (cap // 10))  # 22 names of cap/10: over the cap, plain or inflated
        assert len(over) > cap and len(gzip.compress(over)) < cap
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(receiver.url, over)
        assert refused.value.code == 413
        assert _post_gzip(receiver.url, over) == 413  # a small gzip body, over the cap once inflated
        assert _post(receiver.url, BODY.encode()) == 200
        assert _post_gzip(receiver.url, BODY.encode()) == 200  # under the cap once inflated: taken
        with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as r:
            got = parse(r.read())
    finally:
        sidecar.stop()
    dropped = {dict(ls)["reason"]: v for ls, v in got[catalog.SPANS_DROPPED].items()}
    assert dropped["too_large"] == 2
    assert "malformed" not in dropped
    assert got[catalog.SPANS_RECEIVED][()] == 96  # the two bodies taken, none of the refused


def test_trace_histograms_expire_with_the_quantile_window() -> None:
    """Before: a histogram key lived until restart, whatever sent it and however long ago."""
    now = [1000.0]
    part = LatencyPart(300.0, clock=lambda: now[0])
    part.record([RequestTiming("gone", "1", "t1", "", {"request": 0.02})], now=1000.0)
    part.record([RequestTiming("busy", "1", "t2", "", {"request": 0.02})], now=1000.0)

    def keys() -> set[str]:
        part.prepare()
        return {
            dict(s.labels)["model"]
            for fam in part.collect()
            if fam.name == catalog.REQUEST_DURATION
            for s in fam.samples
        }

    assert keys() == {"gone", "busy"}
    part.record([RequestTiming("busy", "1", "t3", "", {"request": 0.02})], now=1250.0)
    # (Families are built again when the store's 30 s time slice moves: 1289 and 1321 are in others.)
    now[0] = 1289.0
    assert keys() == {"gone", "busy"}  # within the window
    now[0] = 1321.0
    assert keys() == {"busy"}  # 321 s without a trace: forgotten
    now[0] = 1561.0
    assert keys() == set()


def test_the_receiver_binds_loopback_unless_given_a_host() -> None:
    """Before: ``--otlp-listen :4318`` bound every interface."""
    receiver = OtlpReceiver(":0", LatencyPart(300.0))
    try:
        assert receiver.server.server_address[0] == "127.0.0.1"
    finally:
        receiver.server.server_close()


def test_bodies_over_the_concurrency_budget_are_answered_503_at_once() -> None:
    """Before: six concurrent 31 MB bodies were all read at once (1.8 GB)."""
    receiver = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0))
    receiver.start()
    slow: list[socket.socket] = []
    try:
        head = (
            f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(BODY)}\r\n\r\n"
        ).encode()
        for _ in range(MAX_CONCURRENT_BODIES):  # bodies that come slowly hold their slots
            s = socket.create_connection(("127.0.0.1", receiver.port), timeout=10)
            s.sendall(head + BODY[:100].encode())
            slow.append(s)
        deadline = time.monotonic() + 5
        while receiver._reading._value > 0 and time.monotonic() < deadline:  # type: ignore[attr-defined]
            time.sleep(0.01)
        start = time.monotonic()
        req = urllib.request.Request(
            receiver.url, data=BODY.encode(), headers={"Content-Type": "application/json"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(req, timeout=5)
        assert refused.value.code == 503 and time.monotonic() - start < 1
        for s in slow:  # the held bodies complete and are taken
            s.sendall(BODY[100:].encode())
            assert s.recv(100).startswith(b"HTTP/1.1 200")
        assert _post(receiver.url, BODY.encode()) == 200  # slots free again
        received, dropped = receiver.counters.snapshot()
        assert dropped == {"busy": 1} and received == 48 * (MAX_CONCURRENT_BODIES + 1)
    finally:
        for s in slow:
            s.close()
        receiver.stop()


def test_the_receiver_takes_the_web_configs_tls_and_basic_auth(certs: Path) -> None:  # noqa: F811
    """Before: anyone who could reach the port could send spans, in clear text."""
    web = write_config(
        certs,
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"
        f"basic_auth_users:\n  triton: '{bcrypt_hash('span-secret')}'\n",
    )
    authorize, wrap = load_web_config(web)
    receiver = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), authorize=authorize, wrap=wrap)
    receiver.start()
    try:
        assert receiver.url.startswith("https://127.0.0.1:")
        ok = {"data": BODY.encode(), "headers": {"Content-Type": "application/json"}, "timeout": 10}
        verify = str(certs / "server.crt")
        assert (
            requests.post(receiver.url, verify=verify, auth=("triton", "span-secret"), **ok).status_code
            == 200
        )
        assert requests.post(receiver.url, verify=verify, auth=("triton", "guess"), **ok).status_code == 401
        assert requests.post(receiver.url, verify=verify, **ok).status_code == 401
        with pytest.raises(requests.ConnectionError):  # plain HTTP to the TLS port gets nothing
            requests.post(receiver.url.replace("https", "http"), **ok)
        received, dropped = receiver.counters.snapshot()
        assert received == 48 and dropped == {"unauthorized": 2}
    finally:
        receiver.stop()


def test_served_models_start_at_zero_and_stay_while_idle() -> None:
    """Before: a model's histogram appeared with its first traced requests already counted, so
    Prometheus' rate() dropped them and VictoriaMetrics' increase() guessed (0 or all, by size).
    A name Triton does not serve still expires."""
    now = [1000.0]
    served = [("fraud_detector", "1")]
    part = LatencyPart(300.0, clock=lambda: now[0], served=lambda: served)

    def counts() -> dict[tuple[str, str], float]:
        part.prepare()
        return {
            (s.labels["model"], s.labels["phase"]): s.value
            for fam in part.collect()
            if fam.name == catalog.REQUEST_DURATION
            for s in fam.samples
            if s.name.endswith("_count")
        }

    zero = {("fraud_detector", phase): 0.0 for phase in catalog.HISTOGRAM_PHASES}
    assert counts() == zero  # before any trace
    part.record([RequestTiming("fraud_detector", "1", "t1", "", {"request": 0.02})], now=1000.0)
    part.record([RequestTiming("made_up", "1", "t2", "", {"request": 0.02})], now=1000.0)
    assert counts() == {**zero, ("fraud_detector", "request"): 1.0, ("made_up", "request"): 1.0}
    now[0] = 1321.0  # 321 s without a trace: the served model stays, counted; the made-up one goes
    assert counts() == {**zero, ("fraud_detector", "request"): 1.0}
    served.clear()  # unloaded: forgotten like any other
    now[0] = 1351.0
    assert counts() == {}
