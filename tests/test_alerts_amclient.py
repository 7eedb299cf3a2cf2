"""``tritonwatch alerts status|silence`` against a real Alertmanager running the generated config."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from support import stacks

from tritonwatch.cli import main
from tritonwatch.local.procs import free_port, wait_until
from tritonwatch.local.promstack import ALERTMANAGER_BIN, Alertmanager

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_AM = ROOT / "alerts" / "generated" / "alertmanager.yml"

pytestmark = [pytest.mark.needs(ALERTMANAGER_BIN), pytest.mark.usefixtures("platform")]


@pytest.fixture(scope="module")
def alertmanager(platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Alertmanager]:
    am = Alertmanager(tmp_path_factory.mktemp("am"), GOLDEN_AM)
    try:
        am.wait_ready(60)
        yield am
    finally:
        am.stop()


def post_alert(am: Alertmanager, **labels: str) -> None:
    now = datetime.now(timezone.utc)
    body = [
        {
            "labels": labels,
            "annotations": {"summary": f"{labels.get('model', '')} summary"},
            "startsAt": now.isoformat(),
            "endsAt": (now + timedelta(hours=1)).isoformat(),
        }
    ]
    requests.post(f"{am.url}/api/v2/alerts", json=body, timeout=5).raise_for_status()


def api_alerts(am: Alertmanager, model: str) -> list[dict[str, Any]]:
    resp = requests.get(f"{am.url}/api/v2/alerts", params={"filter": f'model="{model}"'}, timeout=5)
    resp.raise_for_status()
    return list(resp.json())


def test_status_lists_alerts_per_model(
    alertmanager: Alertmanager, capsys: pytest.CaptureFixture[str]
) -> None:
    post_alert(
        alertmanager, alertname="TritonSLOErrorBudgetBurn", severity="page", slo="a-availability", model="a"
    )
    post_alert(alertmanager, alertname="TritonModelQueueTimeHigh", severity="ticket", model="b", version="1")
    wait_until(lambda: bool(api_alerts(alertmanager, "b")), 10, "the posted alerts")
    capsys.readouterr()
    assert main(["alerts", "status", "--alertmanager", alertmanager.url]) == 0
    lines = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert lines[0][:5] == ["MODEL", "ALERT", "SEVERITY", "STATE", "SINCE"]
    rows = [r[:4] for r in lines[1:]]
    assert ["a", "TritonSLOErrorBudgetBurn", "page", "active"] in rows
    assert ["b", "TritonModelQueueTimeHigh", "ticket", "active"] in rows
    assert rows.index(["a", "TritonSLOErrorBudgetBurn", "page", "active"]) < rows.index(
        ["b", "TritonModelQueueTimeHigh", "ticket", "active"]
    )
    assert main(["alerts", "status", "--alertmanager", alertmanager.url, "--model", "b"]) == 0
    only_b = capsys.readouterr().out.splitlines()[1:]
    assert len(only_b) == 1 and only_b[0].split()[:2] == ["b", "TritonModelQueueTimeHigh"]


def test_silence_a_model(alertmanager: Alertmanager, capsys: pytest.CaptureFixture[str]) -> None:
    post_alert(
        alertmanager, alertname="TritonSLOErrorBudgetBurn", severity="page", slo="c-availability", model="c"
    )
    wait_until(lambda: bool(api_alerts(alertmanager, "c")), 10, "the posted alert")
    before = datetime.now(timezone.utc)
    code = main(
        ["alerts", "silence", "--alertmanager", alertmanager.url, "--model", "c", "--for", "2h"]
        + ["--comment", "rollout of c v2", "--author", "ci"]
    )
    out = capsys.readouterr().out
    assert code == 0 and out.startswith("silenced model=c until "), out

    def silenced() -> bool:
        (alert,) = api_alerts(alertmanager, "c")
        return alert["status"]["state"] == "suppressed" and bool(alert["status"]["silencedBy"])

    wait_until(silenced, 10, "the alert to be silenced")
    silences = requests.get(f"{alertmanager.url}/api/v2/silences", timeout=5).json()
    (s,) = [s for s in silences if s["comment"] == "rollout of c v2"]
    assert s["createdBy"] == "ci" and s["status"]["state"] == "active"
    assert s["matchers"] == [{"name": "model", "value": "c", "isRegex": False, "isEqual": True}]
    ends = datetime.fromisoformat(s["endsAt"].replace("Z", "+00:00"))
    assert timedelta(hours=2) - timedelta(seconds=5) <= ends - before <= timedelta(hours=2, seconds=30)
    # Other models stay unsilenced.
    post_alert(
        alertmanager, alertname="TritonSLOErrorBudgetBurn", severity="page", slo="d-availability", model="d"
    )
    wait_until(lambda: bool(api_alerts(alertmanager, "d")), 10, "the posted alert")
    assert api_alerts(alertmanager, "d")[0]["status"]["state"] == "active"
    assert main(["alerts", "status", "--alertmanager", alertmanager.url, "--model", "c"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[3] == "silenced"


def test_unreachable_alertmanager_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    for argv in (["alerts", "status"], ["alerts", "silence", "--model", "m", "--comment", "x"]):
        assert main([*argv, "--alertmanager", url]) == 1
        err = capsys.readouterr().err
        assert (
            err
            == f"tritonwatch alerts: error: cannot reach Alertmanager at {url} (connection refused or no route)\n"
        )


def test_bad_duration_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["alerts", "silence", "--model", "m", "--comment", "x", "--for", "soon", "--alertmanager", "http://x"]
    )
    assert code == 2
    assert (
        capsys.readouterr().err
        == "tritonwatch alerts: error: --for: unknown duration 'soon' (expected a number and a unit: ms, s, m, h, d, w)\n"
    )
