"""End to end on real processes: a model that fails every request pages through a real Alertmanager.

The real local Triton serves ``fail_always``; the sidecar runs as a subprocess; a real Prometheus
(scrape and evaluation every second) scrapes both with the rules ``tritonwatch rules`` generates for
an SLO file written here (availability 99.9 on fail_always) and sends to a real Alertmanager running
the generated config. With no history, the 5m and 1h windows fill from the first failures, so the
page arrives within seconds; ``tritonwatch alerts silence`` then silences it, read back via the API.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from support.sidecar import sidecar_argv

from tritonwatch.cli import main
from tritonwatch.local.procs import Managed, free_port, wait_until
from tritonwatch.local.promstack import (
    ALERTMANAGER_BIN,
    PROMETHEUS_BIN,
    Alertmanager,
    Prometheus,
    ScrapeTarget,
    prometheus_config,
)

MODEL = "fail_always"
TRITON_JOB = "triton-e2e"

pytestmark = [
    pytest.mark.triton,
    pytest.mark.prometheus,
    pytest.mark.needs(PROMETHEUS_BIN, ALERTMANAGER_BIN),
    pytest.mark.usefixtures("platform"),
]

SLO = {
    "apiVersion": "tritonwatch/v1",
    "kind": "ServiceLevelObjectives",
    "metadata": {"name": "e2e"},
    "spec": {
        "window": "28d",
        "up_job": TRITON_JOB,
        "slos": [{"model": MODEL, "availability": {"objective": 99.9}}],
    },
}


def page_alerts(am_url: str) -> list[dict[str, Any]]:
    params = {
        "filter": ['alertname="TritonSLOErrorBudgetBurn"', f'model="{MODEL}"', 'severity="page"'],
        "silenced": "true",
        "inhibited": "true",
    }
    resp = requests.get(f"{am_url}/api/v2/alerts", params=params, timeout=5)
    resp.raise_for_status()
    return list(resp.json())


def serving(sidecar: Managed, url: str) -> bool:
    _alive(sidecar)
    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:
        return False


def _alive(*procs: Managed) -> None:
    for p in procs:
        if not p.alive():
            pytest.fail(f"{p.name} exited: {p.log_tail(20)}")


@pytest.fixture
def stack(triton: Any, tmp_path: Path) -> Iterator[tuple[Prometheus, Alertmanager, Managed]]:
    slo_path = tmp_path / "slo.yaml"
    slo_path.write_text(yaml.safe_dump(SLO))
    out = tmp_path / "rules"
    assert main(["rules", "--slo", str(slo_path), "--out", str(out)]) == 0
    with contextlib.ExitStack() as stop:
        am = Alertmanager(tmp_path / "am", out / "alertmanager.yml")
        stop.callback(am.stop)
        sidecar_port = free_port()
        sidecar = Managed(
            "sidecar",
            sidecar_argv(triton.http_url, triton.metrics_url, sidecar_port),
            log_path=tmp_path / "sidecar.log",
        )
        stop.callback(sidecar.stop)
        metrics_addr, _, metrics_path = triton.metrics_url.split("//", 1)[1].partition("/")
        prom = Prometheus(
            tmp_path / "prom",
            prometheus_config(
                [
                    ScrapeTarget(TRITON_JOB, metrics_addr, metrics_path="/" + metrics_path),
                    ScrapeTarget("tritonwatch-sidecar", f"127.0.0.1:{sidecar_port}"),
                ],
                rule_files=sorted(out.glob("*.rules.yml")),
                alertmanager=am.address,
                scrape_interval="1s",
                evaluation_interval="1s",
            ),
        )
        stop.callback(prom.stop)
        am.wait_ready(60)
        prom.wait_ready(60)
        wait_until(
            lambda: serving(sidecar, f"http://127.0.0.1:{sidecar_port}/metrics"), 30, "sidecar /metrics"
        )
        yield prom, am, sidecar


def test_failing_model_pages_and_the_page_can_be_silenced(
    triton: Any, stack: tuple[Prometheus, Alertmanager, Managed], capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonwatch.local.load import LoadDriver

    prom, am, sidecar = stack
    with LoadDriver(triton.http_url, MODEL, concurrency=1, rps=10, seed=3) as load:

        def paged() -> bool:
            _alive(prom.proc, am.proc, sidecar)
            return bool(page_alerts(am.url))

        wait_until(
            paged, 60, "TritonSLOErrorBudgetBurn{severity=page} for fail_always in Alertmanager", interval=1
        )
    (alert,) = page_alerts(am.url)
    assert alert["labels"]["slo"] == f"{MODEL}-availability"
    assert alert["status"]["state"] == "active"
    assert alert["annotations"]["runbook_url"].endswith("/TritonSLOErrorBudgetBurn.md")
    # Every request failed, 10 a second: a total outage pages through the minimum-traffic guard. The
    # value is the long window's failures over min_requests (500) while it has seen fewer requests,
    # 1 / 0.001 = 1000x from then on: above the 14.4x page, at most the exact burn.
    burn = float(re.search(r"budget ([0-9.]+)x too fast", alert["annotations"]["summary"]).group(1))  # type: ignore[union-attr]
    assert 14.4 < burn <= 1000.0, alert["annotations"]
    assert load.stats().errors > 0 and load.stats().ok == 0

    code = main(
        ["alerts", "silence", "--alertmanager", am.url, "--model", MODEL, "--for", "2h", "--comment", "e2e"]
    )
    assert code == 0, capsys.readouterr().err

    def silenced() -> bool:
        alerts = page_alerts(am.url)
        return (
            bool(alerts)
            and alerts[0]["status"]["state"] == "suppressed"
            and bool(alerts[0]["status"]["silencedBy"])
        )

    wait_until(silenced, 15, "the page to be silenced")
    capsys.readouterr()
    assert main(["alerts", "status", "--alertmanager", am.url, "--model", MODEL]) == 0
    rows = [line.split()[:4] for line in capsys.readouterr().out.splitlines()[1:]]
    assert [MODEL, "TritonSLOErrorBudgetBurn", "page", "silenced"] in rows
