"""On a real Alertmanager with the generated config, a stalled server is one page: TritonServerStalled
mutes TritonModelStalled on the same instance, and only there."""

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
