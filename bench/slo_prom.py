"""A Prometheus over backfilled blocks, for the SLO cost bench: start, load blocks, query with stats.

``Server`` runs a Prometheus (loopback, a free port, its own data dir, no scrape targets and no rules:
the bench asks it queries) and always stops it. ``backfill_openmetrics`` and ``backfill_rules`` wrap
``promtool tsdb create-blocks-from ...``; ``load`` moves the blocks they wrote into the data dir and
restarts the server, which then reads them (a running Prometheus looks for new blocks only once a
minute).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from bench.slo_plan import Rule
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until

# A rule backfill's range queries are capped at 11,000 points: 54 h at 30 s is 6,480 (promtool picks the
# largest compatible block range at or under the flag: 2h, 6h, 18h, 54h...).
RULE_BLOCK = "72h"
# The raw counters' blocks: promtool parses the whole input once per block, so blocks are long.
OPENMETRICS_BLOCK = "700h"


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _run(argv: Sequence[str], what: str) -> str:
    proc = subprocess.run(list(argv), capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
        )
    return proc.stdout


def backfill_openmetrics(promtool: str, source: Path, out: Path) -> None:
    _run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            f"--max-block-duration={OPENMETRICS_BLOCK}",
            str(source),
            str(out),
        ],
        "promtool create-blocks-from openmetrics",
    )


# One group name and one file path for every backfill: Prometheus (and promtool) evaluate a group at an
# offset in its interval hashed from both, so every stage's records then share their timestamps, as the
# rules of one group do in a running Prometheus (a record sees the ones before it from the same instant).
BACKFILL_GROUP = "slo-cost-backfill"


def write_rule_file(rules: Sequence[Rule], path: Path) -> None:
    """The records as one rule group (order kept)."""
    entries: list[dict[str, Any]] = []
    for r in rules:
        if not r.is_record:
            raise ValueError(f"{r.name}: only recording rules are backfilled")
        entry: dict[str, Any] = {"record": r.name, "expr": r.expr}
        if r.labels:
            entry["labels"] = dict(r.labels)
        entries.append(entry)
    path.write_text(yaml.safe_dump({"groups": [{"name": BACKFILL_GROUP, "rules": entries}]}, sort_keys=False))


def backfill_rules(promtool: str, url: str, rule_file: Path, start: float, end: float, out: Path) -> None:
    _run(
        [
            promtool,
            "tsdb",
            "create-blocks-from",
            "rules",
            f"--url={url}",
            f"--start={rfc3339(start)}",
            f"--end={rfc3339(end)}",
            "--eval-interval=30s",
            f"--max-block-duration={RULE_BLOCK}",
            f"--output-dir={out}",
            str(rule_file),
        ],
        f"promtool create-blocks-from rules {rule_file.name}",
    )


class Server:
    """Prometheus on 127.0.0.1 over ``data`` (blocks only); ``stop`` always."""

    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.data = workdir / "data"
        self.data.mkdir(parents=True, exist_ok=True)
        self.config = workdir / "prometheus.yml"
        self.config.write_text("global: {evaluation_interval: 30s}\n")
        self.proc: Managed | None = None
        self.url = ""
        self.start()

    def start(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.proc = Managed(
            "prometheus",
            [
                self.binary,
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.data}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=100y",  # the data is weeks in the past
            ],
            log_path=self.workdir / "prometheus.log",
        )
        proc = self.proc

        def ready() -> bool:
            if not proc.alive():
                raise RuntimeError(f"prometheus exited: {proc.log_tail(5)}")
            return http_ok(f"{self.url}/-/ready")

        wait_until(ready, 300, f"prometheus at {self.url}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(grace=30)
            self.proc = None

    def load(self, blocks: Path) -> None:
        """Move the blocks under ``blocks`` into the data dir and restart to read them."""
        self.stop()
        for block in sorted(blocks.iterdir()):
            if (block / "meta.json").exists():
                shutil.move(str(block), str(self.data / block.name))
        self.start()

    def _get(self, path: str, params: dict[str, str]) -> Any:
        body = urllib.parse.urlencode(params).encode()
        req = urllib.request.Request(f"{self.url}{path}", data=body, method="POST")
        with urllib.request.urlopen(req, timeout=900) as resp:
            doc = json.load(resp)
        if doc.get("status") != "success":
            raise RuntimeError(f"{path} {params.get('query', '')[:80]}: {doc}")
        return doc["data"]

    def parse(self, expr: str) -> Any:
        return self._get("/api/v1/parse_query", {"query": expr})

    def instant(self, expr: str, at: float) -> tuple[list[Any], int]:
        """Result and ``totalQueryableSamples`` of an instant query."""
        data = self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}", "stats": "all"})
        return data["result"], int(data["stats"]["samples"]["totalQueryableSamples"])

    def range(self, expr: str, start: float, end: float, step_s: float) -> list[Any]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        return list(self._get("/api/v1/query_range", params)["result"])

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
