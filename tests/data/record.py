"""Re-record the real Triton payloads the unit tests parse (run from the repository root):

    .venv/bin/python tests/data/record.py [all|payloads|traces]

Starts the bundled Triton on free ports serving model_repository/ and tests/models/, scrapes /metrics
idle, then under load (8 clients on fraud_detector repeating each input 3 times, 2% NaN inputs; 2
clients on fail_always) twice a few seconds apart, and saves the statistics, config and repository
index answers. Writes triton_metrics_idle.txt, triton_metrics_load_1.txt, triton_metrics_load_2.txt,
triton_stats_fraud_detector.json, triton_stats_fail_always.json, triton_config_fraud_detector.json,
triton_repository_index.json next to this file. Then it restarts Triton with OpenTelemetry tracing
(rate 10) to a small local OTLP/HTTP receiver and saves the JSON bodies Triton POSTed to
triton_otlp_traces.json (a list of ExportTraceServiceRequest objects, in arrival order).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from otlp_receiver import Receiver, start_receiver  # noqa: E402

from tritonwatch.local.load import LoadDriver  # noqa: E402
from tritonwatch.local.triton import LocalTriton  # noqa: E402


def save_json(name: str, payload: object) -> None:
    (HERE / name).write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def record_traces() -> None:
    server, url = start_receiver()
    try:
        with LocalTriton([ROOT / "model_repository"], trace_to=url, trace_rate=10) as triton:
            # repeat=1: half the traced requests are cache hits, which trace differently.
            LoadDriver(triton.http_url, concurrency=2, rps=30, repeat=1, seed=3).run(4)
            deadline = time.monotonic() + 15  # Triton's batch span processor exports every 5 s
            while len(Receiver.bodies) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
    finally:
        server.shutdown()
    save_json("triton_otlp_traces.json", Receiver.bodies)


def record_payloads() -> None:
    with LocalTriton([ROOT / "model_repository", ROOT / "tests" / "models"]) as triton:
        (HERE / "triton_metrics_idle.txt").write_text(requests.get(triton.metrics_url, timeout=5).text)
        fraud = LoadDriver(triton.http_url, concurrency=8, repeat=3, error_ratio=0.02, seed=1).start()
        failing = LoadDriver(triton.http_url, model="fail_always", concurrency=2, rps=20, seed=2).start()
        try:
            fraud.wait(5)
            (HERE / "triton_metrics_load_1.txt").write_text(requests.get(triton.metrics_url, timeout=5).text)
            fraud.wait(5)
            (HERE / "triton_metrics_load_2.txt").write_text(requests.get(triton.metrics_url, timeout=5).text)
            for model in ("fraud_detector", "fail_always"):
                stats = requests.get(f"{triton.http_url}/v2/models/{model}/stats", timeout=5).json()
                save_json(f"triton_stats_{model}.json", stats)
        finally:
            print(fraud.stop().table())
            print(failing.stop().table())
        save_json(
            "triton_config_fraud_detector.json",
            requests.get(f"{triton.http_url}/v2/models/fraud_detector/config", timeout=5).json(),
        )
        save_json(
            "triton_repository_index.json",
            requests.post(f"{triton.http_url}/v2/repository/index", timeout=5).json(),
        )


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "all"
    if what not in ("all", "payloads", "traces"):
        print(f"usage: record.py [all|payloads|traces] (got {what!r})", file=sys.stderr)
        return 2
    if what in ("all", "payloads"):
        record_payloads()
    if what in ("all", "traces"):
        record_traces()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
