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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.lanes import ProcessGuard, ProcessReach, is_slow
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
    """The path of ``name``; fails the calling test (not a skip) when it is not installed."""
    path = shutil.which(name)
    if path is None:
        where = PACKAGES.get(name, name)
        pytest.fail(
            f"{name} is not installed: the suite needs it (make debs installs {where})", pytrace=False
        )
    return path


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


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _TRITON_STARTS:
        files = len({test.split("::")[0] for test in _TRITON_STARTS})
        terminalreporter.write_line(f"Triton starts: {len(_TRITON_STARTS)} (during tests of {files} files)")


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("triton"):
        need_pytriton()
    for mark in item.iter_markers("needs"):  # @pytest.mark.needs("promtool", ...)
        for name in mark.args:
            need_binary(name)


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
