"""One Triton crash is one clear test failure, with Triton's own last words, never a cascade.

Triton 2.51 can die under OpenTelemetry tracing (signal 11, Triton issue #7795), and, rarely, while it
writes a trace file for every request of a decoupled (streaming) model (a libc trap, seen about once
in several thousand streamed requests with four clients; never in a 150 s run of 1,500 alone). A test
that saw its Triton die fails with the exit code and the tail of Triton's log; the session fixture then
starts Triton afresh for the next test instead of letting every later test fail on a refused connection.

The streaming tests, whose truth is a whole run on one Triton, use ``once_more_after_a_crash``: a run
that saw Triton die is run again on a fresh Triton, once, with a warning that carries Triton's last
words. Only a crash of Triton's own process earns the second run; any failed assertion fails at once.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
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


class TritonCrashed(Exception):
    """Triton's process died under a run (its message is ``crash_report``)."""


class TritonCrashWarning(UserWarning):
    """A run was repeated because Triton died under it; the message is Triton's crash report."""


@contextmanager
def crash_is_named(triton: Any, during: str) -> Iterator[None]:
    """Whatever fails in the block fails as ``TritonCrashed`` when Triton died meanwhile."""
    try:
        yield
    except Exception as exc:
        if triton.crashed():
            raise TritonCrashed(crash_report(triton, during)) from exc
        raise
    if triton.crashed():
        raise TritonCrashed(crash_report(triton, during))


def once_more_after_a_crash(run: Callable[[Path], None], tmp: Path) -> None:
    """``run`` in a folder of its own; again in another, once, if Triton died under the first."""
    try:
        run(tmp / "run-1")
    except TritonCrashed as crash:
        warnings.warn(TritonCrashWarning(f"run repeated on a fresh Triton: {crash}"), stacklevel=2)
    else:
        return
    try:
        run(tmp / "run-2")
    except TritonCrashed as crash:
        pytest.fail(f"Triton died under two runs in a row: {crash}", pytrace=False)
