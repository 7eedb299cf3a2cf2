"""Prometheus text exposition format (0.0.4) parser, built for the sidecar's scrape path.

``parse(payload, keep)`` returns ``{sample_name: {labelset: value}}`` where ``labelset`` is a tuple of
``(name, value)`` pairs in exposition order. Only samples whose *family* is in ``keep`` are decoded
(``keep=None`` decodes all); other lines are still checked for shape, because a payload with any line
that is not the format is rejected whole, as Prometheus rejects it. The one exception is a sample
line whose label text is over ``MAX_LABELS_TEXT``: it is the format, but one hostile or buggy label
value must not blank every other series, so that line is skipped and listed in ``Parsed.skipped``.

Errors raise ``ExpositionError`` with the line number.
"""

from __future__ import annotations

import re
from collections.abc import Callable, ItemsView, Iterable, Iterator, Mapping, Sequence, ValuesView
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, TypeVar, cast, overload

LabelSet = tuple[tuple[str, str], ...]
# What a parse gives, read-only: each sample name's values by label set (a dict, or a ``SeriesView``).
Samples = Mapping[str, Mapping[LabelSet, float]]


class ExpositionError(ValueError):
    """The payload is not the Prometheus text format."""

    reason = "parse"  # the scrape error counter's reason


class ExpositionLimitError(ExpositionError):
    """A line is the format, but over a budget the parser holds to (``MAX_LABELS_TEXT``): the parser
    skips that line (``Parsed.skipped``) rather than raise."""

    reason = "labels_too_long"


class DuplicateSeriesError(ExpositionError):
    """A kept sample appears twice with the same labels (Prometheus drops the second, and warns)."""

    reason = "duplicate_series"


