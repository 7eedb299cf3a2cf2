"""Child processes that die with their parent, free loopback ports, readiness polling.

Every process tritonwatch starts (Triton and its python stubs, Prometheus, Alertmanager, a sidecar)
goes through ``Managed``: it runs in its own process group, gets SIGKILL if the parent dies
(``PR_SET_PDEATHSIG``), and ``stop()`` sends SIGTERM to the whole group, then SIGKILL after a grace
period, so no stub lingers holding a port.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO

from tritonwatch.errors import TritonwatchError

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: new process group, SIGKILL when the parent dies.
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


# Ports handed out lately: a port is chosen now and bound later (Triton binds its three at start), and
# the kernel may offer a just-released port again. Triton was once given one port for HTTP and gRPC
# ("cannot listen to HTTP requests and GRPC requests at the same address and port").
_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=512)
_HANDED_OUT_LOCK = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """A loopback port free now and not handed out by this process among its last 512."""
    with _HANDED_OUT_LOCK:
        for _ in range(64):
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind((host, 0))
                port = int(s.getsockname()[1])
            if port not in _HANDED_OUT:
                _HANDED_OUT.append(port)
                return port
    raise TritonwatchError(f"no free port on {host} that was not just handed out (64 tries)")


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def http_ok(url: str, timeout: float = 1.0, method: str = "GET") -> bool:
    try:
        req = urllib.request.Request(url, method=method)
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return 200 <= int(resp.status) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.2) -> None:
    """Poll ``check`` until true or raise after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TritonwatchError(f"timed out after {timeout:.0f}s waiting for {what}")


class Managed:
    """A started child process group."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[bytes] | None = open(log_path, "ab") if log_path else None
        out = self._log if self._log else subprocess.DEVNULL
        try:
            self.proc = subprocess.Popen(
                self.argv,
                env=dict(env) if env is not None else None,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd,
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            if self._log:
                self._log.close()
            raise TritonwatchError(f"cannot start {name} ({self.argv[0]}): {exc.strerror}") from None
        log.debug("started %s pid %d: %s", name, self.proc.pid, " ".join(self.argv))
        self._guard: subprocess.Popen[bytes] | None = None
        self._guard_fd = self._start_group_guard()

    def _start_group_guard(self) -> int | None:
        """A tiny watcher that kills the child's whole process group when this process dies.

        PR_SET_PDEATHSIG reaches only the direct child: Triton's python stubs are its children and
        outlived a SIGKILLed parent here. The watcher blocks reading a pipe only we hold open; when we
        die, however we die, the read ends and it sweeps the group.
        """
        read_fd, write_fd = os.pipe()  # not inherited by other children (O_CLOEXEC)
        try:
            self._guard = subprocess.Popen(
                ["/bin/sh", "-c", f"read _ ; kill -KILL -- -{self.proc.pid} 2>/dev/null"],
                stdin=read_fd,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(write_fd)
            return None
        finally:
            os.close(read_fd)
        return write_fd

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        if not self.log_path or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM the group, wait ``grace`` seconds, then SIGKILL whatever is left of it."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing its process group", self.name, grace)
        # Children (python stubs) can outlive the leader: always sweep the group.
        self.signal_group(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        if self._guard_fd is not None:
            os.close(self._guard_fd)  # the group is gone: the watcher exits
            self._guard_fd = None
        if self._guard is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._guard.wait(timeout=5)
            self._guard = None
        if self._log:
            self._log.close()
            self._log = None

    def __enter__(self) -> Managed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
