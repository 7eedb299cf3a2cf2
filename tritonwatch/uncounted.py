"""Which models' errors Triton may not count, from their configs (``GET /v2/models/<m>/config``).

Triton 2.51 counts a python model's error response (``pb_utils.InferenceResponse(error=...)``, HTTP 500
at the client) in ``nv_inference_request_success``, never in ``nv_inference_request_failure``
(server#7713, #8521; tensorrtllm_backend#582). ``reasons`` names, per model, each catalog
``UNCOUNTED_ERROR_REASONS`` key that applies:

    python_backend   backend "python" or a python-based backend (vllm)
    decoupled        model_transaction_policy.decoupled
    ensemble_step    an ensemble one of whose steps (at any depth) has a reason above
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

PYTHON_BACKENDS = frozenset({"python", "vllm"})
ENSEMBLE = "ensemble"


@dataclass(frozen=True)
class ModelShape:
    """What of a model config decides whether Triton counts its errors."""

    backend: str = ""
    platform: str = ""
    decoupled: bool = False
    steps: tuple[str, ...] = ()  # an ensemble's step models


def shape(config: object) -> ModelShape:
    """The shape of one config as Triton's HTTP API returns it; ``ValueError`` when it is not one."""
    if not isinstance(config, Mapping):
        raise ValueError("a model config must be an object")
    backend, platform = config.get("backend") or "", config.get("platform") or ""
    if not isinstance(backend, str) or not isinstance(platform, str):
        raise ValueError("backend and platform must be strings")
    policy = config.get("model_transaction_policy") or {}
    if not isinstance(policy, Mapping) or not isinstance(policy.get("decoupled", False), bool):
        raise ValueError("model_transaction_policy.decoupled must be a boolean")
    steps: list[str] = []
    scheduling = config.get("ensemble_scheduling") or {}
    if not isinstance(scheduling, Mapping) or not isinstance(scheduling.get("step") or [], list):
        raise ValueError("ensemble_scheduling.step must be a list")
    for step in scheduling.get("step") or []:
        name = step.get("model_name") if isinstance(step, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError("every ensemble step needs a model_name")
        steps.append(name)
    return ModelShape(backend, platform, bool(policy.get("decoupled", False)), tuple(dict.fromkeys(steps)))


def reasons(shapes: Mapping[str, ModelShape]) -> dict[str, tuple[str, ...]]:
    """Per model with any, its reasons in catalog order. A step whose config is not in ``shapes``
    (not loaded, not read) adds nothing: only what a config shows is claimed."""
    out: dict[str, tuple[str, ...]] = {}

    def own(s: ModelShape) -> list[str]:
        return ["python_backend"] * (s.backend in PYTHON_BACKENDS) + ["decoupled"] * s.decoupled

    def blind_steps(model: str, seen: frozenset[str]) -> bool:
        s = shapes.get(model)
        if s is None or model in seen:
            return False
        if own(s):
            return True
        return any(blind_steps(step, seen | {model}) for step in s.steps)

    for model, s in sorted(shapes.items()):
        found = own(s)
        if s.platform == ENSEMBLE and any(blind_steps(step, frozenset({model})) for step in s.steps):
            found.append("ensemble_step")
        if found:
            out[model] = tuple(found)
    return out
