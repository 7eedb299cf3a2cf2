"""Pipelines on the real local Triton: an ensemble counts each client request once, by step.

One Triton serves ``tests/pipeline_models`` (``pipeline`` = ``pre`` 2 ms → ``core`` 10 ms, dynamic
batching → ``post`` 1 ms, and ``bls_pipeline`` calling the same steps) for the whole module. Clients
send a known mix: ``x`` NaN fails in ``pre`` (it raises), ``x`` = 600 fails in ``core`` (``2x`` over
1000: an error response), every other ``x`` succeeds. As in ``test_sidecar_triton``, the sidecar's
clock stands at 0 s at the quiet snapshot before the load and at SPAN s at the one after, so its
rates are the increases / SPAN exactly and its ratios are ratios of the same integers.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import ROOT, need_binary, need_pytriton
from support import stacks
from support.agreement import STEP, WINDOW, Replica, promtool_agree, sidecar_values
from support.clocked import Clocked
from support.sleeper import nearest_rank

from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.procs import wait_until

PIPELINE_MODELS = ROOT / "tests" / "pipeline_models"
ENSEMBLE = "pipeline"
STEPS = ("pre", "core", "post")
MODELS = (ENSEMBLE, *STEPS, "bls_pipeline")
SPAN = 100.0
NAN_EVERY, OVER_EVERY = (10, 3), (10, 7)  # (period, offset) of the inputs that fail in pre, in core
OVER = 600.0


pytestmark = pytest.mark.triton


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Triton's trace file: every request traced, each trace written at once as PATH.N."""
    return tmp_path_factory.mktemp("traces") / "trace.json"


@pytest.fixture(scope="module")
def triton(trace_path: Path) -> Iterator[Any]:
    need_pytriton()
    from tritonwatch.local.triton import LocalTriton

    with LocalTriton([PIPELINE_MODELS], trace_file=trace_path, trace_rate=1, trace_log_frequency=1) as server:
        yield server


def stats(base: str) -> dict[str, dict[str, Any]]:
    """Every model's cumulative statistics: count and ns per pair, inferences, executions."""
    out = {}
    for s in requests.get(f"{base}/v2/models/stats", timeout=5).json()["model_stats"]:
        pairs = s["inference_stats"]
        out[s["name"]] = {
            "count": {k: int(v["count"]) for k, v in pairs.items()},
            "ns": {k: int(v["ns"]) for k, v in pairs.items()},
            "inferences": int(s["inference_count"]),
            "executions": int(s["execution_count"]),
        }
    return out


def metrics(triton: Any) -> Samples:
    return parse(requests.get(triton.metrics_url, timeout=5).text, catalog.TRITON_FAMILIES)


