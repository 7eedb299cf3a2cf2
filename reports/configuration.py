"""The weekly report's configuration section: per model, the batching settings it runs with against the
ones ``tritonwatch advise`` recommends, and the capacity forecast twice, as configured and as recommended.

The advice is ``advise --prometheus`` at the end of the period (advise/: the same model of the
server, on the sidecar's series), the load being the mean over the period's last ``LOAD_WINDOW_S``;
the instance count is kept (as ``advise`` does by default: the series cannot show how instances
sharing a GPU slow each other).

The forecast as recommended is the report's own forecast (same fitted trend of daily peaks) against a
capacity scaled by what the advice predicts the settings change: for a model sized by its request rate
(a latency objective or a declared capacity) the ratio of the SLO-bound capacities, recommended over
current; for a model sized by its GPUs, the ratio of GPU seconds per request, current over
recommended (the same GPUs then carry that much more load). The report's capacity stays the measured
one; only the change is the model's. So "4 GPUs at week 12 as configured, 2 with the recommended
settings" reads as: the trend, against today's measured capacity, and against it times the predicted
gain.

Writes ``configuration.csv`` and a "Configuration" section before "Method" in report.md/report.html.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from tritonwatch import modelconfig
from tritonwatch.modelconfig import DynamicBatching
from tritonwatch.reports.capacity import Forecast, saturations
from tritonwatch.reports.figures import HORIZONS_WEEKS, ModelFigures, lead_weeks
from tritonwatch.reports.formats import DASH, csv_cell, ms, number
from tritonwatch.reports.promapi import PromClient
from tritonwatch.reports.render import Section, html_table, md_table
from tritonwatch.reports.week import model_name
from tritonwatch.slo import SLOFile

LOAD_WINDOW_S = 3600.0
NO_ADVICE = "no advice (below)"


@dataclass(frozen=True)
class ConfigRow:
    model: str
    version: str
    entry: Mapping[str, Any]  # the advise contract entry
    figures: ModelFigures | None  # the report's figures of the model (None: not in the period's data)
    factor: float | None = None  # capacity as recommended / as configured (None: no recommendation)
    recommended: ModelFigures | None = None  # the figures with the forecast against the scaled capacity

    def gpus(self, weeks: float, recommended: bool) -> int | None:
        f = self.recommended if recommended else self.figures
        return f.gpus_needed(weeks) if f is not None else None

    def weeks(self, recommended: bool) -> float | None:
        f = self.recommended if recommended else self.figures
        return lead_weeks(f.forecast) if f is not None else None


def scaled(f: Forecast, factor: float) -> Forecast:
    """``f`` against ``factor`` times its capacity: the same fitted trends, new saturation dates."""
    capacity = f.capacity * factor
    fits = {k: s.fit for k, s in f.models.items()}
    return replace(f, capacity=capacity, models=saturations(fits, f.peak, capacity))


def factor_of(entry: Mapping[str, Any], source: str) -> float | None:
    """What the recommended settings multiply the model's capacity by (see the module's docstring)."""
    if entry["refusal"] or entry["recommended"] is None:
        return None
    if source == "gpu":
        pred = entry["details"]["predicted"]
        now = pred["current"]["compute_seconds_per_1000_requests"]
        rec = pred["recommended"]["compute_seconds_per_1000_requests"]
        return now / rec if rec > 0 and now > 0 else None
    cur, rec = entry["current"]["slo_capacity_rps"], entry["recommended"]["slo_capacity_rps"]
    return rec / cur if cur and rec else None


def rows(entries: Sequence[Mapping[str, Any]], models: Sequence[ModelFigures]) -> list[ConfigRow]:
    by_key = {(m.week.model, m.week.version): m for m in models}
    out = []
    for e in entries:
        m = by_key.get((e["model"], e["version"]))
        k = factor_of(e, m.capacity_source if m is not None else "")
        rec = None
        if m is not None and k is not None and m.forecast is not None and math.isfinite(m.forecast.peak):
            rec = replace(m, forecast=scaled(m.forecast, k))
        out.append(ConfigRow(e["model"], e["version"], e, m, k, rec))
    return out


def collect(client: PromClient, end: datetime, slos: SLOFile | None) -> list[Mapping[str, Any]]:
    """``advise --prometheus`` at the period's end for every model Prometheus knows; [] without an SLO file."""
    if slos is None:
        return []
    from tritonwatch.advise import advice
    from tritonwatch.advise.prometheus import PrometheusReader

    observations = PrometheusReader(client).read(None, LOAD_WINDOW_S, end)
    return [advice.advise_observed(o, slos, "the SLO file", 0) for o in observations]


# --- output ---------------------------------------------------------------------------------------
def _settings(config: Mapping[str, Any] | None) -> str:
    if not config:
        return DASH
    cfg = modelconfig.parse(config, lenient=True)
    db = cfg.dynamic_batching or DynamicBatching()
    prefs = list(db.preferred)
    count = sum(g.count for g in cfg.instance_groups) or 1
    return (
        f"delay {db.max_queue_delay_us / 1000:g} ms, "
        f"preferred {prefs or 'none'}, {count} instance{'s' if count != 1 else ''}"
    )


