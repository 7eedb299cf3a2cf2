"""Counter selectors from the SLO file (``availability.from``): a metric name and label matchers only.

A selector is text a user wrote that ends up inside PromQL, so it is parsed by a strict grammar, not
checked with a blacklist: ``name`` or ``name{label op "value", ...}`` with ``op`` one of ``=``,
``!=``, ``=~``, ``!~``, values in double quotes whose only escapes are ``\\"`` and ``\\\\``. Anything
else (a function call, an operator, a second expression, a comment, a newline, a range, an offset) is
refused with one line naming the field. What the rules get is the selector re-rendered from its parsed
parts, never the text as written.

    >>> parse_selector('haproxy_backend_http_responses_total{proxy="flaky",code="5xx"}', "f").promql()
    'haproxy_backend_http_responses_total{proxy="flaky",code="5xx"}'
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from tritonwatch.errors import UsageError
from tritonwatch.validators import re2_regex

MAX_LENGTH = 1024
OPS = ("=", "!=", "=~", "!~")
_METRIC = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_OP = re.compile(r"=~|!~|!=|=")
_SPACE = re.compile(r"[ \t]*")


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str  # unescaped

    def promql(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.label}{self.op}"{escaped}"'

    def matches(self, value: str) -> bool:
        """As Prometheus matches: regexes are anchored; an absent label reads as ""."""
        if self.op == "=":
            return value == self.value
        if self.op == "!=":
            return value != self.value
        hit = re.fullmatch(self.value, value) is not None
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True)
class Selector:
    metric: str
    matchers: tuple[Matcher, ...] = ()

    def promql(self) -> str:
        if not self.matchers:
            return self.metric
        return f"{self.metric}{{{','.join(m.promql() for m in self.matchers)}}}"

    def matches(self, metric: str, labels: Mapping[str, str]) -> bool:
        return metric == self.metric and all(m.matches(labels.get(m.label, "")) for m in self.matchers)


def parse_selector(text: object, where: str, what: str = "counter") -> Selector:
    """Parse ``text`` strictly; every problem is a ``UsageError`` line that starts with ``where``
    (``what``: the kind of series the field selects, as its messages name it)."""
    if not isinstance(text, str):
        raise UsageError(f"{where}: must be a {what} selector string (got {type(text).__name__})")
    if len(text) > MAX_LENGTH:
        raise UsageError(f"{where}: longer than {MAX_LENGTH} characters")
    bad = next((c for c in text if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise UsageError(f"{where}: control character {bad!r} in selector (expected one line)")
    return _Reader(text, where, what).selector()


class _Reader:
    def __init__(self, text: str, where: str, what: str = "counter") -> None:
        self.text = text
        self.where = where
        self.what = what
        self.pos = 0

    def fail(self, expected: str) -> UsageError:
        rest = self.text[self.pos :]
        got = repr(rest[:20]) if rest else "the end"
        return UsageError(
            f"{self.where}: not a {self.what} selector (a metric name and label matchers only, "
            f'e.g. requests_total{{code="5xx"}}): expected {expected} at column {self.pos + 1}, got {got}'
        )

    def skip(self) -> None:
        m = _SPACE.match(self.text, self.pos)
        assert m is not None
        self.pos = m.end()

    def take(self, pattern: re.Pattern[str], expected: str) -> str:
        self.skip()
        m = pattern.match(self.text, self.pos)
        if not m:
            raise self.fail(expected)
        self.pos = m.end()
        return m.group(0)

    def peek(self, char: str) -> bool:
        self.skip()
        return self.text.startswith(char, self.pos)

    def selector(self) -> Selector:
        metric = self.take(_METRIC, "a metric name")
        matchers: list[Matcher] = []
        if self.peek("{"):
            self.pos += 1
            while not self.peek("}"):
                matchers.append(self.matcher())
                if self.peek(","):
                    self.pos += 1
                elif not self.peek("}"):
                    raise self.fail("',' or '}'")
            self.pos += 1
        self.skip()
        if self.pos != len(self.text):
            raise self.fail("the end of the selector")
        seen: set[tuple[str, str]] = set()
        for m in matchers:
            if (m.label, m.op) in seen:
                raise UsageError(f"{self.where}: label {m.label!r} matched twice with {m.op}")
            seen.add((m.label, m.op))
        return Selector(metric, tuple(matchers))

    def matcher(self) -> Matcher:
        start = self.pos
        label = self.take(_LABEL, "a label name")
        if label == "__name__" or label.startswith("__"):
            self.pos = start
            raise self.fail("a label name not starting with __ (the metric name goes before '{')")
        op = self.take(_OP, "one of = != =~ !~")
        value = self.string()
        if op in ("=~", "!~"):
            self.check_regex(label, value)
        return Matcher(label, op, value)

    def string(self) -> str:
        self.skip()
        if not self.text.startswith('"', self.pos):
            raise self.fail("a double-quoted value")
        out: list[str] = []
        i = self.pos + 1
        while i < len(self.text):
            c = self.text[i]
            if c == '"':
                self.pos = i + 1
                return "".join(out)
            if c == "\\":
                nxt = self.text[i + 1 : i + 2]
                if nxt not in ('"', "\\"):
                    self.pos = i
                    raise self.fail('an escape \\" or \\\\ only')
                out.append(nxt)
                i += 2
                continue
            out.append(c)
            i += 1
        raise self.fail('a closing "')

    def check_regex(self, label: str, value: str) -> None:
        # The SLO file's own regex check: one list of what Python takes and RE2 (Prometheus) does not.
        re2_regex(value, f"{self.where}: label {label}")


# Values tried for a label a regex or negative matcher constrains, after the literals the selectors
# themselves spell: enough for the usual status matchers ("5..", "5xx|4xx", "5", "2..").
_TRY = ("5xx", "500", "503", "5", "2xx", "200", "2", "other", "tritonwatch", "")
_SUCCESS = frozenset({"2xx", "200", "2"})


def _literals(value: str) -> list[str]:
    """Strings a matcher's value suggests: "5.." -> "500", "5xx|4xx" -> "5xx", "4xx"."""
    out = []
    for part in value.split("|"):
        out += [re.sub(r"\\.|[.]", "0", part), re.sub(r"[\\^$.*+?()\[\]{}]", "", part)]
    return [*out, value]


