"""Re-record the real Triton traces of the streaming test model (run from the repository root):

    .venv/bin/python tests/data/record_llm_traces.py

Starts the bundled Triton serving tests/models/streamer with OpenTelemetry tracing at rate 1 to a
local OTLP/HTTP receiver and streams ONE request at a time through the HTTP generate_stream endpoint
(OTel at rate 1 crashed Triton 2.51 only under concurrent load): the tokens, time to first token and
gap of each request are in STREAMS. Saves the JSON bodies Triton POSTed, in arrival order, to
otlp_streamer.json. Then restarts it in mode=triton (trace files, rate 1, rotating every 2 traces)
and saves the rotated files, in order, to trace_file_streamer.json (a list of the files' lists).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from otlp_receiver import Receiver, start_receiver  # noqa: E402

from tritonwatch.local.triton import LocalTriton  # noqa: E402

# (tokens, time to first token ms, gap ms) per request, streamed one after the other.
STREAMS = ((3, 50.0, 20.0), (4, 80.0, 30.0), (2, 120.0, 10.0), (5, 30.0, 40.0))


def _repos(tmp: Path) -> list[Path]:
    repo = tmp / "models"
    shutil.copytree(ROOT / "tests" / "models" / "streamer", repo / "streamer")
    return [repo]


def _drive(http_url: str) -> None:
    for tokens, ttft, gap in STREAMS:
        body = {"tokens": tokens, "ttft_ms": ttft, "gap_ms": gap}
        with requests.post(
            f"{http_url}/v2/models/streamer/generate_stream", json=body, stream=True, timeout=30
        ) as r:
            got = sum(1 for line in r.iter_lines() if line.startswith(b"data: "))
        assert got == tokens, (got, tokens)


def record_otlp(tmp: Path) -> None:
    server, url = start_receiver()
    with LocalTriton(_repos(tmp / "otlp"), trace_to=url, trace_rate=1) as triton:
        _drive(triton.http_url)
        deadline = time.monotonic() + 20  # the batch span processor exports every 5 s
        while time.monotonic() < deadline:
            spans = sum(
                len(ss["spans"])
                for b in Receiver.bodies
                for rs in b["resourceSpans"]
                for ss in rs["scopeSpans"]
            )
            if spans >= 3 * len(STREAMS):
                break
            time.sleep(0.2)
    server.shutdown()
    (HERE / "otlp_streamer.json").write_text(json.dumps(Receiver.bodies, indent=1, sort_keys=True) + "\n")


def record_trace_files(tmp: Path) -> None:
    out = tmp / "traces"
    out.mkdir()
    path = out / "trace.json"
    with LocalTriton(_repos(tmp / "files"), trace_file=path, trace_rate=1) as triton:
        requests.post(f"{triton.http_url}/v2/trace/setting", json={"log_frequency": "2"}, timeout=5)
        _drive(triton.http_url)
    files = sorted(out.glob("trace.json.*"), key=lambda p: int(p.suffix[1:]))
    data = [json.loads(p.read_text()) for p in files]
    (HERE / "trace_file_streamer.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tritonwatch-record-") as tmp:
        record_otlp(Path(tmp))
        record_trace_files(Path(tmp))


if __name__ == "__main__":
    main()
