"""What the local stack ships in the wheel, found through package data, never through a checkout.

    model_repository()   the demo's models (fraud_detector: config.pbtxt and model.onnx)
    replay_dir()         recorded GPU node payloads (dcgm_*.txt, triton_gpu_*.txt) for ``--gpu-replay``

In a checkout ``local/model_repository`` is a link to the top-level ``model_repository/``.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from tritonwatch.errors import TritonwatchError


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
