"""The trace path's overload shedding and its faster decoding and quantiles (issue 24).

* ``Intake``: a bounded queue between the OTLP receiver's handler and the span processing; a body
  that does not fit is shed whole and counted, exactly, while the consumer is held;
* the receiver answers Triton's exporter at once while its processing is stuck, and counts what it
  shed in ``tritonwatch_spans_dropped_total{reason="overload"}``; what it kept is recorded exactly;
* the fast JSON decode gives the very spans of the checked one on every recorded Triton body;
* the quantiles without per-value pairs equal ``weighted_quantile`` over all pairs.
"""

from __future__ import annotations

import copy
import gzip
import json
import random
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.traces import LatencyPart, OtlpReceiver, otlp
from tritonwatch.exporters.traces.intake import Intake
from tritonwatch.exporters.traces.store import quantiles_of, weighted_quantile
from tritonwatch.local.procs import wait_until

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def recorded_docs() -> list[Any]:
    docs: list[Any] = []
    for name in ("triton_otlp_traces.json", "otlp_sleeper.json", "otlp_streamer.json"):
        docs += json.loads((DATA / name).read_text())
    docs += json.loads(
        gzip.decompress((ROOT / "bench" / "data" / "triton_otlp_fraud_detector.json.gz").read_bytes())
    )
    return docs


class _Held:
    """A consumer that blocks until released, and keeps what it was given."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.batches: list[int] = []

    def __call__(self, bodies: list[Any], now: float) -> None:
        self.entered.set()
        assert self.release.wait(10)
        self.batches.append(sum(len(b) for b in bodies))


def spans(n: int) -> list[otlp.Span]:
    return [otlp.Span(f"{i:032x}", f"{i + 1:016x}", "", "s", 0, 0) for i in range(n)]


def test_a_full_intake_sheds_whole_bodies_and_counts_each_span() -> None:
    held = _Held()
    shed: list[int] = []
    intake = Intake(held, shed.append, max_spans=10)
    intake.start()
    try:
        assert intake.submit(spans(4), 4, 1.0)  # A: taken by the worker, which is held
        assert held.entered.wait(5)
        wait_until(lambda: intake.queued == 0, 5, "the worker to take A")
        assert intake.submit(spans(4), 4, 1.0)  # B: queued (4)
        assert not intake.submit(spans(7), 7, 1.0)  # C: 4 + 7 > 10: shed whole
        assert intake.submit(spans(6), 6, 1.0)  # D: 4 + 6 = 10 fits
        assert not intake.submit(spans(1), 1, 1.0)  # E: 11 > 10
        assert intake.queued == 10
        assert not intake.flush(0.01)  # shed just now: a reader is not held up by the backlog
        held.release.set()
    finally:
        intake.stop()
    assert shed == [7, 1] and intake.shed == 8
    # A alone, then B and D as one batch: one join and one record for what queued meanwhile.
    assert held.batches == [4, 10]
    assert intake.flush(0.01)


def test_an_intake_never_started_processes_in_the_callers_thread() -> None:
    got: list[int] = []
    intake = Intake(lambda bodies, now: got.append(sum(map(len, bodies))), lambda n: None, max_spans=2)
    assert intake.submit(spans(5), 5, 1.0)  # an empty queue takes any body
    assert got == [5] and intake.flush(0.0)


def _renamed(doc: Any, prefix: int) -> bytes:
    """The body with every id's first 8 hex digits replaced: the same spans, new requests."""
    doc = copy.deepcopy(doc)
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if span.get(key):
                        span[key] = f"{prefix:08x}" + span[key][8:]
    return json.dumps(doc).encode()


def _post(url: str, body: bytes) -> int:
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as resp:
        return int(resp.status)


class _Only:
    def __init__(self, part: Any) -> None:
        self.part = part

    def collect(self) -> Any:
        return self.part.collect()


def by_labels(text: bytes | str) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    return {name: {frozenset(k): v for k, v in series.items()} for name, series in parse(text).items()}


def families(part: Any) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    reg = CollectorRegistry()
    reg.register(_Only(part))
    return by_labels(generate_latest(reg))


