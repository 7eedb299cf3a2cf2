"""Read what the advisor needs from Prometheus (``--prometheus``): the same observation as ``--triton``.

Per model version, at time ``at``:
- the config: ``tritonwatch_model_batching_info{config}`` (the sidecar's copy of the batching part of
  the model config, exporters/batching.py); one series per replica, so their count is the replicas;
- the compute cost per batch size: ``tritonwatch_model_batch_executions_total`` and
  ``tritonwatch_model_batch_compute_seconds_total`` by ``batch_size``, their values at ``at`` (cumulative
  since the model loaded, as ``batch_stats`` is), summed over replicas;
- the load: the increase over ``[window]`` of Triton's success and failure counters less its cache
  hits (what reached the batcher), and of its inference count, summed over replicas;
- the server's own overhead per request: Triton's request, queue and compute duration counters and
  its cache-hit duration at ``at`` (since the model loaded), as the statistics API's pairs give it.

Where it cannot equal ``--triton`` exactly (docs/advise.md): the load is Prometheus's ``increase()``
(extrapolated to the window's edges from scrapes) where ``--triton`` counts the requests between two
reads; the overhead comes from Triton's microsecond counters where the statistics API counts
nanoseconds. The config and the compute costs are the same numbers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from tritonwatch import catalog
from tritonwatch.advise.advice import Observation
from tritonwatch.errors import TritonwatchError
from tritonwatch.reports.promapi import Labels, PromClient, label
from tritonwatch.validators import promql_string

_BY = catalog.by_clause()  # "model, version"
Key = tuple[str, str]


def _sel(model: str | None) -> str:
    return f"{{{catalog.MODEL}={promql_string(model)}}}" if model else ""


def _key(labels: Labels) -> Key:
    return label(labels, catalog.MODEL), label(labels, catalog.VERSION)


def _sums(client: PromClient, expr: str, at: datetime) -> dict[Key, float]:
    return {_key(ls): v for ls, v in client.instant(f"sum by ({_BY}) ({expr})", at).items()}


def _increase(family: str, sel: str, window: str) -> str:
    return f"increase({family}{sel}[{window}])"


class PrometheusReader:
    def __init__(self, client: PromClient) -> None:
        self.client = client

    def read(self, model: str | None, window_s: float, at: datetime) -> list[Observation]:
        c, sel = self.client, _sel(model)
        window_ms = max(1, round(window_s * 1000))  # PromQL durations take whole units
        window, window_s = f"{window_ms}ms", window_ms / 1000
        configs: dict[Key, list[str]] = {}
        for ls, _ in c.instant(f"{catalog.MODEL_BATCHING_INFO}{sel}", at).items():
            configs.setdefault(_key(ls), []).append(label(ls, catalog.CONFIG))
        success = _sums(c, _increase(catalog.TRITON_SUCCESS, sel, window), at)
        failure = _sums(c, _increase(catalog.TRITON_FAILURE, sel, window), at)
        hits = _sums(c, _increase(catalog.TRITON_CACHE_HITS, sel, window), at)
        items = _sums(c, _increase(catalog.TRITON_INFERENCE_COUNT, sel, window), at)
        costs: dict[Key, dict[int, list[float]]] = {}
        for i, family in enumerate((catalog.BATCH_EXECUTIONS, catalog.BATCH_COMPUTE)):
            by = f"{_BY}, {catalog.BATCH_SIZE}"
            for ls, v in c.instant(f"sum by ({by}) ({family}{sel})", at).items():
                size = label(ls, catalog.BATCH_SIZE)
                if not size.isdigit() or int(size) < 1:
                    raise TritonwatchError(f"{c.url}: {family}: batch_size {size[:40]!r} is not a batch size")
                costs.setdefault(_key(ls), {}).setdefault(int(size), [0.0, 0.0])[i] = v
        overhead = self._overhead(sel, at)
        out = []
        for key in sorted(set(configs) | set(success)):
            requests = success.get(key, 0.0) + failure.get(key, 0.0) - hits.get(key, 0.0)
            distinct = sorted(set(configs.get(key, [])))
            replicas = max(1, len(configs.get(key, [])))  # one config series per replica
            refusal = None
            config: Mapping[str, Any] = {}
            if not distinct:
                refusal = (
                    f"no {catalog.MODEL_BATCHING_INFO} for this model in Prometheus: its sidecar does not "
                    "export the config (too old, or the config not read yet)"
                )
            elif len(distinct) > 1:
                refusal = f"its replicas serve {len(distinct)} different configs: advise on each alone"
            else:
                config = _config(distinct[0], key, c.url)
            out.append(
                Observation(
                    model=key[0],
                    version=key[1],
                    config=config,
                    seconds=window_s,
                    requests=max(0, round(requests)),
                    rate_rps=max(0.0, requests) / window_s / replicas,
                    items=items.get(key, 0.0),
                    costs=tuple(
                        (b, round(n), round(s * 1e9)) for b, (n, s) in sorted(costs.get(key, {}).items())
                    ),
                    overhead_s=overhead.get(key, 0.0),
                    refusal=refusal,
                    replicas=replicas,
                )
            )
        return out

    def _overhead(self, sel: str, at: datetime) -> dict[Key, float]:
        """Mean request time outside queue and compute since the model loaded (``advice.overhead_s``)."""
        c = self.client
        total = _sums(c, f"{catalog.triton_duration('request')}{sel}", at)
        inner = {
            phase: _sums(c, f"{catalog.triton_duration(phase)}{sel}", at)
            for phase in ("queue", *catalog.COMPUTE_PHASES)
        }
        hit_us = _sums(c, f"{catalog.TRITON_CACHE_HIT_DURATION}{sel}", at)
        success = _sums(c, f"{catalog.TRITON_SUCCESS}{sel}", at)
        hits = _sums(c, f"{catalog.TRITON_CACHE_HITS}{sel}", at)
        out = {}
        for key, us in total.items():
            n = success.get(key, 0.0) - hits.get(key, 0.0)
            outside = us - hit_us.get(key, 0.0) - sum(p.get(key, 0.0) for p in inner.values())
            out[key] = max(0.0, outside / n / 1e6) if n > 0 else 0.0
        return out


def _config(text: str, key: Key, url: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise TritonwatchError(
            f"{url}: {catalog.MODEL_BATCHING_INFO}{{model={key[0]!r}}}: config is not a JSON object"
        )
    return value
