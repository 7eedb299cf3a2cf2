"""Run the real Triton bundled in the ``nvidia-pytriton`` wheel on this CPU, on loopback.

``LocalTriton`` serves a scratch copy of one or more model repositories (ONNX models rewritten to the
python-backend shim, see ``modelrepo``), with its own backends folder holding the python backend and
the stub for the running Python, the local response cache, CPU metrics and latency summaries.
Nothing is written into the source repositories. Triton and its python stubs run in one process
group (``procs.Managed``) that dies with the parent; ``stop()`` leaves no stub and no bound port.

    with LocalTriton([Path("model_repository")]) as triton:   # started and ready
        requests.get(triton.metrics_url)
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.local.procs import Managed, free_port, http_ok, port_is_free, wait_until

log = logging.getLogger(__name__)

HELP = "start the real Triton bundled in nvidia-pytriton (CPU) on model repositories, bound to 127.0.0.1"
CACHE_SIZE_BYTES = 16 * 1024 * 1024
# Triton 2.51 crashed (issue #7795) with OpenTelemetry tracing at little or no sampling under load.
MIN_SAFE_OTEL_RATE = 10
DEFAULT_TRACE_RATE = 10
# Triton's OpenTelemetry batch span processor (server#6842; docs/user_guide/trace.md), set so that
# Triton sends fewer, fuller bodies: the sidecar's cost is mostly per body, not per span (issue 37;
# docs/latency-sources.md has the figures). A batch of 1,024 spans is about 1.3 MB of OTLP JSON, well
# under the receiver's 4 MiB body limit; the queue holds 8 batches (Triton drops spans past it); a
# batch leaves at least every 2 s, so traces still reach the sidecar's 300 s quantile window fresh.
OTEL_BATCH = (
    ("bsp_max_queue_size", 8192),
    ("bsp_max_export_batch_size", 1024),
    ("bsp_schedule_delay", 2000),
)
SHM_DIR = Path("/dev/shm")
# Names of what a LocalTriton leaves on disk carry the owning process id, so a later start can sweep
# what a killed owner left behind (a SIGKILLed Triton never unlinks its stubs' shared memory).
SHM_PREFIX = "tritonwatch_{pid}_"
WORKDIR_PREFIX = "tritonwatch-triton-{pid}-"
_OWNER = re.compile(r"^tritonwatch(?:_|-triton-)(\d+)[_-]")


@dataclass(frozen=True)
class Bundle:
    """Where the wheel keeps the server binary, the python backend, the stubs, the cache and its libraries."""

    server: Path
    python_backend: Path
    stub: Path
    caches: Path
    libs: Path


def find_bundle() -> Bundle:
    try:
        import pytriton
    except ImportError:
        raise TritonwatchError(
            "nvidia-pytriton is not installed (pip install 'tritonwatch[local]'); it bundles the CPU Triton"
        ) from None
    pkg = Path(pytriton.__file__).resolve().parent
    root = pkg / "tritonserver"
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    bundle = Bundle(
        server=root / "bin" / "tritonserver",
        python_backend=root / "backends" / "python",
        stub=root / "python_backend_stubs" / pyver / "triton_python_backend_stub",
        caches=root / "caches",
        libs=pkg.parent / "nvidia_pytriton.libs",
    )
    for path in (bundle.server, bundle.python_backend, bundle.caches, bundle.libs):
        if not path.exists():
            raise TritonwatchError(f"nvidia-pytriton install is incomplete: {path} is missing")
    if not bundle.stub.exists():
        raise TritonwatchError(
            f"nvidia-pytriton has no python backend stub for Python {pyver} ({bundle.stub})"
        )
    return bundle


def trace_args(
    trace_to: str | None, trace_rate: int | None, trace_file: Path | None, log_frequency: int = 0
) -> list[str]:
    """Triton's ``--trace-config`` flags for OTLP export (``trace_to``) or JSON trace files (``trace_file``)."""
    if trace_to and trace_file:
        raise UsageError("--trace-to and --trace-file: Triton traces to one of them, not both")
    if not trace_to and not trace_file:
        if trace_rate is not None:
            raise UsageError("--trace-rate needs --trace-to or --trace-file")
        return []
    rate = DEFAULT_TRACE_RATE if trace_rate is None else trace_rate
    if rate < 1:
        raise UsageError(f"--trace-rate {rate}: must be >= 1 (trace one request in N)")
    if trace_to:
        parsed = urllib.parse.urlparse(trace_to)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise UsageError(
                f"--trace-to {trace_to}: expected a full OTLP/HTTP URL like http://127.0.0.1:4318/v1/traces"
            )
        if rate < MIN_SAFE_OTEL_RATE:
            log.warning(
                "--trace-rate %d with OpenTelemetry: Triton 2.51 can crash (signal 11, issue #7795) at "
                "little sampling under load; use %d or more",
                rate,
                MIN_SAFE_OTEL_RATE,
            )
        mode = ["mode=opentelemetry", f"opentelemetry,url={trace_to}"]
        mode += [f"opentelemetry,{key}={value}" for key, value in OTEL_BATCH]
    else:
        assert trace_file is not None
        mode = ["mode=triton", f"triton,file={trace_file}"]
        if log_frequency:
            mode.append(f"triton,log-frequency={log_frequency}")
    flags = [*mode, f"rate={rate}", "level=TIMESTAMPS"]
    return [arg for flag in flags for arg in ("--trace-config", flag)]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_leftovers() -> None:
    """Remove shared-memory regions and scratch folders of LocalTritons whose owning process is gone."""
    for path in [
        *SHM_DIR.glob("tritonwatch_*_*"),
        *Path(tempfile.gettempdir()).glob("tritonwatch-triton-*-*"),
    ]:
        match = _OWNER.match(path.name)
        if match and not _pid_alive(int(match.group(1))):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)


