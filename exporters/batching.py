"""The batching part of a model's config, as one label of ``tritonwatch_model_batching_info``.

``tritonwatch advise --prometheus`` needs what ``--triton`` reads from the config API: ``max_batch_size``,
``dynamic_batching`` and ``instance_group`` as Triton's model-config JSON spells them (so that the
advice can hand them back as a diff), and whether the model is an ensemble or uses the sequence
batcher (which it refuses). Prometheus never sees a config, so the sidecar, which reads each config
anyway, exports that subset as compact JSON with sorted keys: the same config gives the same label,
and a changed config a new series.
"""

from __future__ import annotations

import json

from tritonwatch.modelconfig import ModelConfig

# A config whose subset is longer than this is left out (its label would cost every scrape): real
# ones are a few hundred bytes; 64 instance groups with GPU lists stay below it.
MAX_BYTES = 8192


def batching_config(cfg: ModelConfig) -> str | None:
    """The label value for ``cfg`` (its ``batching_part``), or None when it is too long to export."""
    text = json.dumps(cfg.batching_part(), sort_keys=True, separators=(",", ":"), allow_nan=False)
    return text if len(text.encode()) <= MAX_BYTES else None