def satisfying_labels(
    sel: Selector, base: Mapping[str, str] | None = None, unlike: Selector | None = None
) -> dict[str, str] | None:
    """Labels of a series ``sel`` selects (starting from ``base``) that ``unlike`` does not, or None
    when none of the values tried will do. Used to build promtool test series for a selector."""
    labels = dict(base or {})
    names = dict.fromkeys(m.label for m in (*sel.matchers, *(unlike.matchers if unlike else ())))
    both = (*sel.matchers, *(unlike.matchers if unlike else ()))
    choices: dict[str, list[str]] = {}
    for name in names:
        own = [m for m in sel.matchers if m.label == name]
        start = [labels[name]] if name in labels else []
        tried = [v for m in both if m.label == name for v in _literals(m.value)]
        fits = [v for v in dict.fromkeys([*start, *tried, *_TRY]) if all(m.matches(v) for m in own)]
        if not fits:
            return None
        choices[name] = fits
        labels[name] = fits[0]
    if unlike is not None and unlike.matches(sel.metric, labels):
        # unlike selects these labels only while every one of its matchers holds: break one.
        for m in unlike.matchers:
            # a status that reads as a success first, so the test series look like real ones
            ordered = sorted(choices[m.label], key=lambda v: v not in _SUCCESS)
            other = next((v for v in ordered if not m.matches(v)), None)
            if other is not None:
                labels[m.label] = other
                break
        else:
            return None
    return {k: v for k, v in labels.items() if v != ""}  # an empty label is an absent one