class LocalTriton:
    """One bundled Triton on fixed or free ports; ``start``/``stop``/``kill`` can repeat on the same ports."""

    def __init__(
        self,
        repositories: Sequence[Path],
        http_port: int | None = None,
        grpc_port: int | None = None,
        metrics_port: int | None = None,
        address: str = "127.0.0.1",
        trace_to: str | None = None,
        trace_rate: int | None = None,
        trace_file: Path | None = None,
        exit_timeout: int = 3,
        trace_log_frequency: int = 0,
        workdir: Path | None = None,
    ) -> None:
        if not repositories:
            raise UsageError("--model-repository: give at least one")
        self.repositories = [Path(r) for r in repositories]
        for repo in self.repositories:
            if not repo.is_dir():
                raise UsageError(f"--model-repository {repo}: not a directory")
        self.address = address
        self.http_port = http_port or free_port()
        self.grpc_port = grpc_port or free_port()
        self.metrics_port = metrics_port or free_port()
        # With trace files, a new file (PATH.0, PATH.1, ...) every ``trace_log_frequency`` traces.
        self.trace = trace_args(trace_to, trace_rate, trace_file, trace_log_frequency)
        self.exit_timeout = exit_timeout
        self.bundle = find_bundle()
        self._own_workdir = workdir is None
        sweep_leftovers()
        prefix = WORKDIR_PREFIX.format(pid=os.getpid())
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix=prefix))
        self.shm_prefix = SHM_PREFIX.format(pid=os.getpid()) + self.workdir.name.rsplit("-", 1)[-1] + "_"
        self.log_path = self.workdir / "tritonserver.log"
        self._proc: Managed | None = None
        self._prepared = False

    @property
    def host(self) -> str:
        return "127.0.0.1" if self.address in ("0.0.0.0", "") else self.address

    @property
    def http_url(self) -> str:
        return f"http://{self.host}:{self.http_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    @property
    def ports(self) -> tuple[int, int, int]:
        return (self.http_port, self.grpc_port, self.metrics_port)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def _prepare(self) -> None:
        from tritonwatch.local.modelrepo import prepare_copy

        backends = self.workdir / "backends" / "python"
        backends.mkdir(parents=True, exist_ok=True)
        # The stub must sit next to libtriton_python.so; site-packages stays untouched.
        for item in self.bundle.python_backend.iterdir():
            if item.is_file():
                shutil.copy2(item, backends / item.name)
        shutil.copy2(self.bundle.stub, backends / self.bundle.stub.name)
        for i, repo in enumerate(self.repositories):
            prepare_copy(repo, self.workdir / f"repo{i}")
        self._prepared = True

    def argv(self) -> list[str]:
        repos = [f"--model-repository={self.workdir / f'repo{i}'}" for i in range(len(self.repositories))]
        return [
            str(self.bundle.server),
            *repos,
            f"--backend-directory={self.workdir / 'backends'}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
            f"--cache-directory={self.bundle.caches}",
            f"--cache-config=local,size={CACHE_SIZE_BYTES}",
            # Explicit control with everything loaded: the repository API can unload/load models.
            "--model-control-mode=explicit",
            "--load-model=*",
            f"--http-address={self.address}",
            f"--grpc-address={self.address}",
            f"--metrics-address={self.address}",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            "--metrics-config=summary_latencies=true",
            "--allow-cpu-metrics=true",
            f"--exit-timeout-secs={self.exit_timeout}",
            *self.trace,
        ]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The stub imports numpy/onnxruntime from the environment it inherits: this venv's bin first.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(self.bundle.libs), env.get("LD_LIBRARY_PATH", "")) if p
        )
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def start(self) -> LocalTriton:
        if self._proc and self._proc.alive():
            raise TritonwatchError(f"Triton already running (pid {self._proc.pid})")
        if not self._prepared:
            self._prepare()
        busy = [p for p in self.ports if not port_is_free(p, self.host)]
        if busy:
            # A restart right after kill(): give the kernel a moment to release the sockets.
            wait_until(
                lambda: all(port_is_free(p, self.host) for p in self.ports), 30, f"ports {busy} to be free"
            )
        self._proc = Managed(
            "tritonserver", self.argv(), env=self.env(), log_path=self.log_path, cwd=self.workdir
        )
        return self

    def alive(self) -> bool:
        return bool(self._proc and self._proc.alive())

    def crashed(self) -> bool:
        """Started and then gone without ``stop()``/``kill()``: it died on its own (a crash, an OOM kill)."""
        return self._proc is not None and not self._proc.alive()

    def exit_code(self) -> int | None:
        return self._proc.proc.poll() if self._proc else None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of Triton's log (kept after it exits)."""
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def ready(self) -> bool:
        # Triton opens its metrics port a few ms after HTTP says ready; a caller that reads /metrics
        # right after wait_ready() (a restart test, the demo) must not race it.
        return http_ok(f"{self.http_url}/v2/health/ready") and http_ok(self.metrics_url)

    def wait_ready(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while True:  # checked once even at timeout 0, so an exited Triton is named as such
            if not self.alive():
                tail = self._proc.log_tail(15) if self._proc else ""
                raise TritonwatchError(f"tritonserver exited while starting (log {self.log_path}):\n{tail}")
            if self.ready():
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(0.25)
        raise TritonwatchError(f"tritonserver not ready after {timeout:.0f}s (log {self.log_path})")

    def stop(self, grace: float | None = None) -> None:
        """SIGTERM Triton, wait for it (it drains for ``exit_timeout``), then SIGKILL whatever is left of its group."""
        if not self._proc:
            return
        proc, self._proc = self._proc, None
        grace = self.exit_timeout + 10.0 if grace is None else grace
        if proc.alive():
            # Signal only the server first: it tells its stubs to finalize; the group sweep follows.
            proc.proc.send_signal(signal.SIGTERM)
        proc.stop(grace=grace)
        self._unlink_shm()  # only left over when the group had to be killed

    def kill(self) -> None:
        """SIGKILL Triton and its stubs at once, as a crash or an OOM kill would."""
        if not self._proc:
            return
        proc, self._proc = self._proc, None
        proc.signal_group(signal.SIGKILL)
        proc.stop(grace=5)
        self._unlink_shm()

    def _unlink_shm(self) -> None:
        for region in SHM_DIR.glob(f"{self.shm_prefix}*"):
            region.unlink(missing_ok=True)

    def restart(self, timeout: float = 90.0) -> None:
        self.stop()
        self.start()
        self.wait_ready(timeout)

    def close(self) -> None:
        self.stop()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> LocalTriton:
        try:
            self.start()
            self.wait_ready()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model-repository",
        action="append",
        type=Path,
        required=False,
        metavar="DIR",
        help="model repository to serve (repeatable; default: the bundled demo repository, fraud_detector); "
        "served from a copy, the source is not written",
    )
    parser.add_argument("--http-port", type=int, default=8000, help="HTTP API port (default: 8000)")
    parser.add_argument("--grpc-port", type=int, default=8001, help="gRPC API port (default: 8001)")
    parser.add_argument("--metrics-port", type=int, default=8002, help="/metrics port (default: 8002)")
    parser.add_argument(
        "--address", default="127.0.0.1", help="address all three servers bind (default: 127.0.0.1)"
    )
    parser.add_argument(
        "--trace-to",
        metavar="URL",
        help="send OpenTelemetry traces (OTLP/HTTP), e.g. http://127.0.0.1:4318/v1/traces",
    )
    parser.add_argument(
        "--trace-rate",
        type=int,
        metavar="N",
        help=f"trace one request in N (default: {DEFAULT_TRACE_RATE}; OTel below {MIN_SAFE_OTEL_RATE} can crash Triton 2.51)",
    )
    parser.add_argument(
        "--trace-file", type=Path, metavar="PATH", help="write Triton JSON trace files (mode=triton)"
    )
    parser.add_argument(
        "--exit-timeout",
        type=int,
        default=3,
        metavar="S",
        help="seconds Triton drains in-flight work on stop (default: 3)",
    )
    parser.add_argument(
        "--ready-timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds to wait for readiness (default: 120)",
    )


