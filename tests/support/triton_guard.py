"""One Triton crash is one clear test failure, with Triton's own last words, never a cascade.

Triton 2.51 can die under OpenTelemetry tracing (signal 11, Triton issue #7795), and, now and then, while
it writes a trace file for every request of a decoupled (streaming) model (a libc trap, SIGILL, with
four clients streaming; not reproduced on purpose in 150 s runs of 1,500 streamed requests). A test
that saw its Triton die fails with the exit code and the tail of Triton's log; the session fixture then
starts Triton afresh for the next test instead of letting every later test fail on a refused connection.

The streaming tests, whose truth is a whole run on one Triton, use ``again_after_a_crash``: a run
that saw Triton die is run again on a fresh Triton (up to three runs in all), with a warning that
carries Triton's exit and last words. Only a death of Triton's own process earns another run; any
failed assertion fails at once. (Triton died under 2 of about 8 runs of the 4-client streaming test
on 3 December 2026, by SIGILL, printing nothing.)
"""

from __future__ import annotations

import signal
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def crash_report(triton: Any, during: str) -> str:
    code = triton.exit_code()
    try:
        how = f"{code} ({signal.Signals(-code).name})" if code is not None and code < 0 else str(code)
    except ValueError:
        how = str(code)
    return (
        f"tritonserver died {during} (exit code {how}; Triton 2.51 dies under OpenTelemetry tracing at "
        f"low rates, issue #7795, and now and then under trace files at rate 1 with a decoupled model). "
        f"Last lines of {triton.log_path}:\n{triton.log_tail(25)}"
    )


def fail_if_crashed(triton: Any, during: str) -> None:
    if triton.crashed():
        pytest.fail(crash_report(triton, during), pytrace=False)


@contextmanager
def must_survive(triton: Any, during: str = "during this test") -> Iterator[None]:
    """Wraps a test's work on ``triton``: if Triton died, that (not a refused connection) is the failure."""
    try:
        with crash_is_named(triton, during):
            yield
    except TritonCrashed as crash:
        pytest.fail(str(crash), pytrace=False)


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


def again_after_a_crash(run: Callable[[Path], None], tmp: Path, runs: int = 3) -> None:
    """``run`` in a folder of its own; again in another, up to ``runs`` in all, while Triton dies under it."""
    for n in range(1, runs + 1):
        try:
            run(tmp / f"run-{n}")
        except TritonCrashed as crash:
            if n == runs:
                pytest.fail(f"Triton died under {runs} runs in a row: {crash}", pytrace=False)
            warnings.warn(TritonCrashWarning(f"run {n} repeated on a fresh Triton: {crash}"), stacklevel=2)
        else:
            return
