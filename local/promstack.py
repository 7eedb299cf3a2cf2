"""Start a real Prometheus and Alertmanager (Debian binaries) on loopback, with their own data dirs.

Used by ``tritonwatch demo`` and by the tests. Configuration is written by the caller's arguments;
each server is polled for readiness with a deadline.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from tritonwatch.errors import TritonwatchError
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until

PROMETHEUS_BIN = "prometheus"
ALERTMANAGER_BIN = "prometheus-alertmanager"


def require_binary(name: str) -> str:
    path = shutil.which(name)
    if not path:
        raise TritonwatchError(
            f"{name} not found on PATH (install the Debian packages: apt-get install prometheus prometheus-alertmanager)"
        )
    return path


def _wait_ready(proc: Managed, url: str, timeout: float) -> None:
    """Poll ``/-/ready`` (Prometheus and Alertmanager both serve it); fail at once if the server exits."""

    def ready() -> bool:
        if not proc.alive():
            raise TritonwatchError(f"{proc.name} exited: {proc.log_tail(5)}")
        return http_ok(f"{url}/-/ready")

    wait_until(ready, timeout, f"{proc.name} at {url}")


@dataclass
class ScrapeTarget:
    job: str
    address: str  # host:port
    metrics_path: str = "/metrics"
    labels: dict[str, str] | None = None


def prometheus_config(
    targets: Sequence[ScrapeTarget],
    rule_files: Sequence[Path] = (),
    alertmanager: str | None = None,
    scrape_interval: str = "1s",
    evaluation_interval: str = "1s",
) -> dict[str, object]:
    jobs: dict[str, list[ScrapeTarget]] = {}
    for t in targets:
        jobs.setdefault(t.job, []).append(t)
    scrape_configs = []
    for job, ts in jobs.items():
        path = ts[0].metrics_path
        scrape_configs.append(
            {
                "job_name": job,
                "metrics_path": path,
                # A target of the job on another path says so itself (Prometheus's __metrics_path__).
                "static_configs": [
                    {
                        "targets": [t.address],
                        "labels": {
                            **(t.labels or {}),
                            **({"__metrics_path__": t.metrics_path} if t.metrics_path != path else {}),
                        },
                    }
                    for t in ts
                ],
            }
        )
    cfg: dict[str, object] = {
        "global": {"scrape_interval": scrape_interval, "evaluation_interval": evaluation_interval},
        "rule_files": [str(p) for p in rule_files],
        "scrape_configs": scrape_configs,
    }
    if alertmanager:
        cfg["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
    return cfg


class Prometheus:
    """A Prometheus server on 127.0.0.1:<port> with its own data directory."""

    def __init__(
        self,
        workdir: Path,
        config: dict[str, object],
        port: int | None = None,
        storage: Path | None = None,
        binary: str | None = None,  # default: prometheus on PATH
    ) -> None:
        binary = binary or require_binary(PROMETHEUS_BIN)
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = workdir / "prometheus.yml"
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        data = storage or workdir / "data"
        self.proc = Managed(
            "prometheus",
            [
                binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={data}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--storage.tsdb.retention.time=30d",
            ],
            log_path=workdir / "prometheus.log",
        )

    def wait_ready(self, timeout: float = 60.0) -> Prometheus:
        _wait_ready(self.proc, self.url, timeout)
        return self

    def stop(self) -> None:
        self.proc.stop()


class Alertmanager:
    """An Alertmanager on 127.0.0.1:<port>, clustering off, with its own storage."""

    def __init__(
        self, workdir: Path, config_path: Path, port: int | None = None, binary: str | None = None
    ) -> None:
        binary = binary or require_binary(ALERTMANAGER_BIN)  # default: Alertmanager on PATH
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.address = f"127.0.0.1:{self.port}"
        self.proc = Managed(
            "alertmanager",
            [
                binary,
                f"--config.file={config_path}",
                f"--storage.path={workdir / 'am-data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--cluster.listen-address=",
            ],
            log_path=workdir / "alertmanager.log",
        )

    def wait_ready(self, timeout: float = 60.0) -> Alertmanager:
        _wait_ready(self.proc, self.url, timeout)
        return self

    def stop(self) -> None:
        self.proc.stop()
