"""The argv of a real ``tritonwatch sidecar`` child process, for tests that run it as production does."""

from __future__ import annotations

import sys
from pathlib import Path

# The console script of the venv the tests run in, so the child runs the code under test.
TRITONWATCH = Path(sys.executable).parent / "tritonwatch"


def sidecar_argv(triton_http_url: str, triton_metrics_url: str, port: int, *extra: str) -> list[str]:
    """``tritonwatch sidecar`` for that Triton, serving on 127.0.0.1:``port``, scraping every second."""
    return [
        str(TRITONWATCH),
        "sidecar",
        "--triton",
        triton_http_url,
        "--triton-metrics",
        triton_metrics_url,
        "--listen",
        f"127.0.0.1:{port}",
        "--interval",
        "1",
        *extra,
    ]
