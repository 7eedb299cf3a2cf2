"""Run every panel query of the generated dashboards against a real Prometheus.

Grafana fills in dashboard variables and its built-ins before a query reaches Prometheus; this does
the same (``$model`` -> ``.*`` as the All value, ``$__rate_interval`` -> a window, ...) so the exact
panel expressions can be proven: each must parse (Prometheus answers a syntax error with HTTP 400
``bad_data``) and, on live data, return series.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import requests

from tritonwatch.dashboards.generate import panel_queries

# Grafana's built-ins (https://grafana.com/docs/grafana/latest/datasources/prometheus/template-variables/)
BUILTINS_DEFAULT: dict[str, str] = {
    "__rate_interval": "1m",
    "__interval": "15s",
    "__interval_ms": "15000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}
_VARIABLE = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)")


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    panel_type: str
    ref: str
    expr: str  # as written in the dashboard
    instant: bool

    @property
    def key(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref}"


@dataclass(frozen=True)
class Result:
    query: PanelQuery
    promql: str  # with variables filled in
    status: int
    error: str
    series: int
    values: tuple[tuple[tuple[tuple[str, str], ...], float], ...] = ()  # (sorted labels, value) per series

    @property
    def has_data(self) -> bool:
        """At least one series with a finite value (a 0/0 ratio is NaN: no data in Grafana either)."""
        return any(math.isfinite(v) for _, v in self.values)

    def value(self, **labels: str) -> float | None:
        """The value of the one series whose labels include ``labels`` (None when there is none)."""
        want = set(labels.items())
        found = [v for ls, v in self.values if want <= set(ls)]
        return found[0] if len(found) == 1 else None


def collect(dashboards: Mapping[str, Mapping[str, Any]]) -> list[PanelQuery]:
    """Every (dashboard, panel, query) of the given dashboards, by file name."""
    out = []
    for name, dash in sorted(dashboards.items()):
        for panel, target in panel_queries(dict(dash)):
            out.append(
                PanelQuery(
                    dashboard=name,
                    panel=panel["title"],
                    panel_type=panel["type"],
                    ref=target["refId"],
                    expr=target["expr"],
                    instant=bool(target.get("instant")),
                )
            )
    return out


def substitute(expr: str, variables: Mapping[str, str]) -> str:
    """Fill in ``$name``/``${name}`` from ``variables``; an unknown variable is an error."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in variables:
            raise KeyError(f"unknown dashboard variable ${name} in: {expr}")
        return variables[name]

    return _VARIABLE.sub(repl, expr)


def dashboard_variables(dashboards: Iterable[Mapping[str, Any]], all_value: str = ".*") -> dict[str, str]:
    """Every templating variable of the dashboards at its All value."""
    out = {}
    for dash in dashboards:
        for var in dash.get("templating", {}).get("list", []):
            if var.get("type") == "query":
                out[var["name"]] = var.get("allValue") or all_value
    return out


def run(
    prometheus_url: str,
    queries: Iterable[PanelQuery],
    variables: Mapping[str, str],
    timeout: float = 10.0,
) -> Iterator[Result]:
    """Run each query as an instant query now; report status, error text and series returned."""
    session = requests.Session()
    for q in queries:
        promql = substitute(q.expr, variables)
        resp = session.get(f"{prometheus_url}/api/v1/query", params={"query": promql}, timeout=timeout)
        body = resp.json()
        vector = body.get("data", {}).get("result", []) if resp.status_code == 200 else []
        values = tuple((tuple(sorted(s["metric"].items())), float(s["value"][1])) for s in vector)
        yield Result(q, promql, resp.status_code, str(body.get("error", "")), len(vector), values)
