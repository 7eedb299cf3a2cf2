"""The GPU part's source per GPU and its stated reasons, on recorded and real payloads (issue 13, 2 and 8).

Triton and dcgm-exporter are served by loopback endpoints; the sources are stepped by hand under a
fake clock (two scrapes 15 s apart, the snapshots' interval), so every value is known in advance:

* the recorded node (``tests/data/*node2gpu*``) with a dcgm-exporter that serves GPU 0 only: GPU 0
  is read from DCGM, GPU 1 from Triton's own ``nv_gpu_*``, and energy per inference joins both;
* the real DataDog ``nvidia_triton`` fixture (``tests/data/real/``): a Triton with a GPU whose
  per-model counters carry no ``gpu_uuid``, so each model's GPU attribution is absent *for a reason*.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.static_endpoint import StaticEndpoint
from test_gpu_query import GPU0, GPU1, INTERVAL, recorded_truth

from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.gpu import DcgmSource, GpuPart, TritonGpuWindow
from tritonwatch.exporters.gpuquery import GpuReading, dcgm_readings
from tritonwatch.exporters.triton import TritonMetrics
from tritonwatch.exporters.window import CounterWindow
from tritonwatch.fetch import MAX_LINE_BYTES

DATA = Path(__file__).resolve().parent / "data"
REAL_GPU = "GPU-951eeeeb-d284-d263-688e-d98a5306389b"  # the real Triton scrape's GPU
REAL_T4 = "GPU-20c56d28-0da5-6d26-a36a-e7af1ce2586e"  # the real dcgm-exporter scrape's GPU
# relative tolerance only for float rounding: the sidecar turns joules into watts and back (j / s x s)
ROUNDING = 1e-12


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def only_gpu(payload: str, uuid: str) -> str:
    """A dcgm-exporter payload as one that covers only ``uuid``: the other GPUs' rows removed."""
    return "".join(
        ln for ln in payload.splitlines(keepends=True) if ln.startswith("#") or f'UUID="{uuid}"' in ln
    )


class Node:
    """Triton (and optionally DCGM) endpoints, their sources and the GPU part, stepped by hand."""

    def __init__(self, triton: list[str], dcgm: list[str] | None) -> None:
        self.clock = Clock()
        self.triton_payloads, self.dcgm_payloads = triton, dcgm
        self.triton_ep = StaticEndpoint(triton[0].encode()).start()
        self.dcgm_ep = StaticEndpoint(dcgm[0].encode()).start() if dcgm else None
        self.metrics = TritonMetrics(
            self.triton_ep.url, CounterWindow(60.0), 1.0, 5.0, 1 << 26, clock=self.clock
        )
        self.window = TritonGpuWindow(60.0)
        self.metrics.snapshots.subscribe(self.window.observe)
        self.dcgm = (
            DcgmSource(self.dcgm_ep.url, 60.0, 1.0, 5.0, 1 << 26, clock=self.clock) if self.dcgm_ep else None
        )
        self.part = GpuPart(self.metrics.snapshots, self.window, self.dcgm)

    def scrape_all(self) -> Samples:
        for i, payload in enumerate(self.triton_payloads):
            self.clock.now = i * INTERVAL
            self.triton_ep.payload = payload.encode()
            assert self.metrics.step()
            if self.dcgm is not None and self.dcgm_ep is not None and self.dcgm_payloads:
                self.dcgm_ep.payload = self.dcgm_payloads[i].encode()
                assert self.dcgm.step()
        return {
            m.name: {tuple(sorted(s.labels.items())): s.value for s in m.samples} for m in self.part.collect()
        }

    def stop(self) -> None:
        self.triton_ep.stop()
        if self.dcgm_ep is not None:
            self.dcgm_ep.stop()


def by(samples: Samples, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(dict(ls)[k] for k in labels): v for ls, v in samples.get(name, {}).items()}


def per_gpu(samples: Samples, name: str) -> dict[str, float]:
    return {dict(ls)[catalog.GPU_UUID]: v for ls, v in samples.get(name, {}).items()}


@pytest.fixture()
def partial_dcgm() -> Iterator[Samples]:
    triton = [(DATA / f"triton_gpu_node2gpu_{i}.txt").read_text() for i in (1, 2)]
    dcgm = [only_gpu((DATA / f"dcgm_node2gpu_{i}.txt").read_text(), GPU0) for i in (1, 2)]
    node = Node(triton, dcgm)
    try:
        yield node.scrape_all()
    finally:
        node.stop()


def test_partial_dcgm_reads_each_gpu_from_the_source_that_has_it(partial_dcgm: Samples) -> None:
    got = partial_dcgm
    info = by(got, catalog.GPU_INFO, catalog.GPU_UUID, catalog.SOURCE)
    assert info == {(GPU0, "dcgm"): 1.0, (GPU1, "triton"): 1.0}
    # the second snapshot's readings, each from its own source
    assert per_gpu(got, catalog.GPU_UTILIZATION) == {GPU0: 0.61, GPU1: 0.67}
    assert per_gpu(got, catalog.GPU_POWER) == {GPU0: 310.5, GPU1: 261.2}
    dcgm2 = parse((DATA / "dcgm_node2gpu_2.txt").read_text())
    (temp0,) = (v for ls, v in dcgm2[catalog.DCGM_GPU_TEMP].items() if dict(ls)["UUID"] == GPU0)
    assert per_gpu(got, catalog.GPU_TEMPERATURE) == {GPU0: temp0}  # DCGM-only: GPU 0
    truth = recorded_truth()
    shares = by(got, catalog.MODEL_GPU_BUSY, "model", "version", catalog.GPU_UUID)
    assert shares == pytest.approx(truth.busy_share, rel=ROUNDING)
    energy = by(got, catalog.MODEL_ENERGY_PER_INFERENCE, "model", "version")
    assert set(energy) == {("resnet50", "1"), ("bert_base", "2")}  # nothing dropped
    assert energy == pytest.approx(truth.energy_per_inference_dcgm_gpu0, rel=ROUNDING)
    # resnet50 runs on both GPUs: its value is neither the all-DCGM nor the all-Triton answer
    for other in (truth.energy_per_inference, truth.energy_per_inference_triton):
        assert energy[("resnet50", "1")] != pytest.approx(other[("resnet50", "1")], rel=1e-6)
    # the CPU-only tokenizer says why it has no GPU attribution
    reasons = by(got, catalog.MODEL_GPU_ATTRIBUTION, "model", "version", catalog.REASON)
    assert reasons == {("tokenizer", "1", "no_gpu_uuid"): 1.0}


