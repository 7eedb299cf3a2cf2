"""The sidecar on a replayed GPU node (recorded dcgm-exporter and Triton payloads; no GPU here).

The node has two GPUs used by Triton and a third it does not use; resnet50 is split over both
(counters split by gpu_uuid, batch 8), bert_base shares GPU 1 (batch 2), tokenizer runs on the
CPU. Triton's HTTP API points at a closed port: that costs only the ``triton_api`` target.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator

import pytest
from test_gpu_query import GPU0, GPU1, GPU2, recorded_truth

from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.gpu import GpuPart
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.gpureplay import GpuReplay
from tritonwatch.local.procs import free_port, wait_until

MODELS = {("resnet50", "1"), ("bert_base", "2"), ("tokenizer", "1")}
GPU_FAMILIES = (catalog.GPU_UTILIZATION, catalog.GPU_MEMORY_USED_RATIO, catalog.GPU_POWER)
DCGM_ONLY = (catalog.GPU_TEMPERATURE, catalog.GPU_SM_CLOCK, catalog.GPU_XID)
SPAN = 4.0  # seconds of scrapes in the window before values are compared
pytestmark = pytest.mark.slow  # each test scrapes the replayed node for SPAN seconds


@pytest.fixture
def node() -> Iterator[GpuReplay]:
    replay = GpuReplay().start()
    try:
        yield replay
    finally:
        replay.stop()


def start_sidecar(triton_metrics: str, dcgm: str = "") -> Sidecar:
    return Sidecar.local(
        f"http://127.0.0.1:{free_port()}",  # nothing listens: only triton_api goes down
        triton_metrics,
        dcgm=dcgm,
        interval=0.25,
        window=6.0,
    ).start()


def scrape(sidecar: Sidecar) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as resp:
        return parse(resp.read())


def by(samples: Samples, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(dict(ls)[k] for k in labels): v for ls, v in samples.get(name, {}).items()}


def up(samples: Samples) -> dict[str, float]:
    return {k[0]: v for k, v in by(samples, catalog.UP, catalog.TARGET).items()}


def wait_for_span(sidecar: Sidecar, dcgm: bool) -> None:
    def filled() -> bool:
        spans = [sidecar.metrics.window.span()]
        part = next(p for p in sidecar.collector.parts if isinstance(p, GpuPart))
        if dcgm and part.dcgm is not None:
            spans.append(part.dcgm.energy.span())
        return min(spans) >= SPAN

    wait_until(filled, 20, f"{SPAN:g}s of scrapes in the sidecar's window")


def assert_models_served(samples: Samples) -> None:
    truth = recorded_truth()
    rates = by(samples, catalog.REQUEST_RATE, "model", "version")
    assert set(rates) == MODELS
    for key, want in truth.request_rate.items():
        assert rates[key] == pytest.approx(want, rel=0.05), key  # summed over gpu_uuid
    shares = by(samples, catalog.MODEL_GPU_BUSY, "model", "version", "gpu_uuid")
    assert set(shares) == set(truth.busy_share)  # no CPU-only model, no GPU it does not run on
    for key, want in truth.busy_share.items():
        assert shares[key] == pytest.approx(want, rel=0.03), key


def test_dcgm_node_joined_to_models(node: GpuReplay) -> None:
    sidecar = start_sidecar(node.triton_metrics_url, node.dcgm_url)
    try:
        wait_for_span(sidecar, dcgm=True)
        got = scrape(sidecar)
    finally:
        sidecar.stop()
    assert up(got) == {"triton": 1.0, "triton_api": 0.0, "dcgm": 1.0}
    assert_models_served(got)
    source = parse(node.dcgm.payload())
    gpu = ("gpu", "UUID")
    for ours, theirs, scale in (
        (catalog.GPU_UTILIZATION, catalog.DCGM_GPU_UTIL, 0.01),
        (catalog.GPU_POWER, catalog.DCGM_POWER, 1.0),
        (catalog.GPU_TEMPERATURE, catalog.DCGM_GPU_TEMP, 1.0),
        (catalog.GPU_SM_CLOCK, catalog.DCGM_SM_CLOCK, 1e6),
        (catalog.GPU_XID, catalog.DCGM_XID, 1.0),
    ):
        values = by(got, ours, "gpu_uuid")
        assert set(values) == {(GPU0,), (GPU1,)}, ours  # GPU 2 is another process's
        raw = {k[1]: v for k, v in by(source, theirs, *gpu).items()}
        for (uuid,), v in values.items():
            assert v == pytest.approx(raw[uuid] * scale, rel=0.02), (ours, uuid)
    used = {k[1]: v for k, v in by(source, catalog.DCGM_FB_USED, *gpu).items()}
    free = {k[1]: v for k, v in by(source, catalog.DCGM_FB_FREE, *gpu).items()}
    for (uuid,), v in by(got, catalog.GPU_MEMORY_USED_RATIO, "gpu_uuid").items():
        assert v == pytest.approx(used[uuid] / (used[uuid] + free[uuid]), rel=0.02)
    assert (GPU2,) not in by(got, catalog.GPU_XID, "gpu_uuid")  # its XID 79 stays out
    info = by(got, catalog.GPU_INFO, "gpu_uuid", "source", "hostname")
    assert info == {(GPU0, "dcgm", "gpu-node-07"): 1.0, (GPU1, "dcgm", "gpu-node-07"): 1.0}
    truth = recorded_truth()
    energy = by(got, catalog.MODEL_ENERGY_PER_INFERENCE, "model", "version")
    assert set(energy) == {("resnet50", "1"), ("bert_base", "2")}
    for key, want in truth.energy_per_inference.items():
        assert energy[key] == pytest.approx(want, rel=0.05), key
        # the two models on GPU 1 run batch 8 and batch 2: without the batch division it is off
        assert energy[key] != pytest.approx(truth.naive_energy_per_inference[key], rel=0.05), key


def test_failing_dcgm_costs_only_gpu_families(node: GpuReplay) -> None:
    sidecar = start_sidecar(node.triton_metrics_url, node.dcgm_url)
    try:
        wait_until(lambda: scrape(sidecar).get(catalog.GPU_TEMPERATURE), 20, "DCGM families")
        node.dcgm.fail = "garbage"
        wait_until(lambda: up(scrape(sidecar)).get("dcgm") == 0.0, 20, "up{target=dcgm} 0")
        wait_for_span(sidecar, dcgm=False)
        got = scrape(sidecar)
        errors = by(got, catalog.SCRAPE_ERRORS, catalog.TARGET, "reason")
    finally:
        sidecar.stop()
    assert up(got) == {"triton": 1.0, "triton_api": 0.0, "dcgm": 0.0}
    assert errors.get(("dcgm", "parse"), 0) >= 1
    assert_models_served(got)
    for name in DCGM_ONLY:
        assert not got.get(name), name  # DCGM's own families are gone, not stale
    # Triton's own GPU metrics stand in, labelled as such
    assert by(got, catalog.GPU_INFO, "gpu_uuid", "source") == {(GPU0, "triton"): 1.0, (GPU1, "triton"): 1.0}
    triton = parse(node.triton.payload())
    util = {k[0]: v for k, v in by(triton, catalog.TRITON_GPU_UTILIZATION, "gpu_uuid").items()}
    for (uuid,), v in by(got, catalog.GPU_UTILIZATION, "gpu_uuid").items():
        assert v == pytest.approx(util[uuid], rel=0.02)
    energy = by(got, catalog.MODEL_ENERGY_PER_INFERENCE, "model", "version")
    for key, want in recorded_truth().energy_per_inference_triton.items():
        assert energy[key] == pytest.approx(want, rel=0.05), key


def test_missing_dcgm_and_no_triton_gpu_metrics_drops_only_gpu_families() -> None:
    with GpuReplay(triton_gpu_metrics=False) as node:
        closed = f"http://127.0.0.1:{free_port()}/metrics"
        sidecar = start_sidecar(node.triton_metrics_url, closed)
        try:
            wait_until(lambda: scrape(sidecar).get(catalog.MODEL_GPU_BUSY), 20, "busy shares")
            wait_for_span(sidecar, dcgm=False)
            got = scrape(sidecar)
        finally:
            sidecar.stop()
    assert up(got) == {"triton": 1.0, "triton_api": 0.0, "dcgm": 0.0}
    assert by(got, catalog.SCRAPE_ERRORS, catalog.TARGET, "reason").get(("dcgm", "connection"), 0) >= 1
    for name in (*GPU_FAMILIES, *DCGM_ONLY, catalog.GPU_INFO, catalog.MODEL_ENERGY_PER_INFERENCE):
        assert not got.get(name), name
    assert_models_served(got)  # request rates and busy shares need only Triton's counters


def test_without_dcgm_flag_triton_gpu_metrics_are_used(node: GpuReplay) -> None:
    sidecar = start_sidecar(node.triton_metrics_url)
    try:
        wait_for_span(sidecar, dcgm=False)
        got = scrape(sidecar)
    finally:
        sidecar.stop()
    assert up(got) == {"triton": 1.0, "triton_api": 0.0}  # no dcgm target unless configured
    mem = by(got, catalog.GPU_MEMORY_USED_RATIO, "gpu_uuid")
    assert mem[(GPU1,)] == pytest.approx((22903 + 585) * 1048576 / 85520809984, rel=0.02)
    assert by(got, catalog.GPU_POWER, "gpu_uuid") == {(GPU0,): 310.5, (GPU1,): 261.2}
    energy = by(got, catalog.MODEL_ENERGY_PER_INFERENCE, "model", "version")
    for key, want in recorded_truth().energy_per_inference_triton.items():
        assert energy[key] == pytest.approx(want, rel=0.05), key


def test_whole_replayed_node_has_every_target_up(node: GpuReplay) -> None:
    sidecar = Sidecar.local(
        node.triton_url, node.triton_metrics_url, dcgm=node.dcgm_url, interval=0.25, window=6.0
    ).start()
    try:
        wait_until(
            lambda: len(scrape(sidecar).get(catalog.BATCH_EFFICIENCY, {})) == 3, 20, "batch efficiency"
        )
        wait_for_span(sidecar, dcgm=True)
        got = scrape(sidecar)
    finally:
        sidecar.stop()
    assert up(got) == {"triton": 1.0, "triton_api": 1.0, "dcgm": 1.0}
    assert by(got, catalog.MODEL_READY, "model", "version") == {k: 1.0 for k in MODELS}
    assert by(got, catalog.MAX_BATCH_SIZE, "model", "version") == {
        ("resnet50", "1"): 16.0,
        ("bert_base", "2"): 8.0,
        ("tokenizer", "1"): 4.0,
    }
    # the statistics API's batch_stats hold time per execution: 12 ms for resnet50 at batch 8
    execs = by(got, catalog.BATCH_EXECUTIONS, "model", "batch_size")
    seconds = by(got, catalog.BATCH_COMPUTE, "model", "batch_size")
    assert seconds[("resnet50", "8")] / execs[("resnet50", "8")] == pytest.approx(0.012, rel=0.01)
    assert by(got, catalog.BATCH_EFFICIENCY, "model", "version")[("resnet50", "1")] == pytest.approx(
        0.5, rel=0.03
    )
