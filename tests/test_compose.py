"""compose/ for one GPU host, checked offline: every mounted file exists, the parts point at each other
on the same ports, promtool and amtool accept the configs the containers load, and the sidecar image is
multi-stage and non-root.

Docker is not available on the machines the suite runs on: the image is not built and the stack is
not started here (docs/deploy.md says how to run it on a GPU host).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import subprocess
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from conftest import need_binary
from support import stacks

from tritonwatch.exporters import sidecar
from tritonwatch.exporters.config import resolve

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_DIR = ROOT / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
DOCKERFILE = COMPOSE_DIR / "Dockerfile"
# Mounted paths that `make generate` writes (other parts of the project own them).
GENERATED = (ROOT / "alerts" / "generated", ROOT / "dashboards" / "generated")
# Configuration files are mounted under this prefix at their repository-relative paths.
MIRROR = PurePosixPath("/etc/tritonwatch")

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?-([^}]*))?\}")


def _interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` with nothing set in the environment: the default."""
    return _VAR.sub(lambda m: m.group(2) or "", value)


def _resolve_vars(node: Any) -> Any:
    if isinstance(node, str):
        return _interpolate(node)
    if isinstance(node, list):
        return [_resolve_vars(v) for v in node]
    if isinstance(node, dict):
        return {k: _resolve_vars(v) for k, v in node.items()}
    return node


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict), "compose file has no services"
    return dict(_resolve_vars(data))


def _services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def _binds(service: dict[str, Any]) -> list[tuple[Path, PurePosixPath]]:
    """Host-path bind mounts of a service (short syntax ``./src:/dst[:ro]``), host side resolved."""
    out = []
    for vol in service.get("volumes", []):
        assert isinstance(vol, str), f"use the short volume syntax: {vol!r}"
        src, dst = vol.split(":")[:2]
        if src.startswith((".", "/")):
            out.append(((COMPOSE_DIR / src).resolve(), PurePosixPath(dst)))
    return out


def _flag(argv: list[str], name: str) -> str:
    """The value of ``--name=value`` (or ``--name value``) in a container command."""
    for i, arg in enumerate(argv):
        if arg.startswith(f"{name}="):
            return arg.split("=", 1)[1]
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
    raise AssertionError(f"{name} not in {argv}")


def _host_path(service: dict[str, Any], container_path: str) -> Path:
    """Map a path inside a container back to the repository through the service's bind mounts."""
    target = PurePosixPath(container_path)
    for src, dst in _binds(service):
        if target == dst:
            return src
        if dst in target.parents:
            return src / target.relative_to(dst)
    raise AssertionError(f"{container_path} is not inside any bind mount")


def _require_generated(path: Path) -> None:
    for gen in GENERATED:
        if (path == gen or gen in path.parents) and not path.exists():
            pytest.fail(f"{path.relative_to(ROOT)} is not generated (run `make generate`)", pytrace=False)


