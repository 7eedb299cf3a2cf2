"""Test-only decoupled python-backend model: streams ``tokens`` responses (clamped to 1..1000).

It sleeps ``ttft_ms`` before the first token and ``gap_ms`` before each next one (each clamped to
0..10 s), sending one response per token (output ``token``: its index), the last with the final flag.
"""

import time
from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

MAX_DELAY_MS = 10_000.0
MAX_TOKENS = 1000


def _scalar(request: Any, name: str) -> float:
    return float(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> None:
        for request in requests:
            sender = request.get_response_sender()
            n = int(np.clip(_scalar(request, "tokens"), 1, MAX_TOKENS))
            ttft = float(np.clip(_scalar(request, "ttft_ms"), 0.0, MAX_DELAY_MS)) / 1000.0
            gap = float(np.clip(_scalar(request, "gap_ms"), 0.0, MAX_DELAY_MS)) / 1000.0
            time.sleep(ttft)
            for i in range(n):
                if i:
                    time.sleep(gap)
                out = pb_utils.Tensor("token", np.array([i], dtype=np.int32))
                # The last token carries the final flag, as the vLLM and TensorRT-LLM backends send it:
                # one response per token, none empty.
                last = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL if i == n - 1 else 0
                sender.send(pb_utils.InferenceResponse(output_tensors=[out]), flags=last)
        return None
