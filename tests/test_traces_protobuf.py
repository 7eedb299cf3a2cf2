"""OTLP/HTTP protobuf (``application/x-protobuf``), what the OpenTelemetry Collector and most SDKs send.

Real Triton exports (``tests/data/otlp_sleeper.json``) re-encoded with opentelemetry-proto's own
message classes decode to the very spans of the JSON path and give the same histograms and quantiles
through the receiver; the OpenTelemetry SDK's OTLP/HTTP exporter (protobuf, gzip) feeds the receiver
spans shaped like Triton's with known timestamps; a malformed body is one 400 with a one-line reason.
"""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from conftest import DATA
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span
from prometheus_client import CollectorRegistry, generate_latest

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.traces import LatencyPart, OtlpReceiver
from tritonwatch.exporters.traces.otlp import OtlpError, decode, decode_body, decode_protobuf

DOCS: list[Any] = json.loads((DATA / "otlp_sleeper.json").read_text())
JSON_BODY = json.dumps(DOCS[0]).encode()
PROTOBUF = "application/x-protobuf"


def any_value(v: dict[str, Any]) -> AnyValue:
    if "stringValue" in v:
        return AnyValue(string_value=v["stringValue"])
    if "intValue" in v:
        return AnyValue(int_value=int(v["intValue"]))
    if "doubleValue" in v:
        return AnyValue(double_value=float(v["doubleValue"]))
    if "boolValue" in v:
        return AnyValue(bool_value=bool(v["boolValue"]))
    raise AssertionError(f"no scalar in {v}")


def key_values(attrs: list[dict[str, Any]]) -> list[KeyValue]:
    return [KeyValue(key=a["key"], value=any_value(a["value"])) for a in attrs]


def span(s: dict[str, Any]) -> Span:
    return Span(
        trace_id=bytes.fromhex(s["traceId"]),
        span_id=bytes.fromhex(s["spanId"]),
        parent_span_id=bytes.fromhex(s.get("parentSpanId", "")),
        name=s["name"],
        kind=s.get("kind", 0),
        start_time_unix_nano=int(s["startTimeUnixNano"]),
        end_time_unix_nano=int(s["endTimeUnixNano"]),
        attributes=key_values(s.get("attributes", [])),
        events=[Span.Event(name=e["name"], time_unix_nano=int(e["timeUnixNano"])) for e in s["events"]],
    )


def to_protobuf(doc: dict[str, Any]) -> bytes:
    """The same export as the JSON document, built with opentelemetry-proto's message classes."""
    request = ExportTraceServiceRequest(
        resource_spans=[
            ResourceSpans(
                resource=Resource(attributes=key_values(rs["resource"]["attributes"])),
                scope_spans=[
                    ScopeSpans(
                        scope=InstrumentationScope(name=ss["scope"]["name"]),
                        spans=[span(s) for s in ss["spans"]],
                    )
                    for ss in rs["scopeSpans"]
                ],
            )
            for rs in doc["resourceSpans"]
        ]
    )
    return request.SerializeToString()


PROTO_BODY = to_protobuf(DOCS[0])


def post(url: str, body: bytes, ctype: str, headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
    req = urllib.request.Request(
        url, data=body, method="POST", headers={"Content-Type": ctype, **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status), resp.headers["Content-Type"], resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read()


def families(part: Any) -> dict[str, dict[frozenset[tuple[str, str]], float]]:
    class Only:
        def collect(self) -> Any:
            return part.collect()

    reg = CollectorRegistry()
    reg.register(Only())  # type: ignore[arg-type]
    return {n: {frozenset(k): v for k, v in s.items()} for n, s in parse(generate_latest(reg)).items()}


def test_protobuf_decodes_to_the_spans_of_the_json_path() -> None:
    # The streamer's recording holds several INFER_RESPONSE_COMPLETE events per root span.
    streamer = json.loads((DATA / "otlp_streamer.json").read_text())
    assert any(len(s.responses) > 1 for doc in streamer for s in decode(json.dumps(doc)))
    for doc in DOCS:
        spans = decode_protobuf(to_protobuf(doc))
        assert spans == decode(json.dumps(doc))
        assert len(spans) == 48
    for doc in streamer:
        assert decode_protobuf(to_protobuf(doc)) == decode(json.dumps(doc))
    assert decode_body(PROTO_BODY, "application/x-protobuf; charset=binary") == decode(JSON_BODY)
    assert decode_protobuf(b"") == []  # an empty export is a valid one


@pytest.mark.parametrize(
    "body",
    [
        b"\xff\xff\xff",  # a truncated varint
        b"\x0a\x05ab",  # a length past the end
        JSON_BODY,  # JSON sent as protobuf
        PROTO_BODY[: len(PROTO_BODY) // 2],  # cut in half
        # a span without a traceId (field 1 of Span left out): the JSON path refuses it too
        ExportTraceServiceRequest(
            resource_spans=[ResourceSpans(scope_spans=[ScopeSpans(spans=[Span(span_id=b"\x01" * 8)])])]
        ).SerializeToString(),
    ],
)
def test_malformed_protobuf_is_an_otlp_error_with_one_line(body: bytes) -> None:
    with pytest.raises(OtlpError) as err:
        decode_protobuf(body)
    assert "\n" not in str(err.value)


def test_unknown_content_type_is_an_otlp_error() -> None:
    with pytest.raises(OtlpError, match="text/plain"):
        decode_body(JSON_BODY, "text/plain")


def test_receiver_gives_the_same_histograms_for_protobuf_json_and_gzip() -> None:
    got = []
    for body, ctype, headers in [
        (JSON_BODY, "application/json", {}),
        (PROTO_BODY, PROTOBUF, {}),
        (gzip.compress(PROTO_BODY), PROTOBUF, {"Content-Encoding": "gzip"}),
    ]:
        r = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), interval=1.0)
        r.start()
        try:
            status, answer_type, answer = post(r.url, body, ctype, headers)
        finally:
            r.stop()
        assert status == 200 and answer_type == ctype
        # An empty ExportTraceServiceResponse in the request's encoding.
        assert answer == (b"{}" if ctype == "application/json" else b"")
        assert families(r)[catalog.SPANS_RECEIVED][frozenset()] == 48
        got.append(families(r.latency))
    assert got[0] == got[1] == got[2]
    count = got[1][catalog.REQUEST_DURATION + "_count"]
    assert count[frozenset({("model", "sleeper"), ("version", "1"), ("phase", "compute_infer")})] == 11


def test_malformed_protobuf_is_a_400_with_a_status_and_counted() -> None:
    r = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), interval=1.0)
    r.start()
    try:
        status, ctype, answer = post(r.url, PROTO_BODY[:100], PROTOBUF)
        assert post(r.url, PROTO_BODY, PROTOBUF)[0] == 200  # still serving
    finally:
        r.stop()
    assert (status, ctype) == (400, PROTOBUF)
    reason = Status.FromString(answer)  # OTLP/HTTP's error body for protobuf clients
    assert reason.code == 3  # INVALID_ARGUMENT
    assert reason.message.startswith("body: not an OTLP protobuf ExportTraceServiceRequest")
    assert "\n" not in reason.message
    own = families(r)
    assert own[catalog.SPANS_DROPPED][frozenset({("reason", "malformed")})] == 1
    assert own[catalog.SPANS_RECEIVED][frozenset()] == 48


