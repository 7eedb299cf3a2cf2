"""Triton's ``*_summary_us`` quantiles as rows of the latency-quantile family (the fallback of traces).

``SummaryReader.rows(samples)`` gives, per (model, version, phase) in Triton's order, the quantiles in
seconds, NaNs, negatives and summaries that observed nothing left out, several summaries of one model
(one per GPU instance, ``gpu_uuid``) merged by taking the largest (``merge_summaries`` says why).

At 2,000 models that is 40,000 samples a scrape, and walking them (labels as dicts, frozensets for the
``_count`` match) cost ~0.15 s a scrape. Payloads keep their lines scrape after scrape (the parser's
``Layout``), so the walk is done once per layout: which flat values are quantiles of which row, and
which ``_count`` each one's summary has (a ``_Plan``). A scrape with that layout then costs picking
the values, one division each and a check that none is NaN, negative or unobserved. The plan is only
made where picking gives what the walk gives: one sample per (row, quantile) and each row's samples
next to each other, so leaving some out never reorders the rest. Otherwise (split summaries, no
layout) each scrape takes the walk, which a test holds the plan to, row for row.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import truediv

from tritonwatch import catalog
from tritonwatch.expfmt import LabelSet, Layout, Samples, picker

Key = tuple[str, str, str]  # model, version, phase
Row = tuple[str, str, str, str]  # model, version, phase, quantile
US = 1e6  # Triton's summaries are in microseconds


@dataclass
class SummaryRows:
    """Rows in Triton's order: ``rows[i]`` is (model, version, phase, quantile), ``seconds[i]`` its value."""

    rows: list[Row] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)


def merge_summaries(samples: Samples) -> dict[Key, dict[str, float]]:
    """Triton's ``*_summary_us`` quantiles (seconds) per (model, version, phase), NaNs left out.

    One model can have several summaries per phase: Triton keeps one per GPU model instance,
    labelled ``gpu_uuid``. Quantiles cannot be merged exactly without the observations, but the
    q-quantile of their union always lies between the smallest and the largest of the parts'
    q-quantiles (each part's CDF is below q left of its own quantile, and at or above q from it).
    We take the **largest**: never below the true value, so a latency SLO is never shown as met
    when it is not, and exact when one part holds all the traffic. A part whose ``_count`` is 0
    has observed nothing and is left out (Triton still prints quantiles for it, e.g. ``3``).
    Summary counts and sums are not exported, so there is nothing else to merge.
    """
    out: dict[Key, dict[str, float]] = {}
    for phase in catalog.PHASES:
        series = samples.get(catalog.triton_summary(phase), {})
        if not series:
            continue
        unobserved = {
            frozenset(labelset)
            for labelset, n in samples.get(catalog.triton_summary_count(phase), {}).items()
            if n == 0
        }
        for labelset, value in series.items():
            labels = dict(labelset)
            q = labels.get(catalog.QUANTILE)
            model = labels.get(catalog.MODEL)
            if q not in catalog.QUANTILES or model is None or math.isnan(value) or value < 0:
                continue
            if unobserved and frozenset(kv for kv in labelset if kv[0] != catalog.QUANTILE) in unobserved:
                continue
            quantiles = out.setdefault((model, labels.get(catalog.VERSION, ""), phase), {})
            seconds = value / US
            if seconds > quantiles.get(q, -1.0):
                quantiles[q] = seconds
    return out


def _as_rows(merged: dict[Key, dict[str, float]]) -> SummaryRows:
    out = SummaryRows()
    for (model, version, phase), values in merged.items():
        for q, seconds in values.items():
            out.rows.append((model, version, phase, q))
            out.seconds.append(seconds)
    return out


class _Plan:
    """Where one layout's quantile samples sit in ``Parsed.flat``, and their summaries' ``_count``."""

    def __init__(self, rows: list[Row], values: list[int], counts: list[int], flat_len: int) -> None:
        self.rows = rows
        self.flat_len = flat_len  # the layout's number of values: its flat lists' length
        self.pick_values: Callable[[Sequence[float]], tuple[float, ...]] = picker(values)
        # Position of each row's _count in flat; a row without one reads the 1.0 appended past the end.
        self.pick_counts: Callable[[Sequence[float]], tuple[float, ...]] = picker(counts)

    def rows_of(self, flat: Sequence[float]) -> SummaryRows:
        """``_as_rows(merge_summaries(samples))`` for samples with this layout and these flat values."""
        values = self.pick_values(flat)
        counts = self.pick_counts([*flat, 1.0])
        if values and not any(map(math.isnan, values)) and min(values) >= 0.0 and 0.0 not in counts:
            return SummaryRows(list(self.rows), list(map(truediv, values, repeat(US))))
        # A NaN fails both comparisons: "not v >= 0" is NaN or negative, as the walk leaves out.
        keep = [v >= 0.0 and n != 0 for v, n in zip(values, counts, strict=True)]
        kept = list(compress(values, keep))
        return SummaryRows(list(compress(self.rows, keep)), list(map(truediv, kept, repeat(US))))


def _plan(layout: Layout) -> _Plan | None:
    """The plan of a layout, or None where picking would not give what ``merge_summaries`` gives."""
    where = {name: (labelsets, start) for name, labelsets, start, _end in layout.series}
    rows: list[Row] = []
    values: list[int] = []
    counts: list[int] = []
    past_end = sum(end - start for _n, _l, start, end in layout.series)
    seen: set[Row] = set()
    done: set[Key] = set()  # rows whose samples have ended: one more would come out of order
    last: Key | None = None
    for phase in catalog.PHASES:
        found = where.get(catalog.triton_summary(phase))
        if found is None:
            continue
        count_of: dict[frozenset[tuple[str, str]], int] = {}
        count_series = where.get(catalog.triton_summary_count(phase))
        if count_series is not None:
            for k, labelset in enumerate(count_series[0]):
                if count_of.setdefault(frozenset(labelset), count_series[1] + k) != count_series[1] + k:
                    return None  # two _count series with the same labels in another order
        labelsets, start = found
        for k, labelset in enumerate(labelsets):
            labels = dict(labelset)
            q = labels.get(catalog.QUANTILE)
            model = labels.get(catalog.MODEL)
            if q not in catalog.QUANTILES or model is None:
                continue
            key = (model, labels.get(catalog.VERSION, ""), phase)
            row = (*key, q)
            if row in seen or (key != last and key in done):
                return None  # merged or interleaved summaries: the walk decides
            seen.add(row)
            if last is not None and key != last:
                done.add(last)
            last = key
            rows.append(row)
            values.append(start + k)
            counts.append(count_of.get(_summary_labels(labelset), past_end))
    return _Plan(rows, values, counts, past_end)


def _summary_labels(labelset: LabelSet) -> frozenset[tuple[str, str]]:
    return frozenset(kv for kv in labelset if kv[0] != catalog.QUANTILE)


class SummaryReader:
    """``SummaryRows`` of each scrape's samples, through a plan per parser layout where one holds."""

    def __init__(self) -> None:
        self._plan: tuple[Layout, _Plan | None] | None = None

    def rows(self, samples: Samples) -> SummaryRows:
        layout = getattr(samples, "layout", None)
        flat = getattr(samples, "flat", None)
        if isinstance(layout, Layout) and flat is not None:
            if self._plan is None or self._plan[0] is not layout:
                self._plan = (layout, _plan(layout))
            plan = self._plan[1]
            if plan is not None and len(flat) == plan.flat_len:
                return plan.rows_of(flat)
        return _as_rows(merge_summaries(samples))
