"""Reading one OTLP/HTTP request body (length, gzip, caps) and the protobuf error body OTLP asks for."""

from __future__ import annotations

import zlib
from http.server import BaseHTTPRequestHandler

from tritonwatch.exporters.config import SidecarConfig

TRACES_PATH = "/v1/traces"
# Triton's batch exporter sends at most 512 spans a body (OpenTelemetry's default), about 0.6-1.3 KB
# each in JSON (tests/data/triton_otlp_traces.json): under 1 MB. A JSON body decodes to about ten times
# its size in objects, so the cap (--otlp-max-body-bytes) bounds the receiver's memory.
MAX_BODY_BYTES = SidecarConfig.otlp_max_body_bytes  # 4 MiB
# Triton's exporter sends one batch at a time; more at once is a flood, answered 503 (OTLP: retry later).
MAX_CONCURRENT_BODIES = 1
# A body sent without valid credentials is read (and dropped) up to this size; a larger one is cut.
UNAUTHORIZED_DRAIN = 1024 * 1024


def _status_proto(code: int, message: str) -> bytes:
    """A serialized ``google.rpc.Status`` {code, message}: OTLP/HTTP's error body for protobuf clients.

    Two scalar fields (1: int32 code, 2: string message), written directly rather than pulling in
    googleapis-common-protos for one message."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    text = message.encode()
    return b"\x08" + varint(code) + b"\x12" + varint(len(text)) + text


GRPC_INVALID_ARGUMENT = 3


def _read_body(handler: BaseHTTPRequestHandler, max_bytes: int) -> tuple[bytes, bytes, str]:
    """(raw body, decoded body, encoding): gunzipped when so encoded; ValueError with an HTTP status in args[1]."""
    length = handler.headers.get("Content-Length")
    if length is None or not length.isdigit():
        raise ValueError("Content-Length required", 411)
    if int(length) > max_bytes:
        raise ValueError(f"body over {max_bytes} bytes", 413)
    raw = handler.rfile.read(int(length))
    encoding = (handler.headers.get("Content-Encoding") or "identity").strip().lower()
    if encoding == "identity":
        return raw, raw, encoding
    if encoding != "gzip":
        raise ValueError(f"Content-Encoding {encoding} not supported", 415)
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(raw, max_bytes + 1)
    except zlib.error:
        raise ValueError("body is not valid gzip", 400) from None
    if len(out) > max_bytes:
        raise ValueError(f"body over {max_bytes} bytes once inflated", 413)
    return raw, out, encoding
