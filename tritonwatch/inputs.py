"""Request inputs built from a model's config: what the load driver and the sidecar's canary probe send.

``input_specs(fetch_config(url, model))`` reads names, datatypes, dims and ``max_batch_size`` from
the model's config (``tritonwatch.tritonapi``, ``tritonwatch.modelconfig``); ``make_inputs(specs, rng)`` builds one request's random tritonclient inputs
(numpy and tritonclient are imported there, so importing this module costs nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonwatch import modelconfig
from tritonwatch.errors import TritonwatchError
from tritonwatch.modelconfig import ModelConfig
from tritonwatch.tritonapi import ScrapeError, TritonClient

FLOAT_TYPES = ("FP16", "FP32", "FP64")
_NUMPY_TYPES = {
    "FP16": "float16",
    "FP32": "float32",
    "FP64": "float64",
    "INT8": "int8",
    "INT16": "int16",
    "INT32": "int32",
    "INT64": "int64",
    "UINT8": "uint8",
    "UINT16": "uint16",
    "UINT32": "uint32",
    "UINT64": "uint64",
    "BOOL": "bool",
    "BYTES": "object",
}


@dataclass(frozen=True)
class InputSpec:
    name: str
    datatype: str  # Triton wire type: FP32, INT64, BYTES, ...
    shape: tuple[int, ...]  # full request shape, batch dimension included when the model batches


def _wire_type(config_type: str) -> str:
    t = config_type.removeprefix("TYPE_")
    return "BYTES" if t == "STRING" else t


def input_specs(config: ModelConfig | Mapping[str, Any], batch: int = 1) -> list[InputSpec]:
    """Request shapes from a model config, typed or as Triton's HTTP API returns it (variable dims
    become 1)."""
    try:
        cfg = modelconfig.typed(config)
    except ValueError as exc:
        raise TritonwatchError(f"model config: {exc}") from None
    batched = cfg.max_batch_size > 0
    specs = []
    for item in cfg.inputs:
        dims = tuple(max(d, 1) for d in item.dims)
        dtype = _wire_type(item.data_type)
        if dtype not in _NUMPY_TYPES:
            raise TritonwatchError(f"model config input {item.name}: unsupported data_type {item.data_type}")
        specs.append(InputSpec(item.name, dtype, ((batch,) if batched else ()) + dims))
    if not specs:
        raise TritonwatchError(f"model config of {cfg.name or '?'} lists no inputs")
    return specs


def fetch_config(triton_url: str, model: str, timeout: float = 5.0) -> ModelConfig:
    """The model's config from Triton's HTTP API; a ``TritonwatchError`` naming the flag and URL."""
    client = TritonClient(triton_url, timeout)
    url = client.config_url(model)
    try:
        answer = client.config_json(model)
    except ScrapeError as exc:
        if exc.reason == "http_status":
            raise TritonwatchError(f"--model {model}: {exc}") from None
        if exc.unreachable:
            raise TritonwatchError(f"--triton {triton_url}: cannot reach {url} ({exc.reason})") from None
        if exc.reason == "bad_json":  # not JSON, or not an object: something else answers on that port
            raise TritonwatchError(
                f"--triton {triton_url}: {url} answered 200 without a JSON model config"
            ) from None
        raise TritonwatchError(f"--triton {triton_url}: {exc}") from None
    finally:
        client.close()
    try:
        return modelconfig.parse(answer)
    except ValueError as exc:
        raise TritonwatchError(f"--triton {triton_url}: {url}: {exc}") from None


def make_inputs(specs: Sequence[InputSpec], rng: Any, invalid: bool = False) -> list[Any]:
    """Random valid inputs for one request (a NaN in one float element when ``invalid``)."""
    import numpy as np
    import tritonclient.http as httpclient

    inputs = []
    for spec in specs:
        np_type = _NUMPY_TYPES[spec.datatype]
        if spec.datatype in FLOAT_TYPES:
            arr = rng.standard_normal(spec.shape).astype(np_type)
            if invalid:
                arr.flat[rng.integers(arr.size)] = np.nan
        elif spec.datatype == "BOOL":
            arr = rng.integers(0, 2, spec.shape).astype(bool)
        elif spec.datatype == "BYTES":
            arr = np.array([str(v).encode() for v in rng.integers(0, 10**9, spec.shape).flat], dtype=object)
            arr = arr.reshape(spec.shape)
        else:
            arr = rng.integers(0, 100, spec.shape).astype(np_type)
        inp = httpclient.InferInput(spec.name, list(spec.shape), spec.datatype)
        inp.set_data_from_numpy(arr, binary_data=True)
        inputs.append(inp)
    return inputs
