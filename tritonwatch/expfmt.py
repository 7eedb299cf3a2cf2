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


# A sample value as Prometheus (Go's strconv.ParseFloat) reads it: Python's float() also takes
# "1_000" and surrounding spaces, which the format does not.
_VALUE = re.compile(
    r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])"
)
_VALUES = re.compile(rf"(?:{_VALUE.pattern})(?:\n(?:{_VALUE.pattern}))*")


def parse_value(text: str) -> float:
    if _VALUE.fullmatch(text) is None:
        raise ValueError(text)
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


def _decode(payload: bytes | str) -> str:
    if isinstance(payload, str):
        return payload
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"payload is not UTF-8 text (byte {exc.start})") from None


# What a sample line's head (everything before the value) means, once validated:
# (sample name, labels, kept?). Triton's label sets rarely change between scrapes, so a scraper keeps
# these across payloads and most lines cost one dict lookup and one float().
_Head = tuple[str, LabelSet, bool]


class Parser:
    """A parser that remembers validated line heads across payloads (one per scrape target).

    The cache holds at most ``max_cache`` heads (by default 4x the largest payload's line count).
    """

    def __init__(self, keep: Iterable[str] | None = None, max_cache: int = 0, exact: bool = False) -> None:
        self.wanted = None if keep is None else frozenset(keep)
        # exact: ``keep`` names samples, not families (a summary's quantiles without its _sum/_count)
        self.exact = exact
        self.max_cache = max_cache
        self._heads: dict[str, _Head] = {}
        # The previous payload's line heads and where its kept values sit: when a payload has the
        # same heads (same series in the same order, the usual case), values are read in bulk.
        self._layout_heads: list[str] | None = None
        self._kept_idx: list[int] = []
        self._other_idx: list[int] = []  # sample lines outside the kept families (values still checked)
        # Comment and blank lines, whole: a head alone does not tell "# TYPE x counter" from
        # "# TYPE x nonsense", nor a blank line from " 0".
        self._fixed_idx: list[int] = []
        self._fixed_lines: list[str] = []
        self._layout: list[tuple[str, tuple[LabelSet, ...], int, int]] = []

    def _slow_head(self, line: str, lineno: int, types: dict[str, str]) -> tuple[_Head, str, bool]:
        """Validate a whole sample line; returns its head meaning, its value text and whether the
        head is cacheable (a line with a timestamp has the value inside what would be the key)."""
        m = _SAMPLE.match(line)
        if m is None:
            raise ExpositionError(f"line {lineno}: not a sample: {line[:80]!r}")
        name = m.group(1)
        labels = _labels(m.group(2), lineno) if m.group(2) else ()
        if _VALUE.fullmatch(m.group(3)) is None:
            raise ExpositionError(f"line {lineno}: bad value {m.group(3)[:40]!r}")
        wanted = self.wanted
        kept = wanted is None or name in wanted or (not self.exact and family_of(name, types) in wanted)
        return (name, labels, kept), m.group(3), m.group(4) is None

    def parse(self, payload: bytes | str) -> Samples:
        lines = _decode(payload).split("\n")
        parts = [line.rpartition(" ") for line in lines]
        heads = [p[0] for p in parts]
        if heads == self._layout_heads and [lines[i] for i in self._fixed_idx] == self._fixed_lines:
            out = self._same_layout(parts)
            if out is not None:
                return out
        return self._full(lines, parts, heads)

    def _same_layout(self, parts: list[tuple[str, str, str]]) -> Samples | None:
        """Every line head is as in the previous payload: only the values need reading."""
        if self._other_idx and _VALUES.fullmatch("\n".join([parts[i][2] for i in self._other_idx])) is None:
            return None  # a value outside the kept families is not a number: the full path says where
        if not self._kept_idx:
            return {}
        values = [parts[i][2] for i in self._kept_idx]
        if "_" in "".join(values):
            return None  # let the full path report the line
        try:
            floats = list(map(float, values))
        except ValueError:
            return None
        return {
            name: dict(zip(labelsets, floats[a:b], strict=True)) for name, labelsets, a, b in self._layout
        }

    def _full(self, lines: list[str], parts: list[tuple[str, str, str]], line_heads: list[str]) -> Samples:
        heads = self._heads
        types: dict[str, str] = {}
        out: Samples = {}
        kept: dict[str, list[tuple[int, LabelSet]]] = {}
        other: list[int] = []
        layout_ok = True
        for index, line in enumerate(lines):
            lineno = index + 1
            if not line:
                continue
            if line[0] == "#":
                if line.startswith("# TYPE"):
                    meta = _META.match(line)
                    if meta is None:
                        raise ExpositionError(f"line {lineno}: malformed TYPE line")
                    kind = (meta.group(3) or "").strip()
                    if kind not in _TYPES:
                        raise ExpositionError(f"line {lineno}: unknown metric type {kind!r}")
                    types[meta.group(2)] = kind
                continue
            head_text, _, value_text = parts[index]
            head = heads.get(head_text)
            if head is None:
                if line.isspace():
                    continue
                head, value_text, cacheable = self._slow_head(line, lineno, types)
                if cacheable and value_text == line[len(head_text) + 1 :]:
                    heads[head_text] = head
                else:
                    layout_ok = False
            if not head[2]:
                if _VALUE.fullmatch(value_text) is None:
                    raise ExpositionError(f"line {lineno}: bad value {value_text[:40]!r}")
                other.append(index)
                continue
            try:
                if "_" in value_text:  # Python's float() takes 1_000; the format does not
                    raise ValueError(value_text)
                value = float(value_text)
            except ValueError:
                try:
                    value = parse_value(value_text)
                except ValueError:
                    raise ExpositionError(f"line {lineno}: bad value {value_text[:40]!r}") from None
            series = out.get(head[0])
            if series is None:
                series = out[head[0]] = {}
                kept[head[0]] = []
            series[head[1]] = value
            kept[head[0]].append((index, head[1]))
        self._remember_layout(line_heads if layout_ok else None, kept, other, lines)
        limit = self.max_cache or 4 * len(lines)
        if len(heads) > limit:
            heads.clear()  # label churn: start afresh rather than grow without bound
        return out

    def _remember_layout(
        self,
        line_heads: list[str] | None,
        kept: dict[str, list[tuple[int, LabelSet]]],
        other: list[int],
        lines: list[str],
    ) -> None:
        self._layout_heads = line_heads
        self._other_idx = other if line_heads is not None else []
        self._fixed_idx = [i for i, h in enumerate(line_heads or ()) if not h or h[0] == "#"]
        self._fixed_lines = [lines[i] for i in self._fixed_idx]
        self._kept_idx = []
        self._layout = []
        if line_heads is None:
            return
        for name, entries in kept.items():
            start = len(self._kept_idx)
            self._kept_idx.extend(i for i, _ in entries)
            self._layout.append((name, tuple(ls for _, ls in entries), start, len(self._kept_idx)))


def parse(payload: bytes | str, keep: Iterable[str] | None = None) -> Samples:
    """Parse exposition text; decode only families in ``keep`` (all when None)."""
    return Parser(keep).parse(payload)
