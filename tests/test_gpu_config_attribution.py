"""GPU busy share and energy per inference for models whose counters carry no ``gpu_uuid`` (issue 30).

Python-backend models on ``KIND_GPU`` export no ``gpu_uuid`` on their own counters; the sidecar
places their GPU time from their config's instance groups (``attribution="config"``).

* The real H200 capture (``tests/data/real/h200/``, from ``../shared/data/h200/``; Triton 2.51): its counters and
  ``nv_energy_consumption`` both count from Triton's start, so a window from an all-zero payload
  (Triton just started) to the capture holds everything the server did. Shares and joules are
  checked against the formula worked out here from the payload's own numbers and the real configs.
* The real local Triton (CPU) behind a front that adds the H200's GPU series (energy advancing at its
  recorded power) and serves the models' configs as ``KIND_GPU``: the shares must equal the split
  of the statistics API's per-batch compute time within 2 %, and the attributed energy summed over
  models the GPU's energy over the window within 5 %.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support.gpu_front import GpuFront, h200_gpu_lines
from support.harness import read_metrics, running_sidecar
from support.static_endpoint import StaticEndpoint

from tritonwatch import catalog
from tritonwatch.expfmt import Samples
from tritonwatch.exporters.gpu import GpuPart, TritonGpuWindow
from tritonwatch.exporters.placement import Placement, placement
from tritonwatch.exporters.triton import ApiState, TritonMetrics
from tritonwatch.exporters.window import CounterWindow
from tritonwatch.local.load import LoadDriver
from tritonwatch.local.procs import wait_until

# The capture from ../shared/data/h200/ (its README beside it), copied so that the test runs anywhere.
H200_DIR = Path(__file__).resolve().parent / "data" / "real" / "h200"
H200_GPU = "GPU-48bd59c1-9c47-ab3c-bccc-06cd2913d14c"
PAYLOAD = H200_DIR / "triton_2.51_metrics.txt"
COMPUTE = [catalog.triton_duration(p) for p in catalog.COMPUTE_PHASES]


def pbtxt_instance_groups(path: Path) -> dict[str, Any]:
    """The config JSON Triton serves for a config.pbtxt's instance groups (the fields read here)."""
    text = path.read_text()
    groups = []
    for body in re.findall(r"\{([^{}]*kind:[^{}]*)\}", text):
        count = re.search(r"count:\s*(\d+)", body)
        gpus = re.search(r"gpus:\s*\[([^\]]*)\]", body)
        groups.append(
            {
                "kind": re.search(r"kind:\s*(\w+)", body).group(1),  # type: ignore[union-attr]
                "count": int(count.group(1)) if count else 1,
                "gpus": [int(g) for g in gpus.group(1).split(",")] if gpus else [],
            }
        )
    return {"instance_group": groups}


def zeroed(payload: str) -> str:
    """The same series, every value 0: the server as it started."""
    return "".join(
        ln if ln.startswith("#") or not ln.strip() else ln.rstrip("\n").rpartition(" ")[0] + " 0\n"
        for ln in payload.splitlines(keepends=True)
    )


def values(payload: str, family: str) -> dict[str, float]:
    out = {}
    for ln in payload.splitlines():
        if ln.startswith(family + "{"):
            out[re.search(r'model="([^"]+)"', ln).group(1)] = float(ln.rpartition(" ")[2])  # type: ignore[union-attr]
    return out


def by(samples: Samples, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(dict(ls)[k] for k in labels): v for ls, v in samples.get(name, {}).items()}


