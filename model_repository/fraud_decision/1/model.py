"""fraud_pipeline step 3: ``is_fraud = fraud_probability >= threshold`` (config parameter ``threshold``)."""

import json
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        params = json.loads(args["model_config"]).get("parameters", {})
        self.threshold = float(params.get("threshold", {}).get("string_value", "0.5"))

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            p = pb_utils.get_input_tensor_by_name(request, "fraud_probability").as_numpy()
            decision = pb_utils.Tensor("is_fraud", (p >= self.threshold).astype(np.bool_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[decision]))
        return responses
