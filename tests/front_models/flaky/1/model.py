"""Test-only python model: a request with a negative ``x`` gets an error response, any other its echo.

The client chooses which requests fail, so the share of errors is known exactly. The error is a
response (``InferenceResponse(error=...)``, HTTP 500 at the client), not an exception: Triton 2.51
counts it in ``nv_inference_request_success`` and never in ``nv_inference_request_failure``.
"""

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            if float(x[0]) < 0:
                responses.append(
                    pb_utils.InferenceResponse(error=pb_utils.TritonError("flaky: asked to fail"))
                )
            else:
                y = pb_utils.Tensor("y", x.astype(np.float32))
                responses.append(pb_utils.InferenceResponse(output_tensors=[y]))
        return responses
