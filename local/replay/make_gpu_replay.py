"""Writes the reconstructed GPU replay payloads beside itself (values chosen by hand; not captured from a GPU).

Rerun: python local/replay/make_gpu_replay.py (tests/data links to these files)
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent
DT = 15.0
GPUS = [
    # uuid, index, bus, util%, gr_active, fb_used, fb_free, power, mean W over DT, temp, sm MHz, xid
    (
        "GPU-3f9a1c52-7b0e-4d8a-9c61-2e5b7d40a8f3",
        "0",
        "00000000:18:00.0",
        (60, 61),
        (0.583, 0.594),
        (31190, 31214),
        (49784, 49760),
        (309.8, 310.5),
        312.4,
        (63, 64),
        1980,
        0,
    ),
    (
        "GPU-b81d6e07-4a3c-42f9-8e15-c7a09f3d6b21",
        "1",
        "00000000:2A:00.0",
        (66, 67),
        (0.637, 0.641),
        (22871, 22903),
        (58103, 58071),
        (257.3, 261.2),
        258.9,
        (61, 61),
        1980,
        0,
    ),
    (
        "GPU-e5c2047b-91d8-4f36-b3a0-58d1c9e7f402",
        "2",
        "00000000:3A:00.0",
        (0, 0),
        (0.0, 0.0),
        (4, 4),
        (80970, 80970),
        (69.7, 69.6),
        69.8,
        (33, 33),
        345,
        79,
    ),
]
HOST = "gpu-node-07"
ENERGY_MJ_T1 = [31104522117, 29873004561, 12061873020]
TRITON_ENERGY_J_T1 = [1112874.519, 921431.207]
TRITON_START_UPTIME = 3600.0

HEADER_DCGM = """# replay: recorded dcgm-exporter format, not a live GPU
# Reconstructed by hand from dcgm-exporter's public default-counters output format (3.3/4.x: label
# set gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION, container,
# namespace, pod); NOT captured from a GPU here. Snapshot {n} of 2, taken {dt:g} s apart: node
# gpu-node-07 with three H100s, of which Triton uses GPU 0 and 1 (GPU 2 belongs to another process).
# replay-interval-seconds {dt:g}
"""

DCGM_FIELDS = [
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ)."),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %)."),
    ("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Number of remapped rows for uncorrectable errors",
    ),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors"),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
    (
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "gauge",
        "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    ),
    (
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "gauge",
        "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.",
    ),
]


def f6(v: float) -> str:
    return f"{v:.6f}"


def dcgm(n: int) -> str:
    k = n - 1
    lines = [HEADER_DCGM.format(n=n, dt=DT).rstrip("\n")]
    for name, kind, help_ in DCGM_FIELDS:
        lines.append(f"# HELP {name} {help_}")
        lines.append(f"# TYPE {name} {kind}")
    for name, _kind, _help in DCGM_FIELDS:
        for i, g in enumerate(GPUS):
            uuid, idx, bus, util, gr, used, free, power, meanw, temp, sm, xid = g
            labels = (
                f'gpu="{idx}",UUID="{uuid}",pci_bus_id="{bus}",device="nvidia{idx}",'
                f'modelName="NVIDIA H100 80GB HBM3",Hostname="{HOST}",DCGM_FI_DRIVER_VERSION="550.54.15",'
                'container="",namespace="",pod=""'
            )
            busy = util[k] > 0
            v = {
                "DCGM_FI_DEV_SM_CLOCK": str(sm),
                "DCGM_FI_DEV_MEM_CLOCK": "2619" if busy else "1593",
                "DCGM_FI_DEV_MEMORY_TEMP": str(temp[k] + 6),
                "DCGM_FI_DEV_GPU_TEMP": str(temp[k]),
                "DCGM_FI_DEV_POWER_USAGE": f6(power[k]),
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": str(ENERGY_MJ_T1[i] + round(meanw * 1000 * DT * k)),
                "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "0",
                "DCGM_FI_DEV_GPU_UTIL": str(util[k]),
                "DCGM_FI_DEV_MEM_COPY_UTIL": str(round(util[k] * 0.4)),
                "DCGM_FI_DEV_ENC_UTIL": "0",
                "DCGM_FI_DEV_DEC_UTIL": "0",
                "DCGM_FI_DEV_XID_ERRORS": str(xid),
                "DCGM_FI_DEV_FB_FREE": str(free[k]),
                "DCGM_FI_DEV_FB_USED": str(used[k]),
                "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "0",
                "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "0",
                "DCGM_FI_DEV_ROW_REMAP_FAILURE": "0",
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": f6(gr[k]),
                "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": f6(gr[k] * 0.52),
                "DCGM_FI_PROF_DRAM_ACTIVE": f6(gr[k] * 0.31),
                "DCGM_FI_PROF_PCIE_TX_BYTES": str(round(gr[k] * 41_873_112)),
                "DCGM_FI_PROF_PCIE_RX_BYTES": str(round(gr[k] * 187_409_552)),
            }[name]
            lines.append(f"{name}{{{labels}}} {v}")
    return "\n".join(lines) + "\n"


# --- Triton ---
U0, U1 = GPUS[0][0], GPUS[1][0]
# (model, version, gpu or None): per-second rates: success, inferences, executions,
# per-execution compute input/infer/output (us), per-request queue and request (us)
SERIES = [
    ("resnet50", "1", U0, 400.0, 400.0, 50.0, 500.0, 11000.0, 500.0, 2000.0, 15000.0),
    ("resnet50", "1", U1, 240.0, 240.0, 30.0, 500.0, 11000.0, 500.0, 2000.0, 15000.0),
    ("bert_base", "2", U1, 100.0, 100.0, 50.0, 300.0, 5400.0, 300.0, 1000.0, 8000.0),
    ("tokenizer", "1", None, 50.0, 50.0, 25.0, 100.0, 1800.0, 100.0, 500.0, 3000.0),
]
NOISE = [1.0, 1.013, 0.987, 1.006]
HIST = [3600.0, 3600.0, 2400.0, 3100.0]  # seconds of traffic behind the first snapshot

HEADER_TRITON = """# replay: recorded Triton GPU metrics format, not a live GPU
# Reconstructed by hand from Triton 2.51's public /metrics format (per-model counters split by
# gpu_uuid for GPU model instances, nv_gpu_* and nv_energy_consumption per GPU); NOT captured from a
# GPU here. Snapshot {n} of 2, taken {dt:g} s apart, of the Triton on gpu-node-07: resnet50 on GPU 0
# and 1 (batch 8), bert_base on GPU 1 (batch 2), tokenizer on the CPU (no gpu_uuid).
# replay-interval-seconds {dt:g}
"""


def lab(model: str, version: str, gpu: str | None, extra: str = "") -> str:
    parts = []
    if gpu:
        parts.append(f'gpu_uuid="{gpu}"')
    parts.append(f'model="{model}"')
    if extra:
        parts.append(extra)
    parts.append(f'version="{version}"')
    return "{" + ",".join(parts) + "}"


def counter_value(i: int, per_second: float, n: int) -> int:
    t = HIST[i] + (DT * NOISE[i] if n == 2 else 0.0)
    return round(per_second * t)


def triton(n: int) -> str:
    out = [HEADER_TRITON.format(n=n, dt=DT).rstrip("\n")]

    def fam(name: str, kind: str, help_: str, rows: list[str]) -> None:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(rows)

    def rows(fn: Callable[[int, Any], object]) -> list[str]:
        return [f"{fam_name}{lab(m, v, g)} {fn(i, s)}" for i, s in enumerate(SERIES) for (m, v, g) in [s[:3]]]

    fam_name = "nv_inference_request_success"
    fam(
        fam_name,
        "counter",
        "Number of successful inference requests, all batch sizes",
        rows(lambda i, s: counter_value(i, s[3], n)),
    )
    failure_rows = []
    for m, v in (("bert_base", "2"), ("tokenizer", "1"), ("resnet50", "1")):
        for reason in ("OTHER", "BACKEND", "CANCELED", "REJECTED"):
            val = 0
            if m == "bert_base" and reason == "BACKEND":
                val = 3 if n == 1 else 4
            failure_rows.append(
                f'nv_inference_request_failure{{model="{m}",reason="{reason}",version="{v}"}} {val}'
            )
    fam(
        "nv_inference_request_failure",
        "counter",
        "Number of failed inference requests, all batch sizes",
        failure_rows,
    )
    fam_name = "nv_inference_count"
    fam(
        fam_name,
        "counter",
        "Number of inferences performed (does not include cached requests)",
        rows(lambda i, s: counter_value(i, s[4], n)),
    )
    fam_name = "nv_inference_exec_count"
    fam(
        fam_name,
        "counter",
        "Number of model executions performed (does not include cached requests)",
        rows(lambda i, s: counter_value(i, s[5], n)),
    )
    fam_name = "nv_inference_request_duration_us"
    fam(
        fam_name,
        "counter",
        "Cumulative inference request duration in microseconds (includes cached requests)",
        rows(lambda i, s: counter_value(i, s[3] * s[10], n)),
    )
    fam_name = "nv_inference_queue_duration_us"
    fam(
        fam_name,
        "counter",
        "Cumulative inference queuing duration in microseconds (includes cached requests)",
        rows(lambda i, s: counter_value(i, s[3] * s[9], n)),
    )
    # compute counters add a batch's time once per request in it: inferences x per-execution time
    for ph, col, help_ in (
        ("input", 6, "Cumulative compute input duration in microseconds (does not include cached requests)"),
        (
            "infer",
            7,
            "Cumulative compute inference duration in microseconds (does not include cached requests)",
        ),
        (
            "output",
            8,
            "Cumulative inference compute output duration in microseconds (does not include cached requests)",
        ),
    ):
        fam_name = f"nv_inference_compute_{ph}_duration_us"
        fam(fam_name, "counter", help_, rows(lambda i, s, col=col: counter_value(i, s[4] * s[col], n)))  # type: ignore[misc]
    fam(
        "nv_inference_pending_request_count",
        "gauge",
        "Instantaneous number of pending requests awaiting execution per-model.",
        [
            f'nv_inference_pending_request_count{{model="{m}",version="{v}"}} {p}'
            for m, v, p in (("bert_base", "2", 1 + n), ("tokenizer", "1", 0), ("resnet50", "1", 5 + n))
        ],
    )
    fam(
        "nv_pinned_memory_pool_total_bytes",
        "gauge",
        "Pinned memory pool total memory size, in bytes",
        ["nv_pinned_memory_pool_total_bytes 268435456"],
    )
    fam(
        "nv_pinned_memory_pool_used_bytes",
        "gauge",
        "Pinned memory pool used memory size, in bytes",
        ["nv_pinned_memory_pool_used_bytes 0"],
    )
    k = n - 1
    gpus = GPUS[:2]
    total = 85520809984
    fam(
        "nv_gpu_utilization",
        "gauge",
        "GPU utilization rate [0.0 - 1.0)",
        [f'nv_gpu_utilization{{gpu_uuid="{g[0]}"}} {g[3][k] / 100}' for g in gpus],
    )
    fam(
        "nv_gpu_memory_total_bytes",
        "gauge",
        "GPU total memory, in bytes",
        [f'nv_gpu_memory_total_bytes{{gpu_uuid="{g[0]}"}} {total}' for g in gpus],
    )
    fam(
        "nv_gpu_memory_used_bytes",
        "gauge",
        "GPU used memory, in bytes",
        [f'nv_gpu_memory_used_bytes{{gpu_uuid="{g[0]}"}} {(g[5][k] + 585) * 1048576}' for g in gpus],
    )
    fam(
        "nv_gpu_power_usage",
        "gauge",
        "GPU power usage in watts",
        [f'nv_gpu_power_usage{{gpu_uuid="{g[0]}"}} {g[7][k]}' for g in gpus],
    )
    fam(
        "nv_gpu_power_limit",
        "gauge",
        "GPU power management limit in watts",
        [f'nv_gpu_power_limit{{gpu_uuid="{g[0]}"}} 700' for g in gpus],
    )
    fam(
        "nv_energy_consumption",
        "counter",
        "GPU energy consumption in joules since the Triton Server started",
        [
            f'nv_energy_consumption{{gpu_uuid="{g[0]}"}} {TRITON_ENERGY_J_T1[i] + (g[8] - 0.3) * DT * k:.3f}'
            for i, g in enumerate(gpus)
        ],
    )
    fam(
        "nv_cpu_utilization",
        "gauge",
        "CPU utilization rate [0.0 - 1.0]",
        [f"nv_cpu_utilization {0.213 + 0.004 * k}"],
    )
    fam(
        "nv_cpu_memory_total_bytes",
        "gauge",
        "CPU total memory (RAM), in bytes",
        ["nv_cpu_memory_total_bytes 540966129664"],
    )
    fam(
        "nv_cpu_memory_used_bytes",
        "gauge",
        "CPU used memory (RAM), in bytes",
        [f"nv_cpu_memory_used_bytes {61873004544 + 4096 * k}"],
    )
    return "\n".join(out) + "\n"


MIG_HEADER = """# replay: recorded dcgm-exporter format, not a live GPU
# Reconstructed by hand from dcgm-exporter's public output format for a MIG-partitioned GPU in
# Kubernetes (per GPU instance: GPU_I_PROFILE, GPU_I_ID; pod mapping labels; the lowercase
# `hostname` label of releases from May 2026); NOT captured from a GPU here. One A100 80GB split in
# two 3g.40gb instances, each held by a Triton pod; DCGM_FI_DEV_GPU_UTIL is not served for MIG.
"""


def mig() -> str:
    uuid = "GPU-06c1a8d2-5e4b-47f0-b9a3-d2c8e17f5a94"
    out = [MIG_HEADER.rstrip("\n")]
    inst = [
        ("1", "triton-a-7f9c6b5d4-x2kqp", 0.412, 9120, 30591, 43),
        ("2", "triton-b-5d2e8c9f7-mw4hz", 0.087, 4511, 35200, 43),
    ]
    fields = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda r: "1410"),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda r: "52"),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda r: "187.214000"),
        (
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "counter",
            "Total energy consumption since boot (in mJ).",
            lambda r: "74213876554",
        ),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", lambda r: str(r[5])),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", lambda r: str(r[4])),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda r: str(r[3])),
        (
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
            "gauge",
            "Ratio of time the graphics engine is active.",
            lambda r: f6(r[2]),
        ),
    ]
    for name, kind, help_, fn in fields:
        out.append(f"# HELP {name} {help_}")
        out.append(f"# TYPE {name} {kind}")
        for r in inst:
            labels = (
                f'gpu="0",UUID="{uuid}",pci_bus_id="00000000:81:00.0",device="nvidia0",'
                f'modelName="NVIDIA A100 80GB PCIe",GPU_I_PROFILE="3g.40gb",GPU_I_ID="{r[0]}",'
                f'hostname="gpu-node-12",DCGM_FI_DRIVER_VERSION="550.54.15",'
                f'container="triton",namespace="inference",pod="{r[1]}"'
            )
            out.append(f"{name}{{{labels}}} {fn(r)}")
    return "\n".join(out) + "\n"


def main() -> None:
    for n in (1, 2):
        (OUT / f"dcgm_node2gpu_{n}.txt").write_text(dcgm(n))
        (OUT / f"triton_gpu_node2gpu_{n}.txt").write_text(triton(n))
    (OUT / "dcgm_mig.txt").write_text(mig())


# Writes only when run: importing it (a tool walking the source tree) must not rewrite package data.
if __name__ == "__main__":
    main()
