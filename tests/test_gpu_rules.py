"""The GPU recording rules from the catalog, run by a real Prometheus on the replayed node.

Prometheus scrapes the replayed dcgm-exporter and Triton (labelled ``cluster``, a grouping label)
and the sidecar watching them; the catalog's rules must pass ``promtool check rules`` and, evaluated
by Prometheus, agree with the sidecar's own values and with the recorded truth.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from support import stacks
from test_gpu_query import recorded_truth

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.gpureplay import GpuReplay
from tritonwatch.local.procs import free_port, wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs("promtool", "prometheus"),
    pytest.mark.usefixtures("platform"),
]

WINDOW = "8s"
OLDER = "12s"  # window + 4 scrape intervals
OLDER_SAMPLES = 11
GROUPING = ("cluster",)
RULES = {
    catalog.GPU_BUSY_SECONDS_RECORD: catalog.gpu_busy_seconds_promql(WINDOW, GROUPING),
    catalog.MODEL_GPU_BUSY_RECORD: catalog.gpu_busy_ratio_promql(WINDOW, GROUPING),
    catalog.GPU_ENERGY_WATTS_RECORD: catalog.gpu_energy_watts_promql(WINDOW, GROUPING),
    catalog.MODEL_ENERGY_PER_INFERENCE_RECORD: catalog.energy_per_inference_promql(WINDOW, GROUPING),
}


def rule_file(path: Path) -> Path:
    rules = [{"record": name, "expr": expr} for name, expr in RULES.items()]
    path.write_text(
        yaml.safe_dump({"groups": [{"name": "tritonwatch-gpu", "rules": rules}]}, sort_keys=False)
    )
    return path


def query(prom: Prometheus, expr: str) -> list[dict[str, Any]]:
    resp = requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=5)
    resp.raise_for_status()
    result: list[dict[str, Any]] = resp.json()["data"]["result"]
    return result


def values(prom: Prometheus, expr: str, *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1]) for r in query(prom, expr)}


def test_rules_pass_promtool(tmp_path: Path) -> None:
    out = subprocess.run(
        ["promtool", "check", "rules", str(rule_file(tmp_path / "gpu.rules.yml"))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 4 rules found" in out.stdout


@pytest.fixture(scope="module")
def stack(
    platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Prometheus, Sidecar]]:
    tmp = tmp_path_factory.mktemp("gpu-rules")
    node = GpuReplay().start()
    sidecar: Sidecar | None = None
    prom: Prometheus | None = None
    try:
        sidecar = Sidecar.local(
            f"http://127.0.0.1:{free_port()}",
            node.triton_metrics_url,
            dcgm=node.dcgm_url,
            interval=0.5,
            window=8.0,
        ).start()
        label = {"cluster": "replay"}
        targets = [
            ScrapeTarget("dcgm", f"127.0.0.1:{node.dcgm.port}", labels=label),
            ScrapeTarget("triton", f"127.0.0.1:{node.triton.port}", labels=label),
            ScrapeTarget("sidecar", f"127.0.0.1:{sidecar.port}", labels=label),
        ]
        prom = Prometheus(tmp, prometheus_config(targets, [rule_file(tmp / "gpu.rules.yml")]))
        prom.wait_ready(60)
        # rate() extrapolates only half an interval before a series' first sample: until every input
        # is older than the rule window, young series read low. Wait for OLDER of history.
        inputs = f'{{__name__=~"{catalog.DCGM_ENERGY}|{catalog.TRITON_INFERENCE_COUNT}"}}'
        p = prom
        wait_until(
            lambda: (
                len(query(p, catalog.MODEL_ENERGY_PER_INFERENCE_RECORD)) == 2
                and bool(query(p, f"min(count_over_time({inputs}[{OLDER}])) >= {OLDER_SAMPLES}"))
            ),
            60,
            f"{OLDER} of scrapes behind every rule input",
        )
        yield prom, sidecar
    finally:
        if prom is not None:
            prom.stop()
        if sidecar is not None:
            sidecar.stop()
        node.stop()


def sidecar_values(sidecar: Sidecar, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    with requests.get(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as resp:
        samples = parse(resp.content)
    return {tuple(dict(ls)[k] for k in labels): v for ls, v in samples.get(name, {}).items()}


def test_busy_share_rule_agrees_with_sidecar_and_truth(stack: tuple[Prometheus, Sidecar]) -> None:
    prom, sidecar = stack
    keys = ("model", "version", "gpu_uuid")
    rule = values(prom, catalog.MODEL_GPU_BUSY_RECORD, *keys)
    ours = sidecar_values(sidecar, catalog.MODEL_GPU_BUSY, *keys)
    truth = recorded_truth().busy_share
    assert set(rule) == set(ours) == set(truth)
    for key, want in truth.items():
        assert rule[key] == pytest.approx(want, rel=0.03), key
        assert rule[key] == pytest.approx(ours[key], rel=0.03), key
    groups = values(prom, catalog.MODEL_GPU_BUSY_RECORD, "cluster")
    assert set(groups) == {("replay",)}  # the grouping label is kept


def test_energy_per_inference_rule_agrees_with_sidecar_and_truth(stack: tuple[Prometheus, Sidecar]) -> None:
    prom, sidecar = stack
    rule = values(prom, catalog.MODEL_ENERGY_PER_INFERENCE_RECORD, "model", "version")
    ours = sidecar_values(sidecar, catalog.MODEL_ENERGY_PER_INFERENCE, "model", "version")
    truth = recorded_truth().energy_per_inference
    assert set(rule) == set(ours) == set(truth)
    for key, want in truth.items():
        assert rule[key] == pytest.approx(want, rel=0.05), key
        assert rule[key] == pytest.approx(ours[key], rel=0.05), key
    # DCGM's mJ counter wins over Triton's J counter, one series per GPU (the replayed third GPU too)
    watts = values(prom, catalog.GPU_ENERGY_WATTS_RECORD, "gpu_uuid")
    assert len(watts) == 3
    assert sorted(watts.values())[-1] == pytest.approx(312.4, rel=0.02)
