"""Synthetic weeks (``support.synthetic``) as TSDB blocks served by a real Prometheus.

``blocks()`` writes the weeks as OpenMetrics and converts them with ``promtool tsdb
create-blocks-from openmetrics``; ``serve()`` copies blocks into a fresh data directory and starts a
Prometheus on a free loopback port over them.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from support import synthetic
from tritonwatch.local.promstack import Prometheus, prometheus_config


def blocks(weeks: synthetic.Week | Sequence[synthetic.Week], work: Path) -> Path:
    """The weeks as TSDB blocks under ``work/blocks`` (the OpenMetrics file is removed after)."""
    om = work / "weeks.om"
    synthetic.write_openmetrics(weeks, om)
    out = work / "blocks"
    # 400h rounds to promtool's largest block size: the file is parsed a few times, not once per 2h block.
    openmetrics_to_blocks(om, out, max_block="400h")
    om.unlink()
    return out


def openmetrics_to_blocks(om: Path, out: Path, max_block: str = "") -> None:
    """``promtool tsdb create-blocks-from openmetrics``: an OpenMetrics file as TSDB blocks in ``out``."""
    cmd = ["promtool", "tsdb", "create-blocks-from", "openmetrics"]
    cmd += [f"--max-block-duration={max_block}"] if max_block else []
    subprocess.run([*cmd, str(om), str(out)], check=True, capture_output=True, timeout=180)


def copy_blocks(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for block in src.iterdir():
        if (block / "meta.json").exists():
            shutil.copytree(block, dst / block.name)


def serve(block_dirs: Sequence[Path], work: Path) -> Prometheus:
    """A ready Prometheus over copies of the given block directories (the caller stops it)."""
    storage = work / "data"
    for d in block_dirs:
        copy_blocks(d, storage)
    return serve_storage(storage, work)


def serve_storage(storage: Path, work: Path) -> Prometheus:
    """A ready Prometheus over the TSDB directory ``storage`` (the caller stops it)."""
    prom = Prometheus(work, prometheus_config([]), storage=storage)
    try:
        prom.wait_ready(60)
    except BaseException:
        prom.stop()
        raise
    return prom
