"""Decoding real OTLP JSON exports from Triton 2.51, and rejecting malformed ones with one error type."""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import DATA

from tritonwatch.exporters.traces.otlp import OtlpError, decode, decode_request


def bodies() -> list[Any]:
    data: list[Any] = json.loads((DATA / "otlp_sleeper.json").read_text())
    return data


def test_decodes_the_three_spans_of_each_traced_request() -> None:
    spans = [s for b in bodies() for s in decode_request(b)]
    # 11 sleeper requests + 3 fraud_detector misses (3 spans each), 3 cache hits (no compute span).
    assert len(spans) == 14 * 3 + 3 * 2
    by_id = {s.span_id: s for s in spans}
    model = next(s for s in spans if s.attributes.get("triton.request_id") == "sleep-50-10")
    assert model.name == "sleeper"
    assert model.attributes["triton.model_name"] == "sleeper"
    assert model.attributes["triton.model_version"] == "1"
    assert set(model.events) == {"REQUEST_START", "QUEUE_START", "REQUEST_END"}
    root = by_id[model.parent_id]
    assert root.name == "InferRequest" and root.parent_id == ""
    compute = next(s for s in spans if s.parent_id == model.span_id)
    assert compute.name == "compute" and compute.trace_id == model.trace_id
    infer_ns = compute.events["COMPUTE_OUTPUT_START"] - compute.events["COMPUTE_INPUT_END"]
    assert 50e6 <= infer_ns < 60e6  # it slept 50 ms


def test_bytes_and_text_decode_alike() -> None:
    raw = json.dumps(bodies()[0])
    assert decode(raw) == decode(raw.encode())


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"\xff\xfe",
        b"not json",
        b"[]",
        b'{"resourceSpans": {}}',
        b'{"resourceSpans": [1]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{}]}]}]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01", "spanId": "01",'
        b' "events": [{"name": "X", "timeUnixNano": "-5"}]}]}]}]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01", "spanId": "01",'
        b' "events": [{"name": "X", "timeUnixNano": 1.5}]}]}]}]}',
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "01", "spanId": "01",'
        b' "attributes": [{"key": "k", "value": {"stringValue": {"a": 1}}}]}]}]}]}',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"a": ' + b"9" * 5000 + b"}",
    ],
)
def test_malformed_bodies_raise_otlp_error(body: bytes) -> None:
    with pytest.raises(OtlpError):
        decode(body)


def test_an_empty_export_is_valid() -> None:
    assert decode(b"{}") == []
    assert decode(b'{"resourceSpans": []}') == []


def _mutations(doc: Any, rng: random.Random) -> Iterator[Any]:
    """Copies of ``doc`` with one value somewhere replaced by something of another shape."""
    odd: list[Any] = [None, 0, -1, 1.5, True, "", "²", "zz", "9" * 30, [], {}, [1], {"a": 1}]
    paths: list[tuple[Any, ...]] = []

    def walk(node: Any, path: tuple[Any, ...]) -> None:
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, (*path, k))
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, (*path, i))

    walk(doc, ())
    for path in rng.sample(paths, min(400, len(paths))):
        mutated = copy.deepcopy(doc)
        if not path:
            yield rng.choice(odd)
            continue
        parent = mutated
        for step in path[:-1]:
            parent = parent[step]
        parent[path[-1]] = rng.choice(odd)
        yield mutated


def test_no_mutation_of_a_real_body_escapes_as_another_error() -> None:
    rng = random.Random(11)
    doc = bodies()[0]
    decoded = 0
    for mutated in _mutations(doc, rng):
        try:
            decode(json.dumps(mutated))
            decoded += 1
        except OtlpError:
            pass
    assert decoded > 0  # some mutations (an attribute value, a name) are still valid exports
