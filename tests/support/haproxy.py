"""A real HAProxy (Debian 2.6) in front of a Triton: one backend per model, its Prometheus exporter.

The config is written to the test's own folder and binds loopback only; the exporter is HAProxy's
built-in service (``http-request use-service prometheus-exporter``), which serves
``haproxy_backend_http_responses_total{proxy="<backend>",code="1xx".."5xx"|"other"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from support.front_process import FrontProcess, check_names
from tritonwatch.local.procs import Managed, free_port


def config(models: Sequence[str], triton_http: str, front_port: int, stats_port: int) -> str:
    """A backend named after each model, chosen by the request path /v2/models/<model>/."""
    check_names(models)
    routes = "".join(f"  use_backend {m} if {{ path_beg /v2/models/{m}/ }}\n" for m in models)
    backends = "".join(f"backend {m}\n  server triton {triton_http}\n" for m in models)
    return (
        "global\n  maxconn 512\n"
        "defaults\n  mode http\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n"
        f"frontend triton\n  bind 127.0.0.1:{front_port}\n{routes}"
        f"{backends}"
        f"frontend stats\n  bind 127.0.0.1:{stats_port}\n"
        "  http-request use-service prometheus-exporter if { path /metrics }\n"
    )


class HAProxy(FrontProcess):
    def __init__(self, binary: str, workdir: Path, models: Sequence[str], triton_http: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.stats_port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_address = f"127.0.0.1:{self.stats_port}"
        path = workdir / "haproxy.cfg"
        path.write_text(config(models, triton_http, self.port, self.stats_port))
        # -db: stay in the foreground, so stopping the process stops HAProxy.
        self.proc = Managed("haproxy", [binary, "-db", "-f", str(path)], log_path=workdir / "haproxy.log")
