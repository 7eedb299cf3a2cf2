"""The generated Alertmanager config: amtool accepts it and routes page and ticket where they belong."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from support import stacks

from tritonwatch import slo
from tritonwatch.alerts import alertmanager

ROOT = Path(__file__).resolve().parent.parent
GOLDEN_AM = ROOT / "alerts" / "generated" / "alertmanager.yml"

needs_amtool = stacks.needs("amtool")


def amtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["amtool", *args], capture_output=True, text=True, timeout=60)


def routes_to(config: Path, *labels: str) -> str:
    run = amtool("config", "routes", "test", f"--config.file={config}", *labels)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


@needs_amtool
def test_amtool_accepts_the_committed_config() -> None:
    run = amtool("check-config", str(GOLDEN_AM))
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 receivers" in run.stdout and "3 inhibit rules" in run.stdout


@needs_amtool
@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        (("alertname=TritonSLOErrorBudgetBurn", "severity=page", "slo=m-availability", "model=m"), "page"),
        (
            ("alertname=TritonSLOErrorBudgetBurn", "severity=ticket", "slo=m-availability", "model=m"),
            "ticket",
        ),
        (("alertname=TritonServerDown", "severity=page", "instance=triton:8002"), "page"),
        (("alertname=TritonModelQueueTimeHigh", "severity=ticket", "model=m"), "ticket"),
        (("alertname=Watchdog", "severity=none"), "watchdog"),
        (("alertname=SomethingElse",), "default"),
    ],
)
def test_routes(labels: tuple[str, ...], receiver: str) -> None:
    assert routes_to(GOLDEN_AM, *labels) == receiver
    verify = amtool(
        "config", "routes", "test", f"--config.file={GOLDEN_AM}", f"--verify.receivers={receiver}", *labels
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    wrong = "ticket" if receiver != "ticket" else "page"
    mismatch = amtool(
        "config", "routes", "test", f"--config.file={GOLDEN_AM}", f"--verify.receivers={wrong}", *labels
    )
    assert mismatch.returncode != 0


def test_grouping_and_inhibition_follow_the_slo_file() -> None:
    doc = yaml.safe_load((ROOT / "alerts" / "slo.yaml").read_text())
    doc["spec"]["grouping"] = ["cluster"]
    cfg = alertmanager.config(slo.parse(doc))
    assert cfg["route"]["group_by"] == ["alertname", "model", "slo", "cluster"]
    server_down = cfg["inhibit_rules"][0]
    assert server_down == {
        "source_matchers": ['alertname="TritonServerDown"'],
        "target_matchers": ['model=~".+"', 'instance=~".+"'],
        "equal": ["instance", "cluster"],
    }


@needs_amtool
def test_configured_receivers_with_secret_files_pass_amtool(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "alerts" / "slo.yaml").read_text())
    doc["spec"]["alertmanager"] = {
        "receivers": {
            "page": {"pagerduty_configs": [{"routing_key_file": "/run/secrets/pagerduty"}]},
            "ticket": {"webhook_configs": [{"url": "http://tickets.internal/alertmanager"}]},
        }
    }
    path = tmp_path / "alertmanager.yml"
    path.write_text(yaml.safe_dump(alertmanager.config(slo.parse(doc))))
    run = amtool("check-config", str(path))
    assert run.returncode == 0, run.stdout + run.stderr
    text = path.read_text()
    assert "routing_key_file: /run/secrets/pagerduty" in text and "routing_key:" not in text
