"""Fuzzing (hypothesis) of what the sidecar reads from the network.

* ``tritonwatch.expfmt``: on any bytes, nothing but ``ExpositionError`` escapes; on valid exposition
  text it agrees with prometheus_client's own parser (names, labels, values); a ``Parser`` reused
  across payloads (its caches) gives exactly what a fresh parse gives, errors included; any single
  line that is not the format fails the whole payload, whatever family it claims.
* ``tritonwatch.exporters.traces.otlp``: on any bytes or JSON shaped like an export, nothing but ``OtlpError`` escapes.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tritonwatch import catalog
from tritonwatch.expfmt import MAX_LABELS_TEXT, ExpositionError, Parser, SeriesView, parse
from tritonwatch.exporters.traces import otlp

DATA = Path(__file__).resolve().parent / "data"
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SUFFIXES = ("_total", "_count", "_sum", "_bucket", "_created", "_info", "_gsum", "_gcount")
metric_names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,10}", fullmatch=True).filter(
    lambda n: not n.endswith(_SUFFIXES)
)
label_names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not n.startswith("__")  # reserved for Prometheus's own use
)
label_values = st.text(st.characters(exclude_categories=("Cs",)), max_size=10)
sample_values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-(10**12), 10**12))


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def render_value(v: float | int) -> str:
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


@st.composite
def families(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(metric_names, min_size=1, max_size=4, unique=True))
    out = []
    for name in names:
        kind = draw(st.sampled_from(["counter", "gauge", "untyped", None]))
        if kind == "counter":
            name += "_total"  # prometheus_client renames counter samples not spelled so
        labelsets = draw(
            st.lists(
                st.dictionaries(label_names, label_values, max_size=3),
                min_size=1,
                max_size=4,
                unique_by=lambda d: tuple(sorted(d.items())),
            )
        )
        samples = [
            (ls, draw(sample_values), draw(st.one_of(st.none(), st.integers(0, 2**40)))) for ls in labelsets
        ]
        help_text = draw(st.one_of(st.none(), label_values))
        out.append({"name": name, "type": kind, "help": help_text, "samples": samples})
    return out


def render(fams: list[dict[str, Any]], trailing_comma: bool = False) -> str:
    lines = []
    for f in fams:
        if f["help"] is not None:
            lines.append(
                f"# HELP {f['name']} {f['help'].replace(chr(92), chr(92) * 2).replace(chr(10), chr(92) + 'n')}"
            )
        if f["type"]:
            lines.append(f"# TYPE {f['name']} {f['type']}")
        for labels, value, ts in f["samples"]:
            body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
            if body and trailing_comma:
                body += ","
            head = f"{f['name']}{{{body}}}" if body else f["name"]
            lines.append(f"{head} {render_value(value)}" + (f" {ts}" if ts is not None else ""))
    return "\n".join(lines) + "\n"


def flat_ours(samples: dict[str, dict[Any, float]]) -> dict[tuple[str, frozenset[tuple[str, str]]], str]:
    return {(n, frozenset(ls)): repr(v) for n, series in samples.items() for ls, v in series.items()}


def flat_reference(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], str]:
    return {
        (s.name, frozenset(s.labels.items())): repr(float(s.value))
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


@pytest.mark.slow  # many examples, over 4 s
@FUZZ
@given(families(), st.booleans())
def test_agrees_with_prometheus_client_on_valid_text(
    fams: list[dict[str, Any]], trailing_comma: bool
) -> None:
    text = render(fams, trailing_comma)
    ours = flat_ours(parse(text))
    assert ours == flat_reference(text)
    assert len(ours) == sum(len(f["samples"]) for f in fams)


@FUZZ
@given(st.binary(max_size=400))
def test_any_bytes_only_exposition_error(payload: bytes) -> None:
    for keep in (None, catalog.TRITON_FAMILIES):
        try:
            parse(payload, keep)
        except ExpositionError:
            pass


_JUNK = st.one_of(
    st.text(max_size=30),
    st.sampled_from(
        ["foo bar", 'foo{a="b"} one', "foo 1 2 3", "foo{a=b} 1", "foo{ 1", "<html>", "foo 1_000", "\x00"]
    ),
)


# Value tokens a scrape may carry where a number was: numbers, and what float() takes but the
# format does not (whitespace, "\r", "_", non-ASCII digits) or neither takes.
value_tokens = st.one_of(
    sample_values.map(render_value),
    st.text(st.sampled_from(list("0123456789.eE+-_ \t\r\x0b\x0c\x1cinfatyINFATY\u0661\u00b2")), max_size=6),
)
_SUFFIX = st.sampled_from(["\r", " ", "\t", " 1", "_", "\x1c", "}"])


@st.composite
def payload_sequences(draw: st.DrawFn) -> tuple[list[str], list[str] | None, bool]:
    fams = draw(families())
    base = render(fams).splitlines()
    payloads = []
    for _ in range(draw(st.integers(1, 5))):
        lines = list(base)
        op = draw(st.sampled_from(["same", "values", "tokens", "suffix", "junk", "drop", "long"]))
        if op == "values":  # same series, new values: the parser's fast path
            lines = [
                ln if ln.startswith("#") else ln.rpartition(" ")[0] + " " + render_value(draw(sample_values))
                for ln in lines
            ]
        elif op == "tokens":  # same heads, any value token (the fast path must refuse what is refused)
            lines = [
                ln if ln.startswith("#") else ln.rpartition(" ")[0] + " " + draw(value_tokens) for ln in lines
            ]
        elif op == "suffix" and lines:  # e.g. "foo 1\r": a fresh parse refuses it
            at = draw(st.integers(0, len(lines) - 1))
            lines[at] += draw(_SUFFIX)
        elif op == "junk":
            lines.insert(draw(st.integers(0, len(lines))), draw(_JUNK))
        elif op == "drop" and lines:
            del lines[draw(st.integers(0, len(lines) - 1))]
        elif op == "long":  # labels over MAX_LABELS_TEXT: that line skipped, the rest read
            name = draw(st.sampled_from([f["name"] for f in fams]))
            lines.insert(draw(st.integers(0, len(lines))), f'{name}{{a="{"x" * (MAX_LABELS_TEXT + 1)}"}} 1')
        payloads.append("\n".join(lines) + "\n")
    names = [f["name"] for f in fams]
    keep = draw(st.one_of(st.none(), st.lists(st.sampled_from(names), unique=True)))
    return payloads, keep, draw(st.booleans())


def outcome(fn: Any) -> Any:
    try:
        parsed = fn()
    except ExpositionError:
        return ("error", None)
    return ("ok", flat_ours(parsed), len(parsed.skipped))


@pytest.mark.slow  # many examples, over 4 s
@FUZZ
@given(payload_sequences())
def test_reused_parser_gives_what_a_fresh_parse_gives(case: tuple[list[str], list[str] | None, bool]) -> None:
    payloads, keep, exact = case
    reused = Parser(keep, exact=exact)
    for text in payloads:
        fresh = outcome(lambda: Parser(keep, exact=exact).parse(text))  # noqa: B023
        try:
            parsed = reused.parse(text)
        except ExpositionError:
            assert fresh == ("error", None)
            continue
        assert ("ok", flat_ours(parsed), len(parsed.skipped)) == fresh
        if parsed.layout is not None:
            # The flat values handed to the window are the samples, in layout order.
            flat = {
                (name, frozenset(ls)): repr(parsed.flat[a + k])
                for name, labelsets, a, b in parsed.layout.series
                for k, ls in enumerate(labelsets)
            }
            assert flat == fresh[1]
            assert len(parsed.flat) == sum(b - a for _n, _l, a, b in parsed.layout.series)


@pytest.mark.parametrize("bad", ["foo 1\r", "foo 1_0", "foo \u0661\r", "foo 1\x1c", "foo 1\x0b", "foo 1}"])
def test_reused_parser_refuses_a_value_a_fresh_parse_refuses(bad: str) -> None:
    # "foo 1\r" was refused by a fresh parse but taken as 1.0 after one good scrape (issue 13, case 6):
    # float() strips whitespace that the format does not allow.
    with pytest.raises(ExpositionError):
        Parser().parse(f"# TYPE foo gauge\n{bad}\n")
    reused = Parser()
    assert reused.parse("# TYPE foo gauge\nfoo 1\n") == {"foo": {(): 1.0}}
    assert reused.parse("# TYPE foo gauge\nfoo 2\n") == {"foo": {(): 2.0}}  # the fast path
    with pytest.raises(ExpositionError):
        reused.parse(f"# TYPE foo gauge\n{bad}\n")
    assert reused.parse("# TYPE foo gauge\nfoo 3\n") == {"foo": {(): 3.0}}


def test_reused_parser_takes_a_value_a_fresh_parse_takes() -> None:
    # Found by hypothesis: trailing blanks after a value are the format ("foo 1\t" is 1); a remembered
    # head must not make the line stricter than a fresh parse either.
    reused = Parser()
    reused.parse("# TYPE foo gauge\nfoo 1\n")
    for text in ("# TYPE foo gauge\nfoo 0.0\t\n", "# TYPE foo gauge\nfoo 2 \t \n"):
        assert reused.parse(text) == Parser().parse(text) == {"foo": {(): float(text.split()[5])}}


def test_an_unchanged_layout_reads_as_the_dicts_a_fresh_parse_gives() -> None:
    # The second payload of a layout comes back as SeriesView mappings, not dicts: every way the
    # sidecar reads a family (lookup, get, in, len, iteration, items, values) gives the dict's answer.
    first = RECORDED
    second = "\n".join(
        ln if ln.startswith("#") or not ln else f"{ln.rpartition(' ')[0]} {k}.5"
        for k, ln in enumerate(first.split("\n"))
    )
    reused = Parser()
    reused.parse(first)
    parsed = reused.parse(second)
    fresh = Parser().parse(second)
    assert parsed.layout is not None and parsed == fresh
    views = [s for s in parsed.values() if isinstance(s, SeriesView)]
    assert len(views) == len(parsed) > 10
    for name, view in parsed.items():
        want = fresh[name]
        assert not isinstance(want, SeriesView)
        assert len(view) == len(want) and list(view) == list(want)
        assert list(view.items()) == list(want.items()) and list(view.values()) == list(want.values())
        for labels, value in want.items():
            assert view[labels] == view.get(labels) == value and labels in view
        absent = (("model", "no such model"),)
        assert absent not in view and view.get(absent) is None and view.get(absent, -1.0) == -1.0
        with pytest.raises(KeyError):
            view[absent]
    assert repr(parsed[next(iter(parsed))]) == repr(fresh[next(iter(fresh))])


RECORDED = (DATA / "triton_metrics_load_1.txt").read_text()
NOT_THE_FORMAT = [
    "this line is not the exposition format",
    "foo bar",
    'foo{a="b"} one',
    'nv_cpu_utilization{x="1",} 1e',
    "foo{a=b} 1",
    'foo{a="b" 1',
    "foo 1 2 3",
    "foo 1 abc",
    "{} 1",
    "# TYPE foo nonsense",
    'foo{a="b"}} 1',
    "foo 1_000",  # Python's float() takes it, Prometheus (Go's ParseFloat) does not
]
# Known gaps in tritonwatch/expfmt.py would be listed here as strict xfails (none at present).
KNOWN_PARSER_GAPS: dict[tuple[str, str], str] = {}


def _not_the_format_params() -> list[Any]:
    out = []
    for keep_id, keep in (("all", None), ("triton-families", catalog.TRITON_FAMILIES)):
        for line in NOT_THE_FORMAT:
            gap = KNOWN_PARSER_GAPS.get((keep_id, line))
            marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
            out.append(pytest.param(line, keep, id=f"{keep_id}-{line}", marks=marks))
    return out


@pytest.mark.parametrize(("line", "keep"), _not_the_format_params())
def test_one_line_not_the_format_fails_the_whole_payload(line: str, keep: frozenset[str] | None) -> None:
    lines = RECORDED.splitlines()
    lines.insert(len(lines) // 2, line)
    with pytest.raises(ExpositionError):
        parse("\n".join(lines) + "\n", keep)
    # also when the parser has seen the good payload before (its caches)
    p = Parser(keep)
    p.parse(RECORDED)
    with pytest.raises(ExpositionError):
        p.parse("\n".join(lines) + "\n")


# --- OTLP ---------------------------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=25)
)
json_values = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=12,
)
hexes = st.text("0123456789abcdefABCDEF", max_size=40)
nanos = st.one_of(
    st.integers(-5, 2**66),
    st.text(max_size=22),
    st.from_regex(r"[0-9]{1,22}", fullmatch=True),
    st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=4),  # '²', '١٢': not ASCII digits
    json_values,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(strategy, json_values)


spans = st.fixed_dictionaries(
    {},
    optional={
        "traceId": maybe(hexes),
        "spanId": maybe(hexes),
        "parentSpanId": maybe(hexes),
        "name": maybe(st.text(max_size=12)),
        "startTimeUnixNano": nanos,
        "endTimeUnixNano": nanos,
        "attributes": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {"key": maybe(st.text(max_size=10))},
                    optional={
                        "value": maybe(
                            st.dictionaries(
                                st.sampled_from(
                                    ["stringValue", "intValue", "doubleValue", "boolValue", "arrayValue"]
                                ),
                                json_values,
                                max_size=2,
                            )
                        )
                    },
                ),
                max_size=3,
            )
        ),
        "events": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {}, optional={"name": maybe(st.text(max_size=10)), "timeUnixNano": nanos}
                ),
                max_size=3,
            )
        ),
    },
)
exports = st.fixed_dictionaries(
    {},
    optional={
        "resourceSpans": maybe(
            st.lists(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "scopeSpans": maybe(
                            st.lists(
                                st.fixed_dictionaries(
                                    {}, optional={"spans": maybe(st.lists(spans, max_size=3))}
                                ),
                                max_size=2,
                            )
                        ),
                        "instrumentationLibrarySpans": maybe(
                            st.lists(
                                st.fixed_dictionaries({"spans": st.lists(spans, max_size=2)}), max_size=1
                            )
                        ),
                    },
                ),
                max_size=2,
            )
        )
    },
)


@FUZZ
@given(exports)
def test_otlp_export_shaped_json_only_otlp_error(doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    try:
        decoded = otlp.decode(body)
    except otlp.OtlpError:
        return
    for span in decoded:
        assert span.trace_id and span.span_id
        assert 0 <= span.start_ns < 2**64 and 0 <= span.end_ns < 2**64


@FUZZ
@given(st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode())))
def test_otlp_any_body_only_otlp_error(body: bytes) -> None:
    try:
        otlp.decode(body)
    except otlp.OtlpError:
        pass


def _real_protobuf() -> bytes:
    from test_traces_protobuf import PROTO_BODY

    return PROTO_BODY


@FUZZ
@given(st.binary(max_size=400))
def test_otlp_any_protobuf_body_only_otlp_error(body: bytes) -> None:
    try:
        spans = otlp.decode_protobuf(body)
    except otlp.OtlpError:
        return
    for span in spans:
        assert span.trace_id and span.span_id


@FUZZ
@given(st.data())
def test_otlp_damaged_real_protobuf_only_otlp_error(data: st.DataObject) -> None:
    """A real Triton export re-encoded as protobuf, with bytes overwritten, cut or inserted."""
    body = bytearray(_real_protobuf())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(body) - 1))
        how = data.draw(st.sampled_from(["set", "cut", "insert"]))
        byte = data.draw(st.integers(0, 255))
        if how == "set":
            body[at] = byte
        elif how == "cut":
            del body[at:]
            if not body:
                break
        else:
            body.insert(at, byte)
    try:
        otlp.decode_protobuf(bytes(body))
    except otlp.OtlpError:
        pass


@pytest.mark.parametrize("stamp", ["²", "١٢"])
def test_otlp_non_ascii_digits_in_a_timestamp_are_an_otlp_error(stamp: str) -> None:
    span = {"traceId": "ab", "spanId": "cd", "startTimeUnixNano": stamp}
    with pytest.raises(otlp.OtlpError):
        otlp.decode(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}))


def test_otlp_deep_nesting_is_an_otlp_error() -> None:
    with pytest.raises(otlp.OtlpError):
        otlp.decode(b"[" * 100_000 + b"]" * 100_000)


def test_reused_parser_rejects_a_line_whose_head_matches_a_blank_or_comment_line() -> None:
    # Found by hypothesis: the remembered layout compared line heads only, so " 0.0" (head "")
    # passed as the blank line of the previous payload, and "# TYPE x nonsense" as "# TYPE x counter".
    reused = Parser()
    reused.parse("# TYPE x counter\n\nx 0.0\n")
    for bad in ("# TYPE x counter\n 0.0\nx 0.0\n", "# TYPE x nonsense\n\nx 0.0\n"):
        with pytest.raises(ExpositionError):
            reused.parse(bad)
