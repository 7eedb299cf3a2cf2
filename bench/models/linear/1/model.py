"""Benchmark python-backend model: a batch of n items costs ``fixed_ms + per_item_ms * n`` (a sleep).

The costs come from the config's ``parameters`` so that the benchmark and the tests read the same
known line; ``y = 2 x`` so a client can check it got its own answer back.
"""

import json
import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def initialize(self, args: dict[str, Any]) -> None:
        params = json.loads(args["model_config"]).get("parameters", {})
        self.fixed_s = float(params["fixed_ms"]["string_value"]) / 1000.0
        self.per_item_s = float(params["per_item_ms"]["string_value"]) / 1000.0

    def execute(self, requests: list[Any]) -> list[Any]:
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        items = sum(int(x.shape[0]) for x in inputs)
        time.sleep(self.fixed_s + self.per_item_s * items)
        return [
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("y", (2 * x).astype(np.float32))])
            for x in inputs
        ]
