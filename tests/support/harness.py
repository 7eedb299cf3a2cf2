"""Start the real sidecar in-process against test targets, and read its /metrics as a client would."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import requests

from tritonwatch import catalog
from tritonwatch.cli import build_parser
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.config import SidecarConfig, resolve
from tritonwatch.exporters.sidecar import Sidecar

ANSWER_WITHIN = 2.0  # the sidecar's /metrics must answer within this, whatever its targets do


def sidecar_config(argv: Sequence[str]) -> SidecarConfig:
    args = build_parser().parse_args(["sidecar", *argv])
    return resolve(args)


@contextmanager
def running_sidecar(argv: Sequence[str], clock: Callable[[], float] | None = None) -> Iterator[Sidecar]:
    sidecar = Sidecar(sidecar_config(["--listen", "127.0.0.1:0", *argv]))
    if clock is not None:
        sidecar.metrics.clock = clock  # time in recorded steps: rates become exact
    sidecar.start()
    try:
        yield sidecar
    finally:
        sidecar.stop()


def read_metrics(port: int, scheme: str = "http", **kwargs: object) -> Samples:
    """GET /metrics; fails the test if the answer takes ``ANSWER_WITHIN`` s or more."""
    start = time.monotonic()
    resp = requests.get(f"{scheme}://127.0.0.1:{port}/metrics", timeout=ANSWER_WITHIN, **kwargs)  # type: ignore[arg-type]
    took = time.monotonic() - start
    assert took < ANSWER_WITHIN, f"/metrics took {took:.2f}s"
    assert resp.status_code == 200, resp.status_code
    samples = parse(resp.text)
    for name, series in samples.items():
        for labels, v in series.items():
            assert not math.isnan(v), f"NaN: {name}{dict(labels)}"
            assert v >= 0, f"negative: {name}{dict(labels)} = {v}"
    return samples


def value(samples: Samples, name: str, **labels: str) -> float | None:
    want = sorted(labels.items())
    for ls, v in samples.get(name, {}).items():
        if sorted(ls) == want:
            return v
    return None


def models_served(samples: Samples) -> set[str]:
    """The models the sidecar serves a request rate for."""
    return {dict(ls)["model"] for ls in samples.get(catalog.REQUEST_RATE, {})}


def poll(port: int, check: Callable[[Samples], bool], what: str, timeout: float = 15.0) -> Samples:
    """Read /metrics until ``check`` holds (each read itself within 2 s) or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    samples: Samples = {}
    while time.monotonic() < deadline:
        samples = read_metrics(port)
        if check(samples):
            return samples
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}; last read: {sorted(samples)}")


def processes_mentioning(text: str) -> list[str]:
    """Running processes (pytest's own aside) whose command line mentions ``text``: what a command
    that should have stopped everything it started left behind."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline[:120]}")
    return found
