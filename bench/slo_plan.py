"""What the SLO cost bench must backfill, and how it adds up what it measured: no process, no I/O.

A rule set (either side's: tritonwatch's or Sloth's) is read into ``Rule`` rows. Each rule's expression is
parsed by Prometheus itself (``/api/v1/parse_query``, its AST as JSON) into the selectors it reads, each
with its range: a rule's window is its longest range (``0``: it reads instants only).

``backfill_plan`` answers "which recorded series must exist, from when": a record read by another rule
must hold values over the reader's range before every instant the reader is evaluated at; a record read
by nothing needs none. Records that read records come in later stages (Prometheus evaluates a record
from what is stored, so a stage is backfilled, loaded, then the next). ``cost_table`` sums the samples
each rule read per SLO and per window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

LOOKBACK_S = 300  # an instant selector reads back up to Prometheus's lookback delta (5m)


@dataclass(frozen=True)
class Selector:
    name: str
    range_s: float  # 0 for an instant selector
    offset_s: float = 0.0
    equal: tuple[tuple[str, str], ...] = ()  # its label=value matchers

    def may_read(self, record: Rule) -> bool:
        """Whether this selector can select the record's series: same name, and no equality matcher on a
        label the rule sets to another value (a label the expression makes is not known here)."""
        return record.name == self.name and all(record.labels.get(k, v) == v for k, v in self.equal)


@dataclass(frozen=True)
class Rule:
    side: str  # "tritonwatch" or "sloth"
    group: str
    name: str  # the record's or the alert's name
    is_record: bool
    expr: str
    labels: Mapping[str, str]
    reads: tuple[Selector, ...] = ()

    @property
    def slo(self) -> str | None:
        """Its ``slo`` (tritonwatch) or ``sloth_slo`` (Sloth) label; else the one SLO its selectors all
        select (Sloth's alerts carry the SLO only in their expression)."""
        own = self.labels.get("slo") or self.labels.get("sloth_slo")
        if own:
            return own
        selected = {v for s in self.reads for k, v in s.equal if k in ("slo", "sloth_slo")}
        return selected.pop() if len(selected) == 1 else None

    @property
    def window_s(self) -> float:
        """The window a record's name states (``...rate5m``, ``...increase1h``, ``...ratio_rate4w``), else its
        longest range and offset: the span of time the rule reads."""
        if self.is_record:
            named = duration_s(
                self.name.rsplit(":", 1)[-1]
                .removeprefix("ratio_")
                .removeprefix("rate")
                .removeprefix("increase")
            )
            if named is not None:
                return named
        return max((s.range_s + s.offset_s for s in self.reads), default=0.0)


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}


def duration_s(text: str) -> float | None:
    """A Prometheus duration (``5m``, ``1h30m``, ``4w``) in seconds; None if ``text`` is not one."""
    total, number = 0.0, ""
    for ch in text:
        if ch.isdigit():
            number += ch
        elif ch in _UNITS and number:
            total += int(number) * _UNITS[ch]
            number = ""
        else:
            return None
    return total if text and not number else None


def selectors(ast: Any, outer_range_s: float = 0.0, outer_offset_s: float = 0.0) -> list[Selector]:
    """The series selectors of a parsed expression (``/api/v1/parse_query``'s JSON), each with the range
    it is read over: a selector inside a subquery reads the subquery's range more."""
    found: list[Selector] = []
    if isinstance(ast, list):
        for item in ast:
            found += selectors(item, outer_range_s, outer_offset_s)
        return found
    if not isinstance(ast, dict):
        return found
    kind = ast.get("type")
    if kind in ("vectorSelector", "matrixSelector"):
        name = ast.get("name") or next(
            (
                m["value"]
                for m in ast.get("matchers") or []
                if m.get("name") == "__name__" and m.get("type") == "="
            ),
            "",
        )
        own = ast.get("range", 0) / 1000 if kind == "matrixSelector" else 0.0
        offset = ast.get("offset", 0) / 1000 + outer_offset_s
        equal = tuple(
            (m["name"], m["value"])
            for m in ast.get("matchers") or []
            if m.get("type") == "=" and m.get("name") != "__name__"
        )
        found.append(Selector(name=name, range_s=own + outer_range_s, offset_s=offset, equal=equal))
        return found
    if kind == "subquery":
        return selectors(
            ast.get("expr"),
            outer_range_s + ast.get("range", 0) / 1000,
            outer_offset_s + ast.get("offset", 0) / 1000,
        )
    for key, value in ast.items():
        if key != "type":
            found += selectors(value, outer_range_s, outer_offset_s)
    return found


@dataclass(frozen=True)
class BackfillJob:
    """Records of one stage to evaluate at every step from ``start`` to the end."""

    stage: int
    start: float
    rules: tuple[Rule, ...]


