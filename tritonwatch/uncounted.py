"""Which models' errors Triton may not count, from their configs (``tritonwatch.modelconfig``).

Triton 2.51 counts a python model's error response (``pb_utils.InferenceResponse(error=...)``, HTTP 500
at the client over ``/infer``) in ``nv_inference_request_success``, never in
``nv_inference_request_failure`` (server#7713, #8521; tensorrtllm_backend#582). ``reasons`` names, per
model, each catalog ``UNCOUNTED_ERROR_REASONS`` key that applies:

    python_backend   backend "python" or a python-based backend (vllm)
    decoupled        model_transaction_policy.decoupled

An ensemble is not marked: measured on Triton 2.51, when a python step returns an error response the
ensemble's own counters do count the failed request (twice, reason OTHER), decoupled step or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from tritonwatch import modelconfig

PYTHON_BACKENDS = frozenset({"python", "vllm"})


@dataclass(frozen=True)
class ModelShape:
    """What of a model config decides whether Triton counts its errors."""

    backend: str = ""
    decoupled: bool = False


def shape(config: object) -> ModelShape:
    """The shape of one config (typed, or its JSON as Triton's HTTP API returns it: ``ValueError``
    when it is not one)."""
    cfg = modelconfig.typed(config)
    return ModelShape(cfg.backend, cfg.decoupled)


def reasons(shapes: Mapping[str, ModelShape]) -> dict[str, tuple[str, ...]]:
    """Per model with any, its reasons in catalog order."""
    out: dict[str, tuple[str, ...]] = {}
    for model, s in sorted(shapes.items()):
        found = ("python_backend",) * (s.backend in PYTHON_BACKENDS) + ("decoupled",) * s.decoupled
        if found:
            out[model] = found
    return out
