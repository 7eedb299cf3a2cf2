"""Test pipeline step ``pre``: 2 ms per execution, ``y = 2x``; a NaN input raises (a BACKEND failure)."""

import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

COST_S = 0.002


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        time.sleep(COST_S)
        xs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        if any(np.isnan(x).any() for x in xs):
            # Raising, not an error response: Triton then counts the failure at this step too.
            raise pb_utils.TritonModelException("pre: NaN input")
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("y", (2 * x).astype(np.float32))])
            for x in xs
        ]