def per_model(samples: Samples, family: str, **match: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for labels, v in samples.get(family, {}).items():
        d = dict(labels)
        if all(d.get(k) == want for k, want in match.items()):
            out[d["model"]] = out.get(d["model"], 0.0) + v
    return out


def quiet(triton: Any) -> tuple[dict[str, dict[str, Any]], Samples]:
    """The statistics and /metrics once Triton is at rest: two reads alike, /metrics saying the same."""
    got: list[Any] = []

    def settled() -> bool:
        first = stats(triton.http_url)
        m = metrics(triton)
        second = stats(triton.http_url)
        got[:] = [second, m]
        successes = per_model(m, catalog.TRITON_SUCCESS)
        return first == second and all(
            successes.get(k, 0.0) == s["count"]["success"] for k, s in second.items()
        )

    wait_until(settled, 30, "Triton at rest (statistics and /metrics alike)", interval=0.1)
    return got[0], got[1]


def model_successes(samples: Samples) -> dict[str, float]:
    return per_model(samples, catalog.TRITON_SUCCESS)


@pytest.fixture
def clocked(triton: Any) -> Iterator[Clocked]:
    # Derived values only once the model configs are read: an ensemble's formulas need them.
    c = Clocked(triton, model_successes, ready=lambda sc: sc.api is not None and bool(sc.api.state.ensembles))
    c.sidecar.start()
    try:
        yield c
    finally:
        c.sidecar.stop()


def x_of(i: int) -> float:
    if i % NAN_EVERY[0] == NAN_EVERY[1]:
        return math.nan
    if i % OVER_EVERY[0] == OVER_EVERY[1]:
        return OVER
    return float(i % 100)


def drive(
    triton: Any, model: str, clients: int, per_client: int, mix: bool, tag: str = ""
) -> tuple[int, int]:
    """``clients`` threads, each with its own client, sending ``per_client`` requests; (ok, failed).

    Request ids are ``<tag>-<client>-<i>-<x>``."""
    import numpy as np
    import tritonclient.http as httpclient

    outcome: list[bool] = []
    errors: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> None:
        client = httpclient.InferenceServerClient(triton.http_url.removeprefix("http://"))
        try:
            for i in range(per_client):
                x = x_of(i) if mix else float(i % 100)
                shape = [1, 1] if model == ENSEMBLE else [1]
                inp = httpclient.InferInput("x", shape, "FP32")
                inp.set_data_from_numpy(np.full(shape, x, dtype=np.float32))
                try:
                    out = client.infer(model, [inp], request_id=f"{tag}-{k}-{i}-{x:g}").as_numpy("out")
                    ok = out is not None and float(out.reshape(-1)[0]) == 2 * x + 1
                except httpclient.InferenceServerException as exc:
                    ok = False
                    if not (math.isnan(x) or x == OVER):
                        with lock:
                            errors.append(f"{x}: {exc}")
                with lock:
                    outcome.append(ok)
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    return outcome.count(True), outcome.count(False)


def delta(after: dict[str, dict[str, Any]], before: dict[str, dict[str, Any]], model: str, pair: str) -> int:
    return int(after[model]["count"][pair] - before[model]["count"][pair])


def served(values: Samples, name: str, model: str, **labels: str) -> float | None:
    want = {"model": model, "version": "1", **labels}
    for ls, v in values.get(name, {}).items():
        if dict(ls) == want:
            return v
    return None


def roles(values: Samples) -> dict[str, str]:
    return {dict(ls)["model"]: dict(ls)[catalog.ROLE] for ls in values.get(catalog.MODEL_ROLE_INFO, {})}


def test_an_ensemble_counts_each_client_request_once(triton: Any, clocked: Clocked) -> None:
    before, m_before = quiet(triton)
    clocked.seen(model_successes(m_before))
    ok, failed = drive(triton, ENSEMBLE, clients=4, per_client=30, mix=True)
    assert (ok, failed) == (96, 24)  # 4 x 3 NaN inputs, 4 x 3 over-range ones
    clocked.now = SPAN
    after, m_after = quiet(triton)
    values = clocked.seen(model_successes(m_after))

    # Topology from the configs.
    assert roles(values) == {
        "pipeline": "ensemble",
        "pre": "step",
        "core": "step",
        "post": "step",
        "bls_pipeline": "model",
    }
    steps = {
        (dict(ls)[catalog.STEP], dict(ls)[catalog.POSITION])
        for ls, v in values.get(catalog.ENSEMBLE_STEP_INFO, {}).items()
        if v == 1.0 and dict(ls)["model"] == ENSEMBLE
    }
    assert steps == {("pre", "1"), ("core", "2"), ("post", "3")}

    # Triton 2.51 counts every failed ensemble request twice, reason OTHER (docs/pipelines.md).
    other = per_model(m_after, catalog.TRITON_FAILURE, reason="OTHER")[ENSEMBLE] - per_model(
        m_before, catalog.TRITON_FAILURE, reason="OTHER"
    ).get(ENSEMBLE, 0.0)
    assert other == catalog.ENSEMBLE_FAILURES_PER_REQUEST * failed
    # The sidecar counts each once: failed / all client requests, exactly.
    assert served(values, catalog.ERROR_RATIO, ENSEMBLE) == failed / (ok + failed)

    # Steps: pre saw every request and raised on the 12 NaN ones; core answered the 12 over-range
    # ones with an error response, which Triton counts as a success of core; post saw the rest.
    assert delta(after, before, "pre", "success") == ok + 12
    assert delta(after, before, "pre", "fail") == 12
    assert delta(after, before, "core", "success") == ok + 12
    assert delta(after, before, "core", "fail") == 0
    assert delta(after, before, "post", "success") == ok
    assert delta(after, before, ENSEMBLE, "success") == ok

    # Fleet: the request rate of the models clients call (steps are not entries) is the client rate.
    rates = {dict(ls)["model"]: v for ls, v in values.get(catalog.REQUEST_RATE, {}).items()}
    entry = {m for m, r in roles(values).items() if r != catalog.ROLE_STEP}
    assert sum(v for m, v in rates.items() if m in entry) == ok / SPAN
    assert rates[ENSEMBLE] == ok / SPAN

    # No batch size for an ensemble, which executes nothing itself; its steps have theirs.
    assert served(values, catalog.BATCH_SIZE_MEAN, ENSEMBLE) is None
    assert served(values, catalog.BATCH_EFFICIENCY, ENSEMBLE) is None
    assert served(values, catalog.BATCH_SIZE_MEAN, "core") is not None

    # Queue share of the ensemble: its request time not spent computing in its steps, from the
    # same /metrics counters the sidecar read.
    def increase(family: str) -> float:
        return per_model(m_after, family)[ENSEMBLE] - per_model(m_before, family).get(ENSEMBLE, 0.0)

    request_us = increase(catalog.triton_duration("request"))
    compute_us = sum(increase(catalog.triton_duration(p)) for p in catalog.COMPUTE_PHASES)
    assert served(values, catalog.QUEUE_TIME_RATIO, ENSEMBLE) == (request_us - compute_us) / request_us


def test_both_engines_agree_on_a_live_ensemble(platform: stacks.Stack, triton: Any, tmp_path: Path) -> None:
    """Payloads the real Triton serves under the good/bad mix, replayed on the 15 s clock through the
    sidecar's window and through the generated recording rules (with the sidecar's role series)."""
    promtool = need_binary("promtool")
    steps = 2 * WINDOW // STEP + 1
    payloads: list[str] = []
    result: list[tuple[int, int]] = []
    load = threading.Thread(target=lambda: result.append(drive(triton, ENSEMBLE, 4, 150, mix=True)))
    load.start()
    try:
        for _ in range(steps):
            last = per_model(parse(payloads[-1]), catalog.TRITON_SUCCESS)[ENSEMBLE] if payloads else -1.0
            got: list[str] = []

            def moved(last: float = last, got: list[str] = got) -> bool:
                got[:] = [requests.get(triton.metrics_url, timeout=5).text]
                return per_model(parse(got[0]), catalog.TRITON_SUCCESS)[ENSEMBLE] > last

            wait_until(moved, 30, "the ensemble's success count to grow", interval=0.02)
            payloads.append(got[0])
    finally:
        load.join(120)
    assert result and result[0][1] > 0, result
    replica = Replica(
        "triton:8002", payloads, {m: 8 for m in MODELS if m != "bls_pipeline"}, frozenset({ENSEMBLE})
    )
    expected = sidecar_values([replica])
    mine = {(r, k): v for (k, r, labels), v in expected.items() if dict(labels)["model"] == ENSEMBLE}
    error_record = catalog.signal(catalog.ERROR_RATIO).record
    # The ensemble's error ratio moved (failures in the window) and it has no batch efficiency.
    assert any(v for (r, _k), v in mine.items() if r == error_record)
    assert all(v is None for (r, _k), v in mine.items() if r == catalog.BATCH_EFFICIENCY_RECORD)
    left_open = platform.prometheus_major >= 3  # compared from the second time: support/agreement.py
    compared, _ = promtool_agree([replica], tmp_path, promtool, left_open)
    assert compared >= (20 if left_open else 21) * 20, compared


def test_a_failure_free_ensemble_computes_exactly_its_steps(triton: Any) -> None:
    before, _ = quiet(triton)
    ok, failed = drive(triton, ENSEMBLE, clients=8, per_client=15, mix=False)
    assert (ok, failed) == (120, 0)
    after, _ = quiet(triton)
    for pair in catalog.COMPUTE_PHASES:
        ensemble_ns = after[ENSEMBLE]["ns"][pair] - before[ENSEMBLE]["ns"][pair]
        steps_ns = sum(after[s]["ns"][pair] - before[s]["ns"][pair] for s in STEPS)
        assert ensemble_ns == steps_ns, pair
    # Eight clients against core's one instance: the ensemble's requests wait in its steps' queues,
    # which its own queue counter (its scheduling only) does not see.
    request_ns = after[ENSEMBLE]["ns"]["success"] - before[ENSEMBLE]["ns"]["success"]
    compute_ns = sum(after[ENSEMBLE]["ns"][p] - before[ENSEMBLE]["ns"][p] for p in catalog.COMPUTE_PHASES)
    own_queue_ns = after[ENSEMBLE]["ns"]["queue"] - before[ENSEMBLE]["ns"]["queue"]
    assert own_queue_ns < 0.01 * request_ns < request_ns - compute_ns


def test_served_configs_name_the_models_clients_call() -> None:
    from tritonwatch.local.modelrepo import entry_models, read_repository

    models = read_repository(PIPELINE_MODELS)
    assert {m.name: m.steps for m in models if m.is_ensemble} == {ENSEMBLE: STEPS}
    assert entry_models(models) == ["bls_pipeline", ENSEMBLE]
    demo = read_repository(ROOT / "model_repository")
    assert entry_models(demo) == ["fraud_pipeline"]


# --- step breakdown from trace files ------------------------------------------------------------
def file_traces(folder: Path) -> dict[Any, dict[str, Any]]:
    """Every trace in Triton's complete rotated files, read with plain JSON: id -> model, parent,
    request id, events (ns)."""
    out: dict[Any, dict[str, Any]] = {}
    for path in sorted(folder.glob("trace.json.*")):
        for entry in json.loads(path.read_text()):
            t = out.setdefault(entry["id"], {"events": {}})
            for k in ("model_name", "parent_id", "request_id"):
                if k in entry:
                    t[k] = entry[k]
            for ts in entry.get("timestamps", []):
                t["events"].setdefault(ts["name"], ts["ns"])
    return out


def cut(traces: dict[Any, dict[str, Any]]) -> dict[Any, list[tuple[str, int, int]]]:
    """Each ensemble request's steps as (step, queue ns, compute ns): cut at the next step's
    REQUEST_START, queue up to the step's COMPUTE_START (the test's own reading of the rule)."""
    out: dict[Any, list[tuple[str, int, int]]] = {}
    for tid, root in traces.items():
        if root.get("model_name") != ENSEMBLE:
            continue
        steps = sorted(
            (t["events"]["REQUEST_START"], t["model_name"], t["events"])
            for t in traces.values()
            if t.get("parent_id") == tid
        )
        starts = [root["events"]["REQUEST_START"]] + [s for s, _m, _e in steps[1:]]
        ends = [s for s, _m, _e in steps[1:]] + [root["events"]["REQUEST_END"]]
        out[tid] = [
            (m, ev.get("COMPUTE_START", b) - a, b - ev.get("COMPUTE_START", b))
            for (_s, m, ev), a, b in zip(steps, starts, ends, strict=True)
        ]
    return out


Breakdown = dict[tuple[str, str], tuple[float, dict[str, float]]]


def expected_steps(traces: dict[Any, dict[str, Any]]) -> Breakdown:
    """(step, phase) -> (mean per traced ensemble request, {quantile: nearest rank of the segments})."""
    chains = cut(traces)
    values: dict[tuple[str, str], list[int]] = {}
    for chain in chains.values():
        for step, queue, compute in chain:
            values.setdefault((step, "queue"), []).append(queue)
            values.setdefault((step, "compute"), []).append(compute)
    return {
        key: (
            sum(ns) / len(chains) / 1e9,
            {q: nearest_rank([v / 1e9 for v in ns], float(q)) for q in catalog.QUANTILES},
        )
        for key, ns in values.items()
    }


def served_steps(values: Samples) -> Breakdown:
    out: Breakdown = {}
    for ls, v in values.get(catalog.ENSEMBLE_STEP_LATENCY, {}).items():
        d = dict(ls)
        if d["model"] == ENSEMBLE:
            out[(d[catalog.STEP], d[catalog.PHASE])] = (v, {})
    for ls, v in values.get(catalog.ENSEMBLE_STEP_QUANTILE, {}).items():
        d = dict(ls)
        if d["model"] == ENSEMBLE and (d[catalog.STEP], d[catalog.PHASE]) in out:
            out[(d[catalog.STEP], d[catalog.PHASE])][1][d[catalog.QUANTILE]] = v
    return out


def per_step(values: Samples, name: str) -> dict[str, float]:
    return {
        dict(ls)[catalog.STEP]: v for ls, v in values.get(name, {}).items() if dict(ls)["model"] == ENSEMBLE
    }


SAMPLES = 65536


def test_traced_steps_add_up_to_each_request_and_give_exact_quantiles(triton: Any, trace_path: Path) -> None:
    folder = trace_path.parent
    # The sidecar reads the module's whole trace history at start (the earlier tests' 1,400 ensemble
    # requests with this one's 80) into one time slice: its quantiles are the exact nearest rank only
    # while a slice keeps every value, which the default 1,024 (--quantile-samples) would not.
    sidecar = Sidecar.local(
        triton.http_url,
        triton.metrics_url,
        interval=0.5,
        quantile_window=3600.0,
        quantile_samples=SAMPLES,
        trace_file=str(trace_path),
    ).start()
    try:
        ok, failed = drive(triton, ENSEMBLE, clients=4, per_client=20, mix=True, tag="steps")
        assert (ok, failed) == (64, 16)
        drive(triton, "bls_pipeline", clients=1, per_client=3, mix=False, tag="bls")

        def mine(traces: dict[Any, dict[str, Any]]) -> dict[Any, dict[str, Any]]:
            return {
                k: t
                for k, t in traces.items()
                if t.get("model_name") == ENSEMBLE and str(t.get("request_id", "")).startswith("steps-")
            }

        wait_until(lambda: len(mine(file_traces(folder))) == 80, 30, "Triton to write the 80 traces")
        got: list[Any] = []

        def agree() -> bool:
            values = parse(requests.get(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=2).text)
            traces = file_traces(folder)
            ends: dict[str, float] = {}
            for chain in cut(traces).values():
                ends[chain[-1][0]] = ends.get(chain[-1][0], 0.0) + 1
            got[:] = [
                (served_steps(values), per_step(values, catalog.ENSEMBLE_CHAIN_ENDS)),
                (expected_steps(traces), ends),
                roles(values),
            ]
            return got[0] == got[1] and got[2].get("bls_pipeline") == catalog.ROLE_BLS

        try:
            wait_until(agree, 60, "the sidecar's step breakdown to be the trace files' exactly, and bls seen")
            assert len(cut(file_traces(folder))) <= SAMPLES  # what makes the quantiles exact
        except Exception:
            assert got[0] == got[1]  # shows the difference
            raise
    finally:
        sidecar.stop()

    traces = file_traces(folder)
    chains = cut(traces)
    for tid, root in mine(traces).items():
        ev = root["events"]
        chain = chains[tid]
        # To the nanosecond: the segments cover the request exactly, none negative.
        assert sum(q + c for _s, q, c in chain) == ev["REQUEST_END"] - ev["REQUEST_START"], tid
        assert all(q >= 0 and c >= 0 for _s, q, c in chain), chain
        # A failed request is a chain that stops where it failed.
        x = root["request_id"].rsplit("-", 1)[1]
        want = ["pre"] if x == "nan" else ["pre", "core"] if float(x) == OVER else list(STEPS)
        assert [s for s, _q, _c in chain] == want, (root["request_id"], chain)
    # The product's own cut gives the same segments for every traced ensemble request.
    from tritonwatch.exporters.traces.timing import segments

    for tid, chain in chains.items():
        children = [(t["model_name"], t["events"]) for t in traces.values() if t.get("parent_id") == tid]
        got_cut = segments(traces[tid]["events"], children)
        assert [(g.step, g.queue_ns, g.compute_ns) for g in got_cut] == chain, tid
