"""Re-record the real Triton trace payloads the trace unit tests read (run from the repository root):

    .venv/bin/python tests/data/otlp_record.py

Starts the bundled Triton serving tests/models/sleeper and model_repository/fraud_detector with
OpenTelemetry tracing at rate 1 to a small local OTLP/HTTP receiver, sends ONE request at a time
(OTel at rate 1 crashed Triton 2.51 only under concurrent load, see the facts file): sleeper with the
delays in SLEEPER_DELAYS_MS (request ids ``sleep-<ms>-<i>``) and fraud_detector with each input twice
(the second a cache hit, which has no compute span). Saves the JSON bodies Triton POSTed, in arrival
order, to otlp_sleeper.json. Then restarts it in mode=triton (trace files, rate 1, rotating every 4
traces) and saves the rotated files, in order, to trace_file_sleeper.json (a list of the files' lists).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import requests
import tritonclient.http as httpclient

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from otlp_receiver import Receiver, start_receiver  # noqa: E402

from tritonwatch.local.triton import LocalTriton  # noqa: E402

SLEEPER_DELAYS_MS = (1, 1, 1, 1, 1, 1, 1, 1, 20, 20, 50)


def _repos(tmp: Path) -> list[Path]:
    repo = tmp / "models"
    shutil.copytree(ROOT / "tests" / "models" / "sleeper", repo / "sleeper")
    shutil.copytree(ROOT / "model_repository" / "fraud_detector", repo / "fraud_detector")
    return [repo]


def _drive(http_url: str) -> None:
    client = httpclient.InferenceServerClient(http_url.removeprefix("http://"))
    for i, ms in enumerate(SLEEPER_DELAYS_MS):
        inp = httpclient.InferInput("delay_ms", [1], "FP32")
        inp.set_data_from_numpy(np.array([float(ms)], dtype=np.float32))
        client.infer("sleeper", [inp], request_id=f"sleep-{ms}-{i}")
    rng = np.random.default_rng(7)
    for i in range(3):
        inp = httpclient.InferInput("input_features", [1, 10], "FP32")
        inp.set_data_from_numpy(rng.standard_normal((1, 10)).astype(np.float32))
        for k in range(2):  # the second is a cache hit
            client.infer("fraud_detector", [inp], request_id=f"fraud-{i}-{k}")
    client.close()


def record(
    name: str,
    repos: Callable[[Path], list[Path]],
    drive: Callable[[str], None],
    min_spans: int,
    log_frequency: int,
    tmp: Path,
) -> None:
    """Record ``drive``'s requests twice on the real Triton: OTLP bodies to ``otlp_<name>.json`` (once
    ``min_spans`` spans have arrived, or after 20 s), then rotated trace files to ``trace_file_<name>.json``.
    """
    server, url = start_receiver()
    with LocalTriton(repos(tmp / "otlp"), trace_to=url, trace_rate=1) as triton:
        drive(triton.http_url)
        deadline = time.monotonic() + 20  # the batch span processor exports every 5 s
        while time.monotonic() < deadline:
            spans = sum(
                len(ss["spans"])
                for b in Receiver.bodies
                for rs in b["resourceSpans"]
                for ss in rs["scopeSpans"]
            )
            if spans >= min_spans:
                break
            time.sleep(0.2)
    server.shutdown()
    (HERE / f"otlp_{name}.json").write_text(json.dumps(Receiver.bodies, indent=1, sort_keys=True) + "\n")

    out = tmp / "traces"
    out.mkdir()
    path = out / "trace.json"
    with LocalTriton(repos(tmp / "files"), trace_file=path, trace_rate=1) as triton:
        requests.post(
            f"{triton.http_url}/v2/trace/setting", json={"log_frequency": str(log_frequency)}, timeout=5
        )
        drive(triton.http_url)
    files = sorted(out.glob("trace.json.*"), key=lambda p: int(p.suffix[1:]))
    data = [json.loads(p.read_text()) for p in files]
    (HERE / f"trace_file_{name}.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main() -> None:
    want = len(SLEEPER_DELAYS_MS) + 6
    with tempfile.TemporaryDirectory(prefix="tritonwatch-record-") as tmp:
        # Three spans a request; cache hits have no compute span.
        record("sleeper", _repos, _drive, 3 * want - 3, 4, Path(tmp))


if __name__ == "__main__":
    main()
