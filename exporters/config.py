"""The sidecar's configuration: flags > environment (TRITONWATCH_*) > config file > defaults.

Validated once at the edge into a frozen ``SidecarConfig``; every error names the flag or field.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from tritonwatch import safeyaml
from tritonwatch.errors import UsageError


@dataclass(frozen=True)
class SidecarConfig:
    triton: str = "http://127.0.0.1:8000"
    triton_metrics: str = ""  # default: the triton host on port 8002
    dcgm: str = ""
    listen: str = ":9450"
    otlp_listen: str = ""
    otlp_forward: str = ""
    otlp_max_body_bytes: int = 4 * 1024 * 1024
    interval: float = 5.0
    stats_interval: float = 0.0  # statistics API; default: --interval
    index_interval: float = 0.0  # repository index (readiness); default: --interval
    model_config_interval: float = 300.0  # model configs rarely change
    window: float = 60.0
    quantile_window: float = 300.0
    # Values kept per series and tenth of the quantile window: the memory bound of trace quantiles
    # (8 bytes each), which stay exact while a tenth of the window brings no more requests than this.
    quantile_samples: int = 1024  # traces.store.PER_SLICE (not imported: the traces package imports this)
    timeout: float = 0.0  # default: 80% of the interval, at most 10 s
    max_payload_bytes: int = 64 * 1024 * 1024
    max_models: int = 5000
    probe: str = ""
    probe_interval: float = 10.0
    set_trace_rate: int = 0
    trace_budget: float = 0.0  # traced requests/s to hold by moving Triton's trace_rate (0: off)
    trace_file: str = ""
    latency_buckets: str = ""  # comma-separated upper bounds in seconds; default catalog.DEFAULT_BUCKETS
    web_config: str = ""
    slo: str = ""  # SLO file: serve each model's SLO-bound capacity (exporters/headroom.py)
    headroom_interval: float = 30.0  # seconds between capacity estimates

    @property
    def scrape_timeout(self) -> float:
        return self.timeout or min(self.interval * 0.8, 10.0)

    @property
    def listen_host_port(self) -> tuple[str, int]:
        return parse_listen(self.listen, "--listen")

    @property
    def latency_bucket_bounds(self) -> tuple[float, ...]:
        """The trace histograms' bucket bounds (empty: the catalog's defaults)."""
        return parse_buckets(self.latency_buckets) if self.latency_buckets else ()

    @property
    def probe_models(self) -> tuple[str, ...]:
        return tuple(m.strip() for m in self.probe.split(",") if m.strip())


MAX_QUANTILE_SAMPLES = 65536  # 5 MiB per series at ten slices: beyond it the bound bounds nothing useful

FLAG_NAMES = {f.name: "--" + f.name.replace("_", "-") for f in fields(SidecarConfig)}


def check_url(value: str, flag: str) -> str:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"{flag}: {value!r} is not an http(s) URL (e.g. http://127.0.0.1:8000)")
    try:
        parts.port  # noqa: B018 - raises on a bad port
    except ValueError:
        raise UsageError(f"{flag}: {value!r} has an invalid port") from None
    return value.rstrip("/") if flag == "--triton" else value


def parse_buckets(value: str) -> tuple[float, ...]:
    try:
        bounds = tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"--latency-buckets: {value!r} is not a comma-separated list of seconds") from None
    if not bounds or any(not 0 < b < float("inf") for b in bounds) or list(bounds) != sorted(set(bounds)):
        raise UsageError(
            f"--latency-buckets: {value!r} must be increasing positive seconds, e.g. 0.005,0.01,0.025"
        )
    return bounds


def parse_listen(value: str, flag: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise UsageError(f"{flag}: {value!r} is not HOST:PORT (e.g. 127.0.0.1:9450 or :9450)")
    return host.strip("[]"), int(port)


def _load_file(path: str) -> dict[str, Any]:
    try:
        data = safeyaml.load(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"--config: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({safeyaml.problem(exc)})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of settings")
    out: dict[str, Any] = {}
    known = {f.name for f in fields(SidecarConfig)}
    for key, value in data.items():
        name = str(key).replace("-", "_")
        if name not in known:
            raise UsageError(f"{path}: unknown field {key!r}")
        out[name] = value
    return out


def resolve(args: argparse.Namespace) -> SidecarConfig:
    """Merge flags/env (already on ``args``; None when not given) over the config file over defaults."""
    merged: dict[str, Any] = _load_file(args.config) if getattr(args, "config", None) else {}
    for f in fields(SidecarConfig):
        value = getattr(args, f.name, None)
        if value is not None:
            merged[f.name] = value
    typed: dict[str, Any] = {}
    defaults = SidecarConfig()
    for f in fields(SidecarConfig):
        if f.name not in merged:
            continue
        typed[f.name] = _typed(f.name, merged[f.name], type(getattr(defaults, f.name)))
    cfg = SidecarConfig(**typed)
    return validate(cfg)


_KIND = {float: "a number", int: "a whole number", str: "a string"}


def _typed(name: str, raw: object, want: type) -> Any:
    """``raw`` as ``want``, never coerced: text (a flag, the environment) is read as that type, and a
    YAML value must already be one (``interval: true`` is not 1 s, ``max_payload_bytes: 1.9`` not 1
    byte, ``probe: [a, b]`` not the text "['a', 'b']")."""
    flag = FLAG_NAMES[name]
    if isinstance(raw, str) and want is not str:
        try:
            return want(raw.strip())
        except ValueError:
            raise UsageError(f"{flag}: {raw!r} is not {_KIND[want]}") from None
    ok = isinstance(raw, want) and not isinstance(raw, bool)
    if want is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if not ok:
        raise UsageError(f"{flag}: must be {_KIND[want]} (got {type(raw).__name__} {str(raw)[:40]})")
    return raw


def validate(cfg: SidecarConfig) -> SidecarConfig:
    check_url(cfg.triton, "--triton")
    metrics = cfg.triton_metrics
    if metrics:
        check_url(metrics, "--triton-metrics")
    else:
        host = urlsplit(cfg.triton).hostname or "127.0.0.1"
        metrics = f"http://{host}:8002/metrics"
    if cfg.dcgm:
        check_url(cfg.dcgm, "--dcgm")
    if cfg.otlp_forward:
        check_url(cfg.otlp_forward, "--otlp-forward")
    parse_listen(cfg.listen, "--listen")
    if cfg.otlp_listen:
        parse_listen(cfg.otlp_listen, "--otlp-listen")
    for f in fields(SidecarConfig):
        value = getattr(cfg, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"{FLAG_NAMES[f.name]}: must be a finite number (got {value})")
    for name in ("stats_interval", "index_interval"):
        if getattr(cfg, name) < 0:
            raise UsageError(f"{FLAG_NAMES[name]}: must be >= 0 (0: --interval; got {getattr(cfg, name)})")
    for name in (
        "interval",
        "window",
        "quantile_window",
        "probe_interval",
        "model_config_interval",
        "headroom_interval",
    ):
        if getattr(cfg, name) <= 0:
            raise UsageError(f"{FLAG_NAMES[name]}: must be > 0 (got {getattr(cfg, name)})")
    if cfg.window < 2 * cfg.interval:
        raise UsageError(
            f"--window: must be at least twice --interval ({cfg.window:g} < 2 x {cfg.interval:g})"
        )
    if cfg.timeout < 0:
        raise UsageError(f"--timeout: must be >= 0 (got {cfg.timeout})")
    for name in ("max_payload_bytes", "max_models", "otlp_max_body_bytes", "quantile_samples"):
        if getattr(cfg, name) <= 0:
            raise UsageError(f"{FLAG_NAMES[name]}: must be > 0 (got {getattr(cfg, name)})")
    if cfg.quantile_samples > MAX_QUANTILE_SAMPLES:
        raise UsageError(
            f"--quantile-samples: at most {MAX_QUANTILE_SAMPLES} (got {cfg.quantile_samples}; "
            "each is 8 bytes per series and tenth of the window)"
        )
    if cfg.set_trace_rate < 0:
        raise UsageError(f"--set-trace-rate: must be >= 0 (got {cfg.set_trace_rate})")
    if cfg.trace_budget < 0:
        raise UsageError(f"--trace-budget: must be >= 0 traced requests/s (got {cfg.trace_budget})")
    if cfg.latency_buckets:
        parse_buckets(cfg.latency_buckets)
    if cfg.headroom_interval > 60:
        # the capacity an autoscaler reads must be at most a minute old
        raise UsageError(f"--headroom-interval: at most 60 s (got {cfg.headroom_interval:g})")
    if cfg.slo and not Path(cfg.slo).is_file():
        raise UsageError(f"--slo: {cfg.slo} is not a file")
    if cfg.web_config and not Path(cfg.web_config).is_file():
        raise UsageError(f"--web-config: {cfg.web_config} is not a file")
    return replace(cfg, triton=cfg.triton.rstrip("/"), triton_metrics=metrics)
