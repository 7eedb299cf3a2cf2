"""Checks for values from user files that are written into PromQL, YAML or Go templates.

Each takes the value and ``where`` (the field, as the error should name it) and raises a one-line
``UsageError`` naming that field, or returns the value unchanged. The SLO file uses them; any other
spec field that ends up in a rule (a selector, a step name) should call the same ones.
"""

from __future__ import annotations

import re

from tritonwatch.errors import UsageError

# Longer than any real model, job or SLO name; a label value this long is a mistake or an attack.
MAX_LABEL_VALUE = 1024

# Control characters (newline included) and the Unicode line breaks YAML and some editors honour.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Python-only regular-expression constructs Prometheus (RE2) refuses: lookarounds, backreferences,
# conditionals, atomic groups, comments, \Z (RE2 spells it \z, which Python refuses in turn).
_NOT_RE2 = (
    (re.compile(r"\(\?[=!]|\(\?<[=!]"), "lookaround (?=, (?!, (?<=, (?<!"),
    (re.compile(r"\(\?P=|\\[1-9]"), "backreference"),
    (re.compile(r"\(\?\("), "conditional (?(...)"),
    (re.compile(r"\(\?>"), "atomic group (?>"),
    (re.compile(r"\(\?#"), "comment (?#"),
    (re.compile(r"\\[Zz]"), r"\Z or \z (not the same in Python and RE2)"),
)
_POSSESSIVE = re.compile(r"(?:[*+?]|\})\+")
_ESCAPED = re.compile(r"\\.")
_CLASS = re.compile(r"\[\^?\]?[^\]]*\]")


def label_value(value: str, where: str) -> str:
    """A value that may become a label value, a YAML scalar or a comment line: no control characters,
    no Go template delimiters (alert texts are templates), at most ``MAX_LABEL_VALUE`` characters."""
    if len(value) > MAX_LABEL_VALUE:
        raise UsageError(f"{where}: longer than {MAX_LABEL_VALUE} characters ({len(value)})")
    bad = _CONTROL.search(value)
    if bad:
        raise UsageError(
            f"{where}: must not contain control characters (got {bad.group(0)!r} in {value[:80]!r})"
        )
    if "{{" in value or "}}" in value:
        raise UsageError(
            f"{where}: must not contain '{{{{' or '}}}}' (alert texts are Go templates; got {value[:80]!r})"
        )
    return value


def re2_regex(value: str, where: str) -> str:
    """A regular expression Prometheus (RE2, fully anchored) and Python read alike, or an error naming
    the construct that only one of them takes."""
    label_value(value, where)
    # Escapes and character classes are literal text, except the escapes that are constructs themselves.
    kept = _ESCAPED.sub(lambda m: m.group(0) if m.group(0)[1] in "123456789Zz" else "", value)
    bare = _CLASS.sub("", kept)
    for pattern, what in _NOT_RE2:
        if pattern.search(bare):
            raise UsageError(f"{where}: {what} is not Prometheus (RE2) regex syntax (got {value!r})")
    if _POSSESSIVE.search(bare):
        raise UsageError(f"{where}: possessive repetition (*+, ++, ?+) is not RE2 syntax (got {value!r})")
    try:
        re.compile(value)
    except re.error as exc:
        raise UsageError(f"{where}: not a valid regular expression ({exc}; got {value!r})") from None
    return value


def promql_string(value: str) -> str:
    """``value`` as a double-quoted PromQL string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def fullmatch(pattern: re.Pattern[str], value: str, where: str, what: str) -> str:
    """``value`` if the whole of it matches ``pattern`` (``$`` also matches before a final newline:
    ``match`` with ``^...$`` lets ``"resnet50\\n"`` through), else an error naming ``where``."""
    if pattern.fullmatch(value) is None:
        raise UsageError(f"{where}: {what} (got {value[:80]!r})")
    return value


def kind(value: object) -> str:
    """What a wrong value in a spec file is, for its one-line error: ``nothing`` or its type's name."""
    return "nothing" if value is None else type(value).__name__
