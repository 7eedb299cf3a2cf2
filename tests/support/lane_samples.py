"""Code shapes for tests/test_lanes.py: which of them reach a process starter (names say it)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from support.lanes import run_once
from tritonwatch.local.procs import Managed
from tritonwatch.local.triton import LocalTriton


def popen_true() -> int:
    return subprocess.run([sys.executable, "-c", "pass"], check=False).returncode


def exec_true() -> int:
    async def main() -> int:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", "pass")
        return await proc.wait()

    return asyncio.run(main())


def a_triton(repo: Path) -> object:
    return LocalTriton([repo])


def a_triton_imported_in_the_body(repo: Path) -> object:
    from tritonwatch.local.triton import LocalTriton as Triton

    return Triton([repo])


class Stack:
    def start(self) -> object:
        return Managed  # a helper class whose method reaches Managed


def through_a_helper() -> int:
    return popen_true() + 1


def through_a_class() -> object:
    return Stack().start()


@given(st.integers(0, 0))
def fuzzed_popen(n: int) -> None:
    popen_true()


def once_true() -> int:
    return run_once([sys.executable, "-c", "pass"]).returncode


def pure() -> int:
    return sum(range(10))


REACH = {
    "popen_true": True,
    "exec_true": True,
    "a_triton": True,
    "a_triton_imported_in_the_body": True,
    "through_a_helper": True,
    "through_a_class": True,
    "fuzzed_popen": True,
    "once_true": False,
    "pure": False,
}