def _stages(records: Sequence[Rule]) -> dict[int, int]:
    """Stage of each record (by index): 0 reads no record, n reads a record of stage n-1 at most."""
    by_name: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_name.setdefault(r.name, []).append(i)
    stage: dict[int, int] = {}
    visiting: set[int] = set()

    def visit(i: int) -> int:
        if i in stage:
            return stage[i]
        if i in visiting:
            raise ValueError(
                f"{records[i].side}: record {records[i].name} reads itself through other records"
            )
        visiting.add(i)
        deps = [j for s in records[i].reads for j in by_name.get(s.name, []) if s.may_read(records[j])]
        if i in deps:
            raise ValueError(f"{records[i].side}: record {records[i].name} reads its own series")
        stage[i] = 1 + max((visit(j) for j in deps), default=-1)
        visiting.discard(i)
        return stage[i]

    for i in range(len(records)):
        visit(i)
    return stage


def backfill_plan(
    rules: Sequence[Rule], demands: Mapping[int, float], end: float, step_s: float
) -> list[BackfillJob]:
    """The backfills that let every rule in ``demands`` (index into ``rules`` -> the earliest instant it is
    evaluated at, up to ``end``) read what Prometheus would have recorded.

    A record read over ``[w]`` by a rule evaluated from ``t`` needs values from ``t - w``; read as an instant,
    from ``t - 5m``. Starts are put on the step grid (``end`` is on it) and records needed from the same
    start in the same stage share one backfill.
    """
    records = [i for i, r in enumerate(rules) if r.is_record]
    stage_of = _stages([rules[i] for i in records])
    stage = {records[k]: s for k, s in stage_of.items()}
    by_name: dict[str, list[int]] = {}
    for i in records:
        by_name.setdefault(rules[i].name, []).append(i)
    need: dict[int, float] = {}  # record -> earliest instant its value must be stored
    evaluated = dict(demands)  # rule -> earliest instant its expression is evaluated
    # Readers before what they read: a record's own need makes it a reader from then on.
    order = sorted(range(len(rules)), key=lambda i: -stage.get(i, 1 << 30))
    for i in order:
        if i in need:
            evaluated[i] = min(evaluated.get(i, end), need[i])
        if i not in evaluated:
            continue
        for s in rules[i].reads:
            first = evaluated[i] - s.offset_s - (s.range_s if s.range_s else LOOKBACK_S)
            for j in by_name.get(s.name, []):
                if s.may_read(rules[j]):
                    need[j] = min(need.get(j, end), first)
    jobs: dict[tuple[int, float], list[int]] = {}
    for j, first in need.items():
        start = end - step_s * -(-(end - first) // step_s)  # on the grid, at or before ``first``
        jobs.setdefault((stage[j], start), []).append(j)
    return [
        BackfillJob(stage=s, start=start, rules=tuple(rules[j] for j in sorted(idx)))
        for (s, start), idx in sorted(jobs.items())
    ]


def window_label(seconds: float) -> str:
    """``0`` -> ``instant``; else the largest whole unit (``28d``, ``6h``, ``30m``, ``90s``)."""
    if seconds == 0:
        return "instant"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:g}s"


def attribution(rules: Sequence[Rule]) -> dict[int, set[str]]:
    """Each rule -> the SLOs it serves: its own ``slo`` (or ``sloth_slo``) label, else every SLO whose
    rules read it, directly or through other unlabelled records."""
    by_name: dict[str, list[int]] = {}
    for i, r in enumerate(rules):
        if r.is_record:
            by_name.setdefault(r.name, []).append(i)
    owners: dict[int, set[str]] = {i: {r.slo} for i, r in enumerate(rules) if r.slo}
    frontier = list(owners)
    while frontier:
        i = frontier.pop()
        for s in rules[i].reads:
            for j in by_name.get(s.name, []):
                if rules[j].slo or not s.may_read(rules[j]):
                    continue
                before = owners.setdefault(j, set())
                if not owners[i] <= before:
                    before |= owners[i]
                    frontier.append(j)
    return owners


@dataclass
class Cost:
    """Samples read per evaluation of one SLO's rules, in all and per window."""

    total: int = 0
    by_window: dict[float, int] = field(default_factory=dict)


def cost_table(rules: Sequence[Rule], samples: Mapping[int, int]) -> dict[str, Cost]:
    """Sum ``samples`` (rule index -> ``totalQueryableSamples`` of its expression at one instant) per SLO
    and per window. A rule that serves several SLOs counts in full for each."""
    table: dict[str, Cost] = {}
    for i, slos in attribution(rules).items():
        if i not in samples:
            continue
        for slo in slos:
            cost = table.setdefault(slo, Cost())
            cost.total += samples[i]
            w = rules[i].window_s
            cost.by_window[w] = cost.by_window.get(w, 0) + samples[i]
    return table


def first_true(points: Iterable[tuple[float, float]], since: float) -> float | None:
    """Minutes from ``since`` to the first point (time, value) at or after it: a range query of an alert
    expression returns points only where the expression holds."""
    times = sorted(t for t, _ in points if t >= since)
    return (times[0] - since) / 60 if times else None
