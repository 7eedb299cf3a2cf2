"""A real Caddy (Debian 2.6) in front of a Triton: one server per model, each with its own metrics.

The JSON config binds loopback only and turns on ``metrics`` per server, which makes Caddy keep
``caddy_http_request_duration_seconds_bucket{server,handler,code,method,le}`` (Prometheus's default
buckets .005 ... 10 s) and serve it on the admin endpoint's ``/metrics``. HOME and the XDG folders
point into the test's folder: Caddy autosaves its config there, not in the user's home.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from support.front_process import FrontProcess, check_names
from tritonwatch.local.procs import Managed, free_port


def config(models: Sequence[str], triton_http: str, ports: Sequence[int], admin: str) -> dict[str, object]:
    """A server named after each model on its own port, reverse-proxying everything to Triton."""
    check_names(models)
    servers = {}
    for model, port in zip(models, ports, strict=True):
        servers[model] = {
            "listen": [f"127.0.0.1:{port}"],
            "automatic_https": {"disable": True},
            "metrics": {},
            "routes": [{"handle": [{"handler": "reverse_proxy", "upstreams": [{"dial": triton_http}]}]}],
        }
    return {"admin": {"listen": admin}, "apps": {"http": {"servers": servers}}}


class Caddy(FrontProcess):
    def __init__(self, binary: str, workdir: Path, models: Sequence[str], triton_http: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        ports = [free_port() for _ in models]
        self.urls = {m: f"http://127.0.0.1:{p}" for m, p in zip(models, ports, strict=True)}
        self.metrics_address = f"127.0.0.1:{free_port()}"
        path = workdir / "caddy.json"
        path.write_text(json.dumps(config(models, triton_http, ports, self.metrics_address)))
        env = {
            **os.environ,
            "HOME": str(workdir),
            "XDG_CONFIG_HOME": str(workdir / "config"),
            "XDG_DATA_HOME": str(workdir / "data"),
        }
        self.proc = Managed(
            "caddy", [binary, "run", "--config", str(path)], log_path=workdir / "caddy.log", env=env
        )
