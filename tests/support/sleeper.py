"""Drive the ``sleeper`` test model (tests/models/sleeper) with known delays, and the true quantiles."""

from __future__ import annotations

import math
import threading


def drive_sleeper(base: str, delays: list[list[float]], timeout: float = 300) -> None:
    """One client thread per list, each asking the sleeper for its delays (ms) in turn.

    Request ids are ``<ms>ms-<client>-<i>``; a client's failure fails the caller (a thread's
    exception is otherwise lost).
    """
    import numpy as np
    import tritonclient.http as httpclient

    errors: list[str] = []

    def worker(k: int) -> None:
        client = httpclient.InferenceServerClient(base.removeprefix("http://"))
        try:
            for i, ms in enumerate(delays[k]):
                inp = httpclient.InferInput("delay_ms", [1], "FP32")
                inp.set_data_from_numpy(np.array([ms], dtype=np.float32))
                client.infer("sleeper", [inp], request_id=f"{ms:g}ms-{k}-{i}")
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            client.close()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(len(delays))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
    assert not errors, errors[0]


def nearest_rank(values: list[float], q: float) -> float:
    """The true ``q`` quantile of ``values`` (nearest-rank definition)."""
    s = sorted(values)
    return s[max(1, math.ceil(q * len(s))) - 1]
