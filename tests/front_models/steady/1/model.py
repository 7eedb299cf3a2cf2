"""Test-only python model: echoes ``x`` as ``y``, never fails."""

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            out.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("y", x.astype(np.float32))])
            )
        return out
