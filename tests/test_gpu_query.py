"""GPU normalisation and the model-to-GPU maths, on the recorded (reconstructed) payloads in tests/data.

``recorded_truth`` works the expected values out of the two snapshots by plain arithmetic, apart from
the code under test; the sidecar test compares the live sidecar against it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tritonwatch import catalog
from tritonwatch.catalog.gpu import ExecIncrease, busy_seconds, busy_shares, energy_per_inference
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.gpuquery import (
    dcgm_readings,
    select_used,
    triton_gpu_uuids,
    triton_readings,
)
from tritonwatch.exporters.window import IncreaseWindow

DATA = Path(__file__).resolve().parent / "data"
GPU0 = "GPU-3f9a1c52-7b0e-4d8a-9c61-2e5b7d40a8f3"
GPU1 = "GPU-b81d6e07-4a3c-42f9-8e15-c7a09f3d6b21"
GPU2 = "GPU-e5c2047b-91d8-4f36-b3a0-58d1c9e7f402"  # on the node, not used by this Triton
MIG_GPU = "GPU-06c1a8d2-5e4b-47f0-b9a3-d2c8e17f5a94"
INTERVAL = 15.0  # the snapshots' replay-interval-seconds


def load(name: str) -> Samples:
    return parse((DATA / name).read_text())


@dataclass(frozen=True)
class Truth:
    request_rate: dict[tuple[str, str], float]  # successes/s summed over gpu_uuid
    busy_share: dict[tuple[str, str, str], float]
    naive_share: dict[tuple[str, str, str], float]  # compute time not divided by batch size
    energy_per_inference: dict[tuple[str, str], float]  # with DCGM's energy counter
    energy_per_inference_triton: dict[tuple[str, str], float]  # with nv_energy_consumption
    # DCGM covering GPU 0 only: GPU 0's energy from DCGM, GPU 1's from nv_energy_consumption
    energy_per_inference_dcgm_gpu0: dict[tuple[str, str], float]
    naive_energy_per_inference: dict[tuple[str, str], float]


def _deltas(first: Samples, second: Samples, family: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v - first[family][labels] for labels, v in second[family].items()}


def recorded_truth() -> Truth:
    t1, t2 = load("triton_gpu_node2gpu_1.txt"), load("triton_gpu_node2gpu_2.txt")
    d1, d2 = load("dcgm_node2gpu_1.txt"), load("dcgm_node2gpu_2.txt")
    rate: dict[tuple[str, str], float] = {}
    for labels, d in _deltas(t1, t2, catalog.TRITON_SUCCESS).items():
        lm = dict(labels)
        key = (lm["model"], lm["version"])
        rate[key] = rate.get(key, 0.0) + d / INTERVAL
    per: dict[tuple[str, str, str], dict[str, float]] = {}
    for family, field in (
        (catalog.triton_duration("compute_input"), "us"),
        (catalog.triton_duration("compute_infer"), "us"),
        (catalog.triton_duration("compute_output"), "us"),
        (catalog.TRITON_INFERENCE_COUNT, "inf"),
        (catalog.TRITON_EXEC_COUNT, "exec"),
    ):
        for labels, d in _deltas(t1, t2, family).items():
            lm = dict(labels)
            if "gpu_uuid" not in lm:
                continue
            k = (lm["model"], lm["version"], lm["gpu_uuid"])
            per.setdefault(k, {}).setdefault(field, 0.0)
            per[k][field] += d
    busy = {k: v["us"] / 1e6 * v["exec"] / v["inf"] for k, v in per.items()}
    naive = {k: v["us"] / 1e6 for k, v in per.items()}

    def shares(times: dict[tuple[str, str, str], float]) -> dict[tuple[str, str, str], float]:
        total: dict[str, float] = {}
        for k, b in times.items():
            total[k[2]] = total.get(k[2], 0.0) + b
        return {k: b / total[k[2]] for k, b in times.items()}

    dcgm_j = {dict(labels)["UUID"]: d / 1000.0 for labels, d in _deltas(d1, d2, catalog.DCGM_ENERGY).items()}
    triton_j = {dict(labels)["gpu_uuid"]: d for labels, d in _deltas(t1, t2, catalog.TRITON_ENERGY).items()}

    def per_inference(
        sh: dict[tuple[str, str, str], float], joules: dict[str, float]
    ) -> dict[tuple[str, str], float]:
        num: dict[tuple[str, str], float] = {}
        den: dict[tuple[str, str], float] = {}
        for (m, v, g), s in sh.items():
            num[(m, v)] = num.get((m, v), 0.0) + s * joules[g]
            den[(m, v)] = den.get((m, v), 0.0) + per[(m, v, g)]["inf"]
        return {k: num[k] / den[k] for k in num}

    busy_sh, naive_sh = shares(busy), shares(naive)
    return Truth(
        request_rate=rate,
        busy_share=busy_sh,
        naive_share=naive_sh,
        energy_per_inference=per_inference(busy_sh, dcgm_j),
        energy_per_inference_triton=per_inference(busy_sh, triton_j),
        energy_per_inference_dcgm_gpu0=per_inference(busy_sh, {**triton_j, GPU0: dcgm_j[GPU0]}),
        naive_energy_per_inference=per_inference(naive_sh, dcgm_j),
    )


def test_recorded_scenario_is_the_documented_one() -> None:
    truth = recorded_truth()
    assert truth.busy_share[("resnet50", "1", GPU0)] == 1.0
    # GPU 1: resnet50 at batch 8 (12 ms per execution, 30/s) and bert_base at batch 2 (6 ms, 50/s)
    assert truth.busy_share[("resnet50", "1", GPU1)] == pytest.approx(0.5520, abs=1e-3)
    assert truth.busy_share[("bert_base", "2", GPU1)] == pytest.approx(0.4480, abs=1e-3)
    assert truth.energy_per_inference[("resnet50", "1")] == pytest.approx(0.708, abs=1e-3)
    assert truth.energy_per_inference[("bert_base", "2")] == pytest.approx(1.176, abs=1e-3)
    # Without the division by batch size bert_base would look 2.6x cheaper: the test can tell.
    assert truth.naive_energy_per_inference[("bert_base", "2")] < 0.5
    assert ("tokenizer", "1") not in truth.energy_per_inference


def test_dcgm_units_are_normalised() -> None:
    r = dcgm_readings(load("dcgm_node2gpu_2.txt"))
    g0 = r[(GPU0, "")]
    assert g0.utilization == pytest.approx(0.61)  # 61 %
    assert g0.memory_used_ratio == pytest.approx(31214 / (31214 + 49760))  # MiB / MiB
    assert g0.power_watts == pytest.approx(310.5)
    assert g0.energy_joules == pytest.approx(31109208.117)  # mJ -> J
    assert g0.sm_clock_hertz == pytest.approx(1.98e9)  # MHz -> Hz
    assert g0.temperature_celsius == 64.0
    assert g0.last_xid == 0.0
    assert (g0.index, g0.hostname, g0.model_name, g0.source) == (
        "0",
        "gpu-node-07",
        "NVIDIA H100 80GB HBM3",
        "dcgm",
    )
    assert r[(GPU2, "")].last_xid == 79.0
    assert set(r) == {(GPU0, ""), (GPU1, ""), (GPU2, "")}


def test_dcgm_lowercase_hostname_and_mig_rows() -> None:
    r = dcgm_readings(load("dcgm_mig.txt"))
    assert set(r) == {(MIG_GPU, "1"), (MIG_GPU, "2")}
    a = r[(MIG_GPU, "1")]
    assert a.hostname == "gpu-node-12"  # the May 2026 lowercase label
    assert a.mig_profile == "3g.40gb"
    assert a.utilization == pytest.approx(0.412)  # GR_ENGINE_ACTIVE: GPU_UTIL is not served for MIG
    assert a.memory_used_ratio == pytest.approx(9120 / (9120 + 30591))
    assert a.last_xid == 43.0


def test_rows_without_uuid_are_skipped_and_nan_is_absent() -> None:
    payload = (
        "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
        'DCGM_FI_DEV_GPU_UTIL{gpu="0"} 50\n'
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-x",Hostname="h"} NaN\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-x",Hostname="h"} 100.5\n'
    )
    r = dcgm_readings(parse(payload))
    assert list(r) == [("GPU-x", "")]
    assert r[("GPU-x", "")].utilization is None
    assert r[("GPU-x", "")].power_watts == 100.5
    assert r[("GPU-x", "")].memory_used_ratio is None


def test_mig_instance_is_chosen_by_pod_or_left_out() -> None:
    r = dcgm_readings(load("dcgm_mig.txt"))
    mine = select_used(r, [MIG_GPU], pod="triton-b-5d2e8c9f7-mw4hz")
    assert mine[MIG_GPU].mig_instance == "2"
    assert mine[MIG_GPU].utilization == pytest.approx(0.087)
    assert select_used(r, [MIG_GPU], pod="") == {}  # two instances, no way to tell: ambiguous
    only = {k: v for k, v in r.items() if k[1] == "1"}
    assert select_used(only, [MIG_GPU])[MIG_GPU].mig_instance == "1"


def test_only_gpus_this_triton_uses_are_selected() -> None:
    used = triton_gpu_uuids(load("triton_gpu_node2gpu_2.txt"))
    assert used == {GPU0, GPU1}
    chosen = select_used(dcgm_readings(load("dcgm_node2gpu_2.txt")), used)
    assert set(chosen) == {GPU0, GPU1}


def test_triton_gpu_metrics_fallback() -> None:
    r = triton_readings(load("triton_gpu_node2gpu_2.txt"))
    g1 = r[GPU1]
    assert g1.source == "triton"
    assert g1.utilization == pytest.approx(0.67)
    assert g1.memory_used_ratio == pytest.approx((22903 + 585) * 1048576 / 85520809984)
    assert g1.power_watts == pytest.approx(261.2)
    assert g1.energy_joules == pytest.approx(925310.207)
    assert g1.temperature_celsius is None and g1.last_xid is None


def test_busy_time_divides_compute_by_batch_size() -> None:
    # 30 executions of batch 8 at 12 ms: Triton's counter holds 240 x 12 ms = 2.88 s; busy is 0.36 s
    assert busy_seconds(ExecIncrease(2.88, 240, 30)) == pytest.approx(0.36)
    assert busy_seconds(ExecIncrease(0.0, 0, 0)) is None


def test_busy_shares_and_energy_split_with_different_batch_sizes() -> None:
    inc = {
        ("a", "1", "G0"): ExecIncrease(4.8, 400, 50),  # batch 8, 12 ms: busy 0.6 s
        ("a", "1", "G1"): ExecIncrease(2.88, 240, 30),  # batch 8, 12 ms: busy 0.36 s
        ("b", "1", "G1"): ExecIncrease(0.6, 100, 50),  # batch 2, 6 ms: busy 0.3 s
    }
    shares = busy_shares(inc)
    assert shares[("a", "1", "G0")] == 1.0
    assert shares[("a", "1", "G1")] == pytest.approx(0.36 / 0.66)
    assert shares[("b", "1", "G1")] == pytest.approx(0.30 / 0.66)
    e = energy_per_inference(shares, inc, {"G0": 300.0, "G1": 264.0})
    assert e[("a", "1")] == pytest.approx((300.0 + 264.0 * 0.36 / 0.66) / 640)
    assert e[("b", "1")] == pytest.approx(264.0 * 0.30 / 0.66 / 100)
    # A GPU without an energy source counts on neither side.
    e = energy_per_inference(shares, inc, {"G0": 300.0})
    assert e == {("a", "1"): pytest.approx(300.0 / 400)}


def test_increase_window_treats_a_drop_as_a_reset() -> None:
    w: IncreaseWindow[str] = IncreaseWindow(10.0)
    w.ingest(0.0, [("s", "k", 100.0)])
    w.ingest(1.0, [("s", "k", 130.0)])
    w.ingest(2.0, [("s", "k", 20.0)])  # restart: counts from 0
    assert w.increases() == {"k": 50.0}
    assert w.span() == 2.0
    w.ingest(20.0, [("s", "k", 25.0)])  # older scrapes leave the window
    assert w.increases() == {"k": 5.0}
    assert w.span() == 18.0
