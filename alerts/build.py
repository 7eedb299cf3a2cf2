"""Small pieces every rule step uses: PromQL selectors and grouping, numbers as rules print them, and an
alert rule with its rendered texts (``_alert``'s old home was ``rules.py``; the steps in ``blind.py``
and ``rules.py`` both build on this module, which imports neither)."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from tritonwatch import catalog
from tritonwatch.alerts.texts import FOR, TEXTS, _go_vars, render
from tritonwatch.slo import SLOFile

Rule = dict[str, Any]


def by(spec: SLOFile, *labels: str) -> str:
    return ", ".join(dict.fromkeys([*labels, *spec.grouping]))


def select(metric: str, *matchers: str) -> str:
    """``metric`` (possibly with a selector already) plus ``matchers``."""
    ms = [m for m in matchers if m]
    if not ms:
        return metric
    if metric.endswith("}"):
        return metric[:-1] + "," + ",".join(ms) + "}"
    return f"{metric}{{{','.join(ms)}}}"


def model(name: str) -> str:
    return f'{catalog.MODEL}="{name}"'


def num(d: Decimal | float) -> str:
    """A number as rules print it: no float noise, no exponent (0.001, 13.44, 0.9333)."""
    return format(Decimal(str(d)).normalize(), "f")


def request_phase() -> str:
    return f'{catalog.PHASE}="request"'


def record(name: str, expr: str, labels: Mapping[str, str] | None = None) -> Rule:
    """A recording rule. Every recording rule is made here, as every alert rule is made by ``alert``: the
    one place that decides what a rule is."""
    rule: Rule = {"record": name, "expr": expr}
    if labels:
        rule["labels"] = dict(labels)
    return rule


def alert(
    name: str,
    expr: str,
    labels: Mapping[str, str],
    fixed: Mapping[str, str] | None = None,
    texts_key: str = "",
) -> Rule:
    """An alert rule: ``expr``, the alert's ``for``, ``labels``, and its texts (``texts_key``, else the
    alert's own) rendered with ``fixed`` values and Go template snippets for the rest."""
    texts = TEXTS[texts_key or name]
    hold = {"hold": FOR[name]} if name in FOR else {}
    values = _go_vars({**hold, **(fixed or {})})
    rule: Rule = {"alert": name, "expr": expr}
    if name in FOR:
        rule["for"] = FOR[name]
    rule["labels"] = dict(sorted(labels.items()))
    rule["annotations"] = {
        "description": render(texts.description, values),
        "summary": render(texts.summary, values),
    }
    return rule
