"""Small pieces every rule step uses: PromQL selectors and grouping, numbers as rules print them, and the
one place a rule is made: ``record`` and ``alert`` (with its rendered texts) return the typed rules of
``alerts/model.py``. The steps (``rules.py``, ``nodata.py``, ``stall.py``, ``headroom.py``...) build on
this module, which imports none of them."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts.model import Alert, Record, Rule
from tritonwatch.alerts.texts import FOR, TEXTS, _go_vars, render
from tritonwatch.slo import SLOFile

__all__ = [
    "Alert",
    "Record",
    "Rule",
    "alert",
    "by",
    "model",
    "num",
    "record",
    "request_phase",
    "runbook_url",
    "select",
]


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


def runbook_url(spec: SLOFile, alert: str) -> str:
    return f"{spec.runbook_base_url}/{alert}.md"


def record(
    name: str, expr: str, labels: Mapping[str, str] | None = None, *, about: str | None = None
) -> Record:
    """A recording rule. Every recording rule is made here, as every alert rule is made by ``alert``: the
    one place that decides what a rule is. ``about``: the one model it is about (``model.Record``)."""
    return Record(name, expr, tuple((labels or {}).items()), model=about)


def alert(
    name: str,
    expr: str,
    labels: Mapping[str, str],
    fixed: Mapping[str, str] | None = None,
    texts_key: str = "",
    *,
    about: str | None = None,
    grouped: bool = True,
) -> Alert:
    """An alert rule: ``expr``, the alert's ``for``, ``labels``, and its texts (``texts_key``, else the
    alert's own) rendered with ``fixed`` values and Go template snippets for the rest; ``about``: the one
    model it is about (``model.Alert``); ``grouped``: whether the result carries the grouping labels (False
    for ``absent()`` and ``vector()``)."""
    texts = TEXTS[texts_key or name]
    hold = {"hold": FOR[name]} if name in FOR else {}
    values = _go_vars({**hold, **(fixed or {})})
    annotations = (
        ("description", render(texts.description, values)),
        ("summary", render(texts.summary, values)),
    )
    return Alert(
        name, expr, tuple(sorted(labels.items())), annotations, FOR.get(name), model=about, grouped=grouped
    )
