"""The typed rules: what generation returns and every writer reads (rule files, promtool tests,
Kubernetes objects).

A ``Record`` or ``Alert`` is one Prometheus rule; a ``Group`` is one rule group, tagged where it is built
with its ``family`` (the rule file it belongs to: catalog, slo, operational), its ``layer``
(``alerts/layers.py``: replica or global) and, for an objective's group, the objective and its model. A
rule may carry its own ``model`` tag (a per-model alert inside a fleet-wide group): the Kubernetes
writer puts it in that model's PrometheusRule without reading its PromQL.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tritonwatch.alerts import layers

Labels = tuple[tuple[str, str], ...]

CATALOG = "catalog"
SLO = "slo"
OPERATIONAL = "operational"
FAMILIES = (CATALOG, SLO, OPERATIONAL)


@dataclass(frozen=True)
class Record:
    """A recording rule: ``record`` = ``expr``, with static ``labels``."""

    record: str
    expr: str
    labels: Labels = ()
    model: str | None = None  # the one model it is about, None for the fleet

    @property
    def name(self) -> str:
        return self.record

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"record": self.record, "expr": self.expr}
        if self.labels:
            out["labels"] = dict(self.labels)
        return out


@dataclass(frozen=True)
class Alert:
    """An alerting rule: its ``expr``, ``for`` (None: fires at once), labels and rendered annotations."""

    alert: str
    expr: str
    labels: Labels
    annotations: Labels
    hold: str | None = None
    model: str | None = None  # the one model it is about, None for the fleet
    # False where the result cannot carry the grouping labels (absent(), vector()): a deployment that
    # routes by one of them (the Prometheus Operator by namespace) sets it as a static label instead.
    grouped: bool = True

    @property
    def name(self) -> str:
        return self.alert

    def labelled(self, **labels: str) -> Alert:
        """The alert with static ``labels`` added (sorted, as built)."""
        return replace(self, labels=tuple(sorted({**dict(self.labels), **labels}.items())))

    def label(self, name: str) -> str | None:
        return dict(self.labels).get(name)

    def annotated(self, **annotations: str) -> Alert:
        """The alert with ``annotations`` added after its own."""
        return replace(self, annotations=tuple({**dict(self.annotations), **annotations}.items()))

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"alert": self.alert, "expr": self.expr}
        if self.hold is not None:
            out["for"] = self.hold
        out["labels"] = dict(self.labels)
        out["annotations"] = dict(self.annotations)
        return out


Rule = Record | Alert


@dataclass(frozen=True)
class Group:
    """One rule group and where it goes: its rule file's ``family``, its ``layer``, and the objective
    (its ``slo`` label) and model it was built for, None for the fleet's groups."""

    name: str
    rules: tuple[Rule, ...]
    family: str
    layer: str = layers.GLOBAL
    objective: str | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if self.family not in FAMILIES or self.layer not in layers.LAYERS:
            raise ValueError(f"group {self.name}: family {self.family!r}, layer {self.layer!r}")

    def model_of(self, rule: Rule) -> str | None:
        """The model a rule of this group is about: the group's, else the rule's own tag."""
        return self.model if self.model is not None else rule.model

    def with_rules(self, rules: tuple[Rule, ...], name: str | None = None) -> Group:
        return replace(self, rules=rules, name=name or self.name)

    def to_yaml(self) -> dict[str, Any]:
        return {"name": self.name, "rules": [r.to_yaml() for r in self.rules]}


def alerts(groups: list[Group]) -> list[Alert]:
    return [r for g in groups for r in g.rules if isinstance(r, Alert)]
