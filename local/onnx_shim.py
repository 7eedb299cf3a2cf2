"""Python-backend model that runs an ONNX file with onnxruntime: the CPU stand-in for Triton's ONNX backend.

``tritonwatch local-triton`` copies this file as ``<model>/<version>/model.py`` of every ONNX model it
serves. It reads input and output names and types from the model config Triton passes in, so one shim
fits any ONNX model. A batch of requests runs as one onnxruntime call (dynamic batching stays real);
a request whose float input holds NaN fails, the realistic invalid-input failure
``tritonwatch load --error-ratio`` uses.

Why a NaN request fails its whole batch: Triton 2.51's python backend counts a response that carries
an error as a *success* in its statistics and ``nv_inference_request_failure`` stays 0 (checked on the
bundled server). Only an exception from ``execute`` is counted as a failure (reason ``BACKEND``), and
it fails every request of that execution, like a poison input in a batched production backend.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils  # type: ignore[import-not-found]

# modelrepo.ONNX_PARAMETER, spelt again: Triton's python stub runs this file on its own, where tritonwatch
# may not be importable (the prepare_copy test holds the two equal).
ONNX_PARAMETER = "tritonwatch_onnx_file"


class TritonPythonModel:
    def initialize(self, args: dict[str, str]) -> None:
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        onnx_file = params.get(ONNX_PARAMETER, {}).get("string_value", "model.onnx")
        path = os.path.join(args["model_repository"], args["model_version"], onnx_file)
        options = ort.SessionOptions()
        # One thread per instance: Triton schedules instances; oversubscribing a small CPU hurts latency.
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
        self.batched = int(config.get("max_batch_size", 0)) > 0
        self.inputs = [(i["name"], pb_utils.triton_string_to_numpy(i["data_type"])) for i in config["input"]]
        self.outputs = [
            (o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]
        ]

    def _invalid(self, arrays: dict[str, Any]) -> str | None:
        for name, arr in arrays.items():
            if arr.dtype.kind == "f" and np.isnan(arr).any():
                return f"input '{name}' contains NaN"
        return None

    def execute(self, requests: list[Any]) -> list[Any]:
        batch = []
        for request in requests:
            arrays = {
                name: pb_utils.get_input_tensor_by_name(request, name).as_numpy().astype(dtype, copy=False)
                for name, dtype in self.inputs
            }
            problem = self._invalid(arrays)
            if problem:
                raise pb_utils.TritonModelException(f"invalid input in batch of {len(requests)}: {problem}")
            batch.append(arrays)
        if self.batched:
            # One onnxruntime call for the whole dynamic batch, split back per request.
            sizes = [arrays[self.inputs[0][0]].shape[0] for arrays in batch]
            feed = {name: np.concatenate([a[name] for a in batch]) for name, _ in self.inputs}
            results = self.session.run([n for n, _ in self.outputs], feed)
            offsets = np.cumsum([0, *sizes])
            per_request = [[r[offsets[k] : offsets[k + 1]] for r in results] for k in range(len(batch))]
        else:
            per_request = [self.session.run([n for n, _ in self.outputs], arrays) for arrays in batch]
        return [
            pb_utils.InferenceResponse(
                output_tensors=[
                    pb_utils.Tensor(name, np.ascontiguousarray(r).astype(dtype, copy=False))
                    for (name, dtype), r in zip(self.outputs, rs, strict=True)
                ]
            )
            for rs in per_request
        ]

    def finalize(self) -> None:
        self.session = None
