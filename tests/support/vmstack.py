"""VictoriaMetrics (Debian's 1.79, or today's: tests/support/stacks.py) on loopback for tests: the store and
``vmalert``.

Both are started with their own data dir on a free port and polled on ``/health`` with a deadline.
The store answers instant queries up to ``-search.latencyOffset`` (default 30 s) in the past only
and caches rollups: both are turned off here, so a test reads what was written a second ago.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from tritonwatch.errors import TritonwatchError
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until

STORE_BIN = "victoria-metrics"
VMALERT_BIN = "vmalert"


def _ready(proc: Managed, url: str, timeout: float) -> None:
    def ready() -> bool:
        if not proc.alive():
            raise TritonwatchError(f"{proc.name} exited: {proc.log_tail(5)}")
        return http_ok(f"{url}/health")

    wait_until(ready, timeout, f"{proc.name} at {url}")


class VictoriaMetrics:
    """The single-node store: Prometheus query API at ``url``, remote write at ``write_url``."""

    def __init__(self, binary: str, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.write_url = f"{self.url}/api/v1/write"
        self.proc = Managed(
            "victoria-metrics",
            [
                binary,
                f"-storageDataPath={workdir / 'data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=1",  # months
                "-search.latencyOffset=1s",
                "-search.disableCache",
                "-selfScrapeInterval=0",
            ],
            log_path=workdir / "victoria-metrics.log",
        )

    def wait_ready(self, timeout: float = 60.0) -> VictoriaMetrics:
        _ready(self.proc, self.url, timeout)
        return self

    def stop(self) -> None:
        self.proc.stop()


@cache
def eval_delay_flag(binary: str) -> str:
    """vmalert's flag that evaluates in the past: ``-datasource.lookback`` up to 1.79, ``-rule.evalDelay``
    in later ones (1.151 refuses the old flag, and delays 30 s by default)."""
    out = subprocess.run([binary, "-help"], capture_output=True, text=True, timeout=30)
    return "-rule.evalDelay" if "-rule.evalDelay" in out.stdout + out.stderr else "-datasource.lookback"


class VMAlert:
    """``vmalert`` evaluating rule files against a store, writing records back, alerting one Alertmanager."""

    def __init__(
        self,
        binary: str,
        workdir: Path,
        rule_files: Sequence[Path],
        store: VictoriaMetrics,
        alertmanager_url: str,
        interval: str = "2s",
    ) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.rule_files = list(rule_files)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = Managed(
            "vmalert",
            [
                binary,
                *(f"-rule={p}" for p in rule_files),
                f"-datasource.url={store.url}",
                f"-remoteWrite.url={store.url}",
                f"-notifier.url={alertmanager_url}",
                f"-evaluationInterval={interval}",
                # Evaluate 10 s in the past, where the shards' remote writes (1 s batches) have all
                # landed: a record is then the rule's value on complete data at the instant it is
                # stamped with (vmalert stamps it with the query's time).
                f"{eval_delay_flag(binary)}=10s",
                "-remoteWrite.flushInterval=1s",
                f"-httpListenAddr=127.0.0.1:{self.port}",
            ],
            log_path=workdir / "vmalert.log",
        )

    def wait_ready(self, timeout: float = 60.0) -> VMAlert:
        _ready(self.proc, self.url, timeout)
        return self

    def stop(self) -> None:
        self.proc.stop()
