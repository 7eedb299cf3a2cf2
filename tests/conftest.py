"""Shared fixtures. ``triton``: ONE real bundled Triton for the whole session, on free loopback ports.

It serves ``model_repository/`` (fraud_detector through the ONNX shim), ``tests/models/``
(fail_always, sleeper, streamer) and ``tests/front_models/`` (flaky, steady: only the HAProxy front test
drives them). A test that needs no flags of its own uses it rather than starting a Triton (each start
costs seconds of the slow lane; the summary counts them). Tests that use it are marked ``triton`` automatically.

The project installs everything its suite needs (``make venv`` the Python packages, ``make debs``
Prometheus, promtool, Alertmanager, amtool, Chromium): a missing one FAILS the tests that need it,
with what to install, rather than skipping them and letting the suite pass untested.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import stacks
from support.lanes import ProcessGuard, ProcessReach, is_slow, longest_first
from support.triton_guard import fail_if_crashed, restart_if_dead

ROOT = Path(__file__).resolve().parent.parent
MODEL_REPOSITORY = ROOT / "model_repository"
TEST_MODELS = ROOT / "tests" / "models"
FRONT_MODELS = ROOT / "tests" / "front_models"
DATA = ROOT / "tests" / "data"
HAVE_PYTRITON = importlib.util.find_spec("pytriton") is not None
NO_PYTRITON = "nvidia-pytriton is not installed (make venv installs it: pip install -e '.[local]'): no bundled Triton to test against"
# Where each outside program comes from.
PACKAGES = {
    "prometheus": "the Debian package prometheus",
    "promtool": "the Debian package prometheus",
    "prometheus-alertmanager": "the Debian package prometheus-alertmanager",
    "amtool": "the Debian package prometheus-alertmanager",
    "chromium": "the Debian package chromium",
    "victoria-metrics": "the Debian package victoria-metrics",
    "vmalert": "the Debian package victoria-metrics",
    "kubectl": "kubectl (apt-get install kubectl, or the upstream binary)",
    "haproxy": "the Debian package haproxy",
    "caddy": "the Debian package caddy",
}


def need_binary(name: str) -> str:
    """The path of ``name``; fails the calling test (not a skip) when it is not installed. A program of
    the Prometheus stack comes from the test's ``platform``; a test without that parameter may not run one."""
    if stacks.ALIASES.get(name, name) in stacks.PROGRAMS:
        return _stack_program(name)
    path = shutil.which(name)
    if path is None:
        where = PACKAGES.get(name, name)
        pytest.fail(
            f"{name} is not installed: the suite needs it (make debs installs {where})", pytrace=False
        )
    return path


# --- two stacks, one suite (tests/support/stacks.py) ------------------------------------------------
_ORIGINAL_PATH = os.environ.get("PATH", "")  # where Debian's programs are found, before any stack's dir
_ACTIVE_STACK: stacks.Stack | None = None  # the stack of the module or test running now


def _stack_program(name: str) -> str:
    if _ACTIVE_STACK is None:
        pytest.fail(
            f"this test runs {name} without the stack parameter: take the `platform` fixture "
            "(tests/support/stacks.py) so it runs on Debian's stack and today's",
            pytrace=False,
        )
    path = _ACTIVE_STACK.programs[stacks.ALIASES.get(name, name)]
    if path is None:
        pytest.fail(_ACTIVE_STACK.missing_line(name), pytrace=False)
    return path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    pinned = any(
        m.args and "platform" in [a.strip() for a in str(m.args[0]).split(",")]
        for m in metafunc.definition.iter_markers("parametrize")
    )
    if "platform" in metafunc.fixturenames and not pinned:  # a test may pin one stack itself
        metafunc.parametrize("platform", stacks.NAMES, indirect=True, scope="module")


@pytest.fixture(scope="module")
def platform(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stacks.Stack]:
    """The stack this module's tests run on (``debian`` or ``current``), its programs first on PATH."""
    global _ACTIVE_STACK
    chosen = stacks.load(request.param, _ORIGINAL_PATH)
    bin_dir = chosen.bin_dir(tmp_path_factory.getbasetemp() / "stacks")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PATH", f"{bin_dir}{os.pathsep}{_ORIGINAL_PATH}")
        _ACTIVE_STACK = chosen
        try:
            yield chosen
        finally:
            _ACTIVE_STACK = None


@pytest.fixture(scope="module")
def every_stack() -> dict[str, stacks.Stack]:
    """Both stacks at once, by name, for a test whose servers run side by side against one system under
    test (one Triton, both Prometheus): it names each program by its stack's absolute path, and a
    program a stack lacks fails the test naming how to get it."""
    return {name: stacks.load(name, _ORIGINAL_PATH) for name in stacks.NAMES}