def test_services_and_gpu(compose: dict[str, Any]) -> None:
    services = _services(compose)
    assert set(services) == {
        "triton",
        "dcgm-exporter",
        "sidecar",
        "prometheus",
        "alertmanager",
        "grafana",
        "report",
    }
    assert services["triton"]["image"] == "nvcr.io/nvidia/tritonserver:24.10-py3"
    assert services["dcgm-exporter"]["image"].startswith("nvcr.io/nvidia/k8s/dcgm-exporter:")
    assert services["prometheus"]["image"].startswith("prom/prometheus:v2.")
    devices = {}
    for name in ("triton", "dcgm-exporter"):
        (dev,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert dev["driver"] == "nvidia" and dev["capabilities"] == ["gpu"], name
        devices[name] = dev["device_ids"]
    # DCGM's UUID joins Triton's gpu_uuid only when both see the same device.
    assert devices["triton"] == devices["dcgm-exporter"] == ["0"]
    assert services["sidecar"]["build"] == {"context": "..", "dockerfile": "compose/Dockerfile"}
    version = importlib.metadata.version("tritonwatch")
    assert services["sidecar"]["image"] == f"tritonwatch-sidecar:{version}"


def test_every_bind_mount_exists(compose: dict[str, Any]) -> None:
    checked = 0
    for name, service in _services(compose).items():
        for src, dst in _binds(service):
            _require_generated(src)
            assert src.exists(), f"{name}: mounts {src} which does not exist"
            assert ROOT in src.parents, f"{name}: mounts {src} from outside the repository"
            # Config files sit at their repository path under /etc/tritonwatch, so relative
            # references between them (prometheus.yml -> rule files) hold in the container too.
            if MIRROR in dst.parents:
                assert dst.relative_to(MIRROR) == PurePosixPath(src.relative_to(ROOT).as_posix()), (name, dst)
            checked += 1
    assert checked >= 6


def test_triton_traces_and_metrics_reach_the_sidecar(compose: dict[str, Any]) -> None:
    services = _services(compose)
    triton = services["triton"]["command"]
    side = services["sidecar"]["command"]
    trace = {a.split("=", 1)[1] for a in triton if a.startswith("--trace-config=")}
    assert "mode=opentelemetry" in trace and "level=TIMESTAMPS" in trace
    (url,) = [t.split("url=", 1)[1] for t in trace if t.startswith("opentelemetry,url=")]
    otlp = urlsplit(url)
    listen_port = _flag(side, "--otlp-listen").rpartition(":")[2]
    assert (otlp.hostname, str(otlp.port), otlp.path) == ("sidecar", listen_port, "/v1/traces")
    rate = int(next(t.split("=", 1)[1] for t in trace if t.startswith("rate=")))
    assert rate >= 100, "production tracing samples 1 request in 100 or fewer (Triton issue #7795)"
    assert _flag(triton, "--allow-metrics") == "true"
    metrics_port = _flag(triton, "--metrics-port")
    assert _flag(side, "--triton-metrics") == f"http://triton:{metrics_port}/metrics"
    assert _flag(side, "--triton") == "http://triton:8000"
    assert _host_path(services["triton"], _flag(triton, "--model-repository")) == ROOT / "model_repository"


def test_sidecar_command_is_accepted_by_the_sidecar(compose: dict[str, Any], tmp_path: Path) -> None:
    """The flags in the compose file are the sidecar's real flags with valid values."""
    service = _services(compose)["sidecar"]
    parser = argparse.ArgumentParser()
    sidecar.add_arguments(parser)
    cfg = resolve(parser.parse_args(service["command"]))
    # All interfaces of the container (Triton is another container), never published on the host.
    assert cfg.otlp_listen == "0.0.0.0:4318" and cfg.listen == ":9450"
    assert not any(str(p).split(":")[-1].split("/")[0] == "4318" for p in service.get("ports", []))
    assert cfg.dcgm == "http://dcgm-exporter:9400/metrics"
    flags = {a.dest for a in parser._actions}
    for env in service.get("environment", {}):
        assert env.startswith("TRITONWATCH_") and env.removeprefix("TRITONWATCH_").lower() in flags, env


def _scrape_targets(config: dict[str, Any]) -> dict[str, list[str]]:
    return {
        job["job_name"]: [t for sc in job["static_configs"] for t in sc["targets"]]
        for job in config["scrape_configs"]
    }


def test_prometheus_scrapes_every_part(compose: dict[str, Any]) -> None:
    services = _services(compose)
    prom = services["prometheus"]
    config_path = _host_path(prom, _flag(prom["command"], "--config.file"))
    assert config_path == COMPOSE_DIR / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    targets = _scrape_targets(config)
    triton_metrics = urlsplit(_flag(services["sidecar"]["command"], "--triton-metrics"))
    assert targets["triton"] == [triton_metrics.netloc]
    sidecar_port = _flag(services["sidecar"]["command"], "--listen").rpartition(":")[2]
    assert targets["tritonwatch"] == [f"sidecar:{sidecar_port}"]
    dcgm = urlsplit(_flag(services["sidecar"]["command"], "--dcgm"))
    assert targets["dcgm"] == [dcgm.netloc]
    # The job TritonServerDown's up{job=~...} matcher selects (the SLO file's spec.up_job).
    slo = yaml.safe_load((ROOT / "alerts" / "slo.yaml").read_text())
    up_job = slo["spec"].get("up_job", "triton")
    assert [j for j in targets if re.fullmatch(up_job, j)] == ["triton"]
    (am,) = config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]
    assert am == "alertmanager:9093" and "alertmanager" in services


