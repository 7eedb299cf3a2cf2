"""``tritonwatch demo``'s log. The whole demo (the stack runs, the failure episode pages, nothing is left
behind) runs from the installed wheel as README shows it, on both stacks: ``test_wheel.py``'s docs test,
which once ran it a second time here, from the checkout."""

from __future__ import annotations


def test_the_log_shows_latencies_in_ms_as_the_table_does() -> None:
    """The non-live log once printed p50 as 0.0 (seconds to 4 places) beside a p99 of 11 ms."""
    from tritonwatch.local.demo import _log_row

    row = {"rate": 3719.84, "errors": 0.0071, "p50": 1.7e-05, "p99": 0.0112, "queue": 0.442, "cache": 0.75}
    assert _log_row("fraud_detector", row) == (
        "fraud_detector req/s=3719.8 errors=0.7% p50=17 us p99=11.2 ms queue share=44.2% cache hit=75.0%"
    )
