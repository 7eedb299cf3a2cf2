"""``tritonwatch demo``'s log and summary. The whole demo (the stack runs, the failure episode pages the
pipeline its clients call, nothing is left behind) runs from the installed wheel as README shows it, on
both stacks: ``test_wheel.py``'s docs test, with ``support.demo_summary.check``, whose verdicts are
tested here on summaries with known numbers."""

from __future__ import annotations

from decimal import Decimal

import pytest
from support.demo_summary import alert_rows, check


def test_the_log_shows_latencies_in_ms_as_the_table_does() -> None:
    """The non-live log once printed p50 as 0.0 (seconds to 4 places) beside a p99 of 11 ms."""
    from tritonwatch.local.demo import _log_row

    row = {"rate": 3719.84, "errors": 0.0071, "p50": 1.7e-05, "p99": 0.0112, "queue": 0.442, "cache": 0.75}
    assert _log_row("fraud_detector", row) == (
        "fraud_detector req/s=3719.8 errors=0.7% p50=17 us p99=11.2 ms queue share=44.2% cache hit=75.0%"
    )


def summary(
    alerts: dict[tuple[str, str, str], tuple[float, str]], died: bool = False, own_slo: bool = True
) -> str:
    from tritonwatch.local.demosummary import EXPECTED, PhaseLoad, Seen, summary_text

    seen = Seen(
        alerts=alerts,
        phases={
            "steady": PhaseLoad(23494, 0, 0),
            "burst": PhaseLoad(19369, 0, 0),
            "failures": PhaseLoad(28048, 10248, 8292),
            "recovery": PhaseLoad(19499, 0, 0),
        },
        shimmed=("fraud_detector",),
        uncounted={"fraud_detector": ("python_backend",)},
        triton_deaths=[(50.0, -11)] if died else [],
        expected=dict(EXPECTED) if own_slo else {},
    )
    return summary_text({"fraud_pipeline": {"rate": 785.3, "p99": 0.0327}}, seen)


PAGE = ("TritonSLOErrorBudgetBurn", "fraud_pipeline", "page")
TICKET = ("TritonSLOErrorBudgetBurn", "fraud_pipeline", "ticket")
UNCOUNTED = ("TritonSLOErrorsUncounted", "fraud_detector", "ticket")


def test_the_summary_ties_each_alert_to_its_phase_and_says_which_were_expected() -> None:
    """The numbers of a real 90 s demo: the pipeline pages in the failure episode, as expected; an
    alert in another phase, or one the demo does not expect, is flagged; the shim's marker is
    explained, and its alert (with an SLO file that puts availability on the shimmed model) is
    expected, not an outage."""
    text = summary({TICKET: (42.0, "failures"), PAGE: (43.0, "failures"), UNCOUNTED: (6.0, "steady")})
    tail = text[text.index("load by phase") :]
    assert tail.splitlines()[:14] == [
        "load by phase (as its clients saw it; invalid: inputs sent to fail on purpose):",
        "  phase     requests  errors  error %  invalid sent",
        "  steady    23494     0       0.0%     0",
        "  burst     19369     0       0.0%     0",
        "  failures  28048     10248   36.5%    8292",
        "  recovery  19499     0       0.0%     0",
        "",
        "alerts that fired (first firing, in the load phase then):",
        "  alert                     model           severity  at   phase     expected?",
        "  TritonSLOErrorsUncounted  fraud_detector  ticket    6s   steady    expected: the python shim marker, see the note below",
        "  TritonSLOErrorBudgetBurn  fraud_pipeline  ticket    42s  failures  expected",
        "  TritonSLOErrorBudgetBurn  fraud_pipeline  page      43s  failures  expected",
        "",
        "note: fraud_detector is an ONNX model served here through a python-backend shim (the bundled Triton",
    ]
    assert "Triton counts a python model's error *responses* as successes" in " ".join(tail.split())
    check(text)  # the docs test's checks accept it

    late = summary(
        {PAGE: (70.0, "recovery"), ("TritonQueueTimeHigh", "fraud_detector", "ticket"): (20.0, "burst")}
    )
    rows = alert_rows(late)
    assert rows == [
        ("TritonQueueTimeHigh", "fraud_detector", "ticket", "burst", "UNEXPECTED"),
        (
            "TritonSLOErrorBudgetBurn",
            "fraud_pipeline",
            "page",
            "recovery",
            "UNEXPECTED here (expected in failures)",
        ),
    ]
    assert "  expected but not seen: TritonSLOErrorBudgetBurn model=fraud_pipeline severity=ticket" in late
    with pytest.raises(AssertionError):
        check(late)  # the page is not in the failure episode
    with pytest.raises(AssertionError):
        check(text.replace("  steady    23494     0       0.0%", "  steady    23494     5       0.0%"))
    died = summary(
        {PAGE: (43.0, "failures"), ("TritonSidecarStale", "", "ticket"): (51.0, "failures")}, died=True
    )
    check(died)  # a Triton restart's own alerts are not held against the demo
    # with another SLO file (or models) nothing is known of what should fire: no verdict, nothing missed
    theirs = summary({("TritonQueueTimeHigh", "fraud_detector", "ticket"): (20.0, "burst")}, own_slo=False)
    assert alert_rows(theirs) == [("TritonQueueTimeHigh", "fraud_detector", "ticket", "burst", "-")]
    assert "expected but not seen" not in theirs


def test_the_demo_slo_file_puts_the_clients_objective_on_the_pipeline() -> None:
    """Only fraud_pipeline has availability (and so a page); the shimmed step has none, so the
    uncounted-errors alert has no objective to fire for."""
    from tritonwatch import slo
    from tritonwatch.local.bundled import own_demo_slo

    spec = slo.load(own_demo_slo())
    assert [(o.model, o.kind) for o in spec.objectives() if o.kind in ("availability", "latency")] == [
        ("fraud_pipeline", "availability")
    ]
    (pipeline,) = [s for s in spec.slos if s.model == "fraud_pipeline"]
    assert pipeline.availability is not None and pipeline.availability.objective == Decimal("99.9")