@pytest.mark.prometheus
def test_promtool_check_config_with_the_generated_rules(
    platform: stacks.Stack, compose: dict[str, Any]
) -> None:
    need_binary("promtool")
    rules = sorted((ROOT / "alerts" / "generated").glob("*.rules.yml"))
    assert rules, "alerts/generated/*.rules.yml is not generated (run `make generate`)"
    prom = _services(compose)["prometheus"]
    config_path = _host_path(prom, _flag(prom["command"], "--config.file"))
    # promtool resolves rule_files relative to the config file, as Prometheus does in the container.
    out = subprocess.run(
        ["promtool", "check", "config", str(config_path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(rules)} rule files found" in out.stdout
    for rule_file in rules:
        assert f"alerts/generated/{rule_file.name}" in out.stdout


@pytest.mark.prometheus
def test_amtool_check_config_on_the_mounted_file(platform: stacks.Stack, compose: dict[str, Any]) -> None:
    need_binary("amtool")
    am = _services(compose)["alertmanager"]
    path = _host_path(am, _flag(am["command"], "--config.file"))
    assert path == ROOT / "alerts" / "generated" / "alertmanager.yml"
    _require_generated(path)
    out = subprocess.run(["amtool", "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    assert _flag(am["command"], "--cluster.listen-address") == ""


def test_grafana_provisioning_points_at_the_mounted_dashboards(compose: dict[str, Any]) -> None:
    services = _services(compose)
    grafana = services["grafana"]
    provisioning = _host_path(grafana, "/etc/grafana/provisioning")
    providers = sorted((provisioning / "dashboards").glob("*.y*ml"))
    datasources = sorted((provisioning / "datasources").glob("*.y*ml"))
    assert providers and datasources, "compose/grafana/provisioning has no dashboard provider or datasource"
    for provider_file in providers:
        for provider in yaml.safe_load(provider_file.read_text())["providers"]:
            dashboards = _host_path(grafana, provider["options"]["path"])
            _require_generated(dashboards)
            assert dashboards == ROOT / "dashboards" / "generated"
            assert sorted(dashboards.glob("*.json")), f"no dashboards in {dashboards}"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert _host_path(grafana, home).is_file()
    prom_port = services["prometheus"]["ports"][0].rpartition(":")[2]
    urls = [ds["url"] for f in datasources for ds in yaml.safe_load(f.read_text())["datasources"]]
    assert f"http://prometheus:{prom_port}" in urls


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return [(ln.split(None, 1)[0].upper(), ln.split(None, 1)[1] if " " in ln else "") for ln in lines]


def test_dockerfile_is_multistage_and_non_root() -> None:
    instructions = _dockerfile_instructions()
    froms = [i for i, (op, _) in enumerate(instructions) if op == "FROM"]
    assert len(froms) >= 2, "the sidecar image is built in stages"
    final = instructions[froms[-1] :]
    assert any(op == "COPY" and arg.startswith("--from=") for op, arg in final), (
        "final stage copies built wheels"
    )
    users = [arg for op, arg in final if op == "USER"]
    assert users, "the final stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0"), users[-1]
    # Only the sidecar's runtime (and the probe's tritonclient): no Triton wheel, pandas or grafanalib.
    installs = " ".join(arg for op, arg in instructions if op == "RUN" and "pip " in arg)
    assert "[probe]" in installs
    for extra in ("[all", "[local", "[report", "[dashboards", "nvidia-pytriton", "pandas"):
        assert extra not in installs, extra
    entry = next(arg for op, arg in final if op == "ENTRYPOINT")
    assert entry == '["tritonwatch", "sidecar"]'


def test_dockerfile_copies_what_exists() -> None:
    for op, arg in _dockerfile_instructions():
        if op != "COPY" or arg.startswith("--from="):
            continue
        *sources, _dest = arg.split()
        for src in sources:
            if "*" in src:
                continue  # optional (README.md*): a glob that may match nothing
            assert (ROOT / src).exists(), f"Dockerfile copies {src}, which is not in the repository"


def test_the_report_service_archives_every_week_when_cron_runs_it(compose: dict[str, Any]) -> None:
    """Not started by `up`; its flags are the report's own; the archive is a named volume; credentials
    come from an optional env file that git ignores, never the command line."""
    from tritonwatch.cli import build_parser

    report = _services(compose)["report"]
    assert report["profiles"] == ["report"] and report["image"] == "tritonwatch-report:0.1.0"
    assert report["build"] == {"context": "..", "dockerfile": "compose/report.Dockerfile"}
    sh, dash_c, script, name = report["entrypoint"]
    # Compose turns $$ into $: the shell gets the same line as the Kubernetes CronJob.
    assert script.replace("$$", "$") == 'exec tritonwatch report "--end=$(date -u +%Y-%m-%dT00:00:00Z)" "$@"'
    args = build_parser().parse_args(["report", "--end=2026-12-07T00:00:00Z", *report["command"]])
    assert args.archive == "/archive" and args.prometheus == "http://prometheus:9090" and args.days == 7
    assert "report-archive:/archive" in report["volumes"] and "report-archive" in compose["volumes"]
    assert report["env_file"] == [{"path": "./report.env", "required": False}]
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", "compose/report.env"], cwd=ROOT, capture_output=True, timeout=30
    )
    assert ignored.returncode == 0, "compose/report.env (SMTP credentials) must be git-ignored"
    assert not any("PASSWORD" in str(a) for a in report["command"])
