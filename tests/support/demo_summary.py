"""Checks of ``tritonwatch demo``'s summary, shared by the docs test (the demo from the installed wheel,
on each stack) and ``test_demo.py`` (the same checks on summaries whose verdict is known)."""

from __future__ import annotations

import math
import re

from tritonwatch.local.demosummary import PATTERN

PHASES = {p.name: p for p in PATTERN}
FRESH_INPUTS_PER_REQUEST = 1 / 4  # the demo's load sends each fresh input 1 + repeat (3) times


def section(summary: str, title: str) -> list[str]:
    """The indented lines under the line starting with ``title``, up to the next blank line."""
    lines = summary.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    out = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        out.append(line)
    return out


def phase_loads(summary: str) -> dict[str, tuple[int, int, int]]:
    """phase -> (requests, errors, invalid sent), from the summary's load-by-phase table."""
    header, *rows = section(summary, "load by phase")
    assert header.split() == ["phase", "requests", "errors", "error", "%", "invalid", "sent"], header
    out = {}
    for row in rows:
        phase, requests, errors, ratio, invalid = row.split()
        assert ratio == f"{int(errors) / int(requests):.1%}", row
        out[phase] = (int(requests), int(errors), int(invalid))
    return out


def alert_rows(summary: str) -> list[tuple[str, str, str, str, str]]:
    """(alert, model, severity, phase, verdict) per alert that fired, from the summary's table."""
    lines = section(summary, "alerts that fired")
    if lines == ["  (none)"]:
        return []
    header, *rows = lines
    assert header.split() == ["alert", "model", "severity", "at", "phase", "expected?"], header
    out = []
    for row in rows:
        if row.startswith("  expected but not seen"):
            continue
        found = re.fullmatch(r"  (\S+)\s+(\S+)\s+(\S+)\s+\d+s\s+(\S+)\s+(.+)", row)
        assert found, row
        out.append((found[1], found[2], found[3], found[4], found[5].strip()))
    return out


def check(summary: str) -> None:
    """The failure episode pages the pipeline its clients call, in that phase and as expected; no other
    phase has errors; the failure phase's invalid share is the load's injected ratio (within five
    standard deviations of a binomial over its fresh inputs), and every invalid request failed."""
    loads = phase_loads(summary)
    restarted = "Triton 2.51 died on its own" in summary  # its requests in flight then fail, in any phase
    assert set(loads) <= set(PHASES) and "failures" in loads, loads
    for phase, (requests, errors, invalid) in loads.items():
        injected = PHASES[phase].error_ratio
        assert requests > 0, (phase, loads)
        if injected == 0:
            assert (restarted or errors == 0) and invalid == 0, (phase, loads)
            continue
        fresh = requests * FRESH_INPUTS_PER_REQUEST
        spread = 5 * math.sqrt(injected * (1 - injected) / fresh)
        assert abs(invalid / requests - injected) <= spread, (phase, loads, spread)
        # an invalid input fails its request, and the batch it is executed in (the shim raises)
        assert errors >= invalid, (phase, loads)
    rows = alert_rows(summary)
    assert ("TritonSLOErrorBudgetBurn", "fraud_pipeline", "page", "failures", "expected") in rows, summary
    if not restarted:  # a restart makes alerts of its own
        assert not [r for r in rows if r[4].startswith("UNEXPECTED")], summary
    if "fraud_detector" in summary and "ONNX served through a python-backend shim" in summary:
        assert "note: fraud_detector is an ONNX model served here through a python-backend shim" in summary