def test_h200_python_models_on_kind_gpu_get_busy_share_and_energy_from_their_configs() -> None:
    real = PAYLOAD.read_text()
    placements: dict[str, Placement] = {
        m: placement(pbtxt_instance_groups(H200_DIR / f"{m}.config.pbtxt")) for m in ("mlp_gpu", "mlp_heavy")
    }
    assert placements["mlp_gpu"] == Placement(gpus=((0, 2),))  # count 2 on gpus [0]
    state = ApiState(placement=placements)  # no statistics API in the capture: counters only
    now = [0.0]
    endpoint = StaticEndpoint(zeroed(real).encode()).start()
    try:
        metrics = TritonMetrics(endpoint.url, CounterWindow(3600.0), 1.0, 5.0, 1 << 26, clock=lambda: now[0])
        window = TritonGpuWindow(3600.0, lambda: state)
        metrics.snapshots.subscribe(window.observe)
        part = GpuPart(metrics.snapshots, window, None)
        assert metrics.step()
        now[0] = 600.0
        endpoint.payload = real.encode()
        assert metrics.step()
        got = {m.name: {tuple(sorted(s.labels.items())): s.value for s in m.samples} for m in part.collect()}
    finally:
        endpoint.stop()
    # By hand from the capture: busy = compute time x executions / inferences (Triton adds a batch's
    # compute time once per request in it); one GPU, so each model's share of it is exact.
    compute = {m: sum(values(real, f)[m] for f in COMPUTE) * 1e-6 for m in ("mlp_gpu", "mlp_heavy")}
    inferences = values(real, catalog.TRITON_INFERENCE_COUNT)
    executions = values(real, catalog.TRITON_EXEC_COUNT)
    busy = {m: compute[m] * executions[m] / inferences[m] for m in compute}
    assert busy["mlp_gpu"] == pytest.approx(12.528254 * 4120 / 8029)
    share = {m: b / sum(busy.values()) for m, b in busy.items()}
    shares = by(got, catalog.MODEL_GPU_BUSY, "model", catalog.GPU_UUID, catalog.ATTRIBUTION)
    assert shares == pytest.approx({(m, H200_GPU, "config"): share[m] for m in share}, rel=1e-9)
    assert shares[("mlp_gpu", H200_GPU, "config")] == pytest.approx(0.97601, abs=1e-5)
    joules = 3017.192  # nv_energy_consumption since Triton started
    energy = by(got, catalog.MODEL_ENERGY_PER_INFERENCE, "model", catalog.ATTRIBUTION)
    want = {(m, "config"): share[m] * joules / inferences[m] for m in share}
    assert energy == pytest.approx(want, rel=1e-9)
    assert sum(energy[(m, "config")] * inferences[m] for m in share) == pytest.approx(joules, rel=1e-9)
    assert got[catalog.MODEL_GPU_ATTRIBUTION] == {}  # nothing left unattributed


# --- the real local Triton behind a GPU front --------------------------------------------------
MODELS = ("fraud_detector", "sleeper")  # dynamic batching (max 64) / no batching, 4 instances


def stats(base: str) -> dict[str, dict[str, float]]:
    """Per model: inferences, executions and busy seconds (the sum of per-batch compute times)."""
    out = {}
    for m in MODELS:
        (s,) = requests.get(f"{base}/v2/models/{m}/stats", timeout=5).json()["model_stats"]
        phases = ("compute_input", "compute_infer", "compute_output")
        busy = sum(b[p]["ns"] for b in s.get("batch_stats", []) for p in phases)
        compute = sum(s["inference_stats"][p]["ns"] for p in phases)
        out[m] = {
            "inferences": s["inference_count"],
            "executions": s["execution_count"],
            "busy": busy / 1e9,
            "compute": compute / 1e9,
        }
    return out


@pytest.fixture
def front(triton: Any) -> Iterator[GpuFront]:
    with GpuFront(triton.http_url, triton.metrics_url, h200_gpu_lines(PAYLOAD), gpu_models=MODELS) as f:
        yield f


def test_local_triton_with_kind_gpu_configs_splits_gpu_time_as_the_statistics_api(
    triton: Any, front: GpuFront
) -> None:
    argv = ["--triton", front.url, "--triton-metrics", front.metrics_url, "--interval", "2"]
    with running_sidecar([*argv, "--window", "600"]) as sidecar:
        m = sidecar.metrics

        def placed() -> bool:
            return all(p in sidecar.api.state.placement for p in MODELS) and m.window.generation >= 3

        wait_until(placed, 30, "the sidecar to read both configs and scrape")
        before = stats(triton.http_url)
        load = [LoadDriver(triton.http_url, model=mdl, concurrency=4, seed=7) for mdl in MODELS]
        for d in load:
            d.start()
        try:
            wait_until(lambda: all(d.stats().ok >= 300 for d in load), 60, "300 requests per model")
        finally:
            for d in load:
                d.stop()
        after = stats(triton.http_url)

        def api_read_after_load() -> bool:
            batch = sidecar.api.state.batch_stats
            return all(
                sum(b.compute_seconds for b in batch.get((mdl, "1"), {}).values())
                == pytest.approx(after[mdl]["busy"], rel=1e-9)
                for mdl in MODELS
            )

        # Busy time comes from the statistics API, read on its own interval: wait until it has read
        # the state after the load, then for the window to take that in.
        wait_until(api_read_after_load, 15, "the sidecar's statistics read after the load")
        generation = m.window.generation
        wait_until(lambda: m.window.generation > generation + 1, 15, "two more sidecar scrapes")
        m.stop()  # no more scrapes: what the sidecar serves covers exactly what the front served
        got = read_metrics(sidecar.port)
    assert not got.get(catalog.SCRAPE_ERRORS)  # every payload served was read: the window is all of them
    delta = {mdl: {k: after[mdl][k] - before[mdl][k] for k in after[mdl]} for mdl in MODELS}
    truth = {mdl: delta[mdl]["busy"] / sum(d["busy"] for d in delta.values()) for mdl in MODELS}
    shares = by(got, catalog.MODEL_GPU_BUSY, "model", catalog.GPU_UUID, catalog.ATTRIBUTION)
    assert set(shares) == {(mdl, H200_GPU, "config") for mdl in MODELS}
    for mdl in MODELS:
        assert shares[(mdl, H200_GPU, "config")] == pytest.approx(truth[mdl], rel=0.02), (shares, truth)
    assert delta["fraud_detector"]["inferences"] > delta["fraud_detector"]["executions"]  # real batches
    energy = by(got, catalog.MODEL_ENERGY_PER_INFERENCE, "model", catalog.ATTRIBUTION)
    attributed = sum(energy[(mdl, "config")] * delta[mdl]["inferences"] for mdl in MODELS)
    gpu_joules = front.served[-1] - front.served[0]  # the sidecar's window: first to last scrape
    print(f"shares {shares} vs statistics API {truth}; energy {attributed:.1f} J vs GPU {gpu_joules:.1f} J")
    assert attributed == pytest.approx(gpu_joules, rel=0.05), (attributed, gpu_joules)


