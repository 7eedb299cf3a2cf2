"""Bring grafanalib's dashboard JSON to Grafana's current classic schema (the one Grafana 12 and 13 read).

grafanalib 0.7.1 (January 2024) still writes fields of Grafana 4 to 8 that the classic dashboard schema
no longer has, writes ``null`` for every option left unset, and leaves out options that the current
panel schemas require (each has a default there). ``conform(dashboard)`` returns the same dashboard
with the dead fields dropped, unset options omitted, and the required panel options written with
Grafana's own defaults, so that the output validates against Grafana's schema field for field
(``tests/test_dashboards_schema.py`` checks it with Grafana's own models, from grafana-foundation-sdk).

Nothing that Grafana would show differently is changed: each dropped field is one Grafana ignores or
migrates away, and each written default is the value Grafana uses when the field is absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Json = dict[str, Any]

# Dashboard fields of the pre-5 row layout and of the dark/light style, the crosshair flag that
# graphTooltip replaced, and the import-time inputs list (a provisioned file has no inputs).
DASHBOARD_DEAD = ("__inputs", "hideControls", "rows", "sharedCrosshair", "style")
# Removed from the schema by Grafana's migration to schema 41 (unused since Grafana 5).
TIMEPICKER_DEAD = ("time_options",)
# Tag-based template variables, removed in Grafana 8.
VARIABLE_DEAD = ("tagValuesQuery", "tagsQuery", "useTags")
# Per-panel fields of the Grafana 4 grid (span, height, minSpan), the panel-level editable/error
# flags, and the pre-7 table panel's own columns, colours, font size and value mappings (mappings and
# colours live in fieldConfig now; ours are empty or the table's default).
PANEL_DEAD = ("editable", "error", "height", "minSpan", "span")
TABLE_DEAD = ("color", "columns", "fontSize", "mappings")
# Prometheus query fields of old Grafana: `query` repeats `expr`, `step` became `interval`, `target`
# and `metric` belong to other data sources' editors.
TARGET_DEAD = ("metric", "query", "step", "target")

# Options each panel schema requires, with the defaults Grafana's panel plugins use when they are absent.
REQUIRED_OPTIONS: Mapping[str, Json] = {
    "stat": {"wideLayout": True, "showPercentChange": False, "percentChangeColorMode": "standard"},
    "table": {"frameIndex": 0},
}


def conform(dashboard: Json) -> Json:
    """The dashboard in the current classic schema (a new object; the argument is left as it was)."""
    out = _drop(_unset(dashboard), DASHBOARD_DEAD)
    if "timepicker" in out:
        out["timepicker"] = _drop(out["timepicker"], TIMEPICKER_DEAD)
    templating = out.get("templating", {})
    templating["list"] = [_drop(v, VARIABLE_DEAD) for v in templating.get("list", [])]
    out["panels"] = [_panel(p) for p in out.get("panels", [])]
    return out


def _panel(panel: Json) -> Json:
    kind = panel.get("type", "")
    out = _drop(panel, PANEL_DEAD + (TABLE_DEAD if kind == "table" else ()))
    if kind == "row":  # a row has no queries or options of its own, only its (collapsed) panels
        out["panels"] = [_panel(p) for p in out.get("panels", [])]
        return out
    out["targets"] = [_drop(t, TARGET_DEAD) for t in out.get("targets", [])]
    options = out.setdefault("options", {})
    for key, value in REQUIRED_OPTIONS.get(kind, {}).items():
        options.setdefault(key, value)
    if kind == "timeseries" and "legend" in options:
        # The legend is shown (the schema's own default is false; the time series panel's is true).
        options["legend"].setdefault("showLegend", True)
    if kind == "table":
        custom = out.setdefault("fieldConfig", {}).setdefault("defaults", {}).setdefault("custom", {})
        # Schema 38 replaced the table's displayMode with cellOptions; "auto" is the one we write.
        if custom.pop("displayMode", "auto") != "auto":
            raise ValueError(f"panel {panel.get('title')!r}: only the automatic cell display is mapped")
        custom["cellOptions"] = {"type": "auto"}
        custom.setdefault("inspect", False)
    return out


def _drop(obj: Json, keys: tuple[str, ...]) -> Json:
    return {k: v for k, v in obj.items() if k not in keys}


def _unset(value: Any) -> Any:
    """``null`` is grafanalib's "not set": omit it, except a threshold step's value (-Infinity, the base)."""
    if isinstance(value, dict):
        step = set(value) == {"color", "value"}
        return {k: _unset(v) for k, v in value.items() if v is not None or (step and k == "value")}
    if isinstance(value, list):
        return [_unset(v) for v in value]
    return value
