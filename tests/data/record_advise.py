"""Re-record the real Triton answers the advisor's tests read (run from the repository root):

    .venv/bin/python tests/data/record_advise.py

Starts the bundled Triton on free ports serving bench/models/ (``linear``: a batch of n sleeps
50 + 6 n ms) and tests/models/. Drives ``linear`` with open-loop Poisson load at 40 requests/s,
reads its statistics, drives on for 10 s and reads them again (the advisor's two reads), and saves
its config. Then reloads ``linear`` (counters from 0), sends 60 requests one after another (batch
size 1 only) and saves those statistics; and saves the ``sleeper`` config (max_batch_size 0).
Writes advise_linear_config.json, advise_linear_stats_1.json, advise_linear_stats_2.json (with the
seconds between the reads in advise_linear_read.json), advise_linear_stats_single.json and
advise_sleeper_config.json next to this file.
"""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))

from record import save_json  # noqa: E402  (tests/data/record.py: the same JSON layout)

from tests.support.poisson import BODY, drive  # noqa: E402
from tritonwatch.local.triton import LocalTriton  # noqa: E402


def main() -> None:
    with LocalTriton([ROOT / "bench" / "models", ROOT / "tests" / "models"]) as triton:
        triton.wait_ready(120)
        base = triton.http_url
        stats = f"{base}/v2/models/linear/stats"
        done: list[object] = []
        load = threading.Thread(target=lambda: done.append(drive(base, "linear", 40.0, 24.0, warmup=0.0)))
        load.start()
        time.sleep(12)
        first = requests.get(stats, timeout=10).json()
        t0 = time.monotonic()
        time.sleep(10)
        second = requests.get(stats, timeout=10).json()
        seconds = time.monotonic() - t0
        load.join()
        save_json("advise_linear_stats_1.json", first)
        save_json("advise_linear_stats_2.json", second)
        save_json("advise_linear_read.json", {"seconds": round(seconds, 3)})
        save_json(
            "advise_linear_config.json", requests.get(f"{base}/v2/models/linear/config", timeout=10).json()
        )
        save_json(
            "advise_sleeper_config.json", requests.get(f"{base}/v2/models/sleeper/config", timeout=10).json()
        )
        requests.post(f"{base}/v2/repository/models/linear/unload", timeout=30).raise_for_status()
        requests.post(f"{base}/v2/repository/models/linear/load", timeout=60).raise_for_status()
        for _ in range(60):
            requests.post(f"{base}/v2/models/linear/infer", json=BODY, timeout=10).raise_for_status()
        save_json("advise_linear_stats_single.json", requests.get(stats, timeout=10).json())


if __name__ == "__main__":
    main()