def _check_port(flag: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise UsageError(f"{flag} {port}: not a TCP port (1-65535)")


def run(args: argparse.Namespace) -> int:
    repos = args.model_repository
    if isinstance(repos, (str, Path)):  # one repository from TRITONWATCH_MODEL_REPOSITORY
        repos = [Path(repos)]
    if not repos:
        from tritonwatch.local.bundled import model_repository

        repos = [model_repository()]  # as `demo` does: a pip user has no model_repository/ folder
    for flag, port in (
        ("--http-port", args.http_port),
        ("--grpc-port", args.grpc_port),
        ("--metrics-port", args.metrics_port),
    ):
        _check_port(flag, port)
        if not port_is_free(port, "127.0.0.1" if args.address in ("0.0.0.0", "") else args.address):
            raise UsageError(f"{flag} {port}: port already in use")
    if args.exit_timeout < 0:
        raise UsageError(f"--exit-timeout {args.exit_timeout}: must be >= 0")

    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; stopping Triton", signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    triton = LocalTriton(
        repos,
        http_port=args.http_port,
        grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
        address=args.address,
        trace_to=args.trace_to,
        trace_rate=args.trace_rate,
        trace_file=args.trace_file,
        exit_timeout=args.exit_timeout,
    )
    try:
        triton.start()
        deadline = time.monotonic() + args.ready_timeout
        while not triton.ready():
            if stop.is_set():
                return 0
            if not triton.alive():
                triton.wait_ready(0)  # raises with the log tail
            if time.monotonic() > deadline:
                raise TritonwatchError(
                    f"tritonserver not ready after {args.ready_timeout:.0f}s (log {triton.log_path})"
                )
            stop.wait(0.25)
        print(
            f"Triton ready: HTTP {triton.http_url}  gRPC {triton.host}:{triton.grpc_port}  metrics {triton.metrics_url}",
            flush=True,
        )
        print(f"log: {triton.log_path}   (Ctrl-C or SIGTERM stops it)", flush=True)
        while not stop.wait(0.5):
            if not triton.alive():
                raise TritonwatchError(f"tritonserver exited unexpectedly (log {triton.log_path})")
        return 0
    finally:
        triton.close()