def _text(labels: LabelSet) -> str:
    return ",".join(f'{k}="{v}"' for k, v in labels)


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(
    rf"^({_NAME})"  # metric name
    r"(?:\{(.*)\})?"  # labels (validated apart: values may hold braces)
    r"[ \t]+(\S+)"  # value
    r"(?:[ \t]+(-?\d+))?[ \t]*$"  # optional timestamp (ms)
)
# The value as "unrolled loop" runs of plain characters between escapes: ``(?:[^"\\]|\\.)*`` made the
# regex engine keep a backtracking point per character (~175 bytes each: 900 MB for a 5 MB value).
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"([^"\\]*(?:\\.[^"\\]*)*)"[ \t]*(,|$)')
# The label text (between the braces) of one sample: Triton's and DCGM's are a few hundred bytes.
# A longer one is skipped before it is decoded, whatever the payload cap allows.
MAX_LABELS_TEXT = 64 * 1024
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


def _decode(payload: bytes | bytearray | str) -> str:
    if isinstance(payload, str):
        return payload
    try:
        return payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"payload is not UTF-8 text (byte {exc.start})") from None


# What a sample line's head (everything before the value) means, once validated: (sample name,
# labels). Triton's label sets rarely change between scrapes, so a scraper keeps these across
# payloads and most lines cost one dict lookup and one float().
_Head = tuple[str, LabelSet]

# A value is the last space-separated token of its line: splitting a payload at " <token>\n" gives
# every line head and every value token in one pass in C (the fast path for an unchanged layout).
_TAIL = re.compile(r" ([^ \n]*)\n")
# Every character a value can hold (_VALUE). Tokens made only of these that float() takes are
# exactly the tokens _VALUE takes: float() alone also takes "1_000", " 1", "1\r" and non-ASCII digits.
_NOT_VALUE_CHAR = re.compile(r"[^0-9.eE+\-iInNfFtTyYaA\n]")


T = TypeVar("T")


def picker(indices: Sequence[int]) -> Callable[[Sequence[T]], tuple[T, ...]]:
    """``lambda seq: tuple(seq[i] for i in indices)``, in C (itemgetter) for any number of indices.

    The parser picks value tokens with it, the window the values it needs from the flat list.
    """
    if not indices:
        return lambda _seq: ()
    if len(indices) == 1:
        only = indices[0]
        return lambda seq: (seq[only],)
    return itemgetter(*indices)  # type: ignore[return-value]  # itemgetter is untyped in C


@dataclass(frozen=True, eq=False)
class Layout:
    """Where each kept sample of a payload sits in ``Parsed.flat``: per sample name, its label sets
    and the ``[start, end)`` slice of its values. The same object for as long as payloads keep the
    same layout (same lines but the values), so a consumer can key work it derived from it on identity.
    """

    series: tuple[tuple[str, tuple[LabelSet, ...], int, int], ...]
    # What consumers derived from the label sets alone (a family's positions by label set, the models
    # a payload names), kept with the layout: the same for every later payload that has it.
    _derived: dict[object, Any] = field(default_factory=dict, compare=False, repr=False)

    def derive(self, key: object, build: Callable[[], T]) -> T:
        """``build()``, once per layout and ``key``."""
        if key not in self._derived:
            self._derived[key] = build()
        return cast(T, self._derived[key])

    def positions(self, name: str, labelsets: tuple[LabelSet, ...]) -> dict[LabelSet, int]:
        return self.derive(("positions", name), lambda: {ls: k for k, ls in enumerate(labelsets)})


def per_layout(samples: Samples, read: Callable[[Samples], T]) -> T:
    """``read(samples)`` for a reading of label sets only: computed once per parser layout."""
    layout = getattr(samples, "layout", None)
    return read(samples) if layout is None else layout.derive(read, lambda: read(samples))


class _Items(ItemsView[LabelSet, float]):
    _mapping: SeriesView

    def __iter__(self) -> Iterator[tuple[LabelSet, float]]:
        view = self._mapping
        return zip(view.labelsets, view.values_list, strict=True)


class _Values(ValuesView[float]):
    _mapping: SeriesView

    def __iter__(self) -> Iterator[float]:
        return iter(self._mapping.values_list)


class SeriesView(Mapping[LabelSet, float]):
    """One sample name's values in a payload of a remembered layout, as a read-only mapping.

    An unchanged layout has the same label sets in the same order every scrape: building a dict of
    them again would hash every label set for consumers that mostly read the flat values (the
    window) or a few names. The label sets are the layout's, the values a slice of the payload's,
    and a lookup by label set uses positions the layout keeps. It equals the dict a fresh parse gives.
    """

    __slots__ = ("labelsets", "values_list", "_layout", "_name")

    def __init__(
        self, layout: Layout, name: str, labelsets: tuple[LabelSet, ...], values: list[float]
    ) -> None:
        self._layout = layout
        self._name = name
        self.labelsets = labelsets
        self.values_list = values

    def __getitem__(self, key: LabelSet) -> float:
        return self.values_list[self._layout.positions(self._name, self.labelsets)[key]]

    @overload
    def get(self, key: LabelSet, /) -> float | None: ...
    @overload
    def get(self, key: LabelSet, /, default: float | Any) -> float | Any: ...
    def get(self, key: LabelSet, default: Any = None) -> Any:
        k = self._layout.positions(self._name, self.labelsets).get(key)
        return default if k is None else self.values_list[k]

    def __contains__(self, key: object) -> bool:
        return key in self._layout.positions(self._name, self.labelsets)

    def __iter__(self) -> Iterator[LabelSet]:
        return iter(self.labelsets)

    def __len__(self) -> int:
        return len(self.labelsets)

    def items(self) -> ItemsView[LabelSet, float]:
        return _Items(self)

    def values(self) -> ValuesView[float]:
        return _Values(self)

    def __repr__(self) -> str:
        return repr(dict(self.items()))


class Parsed(dict[str, Mapping[LabelSet, float]]):
    """``Samples`` that also carry the kept values as one flat list, ``flat``, in ``layout`` order.

    ``layout`` is None when the payload has none to give (a timestamp, a series twice, no final
    newline). A consumer that remembers what it derived from a layout (``CounterWindow``) reads an
    unchanged layout's values in bulk instead of walking the dicts.
    """

    layout: Layout | None = None
    flat: Sequence[float] = ()  # not ``values``: that is dict.values()
    # Lines left out, one message each (labels over MAX_LABELS_TEXT): the scrape counts them.
    skipped: Sequence[str] = ()


class Parser:
    """A parser that remembers validated line heads across payloads (one per scrape target).

    Whatever it remembers, it accepts and returns exactly what a fresh parse of the same payload does
    (a property test holds it to that); it returns ``Parsed`` samples.

    The cache holds at most ``max_cache`` heads (by default 4x the line count of the payload being
    parsed); past that it starts afresh, so label churn cannot grow it without bound.
    """

    def __init__(self, keep: Iterable[str] | None = None, max_cache: int = 0, exact: bool = False) -> None:
        self.wanted = None if keep is None else frozenset(keep)
        # exact: ``keep`` names samples, not families (a summary's quantiles without its _sum/_count)
        self.exact = exact
        self.max_cache = max_cache
        self._heads: dict[str, _Head] = {}
        self._layout: Layout | None = None
        # The previous payload's pieces between value tokens (``_TAIL.split``): when a payload has the
        # same pieces, only the value tokens differ and they are read in bulk.
        self._layout_heads: list[str] | None = None
        # Tokens that are not sample values (the last word of a comment, the empty token of a blank
        # line) are compared whole: "# TYPE x counter" and "# TYPE x nonsense" share a head.
        self._pick_fixed: Callable[[Sequence[str]], tuple[str, ...]] = picker([])
        self._fixed: tuple[str, ...] = ()
        # Value tokens: the kept samples' first (in ``layout`` order), then the others (checked only).
        self._pick_values: Callable[[Sequence[str]], tuple[str, ...]] = picker([])
        self._kept_count = 0

    def _kept(self, name: str, types: dict[str, str]) -> bool:
        wanted = self.wanted
        return wanted is None or name in wanted or (not self.exact and family_of(name, types) in wanted)

    def _slow_head(self, line: str, lineno: int) -> tuple[_Head, str, bool]:
        """Validate a whole sample line; returns its head meaning, its value text and whether the
        head is cacheable (a line with a timestamp has the value inside what would be the key)."""
        m = _SAMPLE.match(line)
        if m is None:
            raise ExpositionError(f"line {lineno}: not a sample: {line[:80]!r}")
        raw = m.group(2)
        if raw and len(raw) > MAX_LABELS_TEXT:
            raise ExpositionLimitError(
                f"line {lineno}: labels of {len(raw)} characters, over {MAX_LABELS_TEXT}: {line[:80]!r}"
            )
        labels = _labels(raw, lineno) if raw else ()
        if _VALUE.fullmatch(m.group(3)) is None:
            raise ExpositionError(f"line {lineno}: bad value {m.group(3)[:40]!r}")
        return (m.group(1), labels), m.group(3), m.group(4) is None

    def parse(self, payload: bytes | bytearray | str) -> Parsed:
        text = _decode(payload)
        pieces = _TAIL.split(text)
        heads = pieces[0::2]
        if heads == self._layout_heads:
            out = self._same_layout(pieces[1::2])
            if out is not None:
                return out
        return self._full(text, pieces)

    def _same_layout(self, tokens: list[str]) -> Parsed | None:
        """Every line is as in the previous payload but its value token: only the values need reading.

        Returns None (the full path then decides, and says where) unless every value token is one
        a fresh parse accepts."""
        if self._pick_fixed(tokens) != self._fixed:
            return None
        values = self._pick_values(tokens)
        if _NOT_VALUE_CHAR.search("\n".join(values)) is not None:
            return None
        try:
            floats = list(map(float, values))
        except ValueError:
            return None
        del floats[self._kept_count :]
        layout = self._layout
        assert layout is not None
        out = Parsed((name, SeriesView(layout, name, ls, floats[a:b])) for name, ls, a, b in layout.series)
        out.layout, out.flat = layout, floats
        return out

    def _full(self, text: str, pieces: list[str]) -> Parsed:
        lines = text.split("\n")
        heads = self._heads
        types: dict[str, str] = {}
        kept_of: dict[str, bool] = {}  # per sample name, valid until the next TYPE line
        built: dict[str, dict[LabelSet, float]] = {}
        kept: dict[str, list[tuple[int, LabelSet, float]]] = {}
        other: list[int] = []
        skipped: list[str] = []
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
                    kept_of.clear()
                continue
            head_text, _, value_text = line.rpartition(" ")
            head = heads.get(head_text)
            if head is not None and _VALUE.fullmatch(value_text) is None:
                # A remembered head vouches for the head only: the whole line decides, as in a fresh
                # parse ("foo 1\r" is refused, "foo 1\t" is 1), whatever came before.
                head = None
            if head is None:
                if line.isspace():
                    continue
                try:
                    head, value_text, cacheable = self._slow_head(line, lineno)
                except ExpositionLimitError as exc:
                    # Not remembered as a layout: a payload without this line is a different one.
                    skipped.append(str(exc))
                    layout_ok = False
                    continue
                if cacheable and value_text == line[len(head_text) + 1 :]:
                    heads[head_text] = head
                else:
                    layout_ok = False
            name = head[0]
            is_kept = kept_of.get(name)
            if is_kept is None:
                is_kept = kept_of[name] = self._kept(name, types)
            if not is_kept:
                other.append(index)
                continue
            value = float(value_text)  # _VALUE holds: float() reads it as Go's ParseFloat does
            series = built.get(name)
            if series is None:
                series = built[name] = {}
                kept[name] = []
            if head[1] in series:  # which of the two is the value? Neither can be trusted.
                raise DuplicateSeriesError(f"line {lineno}: {name}{{{_text(head[1])[:80]}}} a second time")
            series[head[1]] = value
            kept[name].append((index, head[1], value))
        out = Parsed(built)
        out.skipped = skipped
        if layout_ok:
            self._remember_layout(pieces, kept, other, out)
        else:
            self._forget_layout()
        if self._layout_heads is not None:
            out.layout, out.flat = self._layout, [v for e in kept.values() for _i, _ls, v in e]
        limit = self.max_cache or 4 * len(lines)
        if len(heads) > limit:
            heads.clear()  # label churn: start afresh rather than grow without bound
        return out

    def _forget_layout(self) -> None:
        self._layout_heads = None
        self._layout = None

    def _remember_layout(
        self,
        pieces: list[str],
        kept: dict[str, list[tuple[int, LabelSet, float]]],
        other: list[int],
        out: Parsed,
    ) -> None:
        if sum(map(len, out.values())) != sum(map(len, kept.values())):
            self._forget_layout()  # a series twice: its flat values would not be its samples
            return
        # The line each value token ends: piece 2j is what lies between token j-1's newline and token j.
        token_of_line: dict[int, int] = {}
        line = -1
        for j, piece in enumerate(pieces[0:-1:2]):
            line += 1 + piece.count("\n")
            token_of_line[line] = j
        value_tokens: list[int] = []
        series: list[tuple[str, tuple[LabelSet, ...], int, int]] = []
        for name, entries in kept.items():
            start = len(value_tokens)
            for index, _ls, _v in entries:
                token = token_of_line.get(index)
                if token is None:  # the last line, without a newline: its value is not a token
                    self._forget_layout()
                    return
                value_tokens.append(token)
            series.append((name, tuple(ls for _, ls, _ in entries), start, len(value_tokens)))
        kept_count = len(value_tokens)
        for index in other:
            token = token_of_line.get(index)
            if token is None:
                self._forget_layout()
                return
            value_tokens.append(token)
        value_set = set(value_tokens)
        tokens = pieces[1::2]
        fixed = [j for j in range(len(tokens)) if j not in value_set]
        self._layout_heads = pieces[0::2]
        self._pick_fixed = picker(fixed)
        self._fixed = self._pick_fixed(tokens)
        self._pick_values = picker(value_tokens)
        self._kept_count = kept_count
        new = tuple(series)
        if self._layout is None or self._layout.series != new:
            self._layout = Layout(new)


def parse(payload: bytes | bytearray | str, keep: Iterable[str] | None = None) -> Parsed:
    """Parse exposition text; decode only families in ``keep`` (all when None)."""
    return Parser(keep).parse(payload)
