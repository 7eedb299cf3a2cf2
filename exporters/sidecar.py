"""``tritonwatch sidecar``: scrape Triton beside it and serve the derived signals on ``/metrics``."""

from __future__ import annotations

import argparse
import importlib
import logging
import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import CollectorRegistry

from tritonwatch.errors import TritonwatchError
from tritonwatch.exporters import memory
from tritonwatch.exporters.collector import SidecarCollector
from tritonwatch.exporters.config import SidecarConfig, resolve, validate
from tritonwatch.exporters.context import PartContext
from tritonwatch.exporters.exposition import CachedExposition
from tritonwatch.exporters.part import Part
from tritonwatch.exporters.server import MetricsServer
from tritonwatch.exporters.source import Source
from tritonwatch.exporters.triton import TritonApi, TritonMetrics
from tritonwatch.exporters.window import CounterWindow

log = logging.getLogger("tritonwatch.sidecar")

HELP = "scrape a Triton server (and DCGM, traces) and serve derived per-model signals on /metrics"

# Optional parts, each a module with ``make_part(context) -> list[tuple[Part, Source | None]]``
# (exporters/context.py; empty when its flags leave it off). Imported by name so that this module
# stays free of their dependencies and a part that is not installed costs only itself.
PART_MODULES: tuple[str, ...] = (
    "tritonwatch.exporters.gpu",
    "tritonwatch.exporters.traces.wiring",
    "tritonwatch.exporters.probe",
    "tritonwatch.exporters.llm",
    "tritonwatch.exporters.headroom",
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    # Defaults are None so that a config file value is not shadowed by a flag nobody gave.
    p.add_argument("--config", metavar="FILE", help="YAML file of settings (keys as the long flags)")
    p.add_argument("--triton", metavar="URL", help="Triton HTTP API base (default: http://127.0.0.1:8000)")
    p.add_argument(
        "--triton-metrics",
        metavar="URL",
        help="Triton metrics URL, used as given (default: <triton host>:8002/metrics)",
    )
    p.add_argument(
        "--dcgm", metavar="URL", help="dcgm-exporter metrics URL, used as given (off unless given)"
    )
    p.add_argument("--listen", metavar="HOST:PORT", help="where /metrics is served (default: :9450)")
    p.add_argument(
        "--otlp-listen",
        metavar="HOST:PORT",
        help="OTLP/HTTP trace receiver (off unless given; :PORT binds 127.0.0.1)",
    )
    p.add_argument("--otlp-forward", metavar="URL", help="forward received OTLP spans unchanged to this URL")
    p.add_argument("--interval", type=float, metavar="S", help="scrape interval in seconds (default: 5)")
    p.add_argument(
        "--stats-interval",
        type=float,
        metavar="S",
        help="seconds between reads of Triton's statistics API (default: --interval)",
    )
    p.add_argument(
        "--index-interval",
        type=float,
        metavar="S",
        help="seconds between reads of the repository index, i.e. readiness (default: --interval)",
    )
    p.add_argument(
        "--model-config-interval",
        type=float,
        metavar="S",
        help="seconds between reads of each model's config (default: 300; a failed read backs off from --interval)",
    )
    p.add_argument(
        "--window", type=float, metavar="S", help="window of counter derivations in seconds (default: 60)"
    )
    p.add_argument(
        "--quantile-window",
        type=float,
        metavar="S",
        help="window of trace quantiles in seconds (default: 300)",
    )
    p.add_argument(
        "--quantile-samples",
        type=int,
        metavar="N",
        help="trace latencies kept per series and tenth of the quantile window (default: 1024): quantiles "
        "are exact up to N requests a tenth, sampled beyond; memory is 8 bytes each",
    )
    p.add_argument(
        "--timeout", type=float, metavar="S", help="scrape timeout (default: 80%% of the interval, max 10)"
    )
    p.add_argument(
        "--max-payload-bytes",
        type=int,
        metavar="N",
        help="largest /metrics payload accepted (default: 64 MiB)",
    )
    p.add_argument(
        "--otlp-max-body-bytes",
        type=int,
        metavar="N",
        help="largest OTLP body taken, once inflated (default: 4 MiB; larger ones: 413)",
    )
    p.add_argument(
        "--max-models",
        type=int,
        metavar="N",
        help="most models tracked (label cardinality cap) (default: 5000)",
    )
    p.add_argument("--probe", metavar="MODEL[,MODEL]", help="canary-probe these models (off unless given)")
    p.add_argument("--probe-interval", type=float, metavar="S", help="seconds between probes (default: 10)")
    p.add_argument(
        "--set-trace-rate", type=int, metavar="N", help="set Triton's trace rate at start (off unless given)"
    )
    p.add_argument(
        "--trace-budget",
        type=float,
        metavar="N",
        help="hold the traced requests near N per second by moving Triton's trace_rate with the load "
        "(off unless given; never below one in 10)",
    )
    p.add_argument(
        "--trace-file", metavar="PATH", help="read Triton JSON trace files (mode=triton) instead of OTLP"
    )
    p.add_argument(
        "--latency-buckets",
        metavar="S[,S...]",
        help="trace latency histogram bucket bounds in seconds (default: 100us..60s, SLO thresholds included)",
    )
    p.add_argument("--web-config", metavar="FILE", help="TLS and basic auth, exporter-toolkit format")
    p.add_argument(
        "--slo",
        metavar="FILE",
        help="SLO file: serve each model's SLO-bound capacity in requests/s (off unless given; docs/headroom.md)",
    )
    p.add_argument(
        "--headroom-interval",
        type=float,
        metavar="S",
        help="seconds between capacity estimates (default: 30; off the scrape path)",
    )


@dataclass
class Sidecar:
    """The assembled sidecar; ``start()``/``stop()`` for tests and the demo, ``run()`` for the CLI."""

    config: SidecarConfig
    registry: CollectorRegistry = field(default_factory=lambda: CollectorRegistry(auto_describe=False))

    def __post_init__(self) -> None:
        cfg = self.config
        self.window = CounterWindow(cfg.window)
        self.metrics = TritonMetrics(
            cfg.triton_metrics,
            self.window,
            cfg.interval,
            cfg.scrape_timeout,
            cfg.max_payload_bytes,
            max_models=cfg.max_models,
        )
        self.api = TritonApi(
            cfg.triton,
            cfg.interval,
            cfg.scrape_timeout,
            config_refresh=cfg.model_config_interval,
            max_models=cfg.max_models,
            index_interval=cfg.index_interval,
            stats_interval=cfg.stats_interval,
        )
        self.sources: list[Source] = [self.metrics, self.api]
        # /metrics is rendered once per update of anything it shows, not once per request; the
        # costly families are prepared by its render thread, never on a request's time.
        self.exposition = CachedExposition(self.registry)
        authorize, wrap = _web_security(cfg)
        context = PartContext(
            cfg,
            self.metrics.snapshots,
            lambda: self.api.state,
            self.metrics.request_rates,
            updates=[self.exposition],  # what parts show changes outside a source's step too
            prepared=True,
            web=(authorize, wrap),
        )
        parts: list[Part] = []
        for module_name in PART_MODULES:
            try:
                module = importlib.import_module(module_name)
            except ModuleNotFoundError as exc:
                if exc.name == module_name:
                    continue  # that part is not in this build
                raise
            for part, source in module.make_part(context):
                parts.append(part)
                if source is not None:
                    self.sources.append(source)
        self.collector = SidecarCollector(
            self.metrics, self.api, parts, prepared=True, bls=context.bls, texts=context.texts
        )
        self.registry.register(self.collector)
        self.exposition.prepare = [self.collector.prepare, *(part.prepare for part in parts)]
        for source in self.sources:
            source.updates.append(self.exposition)
        host, port = cfg.listen_host_port
        try:
            self.server = MetricsServer(host, port, self.exposition, authorize, wrap)
        except OSError as exc:
            raise TritonwatchError(f"--listen {cfg.listen}: cannot bind ({exc.strerror})") from None

    @classmethod
    def local(cls, triton: str, triton_metrics: str, **settings: Any) -> Sidecar:
        """A sidecar of ``triton`` serving on a free loopback port, validated but not started.

        ``settings`` are ``SidecarConfig`` fields and override any default, the loopback ``listen``
        included; an empty ``triton_metrics`` means Triton's host on port 8002, as for the CLI.
        """
        config = SidecarConfig(
            **{"listen": "127.0.0.1:0", **settings, "triton": triton, "triton_metrics": triton_metrics}
        )
        return cls(validate(config))

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> Sidecar:
        memory.limit_arenas()
        for s in self.sources:
            s.start()
        self.server.start()
        log.info(
            "serving http://%s:%d/metrics; scraping %s and %s every %gs (window %gs)",
            self.config.listen_host_port[0] or "0.0.0.0",
            self.port,
            self.config.triton_metrics,
            self.config.triton,
            self.config.interval,
            self.config.window,
        )
        return self

    def stop(self) -> None:
        self.server.stop()
        for s in self.sources:
            s.stop()

    def run(self) -> int:
        done = threading.Event()

        def _stop(signum: int, frame: Any) -> None:
            done.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        self.start()
        done.wait()
        log.info("stopping")
        self.stop()
        return 0


def _web_security(cfg: SidecarConfig) -> tuple[Any, Any]:
    if not cfg.web_config:
        return None, None
    from tritonwatch.exporters.webconfig import load_web_config

    return load_web_config(cfg.web_config)


def run(args: argparse.Namespace) -> int:
    cfg = resolve(args)
    return Sidecar(cfg).run()