@pytest.fixture(autouse=True)
def _stack_programs_need_the_stack(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test not run per stack finds, on PATH, scripts in place of the stack's programs that fail
    naming the way out: none runs promtool or Prometheus on one stack only, unnoticed."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "platform" in callspec.params:
        return
    guard = tmp_path_factory.getbasetemp() / "stacks" / "outside" / "bin"
    if not guard.is_dir():
        tmp = guard.with_name("bin.tmp")
        tmp.mkdir(parents=True, exist_ok=True)
        for program in (*stacks.PROGRAMS, *stacks.ALIASES):
            line = (
                f"a test ran {program} without the stack parameter: take the `platform` fixture "
                "(tests/support/stacks.py) so it runs on Debian's stack and today's"
            )
            stacks.refuse_script(tmp / program, line)
        tmp.rename(guard)
    monkeypatch.setenv("PATH", f"{guard}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(sys.modules[__name__], "_ACTIVE_STACK", None)


def need_pytriton() -> None:
    if not HAVE_PYTRITON:
        pytest.fail(NO_PYTRITON, pytrace=False)


# Lanes (tests/support/lanes.py): a test that starts a real process, or says it is slow, is marked slow;
# `make check` runs the others (`pytest -m "not slow"`) and refuses them any process.
_REACH: ProcessReach | None = None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    global _REACH
    _REACH = _REACH or ProcessReach()
    for item in items:
        if "triton" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.triton)
        if is_slow(item, _REACH):
            item.add_marker(pytest.mark.slow)
    longest_first(items)


@pytest.fixture(autouse=True)
def _fast_lane_starts_no_process(  # lanes.GUARD_FIXTURE
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.get_closest_marker("slow"):
        yield
    else:
        yield from ProcessGuard(request.node.nodeid).installed(monkeypatch)


_TRITON_STARTS: list[str] = []  # the test (or fixture setup) during which each LocalTriton.start ran


def pytest_configure(config: pytest.Config) -> None:
    # Counts Triton starts in this process (not those of a CLI the tests run as a subprocess): the slow
    # lane's cost is mostly these, so the summary shows how many there were.
    from tritonwatch.local.triton import LocalTriton

    start = LocalTriton.start

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        _TRITON_STARTS.append(os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" ", 1)[0])
        return start(self, *args, **kwargs)

    LocalTriton.start = counted  # type: ignore[method-assign]


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)  # a pytest-xdist worker: tell the controller
    if workeroutput is not None:
        workeroutput["triton_starts"] = list(_TRITON_STARTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:  # pytest-xdist's controller: a worker is done
    _TRITON_STARTS.extend(getattr(node, "workeroutput", {}).get("triton_starts", ()))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _TRITON_STARTS:
        files = len({test.split("::")[0] for test in _TRITON_STARTS})
        terminalreporter.write_line(f"Triton starts: {len(_TRITON_STARTS)} (during tests of {files} files)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("triton"):
        need_pytriton()
    callspec = getattr(item, "callspec", None)
    on = callspec.params.get("platform") if callspec is not None else None
    # Run on both stacks: one at a time (`platform`), or both at once (`every_stack`).
    names: list[str] = []
    if on is not None:
        names = [on]
    elif "every_stack" in getattr(item, "fixturenames", ()):
        names = list(stacks.NAMES)
    way = "take the `platform` fixture (or `every_stack`) to run on both stacks"
    if item.get_closest_marker("prometheus") and not names:
        pytest.fail(f"{item.nodeid} is marked prometheus: {way}", pytrace=False)
    chosen = [stacks.load(n, _ORIGINAL_PATH) for n in names]
    for mark in item.iter_markers("needs"):  # @pytest.mark.needs("promtool", ...)
        for name in mark.args:
            if stacks.ALIASES.get(name, name) not in stacks.PROGRAMS:
                need_binary(name)
                continue
            if not names:
                pytest.fail(f"{item.nodeid} needs {name}: {way}", pytrace=False)
            for stack in chosen:
                if stack.programs[stacks.ALIASES.get(name, name)] is None:
                    pytest.fail(stack.missing_line(name), pytrace=False)


@pytest.fixture(scope="session")
def triton_server() -> Iterator[Any]:
    """The session's one Triton (use ``triton``, which checks it is alive around each test)."""
    need_pytriton()
    from tritonwatch.local.triton import LocalTriton

    server = LocalTriton([MODEL_REPOSITORY, TEST_MODELS, FRONT_MODELS])
    try:
        server.start()
        server.wait_ready(120)
        yield server
    finally:
        server.close()


@pytest.fixture(scope="session")
def bench_triton() -> Iterator[Any]:
    """A second shared Triton, serving ``bench/models`` (linear, 50 + 6 n ms per batch of n): the advise
    tests' (against Triton, and through Prometheus), started once for both. Its counters carry what
    earlier tests sent: read differences."""
    need_pytriton()
    from tritonwatch.local.triton import LocalTriton

    with LocalTriton([ROOT / "bench" / "models"]) as server:
        server.wait_ready(120)
        yield server


@pytest.fixture
def triton(triton_server: Any) -> Iterator[Any]:
    """A started, ready ``LocalTriton`` (attributes http_url, metrics_url, http_port, ...; kill()/start()).

    If Triton crashes during a test, that test fails with Triton's log tail and the next one gets a
    fresh Triton: one crash, one failure.
    """
    restart_if_dead(triton_server)
    yield triton_server
    fail_if_crashed(triton_server, "during this test")
