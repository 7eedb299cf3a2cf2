"""``tritonwatch advise --textfile PATH``: the predicted batch-size distributions as Prometheus text.

The model dashboard shows the executed batch-size distribution beside the one the advice predicts;
the dashboard reads Prometheus, so the prediction must be a series. It is written here, for
node_exporter's textfile collector (``--collector.textfile.directory``), by ``advise`` run on a slow
cadence (a cron job or a Kubernetes CronJob, e.g. hourly with ``--prometheus``), and not computed by
the sidecar: the prediction is a simulation of thousands of requests per candidate (seconds of CPU
per model), the sidecar must stay light on the Triton host, and the sidecar's layer does not import
the report's (tests/test_layout.py). The advice changes when the traffic does, over hours, so an
hourly series is as fresh as it needs to be.

One gauge, ``tritonwatch_model_advised_batch_executions_ratio{model,version,config,batch_size}``:
the predicted share of executions per batch size at the load observed, ``config`` = ``current`` or
``recommended``. A refused model writes nothing. The file is written to a temporary name and
renamed (the collector never reads half a file), and only over a file this command wrote.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.files import may_write, replace_file
from tritonwatch.validators import promql_string

HEADER = "# Written by tritonwatch advise --textfile: do not edit (rewritten on every run).\n"


def render(entries: Sequence[Mapping[str, Any]]) -> str:
    name = catalog.ADVISED_BATCH_SHARE
    lines = [HEADER, f"# HELP {name} {catalog.ADVISED_BATCH_SHARE_HELP}\n", f"# TYPE {name} gauge\n"]
    for e in entries:
        if e["refusal"]:
            continue
        for side in ("current", "recommended"):
            counts = {int(b): n for b, n in e["details"]["predicted"][side]["batch_executions"].items()}
            total = sum(counts.values())
            for size, n in sorted(counts.items()):
                labels = (  # the text format escapes a label value as a PromQL string literal does
                    f"{catalog.MODEL}={promql_string(e['model'])},{catalog.VERSION}={promql_string(e['version'])},"
                    f'{catalog.ADVISED}="{side}",{catalog.BATCH_SIZE}="{size}"'
                )
                lines.append(f"{name}{{{labels}}} {n / total!r}\n")
    return "".join(lines)


def write(path: Path, entries: Sequence[Mapping[str, Any]]) -> None:
    """Write ``render(entries)`` to ``path`` atomically; refuse to replace a file this did not write."""
    if not may_write(path, HEADER):
        raise TritonwatchError(
            f"--textfile {path}: exists and was not written by tritonwatch advise: left alone"
        )
    try:
        replace_file(path, render(entries))
    except OSError as exc:
        raise TritonwatchError(f"--textfile {path}: cannot write ({exc.strerror})") from None
