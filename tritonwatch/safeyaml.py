"""YAML for files a user hands us: ``yaml.safe_load`` with a budget on aliases.

A 700-byte document of nested anchors (``a: &a [x, x, ...]``, ``b: &b [*a, *a, ...]``, ...) expands to
billions of nodes when a consumer walks it: PyYAML shares the objects, but anything that iterates or
dumps them (validation, ``json.dumps``, the rule generator) does the work. A document that would expand
to more than ``MAX_NODES`` nodes is refused while it is composed, before any object is built, as Go's
yaml.v3 refuses an "excessive aliasing" document.
"""

from __future__ import annotations

from typing import Any

import yaml

# Nodes a document may hold once every alias is expanded. Our biggest legitimate files (an SLO file for
# hundreds of models) hold a few thousand.
MAX_NODES = 200_000


class AliasBudgetError(yaml.YAMLError):
    """The document expands to more than ``MAX_NODES`` nodes, or an alias refers to its own ancestor."""


class _BudgetLoader(yaml.SafeLoader):
    """Counts the nodes the document expands to while composing it, before any object is built."""

    def __init__(self, stream: str | bytes) -> None:
        super().__init__(stream)
        self._expanded = 0
        self._sizes: dict[int, int] = {}  # id(node) -> nodes it expands to; absent while being composed

    def _spend(self, nodes: int) -> None:
        self._expanded += nodes
        if self._expanded > MAX_NODES:
            mark = self.peek_event().start_mark
            raise AliasBudgetError(
                f"expands to more than {MAX_NODES} nodes through aliases (*name) by line {mark.line + 1}: "
                "refused as a possible alias bomb"
            )

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            target = self.anchors.get(self.peek_event().anchor)
            if target is not None:  # (an undefined alias: PyYAML says so)
                size = self._sizes.get(id(target))
                if size is None:
                    mark = self.peek_event().start_mark
                    raise AliasBudgetError(f"an alias refers to its own ancestor at line {mark.line + 1}")
                self._spend(size)
            return super().compose_node(parent, index)  # type: ignore[no-any-return]
        before = self._expanded
        node = super().compose_node(parent, index)
        self._spend(1)
        self._sizes[id(node)] = self._expanded - before
        return node


def load(text: str | bytes) -> Any:
    """``yaml.safe_load(text)`` that raises ``AliasBudgetError`` (a ``yaml.YAMLError``) on alias bombs."""
    loader = _BudgetLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def problem(exc: yaml.YAMLError) -> str:
    """One line saying what is wrong with a document and where."""
    if isinstance(exc, AliasBudgetError):
        return str(exc)
    mark = getattr(exc, "problem_mark", None)
    what = getattr(exc, "problem", None) or "not valid YAML"
    return f"{what} at line {mark.line + 1}" if mark is not None else str(what)