def test_real_triton_without_gpu_uuid_on_model_counters_states_why() -> None:
    """DataDog's real Triton scrape: a T4-class GPU (16 GiB, 70 W) in nv_gpu_*, model counters unlabelled."""
    payload = (DATA / "real" / "datadog_nvidia_triton_metrics.txt").read_text()
    node = Node([payload, payload], None)
    try:
        got = node.scrape_all()
    finally:
        node.stop()
    models = {
        "simple_string",
        "simple_sequence",
        "simple_int8",
        "simple_identity",
        "densenet_onnx",
        "simple_dyna_sequence",
        "inception_graphdef",
        "simple",
    }
    reasons = by(got, catalog.MODEL_GPU_ATTRIBUTION, "model", "version", catalog.REASON)
    assert reasons == {(m, "1", "no_gpu_uuid"): 1.0 for m in models}
    assert got[catalog.MODEL_GPU_BUSY] == {} and got[catalog.MODEL_ENERGY_PER_INFERENCE] == {}
    # the GPU itself is still reported, from Triton's own metrics
    assert by(got, catalog.GPU_INFO, catalog.GPU_UUID, catalog.SOURCE) == {(REAL_GPU, "triton"): 1.0}
    assert per_gpu(got, catalog.GPU_UTILIZATION) == {REAL_GPU: 0.0}
    assert per_gpu(got, catalog.GPU_MEMORY_USED_RATIO) == {REAL_GPU: 266338304 / 16106127360}
    assert per_gpu(got, catalog.GPU_POWER) == {REAL_GPU: 32.09}


def test_real_dcgm_exporter_scrape_is_normalised() -> None:
    """DataDog's real dcgm-exporter scrape of an idle Tesla T4 (driver 460.106.00)."""
    readings = dcgm_readings(parse((DATA / "real" / "datadog_dcgm_exporter_t4.txt").read_text()))
    assert readings == {
        (REAL_T4, ""): GpuReading(
            uuid=REAL_T4,
            source="dcgm",
            index="0",
            model_name="Tesla T4",
            hostname="424773df46e0",
            utilization=0.0,  # GPU_UTIL 0 %
            memory_used_ratio=0.0,  # FB_USED 0 of 0 + 15109 MiB
            power_watts=8.969,
            energy_joules=128996013 * 1e-3,  # mJ since boot
            temperature_celsius=25.0,
            sm_clock_hertz=300e6,  # 300 MHz
            last_xid=0.0,
        )
    }


def test_dcgm_serving_only_other_gpus_leaves_tritons_gpu_to_triton() -> None:
    """The two real scrapes side by side: DCGM is up, but serves a GPU this Triton does not use."""
    triton = (DATA / "real" / "datadog_nvidia_triton_metrics.txt").read_text()
    dcgm = (DATA / "real" / "datadog_dcgm_exporter_t4.txt").read_text()
    node = Node([triton, triton], [dcgm, dcgm])
    try:
        got = node.scrape_all()
    finally:
        node.stop()
    assert by(got, catalog.GPU_INFO, catalog.GPU_UUID, catalog.SOURCE) == {(REAL_GPU, "triton"): 1.0}
    assert per_gpu(got, catalog.GPU_POWER) == {REAL_GPU: 32.09}
    assert got[catalog.GPU_TEMPERATURE] == {}  # DCGM-only, and DCGM does not serve this GPU


@pytest.mark.parametrize("length", [2 * 2**20, 100 * 2**10], ids=["over_the_line_cap", "labels_over_64k"])
def test_a_long_dcgm_line_is_skipped_and_counted_and_the_other_gpus_kept(length: int) -> None:
    """Before: one line over 1 MiB stopped the read and one label over 64 KiB refused the payload:
    every GPU's readings went with it."""
    clean = (DATA / "dcgm_node2gpu_1.txt").read_text()
    lines = clean.splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    long = 'DCGM_FI_DEV_GPU_UTIL{gpu="9",UUID="' + "x" * length + '"} 50\n'
    hostile = "".join(lines[:at] + [long] + lines[at:])
    readings = {}
    for name, payload in (("clean", clean), ("hostile", hostile)):
        endpoint = StaticEndpoint(payload.encode()).start()
        try:
            source = DcgmSource(endpoint.url, 60.0, 1.0, 5.0, 1 << 26, clock=Clock())
            assert source.step()
            readings[name] = source.readings
            assert source.health.up == 1.0
            reason = "line_too_long" if length > MAX_LINE_BYTES else "labels_too_long"
            assert source.health.errors == ({reason: 1.0} if name == "hostile" else {})
        finally:
            endpoint.stop()
    assert readings["hostile"] == readings["clean"] and len(readings["clean"]) >= 2
