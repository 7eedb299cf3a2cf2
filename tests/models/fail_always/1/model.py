"""Test-only python-backend model: every execution raises, so Triton counts each request as failed.

Raising is what makes the failure count: Triton 2.51's python backend reports a response carrying an
error as a success in its statistics (``nv_inference_request_failure`` stays 0); an exception from
``execute`` is counted as a failure with reason ``BACKEND``.
"""

from typing import Any

import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        raise pb_utils.TritonModelException("fail_always: this model always fails")
