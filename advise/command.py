"""``tritonwatch advise``: recommended dynamic batching settings per model, from the server's own traffic.

Reads a live Triton (``--triton``): the statistics twice ``--interval`` seconds apart (arrival rate) and
each model's config; fits compute time against batch size on ``batch_stats``; simulates the dynamic
batcher (docs/advise.md) for the current configuration and for candidates; prints per model the
recommendation with its predicted p99 at today's load and SLO-bound capacity, or why it refuses.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import datetime, timezone
from pathlib import Path

from tritonwatch.errors import UsageError
from tritonwatch.flags import utc_time

HELP = (
    "recommend dynamic batching settings (max_queue_delay_microseconds, preferred_batch_size, instance "
    "count) per model from the traffic Triton sees, with predicted p99 and SLO-bound capacity"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--triton", metavar="URL", help="Triton's HTTP API base, e.g. http://127.0.0.1:8000")
    parser.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the same from Prometheus instead (the sidecar's and Triton's series), e.g. http://127.0.0.1:9090",
    )
    parser.add_argument(
        "--time",
        metavar="ISO-8601",
        help="with --prometheus: advise as of this time (default: now), e.g. 2026-11-09T00:00:00Z",
    )
    parser.add_argument("--slo", metavar="FILE", help="the SLO file: each model's latency objective")
    parser.add_argument(
        "--model", metavar="M", help="advise on this model only (default: every loaded model)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output (default: text)")
    parser.add_argument(
        "--interval",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds the load is read over: between the two statistics reads (--triton), or the rate "
        "window ending at --time (--prometheus) (default: 30)",
    )
    parser.add_argument(
        "--max-instances",
        type=int,
        default=0,
        metavar="N",
        help="let the recommendation use up to N model instances (default: keep the current count; the "
        "statistics cannot show how instances sharing a GPU slow each other)",
    )
    parser.add_argument(
        "--textfile",
        metavar="PATH",
        help="also write the predicted batch-size distributions as Prometheus text (for node_exporter's "
        "textfile collector: the model dashboard shows them beside the executed ones)",
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="per HTTP request (default: 10)"
    )


def _url(flag: str, value: str) -> str:
    from tritonwatch.tritonapi import check_base_url

    if check_base_url(value):
        raise UsageError(f"--{flag}: {value!r} is not an http(s) base URL (e.g. http://127.0.0.1:8000)")
    return value.rstrip("/")


def run(args: argparse.Namespace) -> int:
    # Checked here, not by argparse's required=: the flags may come from TRITONWATCH_* variables.
    if bool(args.triton) == bool(args.prometheus):
        raise UsageError(
            "--triton or --prometheus: exactly one is required (or TRITONWATCH_TRITON, TRITONWATCH_PROMETHEUS)"
        )
    if args.time and not args.prometheus:
        raise UsageError("--time: only with --prometheus (a live Triton is read now)")
    if not args.slo:
        raise UsageError("--slo: required (or TRITONWATCH_SLO)")
    if not (0 < args.interval <= 3600):
        raise UsageError(f"--interval: must be more than 0 and at most 3600 seconds (got {args.interval})")
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        raise UsageError(f"--timeout: must be a positive number of seconds (got {args.timeout})")
    if not 0 <= args.max_instances <= 64:
        raise UsageError(f"--max-instances: must be 0 (keep) to 64 (got {args.max_instances})")
    at = utc_time(args.time, "--time") if args.time else datetime.now(timezone.utc)
    base = _url("triton" if args.triton else "prometheus", args.triton or args.prometheus)

    from tritonwatch import slo
    from tritonwatch.advise import advice, render

    slos = slo.load(args.slo)
    if args.triton:
        from tritonwatch.advise.triton import TritonReader

        readings = TritonReader(base, args.timeout).read(args.model, args.interval)
        observations = [advice.from_reading(r) for r in readings]
    else:
        from tritonwatch.advise.prometheus import PrometheusReader
        from tritonwatch.reports.promapi import PromClient

        reader = PrometheusReader(PromClient(base, timeout=args.timeout))
        observations = reader.read(args.model, args.interval, at)
    entries = [advice.advise_observed(o, slos, args.slo, args.max_instances) for o in observations]
    if args.textfile:
        from tritonwatch.advise import textfile

        textfile.write(Path(args.textfile), entries)
    if args.format == "json":
        json.dump({"models": entries}, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render.text(entries))
    return 0
