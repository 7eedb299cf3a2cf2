"""What the local stack ships in the wheel, found through package data, never through a checkout.

    model_repository()   the demo's models (fraud_detector: config.pbtxt and model.onnx)
    replay_dir()         recorded GPU node payloads (dcgm_*.txt, triton_gpu_*.txt) for ``--gpu-replay``
    own_demo_slo()       the demo's own SLO file (an objective on fraud_pipeline)
    demo_slo(...)        the demo's ``--slo``: its own SLO file for the bundled models only

In a checkout ``local/model_repository`` is a link to the top-level ``model_repository/``.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from tritonwatch.errors import TritonwatchError, UsageError


def package_path(package: str, name: str) -> Path:
    """A file or folder of ``package`` as a real path: Triton, Prometheus and promtool are handed paths.

    Wheels install unpacked, so ``files()`` is a directory on disk; a zipped install is refused by name.
    """
    path = Path(str(resources.files(package) / name))
    if not path.exists():
        raise TritonwatchError(f"{package}: bundled {name} not found at {path} (a broken or zipped install?)")
    return path


def model_repository() -> Path:
    return package_path("tritonwatch.local", "model_repository")


def replay_dir() -> Path:
    return package_path("tritonwatch.local", "replay")


def own_demo_slo() -> Path:
    """The demo's own SLO file: an objective on ``fraud_pipeline``, the model its clients call."""
    return package_path("tritonwatch.local", "demo_slo.yaml")


def demo_slo(slo: str | None, model_repository: str | None) -> str:
    """The SLO file the demo's rules come from: ``--slo`` as given; without it the bundled one, named on
    stderr, which names the bundled models only: with ``--model-repository`` it is required."""
    if slo is not None:
        return slo
    if model_repository:
        raise UsageError("--slo FILE is required with --model-repository: the SLO file for those models")
    own = str(own_demo_slo())
    print(f"tritonwatch demo: no --slo given: the demo's own SLO file {own}", file=sys.stderr)
    return own
