"""The rule files' writer: the typed groups (``alerts/model.py``) as Prometheus rule files.

Each group goes to the file its tags name: the replica layer's groups to ``replica.rules.yml``, a
model's groups (its objectives', its operational alerts') to ``model-<model>.rules.yml`` (so that a
model's promtool tests load its own rules only, and a fleet's files grow with it linearly), the others
to ``<family>.rules.yml``.
"""

from __future__ import annotations

from typing import Any

from tritonwatch.alerts import layers
from tritonwatch.alerts.model import SLO, Group


def model_file(model: str) -> str:
    """The rule file of a model's groups."""
    return f"model-{model}.rules.yml"


def file_of(group: Group) -> str:
    if group.layer == layers.REPLICA:
        return layers.REPLICA_FILE
    if group.model is not None:
        return model_file(group.model)
    assert group.family != SLO, group.name
    return f"{group.family}.rules.yml"


def by_file(groups: list[Group]) -> dict[str, list[Group]]:
    """File name -> its groups, in generation order; files by name."""
    out: dict[str, list[Group]] = {}
    for group in groups:
        out.setdefault(file_of(group), []).append(group)
    return dict(sorted(out.items()))


def documents(groups: list[Group]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """File name -> the file's YAML document."""
    return {name: {"groups": [g.to_yaml() for g in gs]} for name, gs in by_file(groups).items()}
