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

import shutil
import sys
import tempfile
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from otlp_record import record  # noqa: E402

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


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tritonwatch-record-") as tmp:
        # Three spans a streamed request (root, model, compute).
        record("streamer", _repos, _drive, 3 * len(STREAMS), 2, Path(tmp))


if __name__ == "__main__":
    main()
