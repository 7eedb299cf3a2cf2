"""One Triton crash is one clear test failure, with Triton's own last words, never a cascade.

Triton 2.51 can die under OpenTelemetry tracing (signal 11, Triton issue #7795). A test that saw its
Triton die fails with the exit code and the tail of Triton's log; the session fixture then starts
Triton afresh for the next test instead of letting every later test fail on a refused connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest


def crash_report(triton: Any, during: str) -> str:
    return (
        f"tritonserver died {during} (exit code {triton.exit_code()}; signal 11 under OpenTelemetry "
        f"tracing is Triton issue #7795). Last lines of {triton.log_path}:\n{triton.log_tail(25)}"
    )


def fail_if_crashed(triton: Any, during: str) -> None:
    if triton.crashed():
        pytest.fail(crash_report(triton, during), pytrace=False)


@contextmanager
def must_survive(triton: Any, during: str = "during this test") -> Iterator[None]:
    """Wraps a test's work on ``triton``: if Triton died, that (not a refused connection) is the failure."""
    try:
        yield
    except Exception:
        fail_if_crashed(triton, during)
        raise
    fail_if_crashed(triton, during)


def restart_if_dead(triton: Any, timeout: float = 120) -> None:
    """Bring back a Triton that died in an earlier test (which has failed for it)."""
    if not triton.alive():
        triton.stop()  # sweeps what is left of a crashed process group
        triton.start()
        triton.wait_ready(timeout)
