"""Decode OTLP/HTTP trace exports (``ExportTraceServiceRequest``), JSON or protobuf, into flat span records.

Pure functions, no I/O. Every way a body can be wrong (not UTF-8, not JSON, not protobuf, too deeply
nested, a field of the wrong type, an id that is not hex, a timestamp that is not a non-negative
integer) raises ``OtlpError`` and nothing else, so a receiver can answer 400 and count the payload
dropped. Both encodings give the same ``Span`` records for the same export.

    spans = decode(body)        # [Span(trace_id="1d96...", span_id="c2f6...", parent_id="7a50...",
                                #       name="compute", attributes={}, events={"COMPUTE_START": 17..., ...}), ...]
    spans = decode_protobuf(body)                  # application/x-protobuf (what the Collector and SDKs send)
    spans = decode_body(body, "application/json")  # by Content-Type; OtlpError for any other type
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

JSON = "application/json"
PROTOBUF = "application/x-protobuf"
CONTENT_TYPES = (JSON, PROTOBUF)


class OtlpError(ValueError):
    """The body is not a valid OTLP trace export."""


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root span
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, str] = field(default_factory=dict)  # values as strings ("1", "sleeper")
    events: Mapping[str, int] = field(default_factory=dict)  # event name -> time (ns), first occurrence
    # Every INFER_RESPONSE_COMPLETE (ns), in time order: one per response of a streaming request.
    responses: tuple[int, ...] = ()


RESPONSE_EVENT = "INFER_RESPONSE_COMPLETE"
_HEX = re.compile(r"^[0-9a-fA-F]*$")
# Older exporters (OTLP < 0.15) name the middle level instrumentationLibrarySpans.
_SCOPE_KEYS = ("scopeSpans", "instrumentationLibrarySpans")


def _obj(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise OtlpError(f"{where}: expected an object")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpError(f"{where}: expected a list")
    return value


def _str(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OtlpError(f"{where}: expected a string")
    return value


def _id(value: Any, where: str, required: bool) -> str:
    text = _str(value, where)
    if required and not text:
        raise OtlpError(f"{where}: missing")
    # OTLP JSON spells ids in hex (the protobuf JSON mapping's base64 is explicitly not used).
    if not _HEX.match(text) or len(text) > 64:
        raise OtlpError(f"{where}: not a hex id")
    return text.lower()


def _nanos(value: Any, where: str) -> int:
    # The JSON mapping of fixed64 is a decimal string; tolerate a plain JSON integer as well.
    if isinstance(value, bool):
        raise OtlpError(f"{where}: expected nanoseconds")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 20:
        n = int(value)
    else:
        raise OtlpError(f"{where}: expected nanoseconds as a decimal string")
    if not 0 <= n < 2**64:
        raise OtlpError(f"{where}: out of range")
    return n


def _any_value(value: Any, where: str) -> str:
    v = _obj(value, where)
    for key in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if key in v:
            raw = v[key]
            if isinstance(raw, dict | list):
                raise OtlpError(f"{where}.{key}: expected a scalar")
            if isinstance(raw, bool):
                return "true" if raw else "false"
            return str(raw)
    return ""  # arrays, kvlists, bytes: nothing tritonwatch reads


def _attributes(value: Any, where: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, item in enumerate(_list(value, where)):
        kv = _obj(item, f"{where}[{i}]")
        key = _str(kv.get("key"), f"{where}[{i}].key")
        out[key] = _any_value(kv.get("value", {}), f"{where}[{i}].value")
    return out


def _events(pairs: Iterable[tuple[str, int]]) -> tuple[dict[str, int], tuple[int, ...]]:
    """A span's events by name (the first of each name) and its responses' times, for both encodings."""
    events: dict[str, int] = {}
    responses: list[int] = []
    for name, ns in pairs:
        events.setdefault(name, ns)
        if name == RESPONSE_EVENT:
            responses.append(ns)
    return events, tuple(sorted(responses))


def _span(value: Any, where: str) -> Span:
    s = _obj(value, where)
    pairs: list[tuple[str, int]] = []
    for i, item in enumerate(_list(s.get("events"), f"{where}.events")):
        ev = _obj(item, f"{where}.events[{i}]")
        name = _str(ev.get("name"), f"{where}.events[{i}].name")
        pairs.append((name, _nanos(ev.get("timeUnixNano"), f"{where}.events[{i}].timeUnixNano")))
    events, responses = _events(pairs)
    return Span(
        trace_id=_id(s.get("traceId"), f"{where}.traceId", required=True),
        span_id=_id(s.get("spanId"), f"{where}.spanId", required=True),
        parent_id=_id(s.get("parentSpanId"), f"{where}.parentSpanId", required=False),
        name=_str(s.get("name"), f"{where}.name"),
        start_ns=_nanos(s.get("startTimeUnixNano", "0"), f"{where}.startTimeUnixNano"),
        end_ns=_nanos(s.get("endTimeUnixNano", "0"), f"{where}.endTimeUnixNano"),
        attributes=_attributes(s.get("attributes"), f"{where}.attributes"),
        events=events,
        responses=responses,
    )


class _Unusual(Exception):
    """The fast path met something it does not take as is: the checked path decides (and names it)."""


_MAX_NANOS = 2**64
_hex = _HEX.match


def _fast_nanos(value: Any) -> int:
    if type(value) is str and len(value) <= 20 and value.isdigit() and value.isascii():
        n = int(value)
    elif type(value) is int and value >= 0:
        n = value
    else:
        raise _Unusual
    if n >= _MAX_NANOS:
        raise _Unusual
    return n


def _fast_id(value: Any, required: bool) -> str:
    if value is None and not required:
        return ""
    if type(value) is not str or (required and not value) or len(value) > 64 or not _HEX.match(value):
        raise _Unusual
    return value.lower()


def _fast_span(s: Any) -> Span:
    """One span as ``_span`` reads it, with fewer calls: no location strings, no helper per field."""
    if type(s) is not dict:
        raise _Unusual
    events: dict[str, int] = {}
    responses: list[int] = []
    raw_events = s.get("events")
    if raw_events is not None:
        if type(raw_events) is not list:
            raise _Unusual
        for ev in raw_events:
            if type(ev) is not dict:
                raise _Unusual
            name = ev.get("name")
            if type(name) is not str:
                if name is not None:
                    raise _Unusual
                name = ""
            ns = ev.get("timeUnixNano")  # inline _fast_nanos: the most frequent field of all
            if type(ns) is str and len(ns) <= 20 and ns.isdigit() and ns.isascii():
                ns = int(ns)
                if ns >= _MAX_NANOS:
                    raise _Unusual
            else:
                ns = _fast_nanos(ns)
            if name not in events:
                events[name] = ns
            if name == RESPONSE_EVENT:
                responses.append(ns)
    attributes: dict[str, str] = {}
    raw_attrs = s.get("attributes")
    if raw_attrs is not None:
        if type(raw_attrs) is not list:
            raise _Unusual
        for kv in raw_attrs:
            if type(kv) is not dict:
                raise _Unusual
            key = kv.get("key")
            if type(key) is not str:
                if key is not None:
                    raise _Unusual
                key = ""
            value = kv.get("value", {})
            if type(value) is dict and type(text := value.get("stringValue")) is str:
                attributes[key] = text
            elif (
                type(value) is dict and "stringValue" not in value and type(n := value.get("intValue")) is str
            ):
                attributes[key] = n  # Triton's model version: an int64, a string in OTLP JSON
            else:
                try:
                    attributes[key] = _any_value(value, "")
                except OtlpError:
                    raise _Unusual from None
    name = s.get("name")
    if type(name) is not str:
        if name is not None:
            raise _Unusual
        name = ""
    trace_id, span_id = s.get("traceId"), s.get("spanId")
    if type(trace_id) is not str or not 0 < len(trace_id) <= 64 or not _hex(trace_id):
        raise _Unusual
    if type(span_id) is not str or not 0 < len(span_id) <= 64 or not _hex(span_id):
        raise _Unusual
    parent = s.get("parentSpanId")
    return Span(  # positional: fields in Span's order
        trace_id.lower(),
        span_id.lower(),
        "" if parent is None or parent == "" else _fast_id(parent, False),
        name,
        _fast_nanos(s.get("startTimeUnixNano", "0")),
        _fast_nanos(s.get("endTimeUnixNano", "0")),
        attributes,
        events,
        tuple(sorted(responses)) if responses else (),
    )


def _fast_request(doc: Any) -> list[Span]:
    if type(doc) is not dict:
        raise _Unusual
    spans: list[Span] = []
    append = spans.append
    resource_spans = doc.get("resourceSpans")
    if resource_spans is None:
        return spans
    if type(resource_spans) is not list:
        raise _Unusual
    for rs in resource_spans:
        if type(rs) is not dict:
            raise _Unusual
        for key in _SCOPE_KEYS:
            scopes = rs.get(key)
            if scopes is None:
                continue
            if type(scopes) is not list:
                raise _Unusual
            for ss in scopes:
                if type(ss) is not dict:
                    raise _Unusual
                items = ss.get("spans")
                if items is None:
                    continue
                if type(items) is not list:
                    raise _Unusual
                for span in items:
                    append(_fast_span(span))
    return spans


def decode_request(doc: Any) -> list[Span]:
    """Spans of an already-parsed ``ExportTraceServiceRequest`` object, in body order.

    A well-formed export takes the fast path (issue 24: about half the CPU of the checked one); one
    the fast path does not take as is, valid or not, is read again by the checked path, which
    gives the same spans or names what is wrong (tests/test_traces_fastdecode.py holds the two
    equal on recorded bodies)."""
    try:
        return _fast_request(doc)
    except _Unusual:
        return checked_request(doc)


def checked_request(doc: Any) -> list[Span]:
    """``decode_request`` field by field, every error naming where it is."""
    root = _obj(doc, "body")
    spans: list[Span] = []
    for r, rs in enumerate(_list(root.get("resourceSpans"), "resourceSpans")):
        rs_obj = _obj(rs, f"resourceSpans[{r}]")
        for key in _SCOPE_KEYS:
            for s, ss in enumerate(_list(rs_obj.get(key), f"resourceSpans[{r}].{key}")):
                ss_obj = _obj(ss, f"resourceSpans[{r}].{key}[{s}]")
                where = f"resourceSpans[{r}].{key}[{s}].spans"
                for i, span in enumerate(_list(ss_obj.get("spans"), where)):
                    spans.append(_span(span, f"{where}[{i}]"))
    return spans


def decode(body: bytes | str) -> list[Span]:
    """Spans of one OTLP/HTTP JSON body (``application/json``)."""
    return decode_request(parse_json(body))


def count_spans(doc: Any) -> int:
    """How many spans ``decode_request(doc)`` gives when it gives any, by list lengths only (what
    the receiver counts to queue or shed a body before decoding it); 0 where the shape is wrong."""
    if type(doc) is not dict or type(resource_spans := doc.get("resourceSpans")) is not list:
        return 0
    n = 0
    for rs in resource_spans:
        if type(rs) is dict:
            for key in _SCOPE_KEYS:
                if type(scopes := rs.get(key)) is list:
                    for ss in scopes:
                        if type(ss) is dict and type(spans := ss.get("spans")) is list:
                            n += len(spans)
    return n


def parse_json(body: bytes | str) -> Any:
    """The JSON document of one body; ``OtlpError`` when it is not UTF-8 JSON."""
    try:
        text = body.decode("utf-8") if isinstance(body, bytes) else body
        doc = json.loads(text)
    except UnicodeDecodeError:
        raise OtlpError("body: not UTF-8") from None
    except RecursionError:
        raise OtlpError("body: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, and int() digit limits inside the parser
        raise OtlpError(f"body: not JSON ({exc})") from None
    return doc


def _pb_id(value: bytes, where: str, required: bool) -> str:
    if required and not value:
        raise OtlpError(f"{where}: missing")
    if len(value) > 32:
        raise OtlpError(f"{where}: id over 32 bytes")
    return value.hex()


def _pb_value(value: Any) -> str:
    """An ``AnyValue`` as the JSON path spells it: scalars as text, anything else as ""."""
    kind = value.WhichOneof("value")
    if kind == "bool_value":
        return "true" if value.bool_value else "false"
    if kind in ("string_value", "int_value", "double_value"):
        return str(getattr(value, kind))
    return ""


def decode_protobuf(body: bytes) -> list[Span]:
    """Spans of one OTLP/HTTP protobuf body (``application/x-protobuf``), in body order."""
    # Imported here: the generated message classes cost start-up time a JSON-only receiver does not need.
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(bytes(body))
    except Exception as exc:  # DecodeError, and whatever else the protobuf runtime raises on bad bytes
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise OtlpError(f"body: not an OTLP protobuf ExportTraceServiceRequest ({reason})") from None
    spans: list[Span] = []
    for r, rs in enumerate(request.resource_spans):
        for s, ss in enumerate(rs.scope_spans):
            for i, sp in enumerate(ss.spans):
                where = f"resourceSpans[{r}].scopeSpans[{s}].spans[{i}]"
                events, responses = _events((ev.name, ev.time_unix_nano) for ev in sp.events)
                spans.append(
                    Span(
                        trace_id=_pb_id(sp.trace_id, f"{where}.traceId", required=True),
                        span_id=_pb_id(sp.span_id, f"{where}.spanId", required=True),
                        parent_id=_pb_id(sp.parent_span_id, f"{where}.parentSpanId", required=False),
                        name=sp.name,
                        start_ns=sp.start_time_unix_nano,
                        end_ns=sp.end_time_unix_nano,
                        attributes={kv.key: _pb_value(kv.value) for kv in sp.attributes},
                        events=events,
                        responses=responses,
                    )
                )
    return spans


def decode_body(body: bytes, content_type: str) -> list[Span]:
    """Spans of one body by its Content-Type (parameters such as ``; charset=utf-8`` ignored)."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == JSON:
        return decode(body)
    if kind == PROTOBUF:
        return decode_protobuf(body)
    raise OtlpError(f"Content-Type {kind or '(none)'}: expected {JSON} or {PROTOBUF}")
