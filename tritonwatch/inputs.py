"""Request inputs built from a model's config: what the load driver and the sidecar's canary probe send.

``input_specs(fetch_config(url, model))`` reads names, datatypes, dims and ``max_batch_size`` from
``GET /v2/models/M/config``; ``make_inputs(specs, rng)`` builds one request's random tritonclient inputs
(numpy and tritonclient are imported there, so importing this module costs nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import requests

from tritonwatch.errors import TritonwatchError

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


def input_specs(config: dict[str, Any], batch: int = 1) -> list[InputSpec]:
    """Request shapes from a model config as Triton's HTTP API returns it (variable dims become 1)."""
    batched = int(config.get("max_batch_size", 0)) > 0
    specs = []
    for item in config.get("input", []):
        dims = tuple(max(int(d), 1) for d in item.get("dims", []))
        dtype = _wire_type(item["data_type"])
        if dtype not in _NUMPY_TYPES:
            raise TritonwatchError(
                f"model config input {item['name']}: unsupported data_type {item['data_type']}"
            )
        specs.append(InputSpec(item["name"], dtype, ((batch,) if batched else ()) + dims))
    if not specs:
        raise TritonwatchError(f"model config of {config.get('name', '?')} lists no inputs")
    return specs


def fetch_config(triton_url: str, model: str, timeout: float = 5.0) -> dict[str, Any]:
    url = f"{triton_url.rstrip('/')}/v2/models/{model}/config"
    try:
        resp = requests.get(url, timeout=timeout)
    except requests.RequestException as exc:
        raise TritonwatchError(f"--triton {triton_url}: cannot reach {url} ({type(exc).__name__})") from None
    if resp.status_code != 200:
        # One line whatever the body (a proxy's HTML error page has many).
        body = " ".join(resp.text.split())[:200]
        raise TritonwatchError(f"--model {model}: {url} answered {resp.status_code}: {body}")
    try:
        config = resp.json()
    except ValueError:  # not JSON: something else answers on that port
        config = None
    if not isinstance(config, dict):
        raise TritonwatchError(f"--triton {triton_url}: {url} answered 200 without a JSON model config")
    return config


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