def _n(v: int | None) -> str:
    return DASH if v is None else str(v)


def _side(r: ConfigRow, side: str) -> Mapping[str, Any]:
    return r.entry.get(side) or {}


TABLE: tuple[tuple[str, Callable[[ConfigRow], str]], ...] = (
    ("model", lambda r: model_name(r.model, r.version)),
    ("configured", lambda r: _settings(_side(r, "current").get("config"))),
    # Why a model has no advice is said once below the table (one refusal is often every model's).
    (
        "recommended",
        lambda r: NO_ADVICE if r.entry["refusal"] else _settings(_side(r, "recommended").get("config")),
    ),
    (
        "p99 ms",
        lambda r: (
            f"{ms(_side(r, 'current').get('p99_seconds'), 0)} → {ms(_side(r, 'recommended').get('p99_seconds'), 0)}"
        ),
    ),
    (
        "SLO-bound capacity req/s",
        lambda r: (
            f"{number(_side(r, 'current').get('slo_capacity_rps'), '{:.1f}')} → "
            f"{number(_side(r, 'recommended').get('slo_capacity_rps'), '{:.1f}')}"
        ),
    ),
    (
        "weeks to saturation",
        lambda r: f"{number(r.weeks(False), '{:.1f}')} → {number(r.weeks(True), '{:.1f}')}",
    ),
    *(
        (f"GPUs at week {w}", lambda r, w=w: f"{_n(r.gpus(w, False))} → {_n(r.gpus(w, True))}")
        for w in HORIZONS_WEEKS
    ),
)
METHOD = (
    "Configured → recommended: the advice of `tritonwatch advise --prometheus` at the period's end "
    f"(load: the mean of its last {LOAD_WINDOW_S / 60:g} minutes; instance counts kept); p99 and "
    "SLO-bound capacity are the model's predictions. Weeks to saturation and GPUs needed: the report's "
    "forecast against its measured capacity, then against that capacity times the predicted change "
    "(docs/advise.md)."
)
COLUMNS = (
    "model",
    "version",
    "refusal",
    "current_config",
    "recommended_config",
    "current_p99_seconds",
    "recommended_p99_seconds",
    "current_slo_capacity_rps",
    "recommended_slo_capacity_rps",
    "capacity_factor",
    "weeks_to_saturation_configured",
    "weeks_to_saturation_recommended",
    *(f"gpus_needed_{w}w_{s}" for w in HORIZONS_WEEKS for s in ("configured", "recommended")),
)


def csv_row(r: ConfigRow) -> list[str]:
    import json

    cur, rec = _side(r, "current"), _side(r, "recommended")
    values: list[object] = [
        r.model,
        r.version,
        r.entry["refusal"] or "",
        json.dumps(cur.get("config"), sort_keys=True) if cur.get("config") else "",
        json.dumps(rec.get("config"), sort_keys=True) if rec.get("config") else "",
        cur.get("p99_seconds"),
        rec.get("p99_seconds"),
        cur.get("slo_capacity_rps"),
        rec.get("slo_capacity_rps"),
        r.factor,
        r.weeks(False),
        r.weeks(True),
        *(r.gpus(w, s == "recommended") for w in HORIZONS_WEEKS for s in ("configured", "recommended")),
    ]
    return [csv_cell(v) for v in values]


def refusals(config_rows: Sequence[ConfigRow]) -> list[str]:
    """Each distinct reason for no advice once, with the models it holds for."""
    by_reason: dict[str, list[str]] = {}
    for r in config_rows:
        if r.entry["refusal"]:
            by_reason.setdefault(r.entry["refusal"], []).append(model_name(r.model, r.version))
    return [f"No advice for {', '.join(names)}: {why}." for why, names in by_reason.items()]


def sentences(config_rows: Sequence[ConfigRow]) -> list[str]:
    """ "4 GPUs at week 12 as configured, 2 with the recommended settings", where the two differ or not."""
    w = HORIZONS_WEEKS[-1]
    out = []
    for r in config_rows:
        a, b = r.gpus(w, False), r.gpus(w, True)
        if a is not None and b is not None:
            out.append(
                f"{model_name(r.model, r.version)}: {a} GPU{'s' if a != 1 else ''} at week {w} as configured, "
                f"{b} with the recommended settings."
            )
    return out


def section(
    client: PromClient, end: datetime, slos: SLOFile | None, models: Sequence[ModelFigures]
) -> Section | None:
    """Advise: the report's configuration section (``configuration.csv`` beside it); None without advice."""
    config_rows = rows(collect(client, end, slos), models)
    if not config_rows:
        return None
    said = [*refusals(config_rows), *sentences(config_rows)]
    md = "\n".join(["## Configuration", "", *md_table(TABLE, config_rows), "", *said, "", METHOD, "", ""])
    page = f"<h2>Configuration</h2>{html_table(TABLE, config_rows)}" + "".join(
        f"<p>{html.escape(s)}</p>" for s in [*said, METHOD]
    )
    return Section(md, page, "configuration.csv", COLUMNS, [csv_row(r) for r in config_rows])
