"""The generated Alertmanager config as a Prometheus Operator ``AlertmanagerConfig``
(``monitoring.coreos.com/v1alpha1``), the namespaced form kube-prometheus-stack merges into its own
Alertmanager's configuration instead of replacing it.

The routing tree, inhibitions and timings are the plain config's, field by field (``route`` ->
``spec.route`` with camelCase keys, each ``label="value"`` matcher -> ``{name, value, matchType}``).
The operator adds ``namespace="<this namespace>"`` to the top route (its default matcher strategy):
tritonwatch's alerts carry a ``namespace`` label when ``namespace`` is in the SLO file's
``spec.grouping`` (docs/deploy.md). Receivers keep their names; their integrations stay in the plain
config (``*_file`` secrets), since an AlertmanagerConfig takes secrets as Secret references only:
``integrations_left_out`` names the receivers that had some.
"""

from __future__ import annotations

import json
import re
from typing import Any

import yaml

from tritonwatch import safeyaml
from tritonwatch.deploy.render import labels
from tritonwatch.errors import UsageError

NAME = "tritonwatch"
_MATCHER = re.compile(r'^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*$')
_ROUTE_KEYS = {
    "receiver": "receiver",
    "group_by": "groupBy",
    "group_wait": "groupWait",
    "group_interval": "groupInterval",
    "repeat_interval": "repeatInterval",
    "continue": "continue",
    "mute_time_intervals": "muteTimeIntervals",
    "active_time_intervals": "activeTimeIntervals",
}


def matcher(text: str, where: str) -> dict[str, str]:
    m = _MATCHER.match(text)
    if not m:
        raise UsageError(f'{where}: matcher {text!r} is not label="value" (=, !=, =~, !~)')
    return {"name": m.group(1), "value": json.loads(f'"{m.group(3)}"'), "matchType": m.group(2)}


def _route(route: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in route.items():
        if key in _ROUTE_KEYS:
            out[_ROUTE_KEYS[key]] = value
        elif key == "matchers":
            out["matchers"] = [matcher(m, f"{where}.matchers") for m in value]
        elif key == "routes":
            out["routes"] = [_route(r, f"{where}.routes[{i}]") for i, r in enumerate(value)]
        else:  # match/match_re: the generator writes matchers only
            raise UsageError(f"{where}.{key}: not carried into an AlertmanagerConfig")
    return out


def _inhibit(rule: dict[str, Any], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, field in (("source_matchers", "sourceMatch"), ("target_matchers", "targetMatch")):
        if key in rule:
            out[field] = [matcher(m, f"{where}.{key}") for m in rule[key]]
    if "equal" in rule:
        out["equal"] = list(rule["equal"])
    return out


def integrations_left_out(config: dict[str, Any]) -> list[str]:
    return [r["name"] for r in config.get("receivers", []) if set(r) - {"name"}]


def load(text: str, where: str = "alertmanager.yml") -> dict[str, Any]:
    try:
        data = safeyaml.load(text)
    except yaml.YAMLError as exc:
        raise UsageError(f"{where}: not valid YAML ({safeyaml.problem(exc)})") from None
    if not isinstance(data, dict) or not isinstance(data.get("route"), dict):
        raise UsageError(f"{where}: expected an Alertmanager config with a route")
    return data


def alertmanager_config(config: dict[str, Any], where: str = "alertmanager.yml") -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": NAME, "labels": labels("alertmanager")},
        "spec": {
            "route": _route(config["route"], f"{where}: route"),
            "inhibitRules": [
                _inhibit(r, f"{where}: inhibit_rules[{i}]")
                for i, r in enumerate(config.get("inhibit_rules", []))
            ],
            "receivers": [{"name": r["name"]} for r in config.get("receivers", [])],
        },
    }
