"""Test pipeline step ``post``: 1 ms per execution, returns its input as ``out``."""

import time
from typing import Any

import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

COST_S = 0.001


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        time.sleep(COST_S)
        return [
            pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("out", pb_utils.get_input_tensor_by_name(r, "z").as_numpy())]
            )
            for r in requests
        ]
