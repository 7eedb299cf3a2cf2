"""The capacity report's LLM section against a real Prometheus holding a backfilled LLM period.

Three days of a vLLM model, a sample a minute: 100 generated tokens/s with the KV cache 20 % full,
except one hour at 400 tokens/s with the cache 80 % full, on two GPUs. Samples sit on the period's
edges and on every 5-minute step, so Prometheus 2's increase() and rate() need no extrapolation and
every figure is exact; Prometheus 3's left-open ranges leave out the sample on the period's start,
and the one extrapolation that makes is computed exactly too.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from support import backfill, stacks

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.local.promstack import Prometheus

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs("promtool", "prometheus"),
    pytest.mark.usefixtures("platform"),
]

END = datetime(2026, 11, 9, tzinfo=timezone.utc)
DAYS = 3
START = END - timedelta(days=DAYS)
PEAK = (datetime(2026, 11, 7, 10, tzinfo=timezone.utc), datetime(2026, 11, 7, 11, tzinfo=timezone.utc))
LABELS = 'model="vllm_model",version="1"'


def busy(t: datetime) -> bool:
    """The minute ending at ``t`` is in the busy hour."""
    return PEAK[0] < t <= PEAK[1]


def write_period(path: Path) -> float:
    """The period as OpenMetrics; returns the tokens generated within it."""
    first = START - timedelta(hours=1)
    minutes = int((END - first).total_seconds() // 60)
    tokens = requests = 0.0
    generated = 0.0
    rows: dict[str, list[str]] = {k: [] for k in ("succ", "tok", "kv", "gpu-a", "gpu-b")}
    for i in range(minutes + 1):
        t = first + timedelta(minutes=i)
        if i:
            rate = 400.0 if busy(t) else 100.0
            tokens += 60 * rate
            requests += 600
            if t > START:
                generated += 60 * rate
        ts = int(t.timestamp())
        rows["succ"].append(f"{catalog.TRITON_SUCCESS}{{{LABELS}}} {requests:.0f} {ts}")
        rows["tok"].append(f"{catalog.VLLM_GENERATION_TOKENS}{{{LABELS}}} {tokens:.0f} {ts}")
        kv = 0.8 if PEAK[0] <= t < PEAK[1] else 0.2
        rows["kv"].append(f"{catalog.VLLM_KV_CACHE}{{{LABELS}}} {kv} {ts}")
        for gpu in ("a", "b"):
            rows[f"gpu-{gpu}"].append(f'{catalog.TRITON_GPU_UTILIZATION}{{gpu_uuid="GPU-{gpu}"}} 0.5 {ts}')
    path.write_text("\n".join(line for lines in rows.values() for line in lines) + "\n# EOF\n")
    return generated


@pytest.fixture(scope="module")
def prometheus(
    platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Prometheus, float]]:
    work = tmp_path_factory.mktemp("report-llm")
    om = work / "period.om"
    generated = write_period(om)
    storage = work / "data"
    backfill.openmetrics_to_blocks(om, storage, max_block="200h")
    prom = backfill.serve_storage(storage, work)
    try:
        yield prom, generated
    finally:
        prom.stop()


def report(prom: Prometheus, out: Path, *extra: str) -> dict[str, str]:
    argv = [
        "report",
        "--prometheus",
        prom.url,
        "--end",
        END.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "--days",
        str(DAYS),
    ]
    assert main([*argv, "--out", str(out), *extra]) == 0
    rows = list(csv.DictReader((out / "llm.csv").open()))
    assert len(rows) == 1
    return rows[0]


def test_tokens_per_gpu_and_headroom_in_tokens_from_the_kv_cache(
    platform: stacks.Stack, prometheus: tuple[Prometheus, float], tmp_path: Path
) -> None:
    prom, generated = prometheus
    if platform.prometheus_major >= 3:
        # (START, END] leaves out the sample on START: the first minute's 6,000 tokens are not counted
        # but extrapolated at the period's mean rate (the busy hour in it), over the 60 s to START.
        span = DAYS * 86400
        generated = (generated - 60 * 100) * span / (span - 60)
    row = report(prom, tmp_path)
    assert (row["model"], row["version"]) == ("vllm_model", "1")
    assert float(row["generated_tokens"]) == pytest.approx(generated, rel=1e-9)
    assert float(row["mean_tokens_per_second"]) == pytest.approx(generated / (DAYS * 86400), rel=1e-9)
    assert float(row["peak_tokens_per_second"]) == 400
    assert row["gpus"] == "2"
    assert float(row["peak_tokens_per_second_per_gpu"]) == 200
    assert float(row["peak_kv_cache_utilization"]) == 0.8
    # 400 tokens/s filled 80 % of the KV cache: a full cache at 500 tokens/s, 100 to spare.
    assert row["capacity_source"] == "kv_cache"
    assert float(row["capacity_tokens_per_second"]) == pytest.approx(500)
    assert float(row["headroom_tokens_per_second"]) == pytest.approx(100)
    assert float(row["headroom_ratio"]) == pytest.approx(0.2)
    md = (tmp_path / "report.md").read_text()
    assert "## LLM models" in md and md.index("## LLM models") < md.index("## Method")
    assert "<h2>LLM models</h2>" in (tmp_path / "report.html").read_text()


def test_declared_token_capacity_wins(prometheus: tuple[Prometheus, float], tmp_path: Path) -> None:
    prom, _ = prometheus
    slo = {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "llm"},
        "spec": {
            "window": "28d",
            "slos": [
                {
                    "model": "vllm_model",
                    "availability": {"objective": 99.9},
                    "token_capacity": {"max_tokens_per_second": 2000},
                }
            ],
        },
    }
    path = tmp_path / "slo.yaml"
    path.write_text(yaml.safe_dump(slo))
    row = report(prom, tmp_path / "out", "--slo", str(path))
    assert row["capacity_source"] == "slo"
    assert float(row["capacity_tokens_per_second"]) == 2000
    assert float(row["headroom_tokens_per_second"]) == 1600
    assert float(row["headroom_ratio"]) == pytest.approx(0.8)
