"""LLM models in the weekly capacity report: generated tokens per second per GPU, headroom in tokens.

For every model with generated-token series over the period (vLLM's or TensorRT-LLM's counters, or
the sidecar's traced rate for other streaming models; expressions from ``tritonwatch.catalog``):
the tokens generated, the mean and the peak 5-minute tokens/s, that peak per GPU, the peak KV-cache
use, and the headroom in tokens/s against a capacity: the SLO file's
``token_capacity.max_tokens_per_second`` when declared, else the KV-cache estimate (``METHOD``).
Writes ``llm.csv`` and adds an "LLM models" section to ``report.md`` and ``report.html``; nothing
when the period holds no LLM model.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

import pandas as pd

from tritonwatch import catalog
from tritonwatch.reports.formats import count, csv_cell, percent
from tritonwatch.reports.promapi import PromClient
from tritonwatch.reports.queries import PEAK_WINDOW
from tritonwatch.reports.render import Section, html_table, md_table
from tritonwatch.reports.week import PEAK_STEP, Week, by_model, model_name, series_by_model
from tritonwatch.slo import SLOFile

METHOD = (
    "LLM models: tokens/s is the 5-minute rate of generated tokens summed across replicas; per GPU it "
    "is divided by the GPUs the model runs on (the gpu_uuid of its execution counters, else every GPU "
    "seen in the period). Capacity in tokens/s is the SLO file's token_capacity.max_tokens_per_second "
    "when declared; else it is estimated from the KV cache, the resource a streaming model runs out of "
    "first: the peak tokens/s divided by the KV-cache use at that moment (linear to a full cache)."
)
COLUMNS = (
    "model",
    "version",
    "generated_tokens",
    "mean_tokens_per_second",
    "peak_tokens_per_second",
    "gpus",
    "peak_tokens_per_second_per_gpu",
    "peak_kv_cache_utilization",
    "capacity_source",
    "capacity_tokens_per_second",
    "headroom_tokens_per_second",
    "headroom_ratio",
)


@dataclass(frozen=True)
class LlmFigures:
    model: str
    version: str
    generated_tokens: float | None
    mean_tokens_per_second: float | None
    peak_tokens_per_second: float | None
    gpus: int  # 0: unknown
    peak_kv_cache_utilization: float | None
    capacity_source: str  # "slo", "kv_cache" or ""
    capacity_tokens_per_second: float | None

    @property
    def peak_tokens_per_second_per_gpu(self) -> float | None:
        p = self.peak_tokens_per_second
        return p / self.gpus if p is not None and self.gpus else None

    @property
    def headroom_tokens_per_second(self) -> float | None:
        c, p = self.capacity_tokens_per_second, self.peak_tokens_per_second
        return c - p if c is not None and p is not None else None

    @property
    def headroom_ratio(self) -> float | None:
        c, p = self.capacity_tokens_per_second, self.peak_tokens_per_second
        return 1.0 - p / c if c and p is not None else None

    def row(self) -> dict[str, object]:
        return {c: getattr(self, c) for c in COLUMNS}


# --- queries (from the catalog) -------------------------------------------------------------------
def generated_total(window: str) -> str:
    """Tokens generated over ``window`` per model: the increase of the backends' token counters."""
    sig = catalog.llm_signal(catalog.LLM_GENERATION_TOKENS_RATE)
    parts = " or ".join(f"increase({i.selector()}[{window}])" for i in sig.inputs)
    return f"sum by ({catalog.by_clause()}) ({parts})"


def tokens_rate(window: str = PEAK_WINDOW) -> str:
    return catalog.llm_promql(catalog.llm_signal(catalog.LLM_GENERATION_TOKENS_RATE), window)


def kv_cache_use() -> str:
    return catalog.llm_promql(catalog.llm_signal(catalog.LLM_KV_CACHE_UTILIZATION))


def collect(
    client: PromClient, end: datetime, days: int, week: Week, slos: SLOFile | None
) -> list[LlmFigures]:
    start = end - timedelta(days=days)
    first = start + PEAK_STEP  # every point's window inside the period
    rates = series_by_model(client.range(tokens_rate(), first, end, PEAK_STEP, "LLM tokens/s"))
    rates = {k: s for k, s in rates.items() if not s.empty}
    if not rates:
        return []
    totals = by_model(client.instant(generated_total(f"{days}d"), end, "LLM tokens generated"))
    kv = series_by_model(client.range(kv_cache_use(), first, end, PEAK_STEP, "KV cache"))
    declared = {s.model: s.max_tokens_per_second for s in slos.slos} if slos else {}
    out = []
    for key, series in sorted(rates.items()):
        peak_at = series.idxmax()
        peak = float(series.max())
        model = week.models.get(key)
        gpus = len(model.gpus) if model and model.gpus else len(week.gpus)
        use = kv.get(key, pd.Series(dtype="float64"))
        total = totals.get(key)
        capacity, source = declared.get(key[0]), "slo"
        if capacity is None:
            at_peak = float(use[peak_at]) if peak_at in use.index else math.nan
            capacity, source = (peak / at_peak, "kv_cache") if at_peak > 0 else (None, "")
        out.append(
            LlmFigures(
                model=key[0],
                version=key[1],
                generated_tokens=total,
                mean_tokens_per_second=total / (days * 86400.0) if total is not None else None,
                peak_tokens_per_second=peak,
                gpus=gpus,
                peak_kv_cache_utilization=float(use.max()) if not use.empty else None,
                capacity_source=source,
                capacity_tokens_per_second=capacity,
            )
        )
    return out


# --- output ---------------------------------------------------------------------------------------


TABLE: tuple[tuple[str, Callable[[LlmFigures], str]], ...] = (
    ("model", lambda f: model_name(f.model, f.version)),
    ("tokens generated", lambda f: count(f.generated_tokens)),
    ("peak tokens/s", lambda f: count(f.peak_tokens_per_second)),
    ("GPUs", lambda f: str(f.gpus) if f.gpus else "—"),
    ("peak tokens/s per GPU", lambda f: count(f.peak_tokens_per_second_per_gpu)),
    ("peak KV cache", lambda f: percent(f.peak_kv_cache_utilization)),
    ("capacity tokens/s", lambda f: count(f.capacity_tokens_per_second)),
    ("capacity from", lambda f: {"slo": "declared", "kv_cache": "KV cache"}.get(f.capacity_source, "—")),
    ("headroom tokens/s", lambda f: count(f.headroom_tokens_per_second)),
    ("headroom", lambda f: percent(f.headroom_ratio)),
)


def markdown(rows: list[LlmFigures]) -> str:
    return "\n".join(["## LLM models", "", *md_table(TABLE, rows), "", METHOD, "", ""])


def html_section(rows: list[LlmFigures]) -> str:
    return f"<h2>LLM models</h2>{html_table(TABLE, rows)}<p>{html.escape(METHOD)}</p>"


def section(client: PromClient, end: datetime, days: int, week: Week, slos: SLOFile | None) -> Section | None:
    """The report's LLM section (``llm.csv`` beside it); None where no model serves an LLM."""
    rows = collect(client, end, days, week, slos)
    if not rows:
        return None
    csv_rows = [[csv_cell(v) for v in r.row().values()] for r in rows]
    return Section(markdown(rows), html_section(rows), "llm.csv", COLUMNS, csv_rows)
