"""Inhibitions on a real Alertmanager with the generated config: each mutes what belongs to what is down,
never a page of the fleet.

* A stalled server is one page: TritonServerStalled mutes TritonModelStalled on the same instance, and
  only there.
* One replica down (``TritonServerDown`` for one instance, a crash-looping pod) mutes that replica's
  per-model alerts, never the fleet-wide SLO page (which carries no instance) nor an alert of another
  replica or without an instance; a page still mutes the ticket of the same SLO and model.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tritonwatch import catalog
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import ALERTMANAGER_BIN, Alertmanager

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_AM = ROOT / "alerts" / "generated" / "alertmanager.yml"

pytestmark = [pytest.mark.needs(ALERTMANAGER_BIN), pytest.mark.usefixtures("platform")]


@pytest.fixture
def am(tmp_path: Path) -> Iterator[Alertmanager]:
    manager = Alertmanager(tmp_path / "am", GOLDEN_AM)
    try:
        manager.wait_ready(60)
        yield manager
    finally:
        manager.stop()


def alerts(am: Alertmanager) -> list[dict[str, Any]]:
    params = {"inhibited": "true", "silenced": "true", "active": "true"}
    resp = requests.get(f"{am.url}/api/v2/alerts", params=params, timeout=5)
    resp.raise_for_status()
    return list(resp.json())


def test_a_stalled_server_mutes_its_stalled_models_only(am: Alertmanager) -> None:
    page = {"severity": "page"}
    posted = [
        {"labels": {"alertname": catalog.SERVER_STALLED_ALERT, "instance": "a:8002", **page}},
        {
            "labels": {
                "alertname": catalog.MODEL_STALLED_ALERT,
                "instance": "a:8002",
                "model": "m",
                "version": "1",
                **page,
            }
        },
        {
            "labels": {
                "alertname": catalog.MODEL_STALLED_ALERT,
                "instance": "b:8002",
                "model": "m",
                "version": "1",
                **page,
            }
        },
    ]
    requests.post(f"{am.url}/api/v2/alerts", json=posted, timeout=5).raise_for_status()

    def states() -> dict[tuple[str, str], str]:
        return {(a["labels"]["alertname"], a["labels"]["instance"]): a["status"]["state"] for a in alerts(am)}

    want = {
        (catalog.SERVER_STALLED_ALERT, "a:8002"): "active",
        (catalog.MODEL_STALLED_ALERT, "a:8002"): "suppressed",  # inhibited by its server's stall
        (catalog.MODEL_STALLED_ALERT, "b:8002"): "active",  # another server: still pages
    }
    wait_until(lambda: states() == want, 15, f"alert states {want}", interval=0.2)
    (muted,) = [a for a in alerts(am) if a["status"]["state"] == "suppressed"]
    assert muted["status"]["inhibitedBy"], muted["status"]


DOWN = "triton-7:8002"
OTHER = "triton-8:8002"


def _key(labels: dict[str, str]) -> tuple[str, ...]:
    return tuple(f"{k}={labels[k]}" for k in sorted(labels))


def test_one_replica_down_mutes_that_replica_only(am: Alertmanager) -> None:
    slo = {"model": "fraud_detector", "slo": "fraud_detector-availability"}
    burn = catalog.SLO_BURN_ALERT
    posted: dict[str, tuple[dict[str, str], str]] = {
        "down": (
            {
                "alertname": catalog.SERVER_DOWN_ALERT,
                "instance": DOWN,
                "severity": "page",
                "cause": "scrape_failed",
            },
            "active",
        ),
        # the fleet aggregate: no instance; the page it is must reach the on-call
        "fleet page": ({"alertname": burn, "severity": "page", **slo}, "active"),
        # the page of the same SLO mutes its ticket (one notification per SLO)
        "fleet ticket": ({"alertname": burn, "severity": "ticket", **slo}, "suppressed"),
        # a per-model ticket without an instance: not the down replica's
        "queue ticket": (
            {"alertname": catalog.QUEUE_TIME_HIGH_ALERT, "severity": "ticket", "model": "fraud_detector"},
            "active",
        ),
        # what the down replica says of its models: muted while it is down
        "down replica's model": (
            {
                "alertname": catalog.MODEL_STALLED_ALERT,
                "instance": DOWN,
                "model": "fraud_detector",
                "version": "1",
                "severity": "page",
            },
            "suppressed",
        ),
        # the same alert from another replica still pages
        "other replica's model": (
            {
                "alertname": catalog.MODEL_STALLED_ALERT,
                "instance": OTHER,
                "model": "fraud_detector",
                "version": "1",
                "severity": "page",
            },
            "active",
        ),
    }
    body = [{"labels": labels} for labels, _ in posted.values()]
    requests.post(f"{am.url}/api/v2/alerts", json=body, timeout=5).raise_for_status()
    want = {_key(labels): state for labels, state in posted.values()}

    def states() -> dict[tuple[str, ...], str]:
        return {_key(a["labels"]): a["status"]["state"] for a in alerts(am)}

    # Inhibitions are computed when Alertmanager answers: poll until every alert is in and judged.
    wait_until(lambda: states() == want, 15, f"alert states {want}", interval=0.2)
    by_key = {_key(a["labels"]): a for a in alerts(am)}
    down_alert = by_key[_key(posted["down"][0])]
    replica = by_key[_key(posted["down replica's model"][0])]
    assert replica["status"]["inhibitedBy"] == [down_alert["fingerprint"]]
    page = by_key[_key(posted["fleet page"][0])]
    assert by_key[_key(posted["fleet ticket"][0])]["status"]["inhibitedBy"] == [page["fingerprint"]]
