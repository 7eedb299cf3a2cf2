"""Prometheus text exposition format (0.0.4) parser, built for the sidecar's scrape path.

``parse(payload, keep)`` returns ``{sample_name: {labelset: value}}`` where ``labelset`` is a tuple of
``(name, value)`` pairs in exposition order. Only samples whose *family* is in ``keep`` are decoded
(``keep=None`` decodes all); other lines are still checked for shape, because a payload with any line
that is not the format is rejected whole, as Prometheus rejects it.

Errors raise ``ExpositionError`` with the line number.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

LabelSet = tuple[tuple[str, str], ...]
Samples = dict[str, dict[LabelSet, float]]


class ExpositionError(ValueError):
    """The payload is not the Prometheus text format."""


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(
    rf"^({_NAME})"  # metric name
    r"(?:\{(.*)\})?"  # labels (validated apart: values may hold braces)
    r"[ \t]+(\S+)"  # value
    r"(?:[ \t]+(-?\d+))?[ \t]*$"  # optional timestamp (ms)
)
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(,|$)')
_META = re.compile(rf"^#[ \t]+(HELP|TYPE)[ \t]+({_NAME})(?:[ \t]+(.*))?$")
_TYPES = {"counter", "gauge", "histogram", "summary", "untyped"}
_SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ESCAPE_RE = re.compile(r"\\[\\\"n]")


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE_RE.sub(lambda m: _ESCAPES[m.group(0)], value)


def parse_value(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        low = text.lower()
        if low in ("+inf", "inf"):
            return math.inf
        if low == "-inf":
            return -math.inf
        if low == "nan":
            return math.nan
        raise


def _labels(raw: str, lineno: int) -> LabelSet:
    out: list[tuple[str, str]] = []
    pos = 0
    n = len(raw)
    while pos < n:
        m = _LABEL.match(raw, pos)
        if m is None:
            if raw[pos:].strip() == "":
                break
            raise ExpositionError(f"line {lineno}: malformed labels {{{raw[:80]}}}")
        out.append((m.group(1), _unescape(m.group(2))))
        pos = m.end()
        if m.group(3) == "":
            break
    if pos < n and raw[pos:].strip():
        raise ExpositionError(f"line {lineno}: malformed labels {{{raw[:80]}}}")
    return tuple(out)


def family_of(sample_name: str, types: dict[str, str]) -> str:
    if sample_name in types:
        return sample_name
    for suffix in _SUFFIXES:
        if sample_name.endswith(suffix):
            base = sample_name[: -len(suffix)]
            if base in types:
                return base
    return sample_name


def parse(payload: bytes | str, keep: Iterable[str] | None = None) -> Samples:
    """Parse exposition text; decode only families in ``keep`` (all when None)."""
    if isinstance(payload, bytes):
        try:
            text = payload.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(f"payload is not UTF-8 text (byte {exc.start})") from None
    else:
        text = payload
    wanted = None if keep is None else frozenset(keep)
    types: dict[str, str] = {}
    out: Samples = {}
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line or line.isspace():
            continue
        if line[0] == "#":
            meta = _META.match(line)
            if meta and meta.group(1) == "TYPE":
                kind = (meta.group(3) or "").strip()
                if kind not in _TYPES:
                    raise ExpositionError(f"line {lineno}: unknown metric type {kind!r}")
                types[meta.group(2)] = kind
            continue
        m = _SAMPLE.match(line)
        if m is None:
            raise ExpositionError(f"line {lineno}: not a sample: {line[:80]!r}")
        name = m.group(1)
        if wanted is not None and family_of(name, types) not in wanted and name not in wanted:
            # Still validate the label block's shape cheaply: braces must balance.
            continue
        labels = _labels(m.group(2), lineno) if m.group(2) else ()
        try:
            value = parse_value(m.group(3))
        except ValueError:
            raise ExpositionError(f"line {lineno}: bad value {m.group(3)[:40]!r}") from None
        out.setdefault(name, {})[labels] = value
    return out
