"""The Alertmanager configuration for an ``SLOFile``.

Emits (``alertmanager.yml``)::

    route:            receiver default, group_by [alertname, model, slo, <grouping>]
      - alertname="Watchdog"  -> watchdog (repeats every minute: a dead man's switch)
      - severity="page"       -> page
      - severity="ticket"     -> ticket
    inhibit_rules:    TritonServerDown mutes the alerts of the same replica only: those with a model and
                      the down target's instance (equal instance, <grouping>), never an alert
                      without an instance (a fleet-wide SLO page);
                      a page mutes the ticket of the same alertname, slo and model;
                      TritonServerStalled mutes TritonModelStalled on the same instance
    receivers:        default, page, ticket, watchdog: as configured in spec.alertmanager.receivers
                      (secrets only through *_file fields), otherwise without integrations

Receivers without integrations are valid: alerts still show in Alertmanager's UI and API, and a
deployment fills them in through the SLO file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tritonwatch import catalog
from tritonwatch.alerts import rules
from tritonwatch.slo import RECEIVERS, SLOFile

GROUP_WAIT = "30s"
GROUP_INTERVAL = "5m"
REPEAT_INTERVAL = {"page": "1h", "ticket": "12h", "default": "4h", "watchdog": "1m"}


@dataclass(frozen=True)
class Matcher:
    """``name op "value"``: the plain config writes its text, an AlertmanagerConfig its fields."""

    name: str
    op: str  # =, !=, =~, !~
    value: str

    def text(self) -> str:
        return f"{self.name}{self.op}{json.dumps(self.value)}"


def eq(name: str, value: str) -> Matcher:
    return Matcher(name, "=", value)


@dataclass(frozen=True)
class Route:
    receiver: str
    matchers: tuple[Matcher, ...] = ()
    group_by: tuple[str, ...] = ()
    group_wait: str | None = None
    group_interval: str | None = None
    repeat_interval: str | None = None
    routes: tuple[Route, ...] = ()

    def to_yaml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"receiver": self.receiver}
        if self.matchers:
            out["matchers"] = [m.text() for m in self.matchers]
        if self.group_by:
            out["group_by"] = list(self.group_by)
        for key in ("group_wait", "group_interval", "repeat_interval"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        if self.routes:
            out["routes"] = [r.to_yaml() for r in self.routes]
        return out


@dataclass(frozen=True)
class Inhibit:
    source: tuple[Matcher, ...]
    target: tuple[Matcher, ...]
    equal: tuple[str, ...]

    def to_yaml(self) -> dict[str, Any]:
        return {
            "source_matchers": [m.text() for m in self.source],
            "target_matchers": [m.text() for m in self.target],
            "equal": list(self.equal),
        }


@dataclass(frozen=True)
class Config:
    route: Route
    inhibit_rules: tuple[Inhibit, ...]
    receivers: tuple[tuple[str, Mapping[str, Any]], ...]  # name, its integrations

    def to_yaml(self) -> dict[str, Any]:
        return {
            "route": self.route.to_yaml(),
            "inhibit_rules": [r.to_yaml() for r in self.inhibit_rules],
            "receivers": [{"name": name, **integrations} for name, integrations in self.receivers],
        }


def group_by(spec: SLOFile) -> list[str]:
    return list(dict.fromkeys(["alertname", catalog.MODEL, rules.SLO_LABEL, *spec.grouping]))


def route(spec: SLOFile) -> Route:
    return Route(
        "default",
        group_by=tuple(group_by(spec)),
        group_wait=GROUP_WAIT,
        group_interval=GROUP_INTERVAL,
        repeat_interval=REPEAT_INTERVAL["default"],
        routes=(
            Route(
                "watchdog",
                (eq("alertname", rules.WATCHDOG),),
                group_wait="0s",
                group_interval="1m",
                repeat_interval=REPEAT_INTERVAL["watchdog"],
            ),
            Route("page", (eq(rules.SEVERITY, "page"),), repeat_interval=REPEAT_INTERVAL["page"]),
            Route("ticket", (eq(rules.SEVERITY, "ticket"),), repeat_interval=REPEAT_INTERVAL["ticket"]),
        ),
    )


def inhibit_rules(spec: SLOFile) -> tuple[Inhibit, ...]:
    # One replica down mutes what that replica says of its models, nothing else. Alertmanager reads
    # a label both alerts lack as equal (both empty), so the target must have an instance: else a
    # crash-looping pod would hide every fleet-wide SLO page (which carries no instance) while it loops.
    per_instance = tuple(dict.fromkeys(["instance", *spec.grouping]))
    return (
        Inhibit(
            (eq("alertname", rules.SERVER_DOWN),),
            (Matcher(catalog.MODEL, "=~", ".+"), Matcher("instance", "=~", ".+")),
            per_instance,
        ),
        Inhibit(
            (eq(rules.SEVERITY, "page"),),
            (eq(rules.SEVERITY, "ticket"),),
            ("alertname", rules.SLO_LABEL, catalog.MODEL, *spec.grouping),
        ),
        # A wedged server is one page, not one per model stalled on it.
        Inhibit(
            (eq("alertname", rules.SERVER_STALLED),), (eq("alertname", rules.MODEL_STALLED),), per_instance
        ),
    )


def receivers(spec: SLOFile) -> tuple[tuple[str, Mapping[str, Any]], ...]:
    out = []
    for name in RECEIVERS:
        configured = spec.receivers.get(name, {})
        out.append((name, {k: configured[k] for k in sorted(configured)}))
    return tuple(out)


def typed_config(spec: SLOFile) -> Config:
    return Config(route(spec), inhibit_rules(spec), receivers(spec))


def config(spec: SLOFile) -> dict[str, Any]:
    """``alertmanager.yml`` as a document (the writer of ``typed_config``)."""
    return typed_config(spec).to_yaml()
