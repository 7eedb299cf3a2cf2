"""Test-only python-backend model: echoes ``block``; as ``wedge``, blocks in ``execute`` for ever when
``block`` > 0. Copies served under other names never block, whatever a canary probe sends them.

Only stopping Triton (and killing its process group, as ``LocalTriton.stop`` does) ends the stub.
"""

import threading
from typing import Any

import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

NEVER = threading.Event()  # nothing sets it


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        self.can_block = args["model_name"] == "wedge"

    def execute(self, requests: list[Any]) -> list[Any]:
        responses = []
        for request in requests:
            block = pb_utils.get_input_tensor_by_name(request, "block").as_numpy()
            if self.can_block and float(block.reshape(-1)[0]) > 0:
                NEVER.wait()
            out = pb_utils.Tensor("echo", block.reshape(1))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
