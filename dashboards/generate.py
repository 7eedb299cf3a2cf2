"""``tritonwatch dashboards --out DIR``: write the Grafana dashboards as JSON.

Writes exactly these files into DIR (and nothing else), byte-for-byte reproducible:
``tritonwatch-fleet.json``, ``tritonwatch-model.json``, ``tritonwatch-gpu.json``,
``tritonwatch-slo.json``, ``tritonwatch-llm.json``. The committed copies live in ``dashboards/generated/``; regenerate them
with ``make generate``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tritonwatch.errors import UsageError

HELP = "generate the Grafana dashboards (JSON) from the signal catalog"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="directory to write the dashboard JSON files into"
    )


def builders() -> dict[str, Callable[[], Any]]:
    """File name -> function building the grafanalib dashboard."""
    from tritonwatch.dashboards import fleet, gpu, llm, model, pipeline, slo

    return {f"tritonwatch-{m.NAME}.json": m.build for m in (fleet, model, gpu, slo, llm, pipeline)}


def render_all() -> dict[str, bytes]:
    """Every dashboard file's exact bytes, by file name."""
    from tritonwatch.dashboards import panels

    return {name: panels.render(build()) for name, build in builders().items()}


def panel_queries(dashboard: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, target) for every query of every panel, rows included."""
    for panel in dashboard.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner, target


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create directory ({exc.strerror})") from exc
    files = render_all()
    for name, data in files.items():
        target = out / name
        # Writing only on change keeps mtimes stable for Grafana's file provisioner.
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
    print(f"wrote {len(files)} dashboards to {out}: {', '.join(sorted(files))}")
    return 0
