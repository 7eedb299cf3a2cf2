"""``tritonwatch demo --duration S``: the whole stack runs, an alert fires, nothing is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import need_pytriton
from support import stacks

pytestmark = pytest.mark.triton


def processes_mentioning(text: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found


def test_demo_runs_fires_an_alert_and_cleans_up(platform: stacks.Stack, tmp_path: Path) -> None:
    need_pytriton()
    workdir = tmp_path / "demo"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tritonwatch",
            "demo",
            "--duration",
            "60",
            "--no-live",
            "--workdir",
            str(workdir),
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "demo summary" in out
    summary = out[out.index("demo summary") :]
    row = next(line for line in summary.splitlines() if line.startswith("fraud_detector"))
    cells = row.split()
    assert float(cells[1]) > 0, row  # request rate
    # p99 from the sampled traces (Triton's summaries are off for a model with the cache on).
    assert cells[3] in ("ms", "us") and float(cells[2]) > 0, row
    assert cells[-1].endswith("%") and 60 <= float(cells[-1].rstrip("%")) <= 90, (
        row
    )  # cache hit, 3 of 4 repeat
    # The pipeline the clients call, and its steps in order (from the sidecar's step info).
    assert "  fraud_pipeline: fraud_scaler -> fraud_detector -> fraud_decision" in summary.splitlines(), (
        summary
    )
    fired = summary[summary.index("alerts that fired:") :]
    assert "TritonSLOErrorBudgetBurn" in fired and "model=fraud_detector" in fired, summary
    assert processes_mentioning(str(workdir)) == []


def test_the_log_shows_latencies_in_ms_as_the_table_does() -> None:
    """The non-live log once printed p50 as 0.0 (seconds to 4 places) beside a p99 of 11 ms."""
    from tritonwatch.local.demo import _log_row

    row = {"rate": 3719.84, "errors": 0.0071, "p50": 1.7e-05, "p99": 0.0112, "queue": 0.442, "cache": 0.75}
    assert _log_row("fraud_detector", row) == (
        "fraud_detector req/s=3719.8 errors=0.7% p50=17 us p99=11.2 ms queue share=44.2% cache hit=75.0%"
    )
