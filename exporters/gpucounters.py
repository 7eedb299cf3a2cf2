"""Cumulative GPU busy seconds and inferences of models placed by their config (docs/gpu.md).

Prometheus never sees model configs, so the GPU recording rules cannot place a model whose counters
carry no ``gpu_uuid``. The sidecar does, and hands the rules what they need as counters, labels
``model``, ``version``, ``gpu_uuid``, ``attribution="config"``::

    tritonwatch_model_gpu_busy_seconds_total   batch_stats compute time (else compute x E / I)
    tritonwatch_model_gpu_inferences_total     nv_inference_count

Each Triton scrape's increase is split by the GPU's share of the model's instances *at that time*,
then added: the counters only grow, whatever the placement later becomes. They start at 0 when the
sidecar starts; ``rate()`` reads that as a reset, as it does a Triton restart.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client.core import CounterMetricFamily

from tritonwatch import catalog
from tritonwatch.catalog.gpu import ExecIncrease, ModelGpuKey, busy_seconds

ModelVersion = tuple[str, str]


class ConfigCounters:
    """Per (model, version, gpu_uuid) totals, fed the per-scrape increases of unlabelled counters."""

    def __init__(self) -> None:
        self._pending: dict[ModelVersion, dict[str, float]] = {}
        self.busy: dict[ModelGpuKey, float] = {}
        self.inferences: dict[ModelGpuKey, float] = {}

    def add(self, increases: Mapping[tuple[ModelGpuKey, str], float]) -> None:
        """One scrape's increases (keys ``((model, version, gpu), field)``); only gpu "" rows count."""
        for (key, name), value in increases.items():
            if not key[2]:
                fields = self._pending.setdefault(key[:2], {})
                fields[name] = fields.get(name, 0.0) + value

    def take(self) -> dict[ModelVersion, dict[str, float]]:
        pending, self._pending = self._pending, {}
        return pending

    def settle(
        self,
        pending: Mapping[ModelVersion, dict[str, float]],
        fractions: Mapping[str, dict[str, float] | str],
    ) -> None:
        """Adds increases taken since the last call, split by each model's current GPU fractions.

        A model with no placement (a reason instead) adds nothing: it has no GPU attribution.
        """
        for (model, version), f in pending.items():
            shares = fractions.get(model)
            if not isinstance(shares, dict):
                continue
            busy = f.get("busy")
            if busy is None:  # no statistics API: the mean-batch formula over this increase
                inc = ExecIncrease(f.get("compute", 0.0), f.get("inferences", 0.0), f.get("executions", 0.0))
                busy = busy_seconds(inc) or 0.0
            for uuid, share in shares.items():
                key = (model, version, uuid)
                self.busy[key] = self.busy.get(key, 0.0) + max(busy, 0.0) * share
                self.inferences[key] = self.inferences.get(key, 0.0) + f.get("inferences", 0.0) * share

    def families(self) -> Iterator[CounterMetricFamily]:
        labels = [*catalog.MODEL_KEY, catalog.GPU_UUID, catalog.ATTRIBUTION]
        for name, help_text, totals in (
            (catalog.MODEL_GPU_BUSY_SECONDS, catalog.MODEL_GPU_BUSY_SECONDS_HELP, self.busy),
            (catalog.MODEL_GPU_INFERENCES, catalog.MODEL_GPU_INFERENCES_HELP, self.inferences),
        ):
            fam = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=labels)
            for (model, version, gpu), value in sorted(totals.items()):
                fam.add_metric([model, version, gpu, catalog.ATTRIBUTION_CONFIG], value)
            yield fam
