"""Test BLS model: calls ``pre``, ``core`` and ``post`` in turn, each with the request's trace, so
Triton's traces link every child to this request. A child's error becomes this request's error."""

from typing import Any

import numpy as np
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

CHAIN = (("pre", "x", "y"), ("core", "y", "z"), ("post", "z", "out"))


class TritonPythonModel:
    def execute(self, requests: list[Any]) -> list[Any]:
        return [self._one(r) for r in requests]

    def _one(self, request: Any) -> Any:
        value = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().reshape(1, 1)
        for model, inp, out in CHAIN:
            child = pb_utils.InferenceRequest(
                model_name=model,
                requested_output_names=[out],
                inputs=[pb_utils.Tensor(inp, value.astype(np.float32))],
                trace=request.trace(),
            )
            answer = child.exec()
            if answer.has_error():
                return pb_utils.InferenceResponse(output_tensors=[], error=answer.error())
            value = pb_utils.get_output_tensor_by_name(answer, out).as_numpy()
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("out", value.reshape(1))])