def test_the_opentelemetry_sdk_exporter_feeds_the_receiver() -> None:
    """Spans shaped like Triton's (root, model span, compute child), sent by the SDK's own exporter."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    r = OtlpReceiver("127.0.0.1:0", LatencyPart(300.0), interval=1.0)
    r.start()
    provider = TracerProvider()
    provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=r.url, compression=Compression.Gzip, timeout=5))
    )
    tracer = provider.get_tracer("triton-server")
    t0 = 1_796_228_243_000_000_000
    infer_ms = [3, 7, 7, 12, 40]  # compute_infer per request, ms
    try:
        for i, ms in enumerate(infer_ms):
            start = t0 + i * 1_000_000_000
            root = tracer.start_span("InferRequest", start_time=start)
            model = tracer.start_span(
                "sleeper",
                context=trace.set_span_in_context(root),
                start_time=start + 1000,
                attributes={"triton.model_name": "sleeper", "triton.model_version": 1},
            )
            model.add_event("REQUEST_START", timestamp=start + 1000)
            model.add_event("QUEUE_START", timestamp=start + 2000)
            compute = tracer.start_span(
                "compute", context=trace.set_span_in_context(model), start_time=start + 5000
            )
            compute.add_event("COMPUTE_START", timestamp=start + 5000)
            compute.add_event("COMPUTE_INPUT_END", timestamp=start + 6000)
            compute.add_event("COMPUTE_OUTPUT_START", timestamp=start + 6000 + ms * 1_000_000)
            compute.add_event("COMPUTE_END", timestamp=start + 7000 + ms * 1_000_000)
            compute.end(end_time=start + 7000 + ms * 1_000_000)
            model.add_event("REQUEST_END", timestamp=start + 9000 + ms * 1_000_000)
            model.end(end_time=start + 9000 + ms * 1_000_000)
            root.end(end_time=start + 10_000 + ms * 1_000_000)
        assert provider.force_flush(10_000)
    finally:
        provider.shutdown()
        r.stop()
    own = families(r)
    assert own[catalog.SPANS_RECEIVED][frozenset()] == 3 * len(infer_ms)
    assert not own.get(catalog.SPANS_DROPPED)
    lat = families(r.latency)
    key = frozenset({("model", "sleeper"), ("version", "1"), ("phase", "compute_infer")})
    assert lat[catalog.REQUEST_DURATION + "_count"][key] == len(infer_ms)
    assert lat[catalog.REQUEST_DURATION + "_sum"][key] == pytest.approx(sum(infer_ms) / 1e3, abs=1e-12)
    q = lat[catalog.LATENCY_QUANTILE]
    # Nearest rank over [3, 7, 7, 12, 40] ms: p50 is the 3rd, p90 and p99 the 5th.
    assert q[key | {("quantile", "0.5"), ("source", "trace")}] == 0.007
    assert q[key | {("quantile", "0.9"), ("source", "trace")}] == 0.040
    assert q[key | {("quantile", "0.99"), ("source", "trace")}] == 0.040
    queue = frozenset({("model", "sleeper"), ("version", "1"), ("phase", "queue")})
    assert lat[catalog.LATENCY_QUANTILE][queue | {("quantile", "0.5"), ("source", "trace")}] == 3e-6
