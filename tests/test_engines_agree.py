"""The two engines of one catalog agree: the sidecar's value and the recording rule's value, same data.

The same payloads go, with a fake clock, through the sidecar's scrape path and window and, as
``promtool test rules`` input series, through the generated ``alerts/generated/catalog.rules.yml``;
promtool asserts every recorded value equals the sidecar's to 1e-9 (exactly for the pending gauge).
``tests/support/agreement.py`` says why the comparison can be exact despite ``rate()``'s extrapolation.

* recorded: the real local Triton's recorded payloads (``tests/data/triton_metrics_{idle,load_1,load_2}.txt``)
  and the GPU-shaped pair (``triton_gpu_node2gpu_{1,2}.txt``: counters split by ``gpu_uuid``), advanced
  by varying mixes of their real increments, with a Triton restart (every counter back near 0) inside
  the window, and one model served by two replicas (``sum by (model, version)`` pools them);
* live: payloads the real local Triton serves under load (with failures and cache hits), captured now.
"""

from __future__ import annotations

import math
import random
import time
from pathlib import Path
from typing import Any

import requests
import yaml
from conftest import DATA, need_binary
from support import stacks
from support.agreement import (
    RULES,
    STEP,
    WINDOW,
    Replica,
    promtool_agree,
    replica_series,
    sidecar_values,
    victoriametrics_agree,
)
from support.vmstack import VictoriaMetrics

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.local.load import LoadDriver
from tritonwatch.local.procs import wait_until

MODEL = "fraud_detector"


class Recorded:
    """A payload's lines as (head, value); renders the same layout with other values."""

    def __init__(self, path: Path) -> None:
        self.lines: list[tuple[str, float | None]] = []
        for line in path.read_text().splitlines():
            if line.startswith("#") or not line.strip():
                self.lines.append((line, None))
            else:
                head, _, value = line.rpartition(" ")
                self.lines.append((head, float(value)))
        types = {}
        for head, value in self.lines:
            parts = head.split()
            if value is None and len(parts) >= 4 and parts[1] == "TYPE":
                types[parts[2]] = parts[3]
        self.counter = {h: types.get(h.split("{")[0]) == "counter" for h, v in self.lines if v is not None}

    def values(self) -> dict[str, float]:
        return {h: v for h, v in self.lines if v is not None}

    def render(self, values: dict[str, float], keep: str = "") -> str:
        out = []
        for head, v in self.lines:
            if v is None:
                out.append(head)
            elif not keep or f'model="{keep}"' in head or "model=" not in head:
                out.append(f"{head} {values[head]!r}")
        return "\n".join(out) + "\n"


def timeline(
    first: Path,
    steps_from: list[tuple[Path, Path]],
    seed: int,
    n: int,
    restart_at: int | None = None,
    keep: str = "",
) -> list[str]:
    """``n`` payloads of ``first``'s layout: each step adds a random mix (0-3 times each) of the real
    increments between the given pairs of recorded payloads; gauges take the pairs' values in turn.
    At ``restart_at`` every counter starts again from 0 (plus that step's increase), as after a restart."""
    rec = Recorded(first)
    deltas = []
    gauges = []
    for a, b in steps_from:
        va, vb = Recorded(a).values(), Recorded(b).values()
        deltas.append({h: vb[h] - va[h] for h in va if rec.counter[h]})
        gauges += [va, vb]
    rng = random.Random(seed)
    now = rec.values()
    out = []
    for k in range(n):
        if k:
            mix = [rng.randint(0, 3) for _ in deltas]
            for head, counter in rec.counter.items():
                if counter:
                    base = 0.0 if k == restart_at else now[head]
                    now[head] = base + sum(m * d[head] for m, d in zip(mix, deltas, strict=True))
                else:
                    now[head] = gauges[k % len(gauges)][head]
        out.append(rec.render(now, keep))
    return out


STEPS = 2 * WINDOW // STEP + 1  # 41 payloads, 0..600 s: 21 evaluation times with a full window


def recorded_replicas() -> list[Replica]:
    idle, one, two = (DATA / f"triton_metrics_{s}.txt" for s in ("idle", "load_1", "load_2"))
    gpu1, gpu2 = DATA / "triton_gpu_node2gpu_1.txt", DATA / "triton_gpu_node2gpu_2.txt"
    return [
        # fraud_detector and fail_always; Triton restarts at 405 s (inside the later windows).
        Replica("a:8002", timeline(one, [(idle, one), (one, two)], 1, STEPS, restart_at=27), {MODEL: 64}),
        # resnet50 on two GPUs, bert_base on one, tokenizer on the CPU.
        Replica("b:8002", timeline(gpu1, [(gpu1, gpu2)], 2, STEPS)),
        # a second replica of fraud_detector only: the rules pool it with replica a's.
        Replica("c:8002", timeline(idle, [(idle, one), (one, two)], 3, STEPS, keep=MODEL), {MODEL: 64}),
    ]


def test_recorded_payloads_agree_to_1e_9(platform: stacks.Stack, tmp_path: Path) -> None:
    replicas = recorded_replicas()
    expected = sidecar_values(replicas)
    models = {dict(labels)["model"] for _k, _r, labels in expected}
    assert models == {MODEL, "fail_always", "resnet50", "bert_base", "tokenizer"}
    # Every catalog record and batch efficiency is compared, with values, at each of 21 times.
    records = {r for (_k, r, _l), v in expected.items() if v is not None}
    assert records == {s.record for s in catalog.SIGNALS} | {catalog.BATCH_EFFICIENCY_RECORD}
    assert len({k for k, _r, _l in expected}) == 21
    compared, _ = promtool_agree(replicas, tmp_path, need_binary("promtool"), platform.prometheus_major >= 3)
    assert compared >= 21 * 40, compared


