"""A Triton that dies mid-test is reported once, clearly, and the next test gets a live Triton."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from conftest import TEST_MODELS, need_pytriton
from support.streaming import rejected_by_triton
from support.triton_guard import (
    TritonCrashWarning,
    again_after_a_crash,
    crash_is_named,
    must_survive,
    restart_if_dead,
)

from tritonwatch.local.procs import wait_until

pytestmark = pytest.mark.triton


def test_a_crash_fails_with_the_exit_and_the_log_tail_and_is_restarted() -> None:
    need_pytriton()
    from tritonwatch.local.triton import LocalTriton

    with LocalTriton([TEST_MODELS]) as triton:
        with pytest.raises(pytest.fail.Exception) as failed:
            with must_survive(triton):
                # Signal 11, as in Triton issue #7795 (not kill(): that is a deliberate stop).
                os.kill(triton.pid, signal.SIGSEGV)
                wait_until(lambda: not triton.alive(), 15, "Triton to die")
                raise ConnectionRefusedError("what the test itself would have seen")
        message = str(failed.value)
        assert message.startswith("tritonserver died during this test (exit code -11 (SIGSEGV);")
        assert "Last lines of" in message and str(triton.log_path) in message
        assert "Signal (11) received" in message  # Triton's own last words, from its log
        restart_if_dead(triton)
        assert triton.alive() and triton.ready() and not triton.crashed()
    assert not triton.crashed()  # stopped on purpose: not a crash


class _Process:
    """Stands for a LocalTriton in the guard's eyes: whether it crashed, and its last words."""

    def __init__(self) -> None:
        self.dead = False
        self.log_path = "triton.log"

    def crashed(self) -> bool:
        return self.dead

    def exit_code(self) -> int:
        return -11

    def log_tail(self, lines: int = 30) -> str:
        return "Signal (11) received."


def test_a_run_is_repeated_only_after_triton_died_under_it_three_runs_at_most(tmp_path: Path) -> None:
    runs: list[Path] = []

    def crashing_once(folder: Path) -> None:
        runs.append(folder)
        triton = _Process()
        with crash_is_named(triton, "under the run"):
            if len(runs) == 1:
                triton.dead = True
                raise ConnectionError("what the run saw")

    with pytest.warns(
        TritonCrashWarning,
        match=r"run 1 repeated on a fresh Triton: tritonserver died under the run \(exit code -11 \(SIGSEGV\)",
    ):
        again_after_a_crash(crashing_once, tmp_path)
    assert runs == [tmp_path / "run-1", tmp_path / "run-2"]

    crashed: list[Path] = []

    def always_crashing(folder: Path) -> None:
        crashed.append(folder)
        triton = _Process()
        with crash_is_named(triton, "under the run"):
            triton.dead = True

    with pytest.warns(TritonCrashWarning), pytest.raises(pytest.fail.Exception, match="3 runs in a row"):
        again_after_a_crash(always_crashing, tmp_path)
    assert crashed == [tmp_path / f"run-{n}" for n in (1, 2, 3)]

    failed: list[Path] = []

    def wrong(folder: Path) -> None:
        failed.append(folder)
        with crash_is_named(_Process(), "under the run"):
            raise AssertionError("a wrong value is never run again")

    with pytest.raises(AssertionError, match="never run again"):
        again_after_a_crash(wrong, tmp_path)
    assert failed == [tmp_path / "run-1"]


def test_only_triton_refusing_a_declared_input_is_its_fault() -> None:
    inputs = ("tokens", "ttft_ms", "gap_ms")
    seen = [b'data: {"error":"[request id: <id_unknown>] unknown request input name ttft_ms"}']
    assert rejected_by_triton(400, seen, inputs)
    # A name the model does not declare is the client's mistake; other statuses and errors are not this.
    assert not rejected_by_triton(400, [seen[0].replace(b"ttft_ms", b"prompt")], inputs)
    assert not rejected_by_triton(200, seen, inputs)
    assert not rejected_by_triton(400, [b'data: {"error":"model is not ready"}'], inputs)