# --- placement from instance groups, and the stated reasons -------------------------------------
U0, U1 = "GPU-0000", "GPU-1111"


def groups(*g: dict[str, Any]) -> dict[str, Any]:
    return {"instance_group": list(g)}


@pytest.mark.parametrize(
    ("config", "index_uuid", "reported", "want"),
    [
        # one group pinned to GPU 1 of two (DCGM maps indices): exact
        (groups({"kind": "KIND_GPU", "count": 2, "gpus": [1]}), {0: U0, 1: U1}, {U0, U1}, {U1: 1.0}),
        # one group over both GPUs, and a second on GPU 0: 3 instances on GPU 0, 1 on GPU 1
        (
            groups(
                {"kind": "KIND_GPU", "count": 1, "gpus": [0, 1]},
                {"kind": "KIND_GPU", "count": 2, "gpus": [0]},
            ),
            {0: U0, 1: U1},
            {U0, U1},
            {U0: 0.75, U1: 0.25},
        ),
        # no gpus listed: every GPU Triton reports
        (groups({"kind": "KIND_GPU", "count": 1}), {}, {U0, U1}, {U0: 0.5, U1: 0.5}),
        # one GPU and no DCGM: index 0 is that GPU
        (groups({"kind": "KIND_GPU", "count": 4, "gpus": [0]}), {}, {U0}, {U0: 1.0}),
        # two GPUs and no DCGM index: not guessed
        (groups({"kind": "KIND_GPU", "count": 1, "gpus": [1]}), {}, {U0, U1}, "gpu_index_unknown"),
        (groups({"kind": "KIND_CPU", "count": 4}), {}, {U0}, "cpu_instances"),
        (groups({"kind": "KIND_MODEL"}), {}, {U0}, "kind_model"),
        (groups({"kind": "KIND_GPU", "gpus": [0]}, {"kind": "KIND_CPU"}), {}, {U0}, "mixed_kinds"),
        ({"max_batch_size": 8}, {}, {U0}, "no_gpu_uuid"),  # no instance groups served
    ],
)
def test_gpu_fractions_from_instance_groups(
    config: dict[str, Any], index_uuid: dict[int, str], reported: set[str], want: dict[str, float] | str
) -> None:
    from tritonwatch.exporters.placement import gpu_fractions

    assert gpu_fractions(placement(config), index_uuid, frozenset(reported)) == want
    for reason in [want] if isinstance(want, str) else []:
        assert reason in catalog.GPU_ATTRIBUTION_REASONS  # every reason is explained in the catalog


@pytest.mark.parametrize(
    ("group", "message"),
    [
        (
            {"kind": "KIND_GPU", "count": -1, "gpus": [0]},
            "instance_group[0].count: not an integer in [0, 100000] (got -1)",
        ),
        (
            {"kind": "KIND_GPU", "count": [2], "gpus": [0]},
            "instance_group[0].count: not an integer in [0, 100000] (got [2])",
        ),
        (
            {"kind": "KIND_GPU", "count": 1, "gpus": ["0; drop"]},
            "instance_group[0].gpus[0]: not a device index (got 0; drop)",
        ),
        ({"kind": "KIND_GPU", "count": 1, "gpus": "0"}, "instance_group[0].gpus must be a list (got str)"),
    ],
)
def test_a_hostile_instance_group_is_refused_with_what_is_wrong(group: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        placement(groups(group))
