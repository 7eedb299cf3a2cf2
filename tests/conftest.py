"""Shared fixtures. ``triton``: ONE real bundled Triton for the whole session, on free loopback ports.

It serves ``model_repository/`` (fraud_detector through the ONNX shim) and ``tests/models/``
(fail_always). Tests that use it are marked ``triton`` automatically and are skipped, with the
reason, where nvidia-pytriton is not installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MODEL_REPOSITORY = ROOT / "model_repository"
TEST_MODELS = ROOT / "tests" / "models"
DATA = ROOT / "tests" / "data"
HAVE_PYTRITON = importlib.util.find_spec("pytriton") is not None
NO_PYTRITON = (
    "nvidia-pytriton is not installed (pip install -e '.[local]'): no bundled Triton to test against"
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if "triton" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.triton)
        if item.get_closest_marker("triton") and not HAVE_PYTRITON:
            item.add_marker(pytest.mark.skip(reason=NO_PYTRITON))


@pytest.fixture(scope="session")
def triton() -> Iterator[object]:
    """A started, ready ``LocalTriton`` (attributes http_url, metrics_url, http_port, ...; kill()/start())."""
    if not HAVE_PYTRITON:
        pytest.skip(NO_PYTRITON)
    from tritonwatch.local.triton import LocalTriton

    server = LocalTriton([MODEL_REPOSITORY, TEST_MODELS])
    try:
        server.start()
        server.wait_ready(120)
        yield server
    finally:
        server.close()
