"""Test lanes by construction: a test that starts a real process is in the slow lane.

``is_slow(item)`` decides at collection time, from the code itself rather than from a list of test
ids (a renamed or a new test keeps or gets its lane): a test is slow when

- it is marked ``slow`` (a slow pure-Python test says so next to itself), ``triton``, ``prometheus``
  or ``needs(...)`` (it runs an installed program), or
- its body, one of its fixtures, or a helper of the tests' own they call (followed through functions
  and classes defined in this repository) reaches a process starter: the ``subprocess`` or
  ``multiprocessing`` modules, ``asyncio.create_subprocess_*``, ``os.fork``/``posix_spawn``/``system``,
  or ``tritonwatch.local.procs.Managed`` (every process the product starts goes through it).

One door stays open in the fast lane: ``run_once``, a program that runs once to its end within a short
timeout (a Python runner sweeping 184 bad command lines in 2 s, a one-shot check). It is cheap and
starts no server, so reaching it does not make a test slow, and the guard lets it through.

That reading follows names, so it can miss a process started behind a dynamic call (``cli.main([...])``
dispatching to ``demo``). ``ProcessGuard`` closes that gap: in a test not in the slow lane, starting a
process fails loudly, naming the way out, so nothing that starts one can slip into the fast lane.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
import multiprocessing
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
_VENV = ROOT / ".venv"

# Markers that put a test in the slow lane: it says so, or it needs a real Triton or an installed program.
SLOW_MARKERS = ("slow", "triton", "prometheus", "needs")
_OUR_PACKAGES = {"tritonwatch", "support", "conftest"}
# The autouse fixture that installs ProcessGuard names process starters to refuse them: not a reach.
GUARD_FIXTURE = "_fast_lane_starts_no_process"

_SINK_MODULES = (subprocess, multiprocessing)
_SINK_NAMES = {
    (asyncio, "create_subprocess_exec"),
    (asyncio, "create_subprocess_shell"),
    (os, "fork"),
    (os, "forkpty"),
    (os, "posix_spawn"),
    (os, "posix_spawnp"),
    (os, "system"),
    (os, "popen"),
}


_ONE_SHOT: contextvars.ContextVar[bool] = contextvars.ContextVar("one_shot", default=False)


def run_once(argv: list[str], *, timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """``subprocess.run(argv, timeout=timeout, ...)``: a program run to its end, allowed in the fast lane."""
    token = _ONE_SHOT.set(True)
    try:
        return subprocess.run(argv, timeout=timeout, check=False, **kwargs)
    finally:
        _ONE_SHOT.reset(token)


def _sinks() -> set[int]:
    found = {id(getattr(module, name)) for module, name in _SINK_NAMES if hasattr(module, name)}
    from tritonwatch.local.procs import Managed

    found.add(id(Managed))
    return found


def _ours(obj: object) -> bool:
    """Defined in this repository (tests and product), not in the standard library or the venv."""
    try:
        source = inspect.getsourcefile(obj)  # type: ignore[arg-type]
    except TypeError:
        return False
    if source is None:
        return False
    path = Path(source).resolve()
    return path.is_relative_to(ROOT) and not path.is_relative_to(_VENV)


class ProcessReach:
    """Whether code reaches a process starter; memoised over the session (helpers are shared)."""

    def __init__(self) -> None:
        self._sinks = _sinks()
        self._memo: dict[int, bool] = {id(run_once): False}  # the fast lane's one open door

    def reaches(self, obj: object) -> bool:
        key = id(obj)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = False  # a cycle reaches nothing new
        result = self._reaches(obj)
        self._memo[key] = result
        return result

    def _reaches(self, obj: object) -> bool:
        if id(obj) in self._sinks or any(obj is module for module in _SINK_MODULES):
            return True
        if getattr(obj, "__module__", None) == __name__:
            return False  # this machinery names process starters to find or refuse them; it starts none
        if isinstance(obj, (staticmethod, classmethod)):
            return self.reaches(obj.__func__)
        if isinstance(obj, property):
            return any(self.reaches(f) for f in (obj.fget, obj.fset, obj.fdel) if f is not None)
        if isinstance(obj, types.MethodType):
            return self.reaches(obj.__func__)
        # functools.wraps keeps the original as __wrapped__, Hypothesis's @given as .hypothesis.inner_test
        wrapped = getattr(obj, "__wrapped__", None) or getattr(
            getattr(obj, "hypothesis", None), "inner_test", None
        )
        if isinstance(obj, types.FunctionType):
            if wrapped is not None and self.reaches(wrapped):
                return True
            if not _ours(obj):
                return False
            cells = [c.cell_contents for c in obj.__closure__ or () if _filled(c)]
            return self._code_reaches(obj.__code__, obj.__globals__) or any(self.reaches(c) for c in cells)
        if isinstance(obj, type):
            if not _ours(obj):
                return False
            members = [m for klass in obj.__mro__ if _ours(klass) for m in vars(klass).values()]
            return any(self.reaches(m) for m in members)
        return False

    def _code_reaches(self, code: types.CodeType, namespace: dict[str, Any]) -> bool:
        names = set(code.co_names)
        for name in names:
            value = namespace[name] if name in namespace else _imported_here(name)
            if value is None:
                continue
            if self.reaches(value):
                return True
            if isinstance(value, types.ModuleType):
                # module.attribute: the attribute names sit in the same co_names.
                for attribute in names:
                    member = vars(value).get(attribute)  # no module __getattr__ (numpy warns)
                    if member is not None and self.reaches(member):
                        return True
        nested = (c for c in code.co_consts if isinstance(c, types.CodeType))
        return any(self._code_reaches(c, namespace) for c in nested)


def _imported_here(name: str) -> types.ModuleType | None:
    """A module a function imports in its body (``from tritonwatch.local.triton import LocalTriton`` puts
    the module's dotted name and ``LocalTriton`` in co_names): ours are imported to be read."""
    if name.split(".")[0] not in _OUR_PACKAGES:
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def is_slow(item: pytest.Item, reach: ProcessReach) -> bool:
    if any(item.get_closest_marker(name) for name in SLOW_MARKERS):
        return True
    function = getattr(item, "function", None)
    if function is not None and reach.reaches(function):
        return True
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in info.names_closure:
        if name == GUARD_FIXTURE:
            continue
        for definition in info.name2fixturedefs.get(name, ()):
            if reach.reaches(definition.func):
                return True
    return False


def _importing() -> bool:
    """Inside a module's first import: a program run once by import-time code (numpy.testing runs lscpu,
    ctypes.util.find_library runs ldconfig) is that module's one-off cost, not the test's doing."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_filename == "<frozen importlib._bootstrap>":
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class ProcessGuard:
    """In a fast-lane test, starting any process fails, with the test's name and the way out."""

    def __init__(self, test: str) -> None:
        self.test = test

    def refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(
            f"{self.test} starts a process, so it belongs in the slow lane: start it through a fixture or a "
            "tests/support helper that calls subprocess or tritonwatch.local.procs.Managed (the lane follows "
            "them), or mark the test @pytest.mark.slow (tests/support/lanes.py)"
        )

    def installed(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        refuse: Callable[..., Any] = self.refuse
        execute_child = subprocess.Popen._execute_child  # type: ignore[attr-defined]

        def execute_once(popen: subprocess.Popen[Any], *args: Any, **kwargs: Any) -> Any:
            if not _ONE_SHOT.get() and not _importing():
                refuse()
            return execute_child(popen, *args, **kwargs)

        # Popen._execute_child is the one door of subprocess.run/Popen and of asyncio's subprocesses.
        monkeypatch.setattr(subprocess.Popen, "_execute_child", execute_once)
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "popen"):
            if hasattr(os, name):
                monkeypatch.setattr(os, name, refuse)
        yield


# The slow lane's longest files, longest first (--durations of fresh-clone runs, 7 Dec 2026: minutes of
# setup and calls per file on 3 workers). pytest-xdist's --dist loadfile hands out files with the most tests first,
# so the long files of few tests (test_wheel.py, test_stall_e2e.py) ran last, alone on one worker while
# the others sat idle. With --no-loadscope-reorder (the Makefile) it hands them out in collection order:
# this order, the long files first, overlapping the many short ones.
LONGEST_FIRST = (
    "test_wheel.py",  # ~7 min: a wheel built and installed, the first hour of the docs on both stacks
    "test_fleet_topology.py",  # ~5.3 min
    "test_init.py",  # ~2.7 min: promtool on an ensemble's file of 4 objectives, both stacks
    "test_kubernetes_cluster.py",  # ~2.5 min under load: a control plane, 200 models applied, a page routed
    "test_stall_e2e.py",  # ~2.2 min: the rule's 2-minute window
    "test_alerts_rules.py",
    "test_advise_prometheus.py",
    "test_replicas.py",
    "test_llm_streaming.py",
    "test_dashboards_llm_live.py",
    "test_llm_slo.py",
    "test_kubernetes_operators.py",
    "test_trace_budget.py",
)


def longest_first(items: list[pytest.Item]) -> None:
    """Reorders ``items`` in place: the files of ``LONGEST_FIRST`` first, in its order, each file's
    tests kept together and in their order (module-scoped servers start once)."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
