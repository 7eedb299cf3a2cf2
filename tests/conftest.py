"""Shared fixtures. ``triton``: ONE real bundled Triton for the whole session, on free loopback ports.

It serves ``model_repository/`` (fraud_detector through the ONNX shim) and ``tests/models/``
(fail_always, sleeper). Tests that use it are marked ``triton`` automatically.

The project installs everything its suite needs (``make venv`` the Python packages, ``make debs``
Prometheus, promtool, Alertmanager, amtool, Chromium): a missing one FAILS the tests that need it,
with what to install, rather than skipping them and letting the suite pass untested.
"""

from __future__ import annotations

import importlib.util
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.triton_guard import fail_if_crashed, restart_if_dead

ROOT = Path(__file__).resolve().parent.parent
MODEL_REPOSITORY = ROOT / "model_repository"
TEST_MODELS = ROOT / "tests" / "models"
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


# `make check` runs the suite without these (`pytest -m "not slow"`), in under 3 minutes with lint and
# types: tests marked triton or prometheus, the wheel's (they build and install it), and these, each over
# 4 s on the 2-core development machine (`pytest --durations`). `make test` runs everything.
SLOW = {
    "tests/test_fuzz.py::test_reused_parser_gives_what_a_fresh_parse_gives",
    "tests/test_fuzz.py::test_agrees_with_prometheus_client_on_valid_text",
    "tests/test_llm_slo.py::test_ttft_slo_pages_when_first_tokens_slow_down_and_not_on_healthy_traffic",
    "tests/test_alerts_rules.py::test_promtool_passes_with_grouping_labels_and_another_window",
    "tests/test_alerts_rules.py::test_promtool_checks_and_runs_the_committed_rules_and_tests",
    "tests/test_report_prometheus.py",
    "tests/test_gpu_sidecar.py",
    "tests/test_floods.py::test_span_flood_keeps_memory_bounded_and_counts_the_dropped",
    "tests/test_alerts_scenarios.py::test_steady_slow_burn_opens_a_ticket_within_8h_and_never_pages",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "triton" in fixtures:
            item.add_marker(pytest.mark.triton)
        test = item.nodeid.split("[")[0]
        if (
            item.get_closest_marker("triton")
            or item.get_closest_marker("prometheus")
            or "installed" in fixtures  # test_wheel.py: builds the wheel, installs it into a virtualenv
            or test in SLOW
            or test.split("::")[0] in SLOW
        ):
            item.add_marker(pytest.mark.slow)


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

    server = LocalTriton([MODEL_REPOSITORY, TEST_MODELS])
    try:
        server.start()
        server.wait_ready(120)
        yield server
    finally:
        server.close()


@pytest.fixture
def triton(triton_server: Any) -> Iterator[Any]:
    """A started, ready ``LocalTriton`` (attributes http_url, metrics_url, http_port, ...; kill()/start()).

    If Triton crashes during a test, that test fails with Triton's log tail and the next one gets a
    fresh Triton: one crash, one failure.
    """
    restart_if_dead(triton_server)
    yield triton_server
    fail_if_crashed(triton_server, "during this test")
