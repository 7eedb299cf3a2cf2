"""The demo starts a Triton that died on its own again (Triton 2.51's tracing segfaults now and then),
at most ``MAX_TRITON_RESTARTS`` times, and says so in its summary: a fake stack and clock, no process."""

from __future__ import annotations

import argparse
import threading
from typing import Any

import pytest

from tritonwatch.local import demo


class FakeTriton:
    def __init__(self, deaths: int) -> None:
        self.deaths = deaths  # how many times it dies: once at each watch tick until then
        self.restarts = 0
        self.log_path = "tritonserver.log"

    def crashed(self) -> bool:
        return self.restarts < self.deaths

    def exit_code(self) -> int:
        return -11

    def log_tail(self, lines: int = 30) -> str:
        return "Signal (11) received."

    def restart(self, timeout: float = 90.0) -> None:
        self.restarts += 1


class Ticks(threading.Event):
    """A stop event whose wait() is one watch tick: the demo ends after ``ticks`` of them."""

    def __init__(self, ticks: int) -> None:
        super().__init__()
        self.left = ticks

    def wait(self, timeout: float | None = None) -> bool:
        self.left -= 1
        if self.left <= 0:
            self.set()
        return self.is_set()


@pytest.mark.parametrize(("deaths", "restarted"), [(0, 0), (1, 1), (5, demo.MAX_TRITON_RESTARTS)])
def test_a_dead_triton_is_started_again_and_the_summary_says_so(
    monkeypatch: pytest.MonkeyPatch, deaths: int, restarted: int
) -> None:
    monkeypatch.setattr(demo, "model_rows", lambda port: {})
    monkeypatch.setattr(demo, "pipeline_steps", lambda port: {})
    monkeypatch.setattr(demo, "firing_alerts", lambda url: [])
    triton = FakeTriton(deaths)
    stack: Any = argparse.Namespace(
        triton=triton, sidecar=argparse.Namespace(port=1), prometheus=argparse.Namespace(url="")
    )
    load: Any = argparse.Namespace(phase="steady")
    args = argparse.Namespace(no_live=True, duration=0, gpu_replay=False)
    seen = demo.Seen()
    demo._watch(stack, load, seen, args, Ticks(10))
    assert triton.restarts == restarted
    assert [code for _, code in seen.triton_deaths] == [-11] * restarted
    text = demo.summary_text({}, seen)
    assert ("Triton 2.51 died on its own" in text) == (restarted > 0)
    assert text.count("exit code -11") == restarted
