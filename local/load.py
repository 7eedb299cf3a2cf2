"""Drive real requests at a Triton model with tritonclient[http] and report what was achieved.

Inputs are built from the model's config (``GET /v2/models/M/config``: names, datatypes, dims,
``max_batch_size``). Each worker thread owns its client (tritonclient's gevent client must not be
shared across threads) and sends every fresh random input ``1 + repeat`` times, so ``repeat=3``
gives 3 cache hits in 4 requests on a model with the response cache on. ``error_ratio`` replaces
that share of the fresh inputs with NaN ones, which the ONNX shim rejects: real failures on the
server. ``rps`` caps the total request rate across threads.

    driver = LoadDriver("http://127.0.0.1:8000", concurrency=8, repeat=3).start()
    ...
    stats = driver.stop()   # LoadStats(ok=..., errors=..., rate=..., p50_ms=...)
"""

from __future__ import annotations

import argparse
import logging
import math
import random
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass

from tritonwatch.errors import UsageError
from tritonwatch.inputs import FLOAT_TYPES, fetch_config, input_specs, make_inputs

log = logging.getLogger(__name__)

HELP = (
    "drive requests at a Triton model (inputs built from its config) and report rate and latency percentiles"
)
DEFAULT_MODEL = "fraud_detector"


def parse_triton_url(url: str) -> tuple[str, bool]:
    """``http://host:port`` -> (``host:port``, ssl) as tritonclient wants it."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise UsageError(f"--triton {url}: expected an HTTP URL like http://127.0.0.1:8000")
    return parsed.netloc, parsed.scheme == "https"


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an ascending sequence (NaN when empty)."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True)
class LoadStats:
    model: str
    duration_s: float
    ok: int
    errors: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    last_error: str | None = None
    invalid: int = 0  # requests sent with an invalid (NaN) input on purpose (error_ratio)

    @property
    def requests(self) -> int:
        return self.ok + self.errors

    @property
    def rate(self) -> float:
        """Achieved requests per second (successes and failures)."""
        return self.requests / self.duration_s if self.duration_s > 0 else 0.0

    def table(self) -> str:
        rows = [
            ("model", self.model),
            ("duration_s", f"{self.duration_s:.1f}"),
            ("requests", str(self.requests)),
            ("ok", str(self.ok)),
            ("errors", str(self.errors)),
            ("rate_rps", f"{self.rate:.1f}"),
            ("p50_ms", f"{self.p50_ms:.2f}"),
            ("p90_ms", f"{self.p90_ms:.2f}"),
            ("p99_ms", f"{self.p99_ms:.2f}"),
        ]
        if self.last_error:
            rows.append(("last_error", self.last_error))
        return "\n".join(f"{k:<12} {v}" for k, v in rows)


class _RateLimiter:
    """One shared schedule of send slots, ``1/rps`` apart, for all threads."""

    def __init__(self, rps: float) -> None:
        self.interval = 1.0 / rps
        self.next = time.monotonic()
        self.lock = threading.Lock()

    def wait(self, stop: threading.Event) -> None:
        with self.lock:
            now = time.monotonic()
            slot = max(self.next, now)
            self.next = slot + self.interval
        delay = slot - time.monotonic()
        if delay > 0:
            stop.wait(delay)


class LoadDriver:
    """Background load: ``concurrency`` threads, each with its own tritonclient, until ``stop()``."""

    def __init__(
        self,
        triton_url: str,
        model: str = DEFAULT_MODEL,
        concurrency: int = 8,
        rps: float | None = None,
        repeat: int = 0,
        error_ratio: float = 0.0,
        batch: int = 1,
        seed: int | None = None,
        timeout: float = 30.0,
    ) -> None:
        if concurrency < 1:
            raise UsageError(f"--concurrency {concurrency}: must be >= 1")
        if rps is not None and rps <= 0:
            raise UsageError(f"--rps {rps}: must be > 0")
        if repeat < 0:
            raise UsageError(f"--repeat {repeat}: must be >= 0")
        if not 0.0 <= error_ratio <= 1.0:
            raise UsageError(f"--error-ratio {error_ratio}: must be between 0 and 1")
        self.url, self.ssl = parse_triton_url(triton_url)
        self.model = model
        self.concurrency = concurrency
        self.repeat = repeat
        self.error_ratio = error_ratio
        self.timeout = timeout
        self.specs = input_specs(fetch_config(triton_url, model), batch)
        if error_ratio > 0 and not any(s.datatype in FLOAT_TYPES for s in self.specs):
            raise UsageError(f"--error-ratio: model {model} has no float input to put NaN in")
        self._limiter = _RateLimiter(rps) if rps else None
        self._seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._latencies: list[float] = []
        self._ok = 0
        self._errors = 0
        self._invalid = 0
        self._last_error: str | None = None
        self._started = 0.0
        self._stopped: float | None = None

    def _worker(self, index: int) -> None:
        import numpy as np
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException

        rng = np.random.default_rng([self._seed, index])
        client = httpclient.InferenceServerClient(
            self.url, ssl=self.ssl, connection_timeout=self.timeout, network_timeout=self.timeout
        )
        try:
            while not self._stop.is_set():
                invalid = rng.random() < self.error_ratio
                inputs = make_inputs(self.specs, rng, invalid=invalid)
                for _ in range(1 + self.repeat):
                    if self._limiter:
                        self._limiter.wait(self._stop)
                    if self._stop.is_set():
                        return
                    t0 = time.perf_counter()
                    error: str | None = None
                    try:
                        client.infer(self.model, inputs)
                    except InferenceServerException as exc:
                        error = str(exc.message() or exc)
                    except Exception as exc:  # connection refused/reset while Triton restarts
                        error = f"{type(exc).__name__}: {exc}"
                    elapsed = time.perf_counter() - t0
                    with self._lock:
                        self._invalid += invalid
                        if error is None:
                            self._ok += 1
                            self._latencies.append(elapsed)
                        else:
                            self._errors += 1
                            self._last_error = error.splitlines()[0][:200] if error else "error"
                    if error is not None and "Connection" in error:
                        self._stop.wait(0.1)  # server down: don't spin
        finally:
            client.close()

    def start(self) -> LoadDriver:
        self._started = time.monotonic()
        for i in range(self.concurrency):
            t = threading.Thread(target=self._worker, args=(i,), name=f"load-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def halt(self) -> None:
        """Stop sending, without waiting: several drivers then wait for their requests in flight at once."""
        self._stop.set()

    def stop(self) -> LoadStats:
        """Stop sending, wait for in-flight requests to finish, return the final counts."""
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout + 5)
        if self._stopped is None:
            self._stopped = time.monotonic()
        return self.stats()

    def stats(self) -> LoadStats:
        with self._lock:
            latencies = sorted(self._latencies)
            ok, errors, last, invalid = self._ok, self._errors, self._last_error, self._invalid
        end = self._stopped if self._stopped is not None else time.monotonic()
        return LoadStats(
            model=self.model,
            duration_s=end - self._started if self._started else 0.0,
            ok=ok,
            errors=errors,
            p50_ms=percentile(latencies, 50) * 1000,
            p90_ms=percentile(latencies, 90) * 1000,
            p99_ms=percentile(latencies, 99) * 1000,
            last_error=last,
            invalid=invalid,
        )

    def wait(self, timeout: float | None) -> bool:
        """Block until ``stop()`` is called or ``timeout`` passes; True when stopped."""
        return self._stop.wait(timeout)

    def run(self, duration: float) -> LoadStats:
        self.start()
        try:
            self._stop.wait(duration)
        finally:
            stats = self.stop()
        return stats

    def __enter__(self) -> LoadDriver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--triton", default="http://127.0.0.1:8000", metavar="URL", help="Triton HTTP API base"
    )
    parser.add_argument("--model", default=DEFAULT_MODEL, help=f"model to drive (default: {DEFAULT_MODEL})")
    parser.add_argument("--concurrency", type=int, default=8, metavar="C", help="client threads (default: 8)")
    parser.add_argument(
        "--rps", type=float, metavar="N", help="cap on the total request rate (default: none)"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds to run; 0 runs until Ctrl-C (default: 10)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=0,
        metavar="K",
        help="send each fresh input 1+K times (K=3: 3/4 cache hits)",
    )
    parser.add_argument(
        "--error-ratio",
        type=float,
        default=0.0,
        metavar="R",
        help="share of fresh inputs with a NaN: real server-side failures (each fails its dynamic batch)",
    )
    parser.add_argument(
        "--batch", type=int, default=1, help="rows per request for batching models (default: 1)"
    )


def run(args: argparse.Namespace) -> int:
    if args.duration < 0:
        raise UsageError(f"--duration {args.duration}: must be >= 0")
    if args.batch < 1:
        raise UsageError(f"--batch {args.batch}: must be >= 1")
    driver = LoadDriver(
        args.triton,
        model=args.model,
        concurrency=args.concurrency,
        rps=args.rps,
        repeat=args.repeat,
        error_ratio=args.error_ratio,
        batch=args.batch,
    )
    log.info("driving %s at %s with %d clients", args.model, args.triton, args.concurrency)
    driver.start()
    try:
        driver.wait(args.duration if args.duration > 0 else None)
    except KeyboardInterrupt:
        pass
    stats = driver.stop()
    print(stats.table())
    return 0 if stats.ok > 0 or stats.errors == 0 else 1
