"""``tritonwatch dashboards --out DIR [--format json|resource]``: write the Grafana dashboards as JSON.

Writes exactly these files into DIR (and nothing else), byte-for-byte reproducible:
``tritonwatch-fleet.json``, ``tritonwatch-model.json``, ``tritonwatch-gpu.json``,
``tritonwatch-slo.json``, ``tritonwatch-llm.json``, ``tritonwatch-pipeline.json``. ``--format json`` (the
default) writes the classic dashboard model that file provisioning and the import dialog read;
``--format resource`` writes each as a Grafana 12+ Kubernetes-style resource (``dashboard.grafana.app/v1beta1``,
``kind: Dashboard``, ``metadata.name`` = the uid, ``spec`` = the same classic model) for Git Sync and the
dashboard API. The committed copies (classic) live in ``dashboards/generated/``; regenerate them with
``make generate``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tritonwatch.errors import UsageError

HELP = "generate the Grafana dashboards (JSON) from the signal catalog"
FORMATS = ("json", "resource")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, metavar="DIR", help="directory to write the dashboard JSON files into"
    )
    # dest dashboard_format: TRITONWATCH_FORMAT is `advise --format` (text|json).
    parser.add_argument(
        "--format",
        dest="dashboard_format",
        choices=FORMATS,
        default="json",
        metavar="FORMAT",  # not "json|resource": a "|" would split the flag tables of docs/configuration.md
        help="json: the classic dashboard model (file provisioning, import); resource: Grafana 12+ "
        "Kubernetes-style resources, dashboard.grafana.app/v1beta1 (Git Sync, the dashboard API) (default: json)",
    )


def builders() -> dict[str, Callable[[], Any]]:
    """File name -> function building the grafanalib dashboard."""
    from tritonwatch.dashboards import fleet, gpu, llm, model, pipeline, slo

    return {f"tritonwatch-{m.NAME}.json": m.build for m in (fleet, model, gpu, slo, llm, pipeline)}


def render_all(fmt: str = "json") -> dict[str, bytes]:
    """Every dashboard file's exact bytes in ``fmt`` (``json`` or ``resource``), by file name."""
    from tritonwatch.dashboards import panels, resource

    if fmt not in FORMATS:
        raise ValueError(f"dashboard format {fmt!r}: not one of {', '.join(FORMATS)}")
    wrap = resource.resource if fmt == "resource" else (lambda d: d)
    return {name: panels.dump(wrap(panels.to_json(build()))) for name, build in builders().items()}


def panel_queries(dashboard: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(panel, target) for every query of every panel, rows included."""
    for panel in dashboard.get("panels", []):
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                yield inner, target


def run(args: argparse.Namespace) -> int:
    if args.dashboard_format not in FORMATS:  # argparse checks the flag, not TRITONWATCH_DASHBOARD_FORMAT
        raise UsageError(
            f"--format (TRITONWATCH_DASHBOARD_FORMAT) {args.dashboard_format!r}: not one of {', '.join(FORMATS)}"
        )
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: cannot create directory ({exc.strerror})") from exc
    files = render_all(args.dashboard_format)
    for name, data in files.items():
        target = out / name
        # Writing only on change keeps mtimes stable for Grafana's file provisioner.
        if not target.exists() or target.read_bytes() != data:
            target.write_bytes(data)
    what = "dashboard resources" if args.dashboard_format == "resource" else "dashboards"
    print(f"wrote {len(files)} {what} to {out}: {', '.join(sorted(files))}")
    return 0
