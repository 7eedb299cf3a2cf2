"""What ``tritonwatch demo`` drives and reports: its load pattern, what it saw, and the plain-text
``demo summary`` (each alert with the load phase it first fired in and whether the demo expected it
there, the requests and errors of each phase, and what the uncounted-errors marker on a model served
through the ONNX shim means)."""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field

from tritonwatch import catalog


@dataclass
class Phase:
    name: str
    start: float  # fraction of the run
    concurrency: int
    error_ratio: float


# Steady traffic, a burst, a failure episode (invalid inputs fail in the model), then recovery.
PATTERN = (
    Phase("steady", 0.0, 4, 0.0),
    Phase("burst", 0.25, 12, 0.0),
    Phase("failures", 0.45, 4, 0.3),
    Phase("recovery", 0.75, 4, 0.0),
)
# What the demo's load makes fire with its own SLO file, and in which phase: (alert, model, severity)
# -> phase. The failure episode's errors surface at the model clients call; any other alert, or one of
# these in another phase, is flagged in the summary as unexpected.
EXPECTED = {
    (catalog.SLO_BURN_ALERT, "fraud_pipeline", "page"): "failures",
    (catalog.SLO_BURN_ALERT, "fraud_pipeline", "ticket"): "failures",
}


@dataclass
class PhaseLoad:
    """What the load sent in one phase (all its runs, all models), as its clients saw it."""

    requests: int = 0
    errors: int = 0
    invalid: int = 0  # sent with an invalid input on purpose: each fails in the model

    @property
    def error_ratio(self) -> float:
        return self.errors / self.requests if self.requests else 0.0


@dataclass
class Seen:
    # (alert name, model, severity) -> (seconds into the demo, load phase) when first seen firing
    alerts: dict[tuple[str, str, str], tuple[float, str]] = field(default_factory=dict)
    # load phase -> what was sent in it
    phases: dict[str, PhaseLoad] = field(default_factory=dict)
    # models served through the python-backend ONNX shim (the bundled Triton has no ONNX Runtime backend)
    shimmed: tuple[str, ...] = ()
    # model -> reasons the sidecar marks it with (tritonwatch_model_uncounted_errors_info)
    uncounted: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # what should fire, and in which phase: EXPECTED with the demo's own models and SLO file; nothing is
    # known of another file's (each alert's verdict is then "-")
    expected: dict[tuple[str, str, str], str] = field(default_factory=lambda: dict(EXPECTED))
    # ensemble -> its steps in order, as the sidecar serves them (tritonwatch_ensemble_step_info)
    pipelines: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # seconds into the demo and exit code of each time the bundled Triton died on its own
    triton_deaths: list[tuple[float, int | None]] = field(default_factory=list)


def fmt_value(value: float | None, kind: str) -> str:
    if value is None or math.isnan(value):
        return "-"
    if kind == "ratio":
        return f"{value * 100:.1f}%"
    if kind == "ms":
        return f"{value * 1e6:.0f} us" if value < 0.001 else f"{value * 1000:.1f} ms"
    return f"{value:.1f}"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def shim_note(model: str, reasons: tuple[str, ...]) -> str:
    """Why a model served through the ONNX shim carries the uncounted-errors marker, and what it means."""
    return (
        f"{model} is an ONNX model served here through a python-backend shim (the bundled Triton has no "
        f"ONNX Runtime backend), so the sidecar marks it ({', '.join(reasons)}): Triton counts a python "
        "model's error *responses* as successes. The shim raises on an invalid input instead, which Triton "
        "does count as a failure, and in production (ONNX Runtime backend) the marker does not apply. "
        f"{catalog.SLO_ERRORS_UNCOUNTED_ALERT} fires only for an availability objective on a marked model: "
        "the demo's SLO file has none (the clients' objective is on the ensemble), so it does not page here; "
        "with an SLO file that has one it fires, and is not an outage."
    )


def _expected(key: tuple[str, str, str], phase: str, seen: Seen) -> str:
    name, model, _severity = key
    if name == catalog.SLO_ERRORS_UNCOUNTED_ALERT and model in seen.shimmed:
        return "expected: the python shim marker, see the note below"
    if not seen.expected:
        return "-"
    want = seen.expected.get(key)
    if want is None:
        return "UNEXPECTED"
    return "expected" if want == phase else f"UNEXPECTED here (expected in {want})"


def summary_text(rows: dict[str, dict[str, float]], seen: Seen) -> str:
    lines = ["demo summary", ""]
    header = ["model", "req/s", "p99", "batch eff", "cache hit"]
    table = [header]
    for model, row in sorted(rows.items()):
        table.append(
            [
                model,
                fmt_value(row.get("rate"), "num"),
                fmt_value(row.get("p99"), "ms"),
                fmt_value(row.get("batch_eff"), "ratio"),
                fmt_value(row.get("cache"), "ratio"),
            ]
        )
    lines += [r.removeprefix("  ") for r in _table(table)]
    if seen.pipelines:
        lines += ["", "pipelines (each client request counted once, at the ensemble; its steps follow):"]
        lines += [f"  {m}: {' -> '.join(steps)}" for m, steps in sorted(seen.pipelines.items())]
    if seen.triton_deaths:
        lines += ["", "Triton 2.51 died on its own and was started again (its tracing crashes now and then):"]
        lines += [f"  at {at:.0f}s, exit code {code}" for at, code in seen.triton_deaths]
    if seen.phases:
        lines += ["", "load by phase (as its clients saw it; invalid: inputs sent to fail on purpose):"]
        phase_rows = [["phase", "requests", "errors", "error %", "invalid sent"]]
        for phase in [p.name for p in PATTERN if p.name in seen.phases]:
            load = seen.phases[phase]
            phase_rows.append(
                [phase, str(load.requests), str(load.errors), f"{load.error_ratio:.1%}", str(load.invalid)]
            )
        lines += _table(phase_rows)
    lines += ["", "alerts that fired (first firing, in the load phase then):"]
    if not seen.alerts:
        lines.append("  (none)")
    else:
        alert_rows = [["alert", "model", "severity", "at", "phase", "expected?"]]
        for key, (at, phase) in sorted(seen.alerts.items(), key=lambda kv: kv[1][0]):
            name, model, severity = key
            alert_rows.append(
                [name, model or "-", severity or "-", f"{at:.0f}s", phase, _expected(key, phase, seen)]
            )
        lines += _table(alert_rows)
    missing = [k for k, phase in seen.expected.items() if k not in seen.alerts and phase in seen.phases]
    for name, model, severity in missing:
        lines.append(f"  expected but not seen: {name} model={model} severity={severity}")
    notes = [shim_note(m, seen.uncounted[m]) for m in seen.shimmed if m in seen.uncounted]
    for n in notes:
        lines += ["", *textwrap.wrap(n, 100, initial_indent="note: ", subsequent_indent="  ")]
    return "\n".join(lines)
