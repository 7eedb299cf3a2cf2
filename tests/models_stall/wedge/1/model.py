"""Test-only python-backend model: echoes ``block``; when it is > 0, blocks in ``execute`` for ever.

Only stopping Triton (and killing its process group, as ``LocalTriton.stop`` does) ends the stub.
"""

import threading
from typing import Any

import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

NEVER = threading.Event()  # nothing sets it


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            block = pb_utils.get_input_tensor_by_name(request, "block").as_numpy()
            if float(block.reshape(-1)[0]) > 0:
                NEVER.wait()
            out = pb_utils.Tensor("echo", block.reshape(1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
