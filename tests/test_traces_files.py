"""Rate 1 through Triton's JSON trace files (mode=triton): the sidecar reads each rotation once.

OpenTelemetry at rate 1 crashed Triton 2.51 under load; trace files did not. Each request id names the
delay it asked for, and Triton writes request ids into the files, so the truth is known exactly.
"""

from __future__ import annotations

import json
import random
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import HAVE_PYTRITON, NO_PYTRITON, TEST_MODELS
from support.sleeper import drive_sleeper, nearest_rank

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.procs import wait_until

pytestmark = [pytest.mark.triton, pytest.mark.skipif(not HAVE_PYTRITON, reason=NO_PYTRITON)]

MIX_MS = [10.0] * 85 + [25.0] * 13 + [100.0] * 2
LOG_FREQUENCY = 50


def file_requests(folder: Path) -> dict[str, float]:
    """request id -> seconds asked, for every sleeper trace in the rotated files (plain JSON)."""
    out: dict[str, float] = {}
    for path in folder.glob("trace.json.*"):
        for entry in json.loads(path.read_text()):
            if entry.get("model_name") == "sleeper":
                out[entry["request_id"]] = float(entry["request_id"].split("ms-")[0]) / 1000
    return out


def test_rate_1_trace_files_give_the_known_quantiles(tmp_path: Path) -> None:
    from tritonwatch.local.triton import LocalTriton

    folder = tmp_path / "traces"
    folder.mkdir()
    path = folder / "trace.json"
    with LocalTriton([TEST_MODELS], trace_file=path, trace_rate=1) as triton:
        base = triton.http_url
        setting = f"{base}/v2/trace/setting"
        requests.post(setting, json={"trace_level": ["OFF"]}, timeout=5).raise_for_status()
        drive_sleeper(base, [[1.0] * 4 for _ in range(4)], timeout=120)  # warm the instances up, untraced
        requests.post(
            setting, json={"trace_level": ["TIMESTAMPS"], "log_frequency": str(LOG_FREQUENCY)}, timeout=5
        ).raise_for_status()
        sidecar = Sidecar.local(
            base, triton.metrics_url, interval=1.0, window=10.0, trace_file=str(path)
        ).start()
        try:
            rng = random.Random(7)
            drive_sleeper(base, [[rng.choice(MIX_MS) for _ in range(100)] for _ in range(4)], timeout=120)
            key = frozenset({("model", "sleeper"), ("version", "1"), ("phase", "compute_infer")})

            def scrape() -> dict[str, dict[frozenset[tuple[str, str]], float]]:
                with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as r:
                    return {n: {frozenset(k): v for k, v in s.items()} for n, s in parse(r.read()).items()}

            # 400 traces at log-frequency 50: eight complete files.
            wait_until(lambda: len(file_requests(folder)) == 400, 30, "Triton to write 8 trace files")
            wait_until(
                lambda: scrape().get(catalog.LATENCY_SAMPLES, {}).get(key) == 400,
                15,
                "the sidecar to read them all",
            )
            values = scrape()
        finally:
            sidecar.stop()
    asked = list(file_requests(folder).values())
    assert values[catalog.REQUEST_DURATION + "_count"][key] == 400
    got: dict[str, Any] = {}
    for q in ("0.5", "0.9", "0.99"):
        true = nearest_rank(asked, float(q))
        got[q] = values[catalog.LATENCY_QUANTILE][key | {("quantile", q), ("source", "trace")}]
        assert abs(got[q] - true) <= 0.2 * true, (q, got[q], true)
    assert got["0.5"] < got["0.9"] < got["0.99"]
