"""The generated Alertmanager config as a Prometheus Operator ``AlertmanagerConfig``
(``monitoring.coreos.com/v1alpha1``), the namespaced form kube-prometheus-stack merges into its own
Alertmanager's configuration instead of replacing it.

The routing tree, inhibitions and timings are the plain config's (``alerts/alertmanager.py``'s typed
``Config``, which also writes alertmanager.yml), field by field (``route`` -> ``spec.route`` with camelCase
keys, each typed matcher -> ``{name, value, matchType}``).
The operator adds ``namespace="<this namespace>"`` to the top route (its default matcher strategy):
tritonwatch's alerts carry a ``namespace`` label when ``namespace`` is in the SLO file's
``spec.grouping`` (docs/deploy.md). Receivers keep their names; their integrations stay in the plain
config (``*_file`` secrets), since an AlertmanagerConfig takes secrets as Secret references only:
``integrations_left_out`` names the receivers that had some.
"""

from __future__ import annotations

from typing import Any

from tritonwatch.alerts.alertmanager import Config, Inhibit, Matcher, Route
from tritonwatch.deploy.render import labels

NAME = "tritonwatch"
_ROUTE_KEYS = {
    "receiver": "receiver",
    "group_by": "groupBy",
    "group_wait": "groupWait",
    "group_interval": "groupInterval",
    "repeat_interval": "repeatInterval",
}


def matcher(m: Matcher) -> dict[str, str]:
    return {"name": m.name, "value": m.value, "matchType": m.op}


def _route(route: Route) -> dict[str, Any]:
    # The plain config's key order, camelCase (alertmanager.Route.to_yaml)
    plain = route.to_yaml()
    out: dict[str, Any] = {}
    for key in plain:
        if key == "matchers":
            out["matchers"] = [matcher(m) for m in route.matchers]
        elif key == "routes":
            out["routes"] = [_route(r) for r in route.routes]
        else:
            out[_ROUTE_KEYS[key]] = plain[key]
    return out


def _inhibit(rule: Inhibit) -> dict[str, Any]:
    return {
        "sourceMatch": [matcher(m) for m in rule.source],
        "targetMatch": [matcher(m) for m in rule.target],
        "equal": list(rule.equal),
    }


def integrations_left_out(config: Config) -> list[str]:
    return [name for name, integrations in config.receivers if integrations]


def alertmanager_config(config: Config) -> dict[str, Any]:
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": NAME, "labels": labels("alertmanager")},
        "spec": {
            "route": _route(config.route),
            "inhibitRules": [_inhibit(r) for r in config.inhibit_rules],
            "receivers": [{"name": name} for name, _ in config.receivers],
        },
    }