def test_the_receiver_answers_at_once_while_stuck_and_counts_what_it_shed() -> None:
    """Processing stuck behind the first body: the next bodies are answered at once (queued, then
    shed whole), and the drop is counted span for span."""
    [doc] = json.loads((DATA / "triton_otlp_traces.json").read_text())  # 30 spans, 12 requests
    per_body = sum(len(ss["spans"]) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"])
    latency = LatencyPart(300.0)
    r = OtlpReceiver("127.0.0.1:0", latency, interval=60.0, max_queued_spans=2 * per_body)
    r.start()
    try:
        first: list[int] = []
        with latency._lock:  # the consumer is stuck: the worker waits in record()
            # The intake keeps up: the first answer waits for its body (read-your-writes).
            sender = threading.Thread(target=lambda: first.append(_post(r.url, _renamed(doc, 1))))
            sender.start()
            wait_until(lambda: r.intake.queued == 0 and r.intake.batches == 0 and not r.intake.idle(), 5,
                       "the worker to take the first body")  # fmt: skip
            assert first == []  # still waiting on the stuck worker
            # Queued (two bodies fit), then shed: every answer comes at once, 200 (OTLP: accepted).
            assert [_post(r.url, _renamed(doc, i)) for i in range(2, 7)] == [200] * 5
            assert r.intake.queued == 2 * per_body
            stuck = families(r)  # /metrics does not wait for a queue that sheds
            assert stuck[catalog.SPANS_DROPPED][frozenset({("reason", "overload")})] == 3 * per_body
        sender.join(10)
        assert first == [200]
    finally:
        r.stop()
    own = families(r)
    assert own[catalog.SPANS_RECEIVED][frozenset()] == 6 * per_body
    assert own[catalog.SPANS_DROPPED][frozenset({("reason", "overload")})] == 3 * per_body
    lat = families(latency)
    key = frozenset({("model", "fraud_detector"), ("version", "1"), ("phase", "request")})
    assert lat[catalog.REQUEST_DURATION + "_count"][key] == 3 * 12  # the three bodies kept, exactly


def test_json_that_is_not_an_export_is_answered_then_counted_malformed() -> None:
    """Parsed in the handler, decoded in the worker: not JSON is a 400; JSON of the wrong shape is
    accepted (200) and counted malformed (one per body, as a 400 is), its spans never recorded."""
    r = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), interval=60.0)
    r.start()
    try:
        assert _post(r.url, b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 7}]}]}]}') == 200
        with pytest.raises(urllib.error.HTTPError) as refused:
            _post(r.url, b"{not json")
        assert refused.value.code == 400
        own = families(r)
    finally:
        r.stop()
    assert own[catalog.SPANS_DROPPED][frozenset({("reason", "malformed")})] == 2
    # Received as its lists count them (one span) when the answer went; never recorded.
    assert own[catalog.SPANS_RECEIVED][frozenset()] == 1
    assert catalog.REQUEST_DURATION + "_count" not in families(r.latency)


@pytest.mark.parametrize("index", range(len(recorded_docs())))
def test_the_fast_decode_gives_the_checked_decodes_spans(index: int) -> None:
    doc = recorded_docs()[index]
    fast = otlp._fast_request(doc)  # taken as is: no fallback on what Triton sends
    assert fast == otlp.checked_request(doc)
    assert fast == otlp.decode(json.dumps(doc).encode())


def test_unusual_fields_give_the_same_spans_or_the_same_error() -> None:
    """Every field of a recorded body changed to something odd: the fast path and the checked path
    agree, span for span or error for error."""
    rng = random.Random(24)
    [doc] = json.loads((DATA / "triton_otlp_traces.json").read_text())
    odd: list[Any] = [None, 7, -1, True, "", "12", "ABCDEF", "1" * 21, "²", [], {}, {"intValue": "3"}]

    def leaves(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        out = [path]
        if isinstance(node, dict):
            for k, v in node.items():
                out += leaves(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                out += leaves(v, (*path, i))
        return out

    paths = [p for p in leaves(doc) if p]
    for path in rng.sample(paths, min(400, len(paths))):
        changed = copy.deepcopy(doc)
        node = changed
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = rng.choice(odd)

        def outcome(fn: Any, value: Any = changed) -> Any:
            try:
                return fn(value)
            except otlp.OtlpError as exc:
                return f"error: {exc}"

        assert outcome(otlp.decode_request) == outcome(otlp.checked_request), path


def test_quantiles_without_pairs_equal_the_weighted_nearest_rank() -> None:
    rng = random.Random(7)
    qs = ("0.5", "0.9", "0.95", "0.99", "0.999", "1", "0.0001")
    for _ in range(1500):
        held = []
        for _s in range(rng.randint(1, 11)):
            n = rng.randint(0, 40)
            values = [round(rng.lognormvariate(-5, 1), rng.choice([3, 6, 12])) for _ in range(n)]
            seen = n if rng.random() < 0.5 else n + rng.randint(0, 500)  # saturated: weight > 1
            held.append((sorted(values), seen / n if n else 1.0, seen))
        pairs = sorted((v, w) for values, w, _seen in held for v in values)
        got = quantiles_of(held, qs)
        if not pairs:
            assert got is None
            continue
        assert got is not None
        assert got.values == {q: weighted_quantile(pairs, float(q)) for q in qs}
        assert got.count == sum(seen for _v, _w, seen in held)
