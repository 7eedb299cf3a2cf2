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

from typing import Any

from tritonwatch import catalog
from tritonwatch.alerts import rules
from tritonwatch.slo import RECEIVERS, SLOFile

GROUP_WAIT = "30s"
GROUP_INTERVAL = "5m"
REPEAT_INTERVAL = {"page": "1h", "ticket": "12h", "default": "4h", "watchdog": "1m"}


def group_by(spec: SLOFile) -> list[str]:
    return list(dict.fromkeys(["alertname", catalog.MODEL, rules.SLO_LABEL, *spec.grouping]))


def route(spec: SLOFile) -> dict[str, Any]:
    return {
        "receiver": "default",
        "group_by": group_by(spec),
        "group_wait": GROUP_WAIT,
        "group_interval": GROUP_INTERVAL,
        "repeat_interval": REPEAT_INTERVAL["default"],
        "routes": [
            {
                "receiver": "watchdog",
                "matchers": [f'alertname="{rules.WATCHDOG}"'],
                "group_wait": "0s",
                "group_interval": "1m",
                "repeat_interval": REPEAT_INTERVAL["watchdog"],
            },
            {
                "receiver": "page",
                "matchers": [f'{rules.SEVERITY}="page"'],
                "repeat_interval": REPEAT_INTERVAL["page"],
            },
            {
                "receiver": "ticket",
                "matchers": [f'{rules.SEVERITY}="ticket"'],
                "repeat_interval": REPEAT_INTERVAL["ticket"],
            },
        ],
    }


def inhibit_rules(spec: SLOFile) -> list[dict[str, Any]]:
    # One replica down mutes what that replica says of its models, nothing else. Alertmanager reads
    # a label both alerts lack as equal (both empty), so the target must have an instance: else a
    # crash-looping pod would hide every fleet-wide SLO page (which carries no instance) while it loops.
    server_down: dict[str, Any] = {
        "source_matchers": [f'alertname="{rules.SERVER_DOWN}"'],
        "target_matchers": [f'{catalog.MODEL}=~".+"', 'instance=~".+"'],
        "equal": list(dict.fromkeys(["instance", *spec.grouping])),
    }
    return [
        server_down,
        {
            "source_matchers": [f'{rules.SEVERITY}="page"'],
            "target_matchers": [f'{rules.SEVERITY}="ticket"'],
            "equal": ["alertname", rules.SLO_LABEL, catalog.MODEL, *spec.grouping],
        },
        {
            # A wedged server is one page, not one per model stalled on it.
            "source_matchers": [f'alertname="{rules.SERVER_STALLED}"'],
            "target_matchers": [f'alertname="{rules.MODEL_STALLED}"'],
            "equal": list(dict.fromkeys(["instance", *spec.grouping])),
        },
    ]


def receivers(spec: SLOFile) -> list[dict[str, Any]]:
    out = []
    for name in RECEIVERS:
        configured = spec.receivers.get(name, {})
        out.append({"name": name, **{k: configured[k] for k in sorted(configured)}})
    return out


def config(spec: SLOFile) -> dict[str, Any]:
    return {"route": route(spec), "inhibit_rules": inhibit_rules(spec), "receivers": receivers(spec)}
