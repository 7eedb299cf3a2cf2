"""fraud_pipeline step 1: standardise raw features, ``(raw - MEAN) / SCALE`` per feature.

A NaN stays NaN, so fraud_detector refuses it as it refuses a NaN sent to it directly.
"""

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

# Per-feature mean and scale of the raw features (the demo's load sends standard normal features,
# which these map to standard normal again: the identity keeps fraud_detector's scores as they were).
MEAN = np.zeros(10, dtype=np.float32)
SCALE = np.ones(10, dtype=np.float32)


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            raw = pb_utils.get_input_tensor_by_name(request, "raw_features").as_numpy()
            scaled = ((raw - MEAN) / SCALE).astype(np.float32)
            responses.append(
                pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("input_features", scaled)])
            )
        return responses
