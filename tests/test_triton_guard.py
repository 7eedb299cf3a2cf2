"""A Triton that dies mid-test is reported once, clearly, and the next test gets a live Triton."""

from __future__ import annotations

import os
import signal

import pytest
from conftest import TEST_MODELS, need_pytriton
from support.triton_guard import must_survive, restart_if_dead

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
        assert message.startswith("tritonserver died during this test (exit code -11;")
        assert "Last lines of" in message and str(triton.log_path) in message
        assert "Signal (11) received" in message  # Triton's own last words, from its log
        restart_if_dead(triton)
        assert triton.alive() and triton.ready() and not triton.crashed()
    assert not triton.crashed()  # stopped on purpose: not a crash
