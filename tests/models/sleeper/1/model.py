"""Test-only python-backend model: sleeps ``delay_ms`` (clamped to 0..10 s) and returns it.

The sleep is the whole of ``execute``, so Triton's compute_infer phase for a request is the requested
delay plus the backend's small fixed overhead.
"""

import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

MAX_DELAY_MS = 10_000.0


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            delay = pb_utils.get_input_tensor_by_name(request, "delay_ms").as_numpy()
            ms = float(np.clip(delay.reshape(-1)[0], 0.0, MAX_DELAY_MS))
            time.sleep(ms / 1000.0)
            out = pb_utils.Tensor("slept_ms", np.array([ms], dtype=np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
