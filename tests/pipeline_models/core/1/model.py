"""Test pipeline step ``core``: 10 ms per batch, ``z = y + 1``; ``y`` over 1000 gets an error response.

An error *response* is what Triton 2.51 counts as a success of this step (and a failure of the
ensemble): the tests rely on that to tell the two kinds of failure apart.
"""

import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

COST_S = 0.010
LIMIT = 1000.0


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        time.sleep(COST_S)
        responses = []
        for request in requests:
            y = pb_utils.get_input_tensor_by_name(request, "y").as_numpy()
            if (y > LIMIT).any():
                error = pb_utils.TritonError(f"core: input over {LIMIT:g}")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=error))
            else:
                z = (y + 1).astype(np.float32)
                responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("z", z)]))
        return responses
