"""Scenarios through promtool: ``tritonwatch rules`` on an SLO file written here, then promtool's unit-test
engine over the test's own cases (``ALERTS`` and the records at each evaluation)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tritonwatch.cli import main


def run(
    tmp_path: Path,
    slo: dict[str, Any],
    interval: str,
    cases: list[dict[str, Any]],
    files: str = "*.rules.yml",
    timeout: float = 300,
) -> None:
    """Generate the rules of ``slo`` and run ``cases`` against its rule files named by ``files`` (a glob),
    evaluated each ``interval``."""
    (tmp_path / "slo.yaml").write_text(yaml.safe_dump(slo))
    out = tmp_path / "rules"
    assert main(["rules", "--slo", str(tmp_path / "slo.yaml"), "--out", str(out)]) == 0
    test = {
        "rule_files": [str(p) for p in sorted(out.glob(files))],
        "evaluation_interval": interval,
        "tests": cases,
    }
    (tmp_path / "scenario.test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    done = subprocess.run(
        ["promtool", "test", "rules", str(tmp_path / "scenario.test.yml")],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