def test_live_triton_payloads_agree_to_1e_9(platform: stacks.Stack, triton: Any, tmp_path: Path) -> None:
    """Payloads the real Triton serves now, under load with failures and cache hits, both engines.

    Captured as fast as the counters move (each payload once the success count has grown), then
    replayed on the 15 s clock: the data is the live Triton's, the timing is made exact.
    """
    import requests

    promtool = need_binary("promtool")
    config = requests.get(f"{triton.http_url}/v2/models/{MODEL}/config", timeout=5).json()

    def successes(text: str) -> float:
        series = parse(text, {catalog.TRITON_SUCCESS}).get(catalog.TRITON_SUCCESS, {})
        return sum(v for ls, v in series.items() if dict(ls)["model"] == MODEL)

    payloads: list[str] = []
    load = LoadDriver(triton.http_url, model=MODEL, concurrency=6, repeat=3, error_ratio=0.05).start()
    try:
        for _ in range(STEPS):
            last = successes(payloads[-1]) if payloads else -1.0
            got: list[str] = []

            def moved(last: float = last, got: list[str] = got) -> bool:
                got[:] = [requests.get(triton.metrics_url, timeout=5).text]
                return successes(got[0]) > last

            wait_until(moved, 30, "Triton's success count to grow", interval=0.05)
            payloads.append(got[0])
    finally:
        load.stop()
    replica = Replica("triton:8002", payloads, {MODEL: int(config["max_batch_size"])})
    expected = sidecar_values([replica])
    live = {r for (_k, r, labels), v in expected.items() if v is not None and dict(labels)["model"] == MODEL}
    # Live traffic moves every counter-based record of fraud_detector (failures, hits, batches).
    assert live >= {s.record for s in catalog.SIGNALS if s.kind != "gauge"} | {
        catalog.BATCH_EFFICIENCY_RECORD
    }
    compared, _ = promtool_agree([replica], tmp_path, promtool, platform.prometheus_major >= 3)
    assert compared >= 21 * len(live)


def test_recording_rules_are_the_catalog_formulas() -> None:
    assert RULES.is_file(), f"{RULES} is not generated (make generate)"
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r]
    for sig in catalog.SIGNALS:
        match = [
            r for r in rules if r["record"] == sig.record and (r.get("labels") or {}) == dict(sig.labels)
        ]
        assert len(match) == 1, (sig.record, sig.labels)
        assert " ".join(match[0]["expr"].split()) == " ".join(catalog.promql(sig, "5m").split())


def test_victoriametrics_agrees_on_recorded_payloads_to_1e_9(platform: stacks.Stack, tmp_path: Path) -> None:
    """The third engine: the same recorded payloads imported into VictoriaMetrics, the catalog's
    expressions queried there at the same 21 times, equal the sidecar's values (and so promtool's)."""
    replicas = recorded_replicas()
    store = VictoriaMetrics(need_binary("victoria-metrics"), tmp_path / "vm")
    try:
        store.wait_ready()
        base = (int(time.time()) - 3600) // STEP * STEP
        compared = victoriametrics_agree(replicas, store.url, base)
    finally:
        store.stop()
    expected = sidecar_values(replicas)
    assert compared == sum(1 for v in expected.values() if v is not None) >= 21 * 40


def test_victoriametrics_does_not_extrapolate_a_partial_window(
    platform: stacks.Stack, tmp_path: Path
) -> None:
    """The documented difference: where a window reaches back before a series' first sample,
    VictoriaMetrics' ``rate`` divides the increase it saw by the time it saw (last - first sample),
    while Prometheus extrapolates towards the window's start and divides by the whole window. So the
    engines are held to each other on full windows only, and here VictoriaMetrics' own rule is shown."""
    replicas = recorded_replicas()
    at = 10  # 150 s into the data: half a [5m] window
    series = replica_series(replicas)
    want: dict[str, float] = {}
    for (family, labels), values in series.items():
        if family == catalog.TRITON_SUCCESS:
            model = dict(labels)[catalog.MODEL]
            want[model] = want.get(model, 0.0) + (values[at] - values[0]) / (at * STEP)
    store = VictoriaMetrics(need_binary("victoria-metrics"), tmp_path / "vm")
    try:
        store.wait_ready()
        base = (int(time.time()) - 3600) // STEP * STEP
        victoriametrics_agree(replicas, store.url, base)  # imports the data (and holds the full windows)
        expr = catalog.promql(catalog.signal(catalog.REQUEST_RATE), "5m")
        resp = requests.get(
            f"{store.url}/api/v1/query", params={"query": expr, "time": base + at * STEP}, timeout=30
        )
        resp.raise_for_status()
        got = {r["metric"][catalog.MODEL]: float(r["value"][1]) for r in resp.json()["data"]["result"]}
    finally:
        store.stop()
    assert set(got) == set(want) and any(want.values())
    for model, value in want.items():
        assert math.isclose(got[model], value, rel_tol=1e-12), (model, got[model], value)
        # What a full-window division (Prometheus's, before its extrapolation) would give: half.
        assert value == 0 or not math.isclose(got[model], value / 2, rel_tol=0.1)
