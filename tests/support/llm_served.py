"""A real sidecar fed scraped payloads on a fake clock, and the series it then serves."""

from __future__ import annotations

import requests
from prometheus_client.parser import text_string_to_metric_families

from support.static_endpoint import StaticEndpoint
from tritonwatch.exporters.sidecar import Sidecar

SECONDS = 10.0

Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def served_twice(first: str, second: str) -> Series:
    """The sidecar's /metrics after scraping ``first`` then ``second`` 10 s later (fake clock)."""
    return served([first, second])


def served(payloads: list[str | None], api: str | None = None) -> Series:
    """The sidecar's /metrics after scraping each payload 10 s apart (None: the endpoint is gone).

    ``api``: a Triton API it reads once first; without one nothing listens on the API port and the
    triton_api target is down, which costs only its own families."""
    endpoint = StaticEndpoint(b"").start()
    clock = FakeClock()
    sidecar = Sidecar.local(api or "http://127.0.0.1:9", endpoint.url, window=60.0, timeout=2.0)
    sidecar.metrics.clock = clock
    try:
        if api is not None:
            assert sidecar.api.step()
        for payload in payloads:
            if payload is None:
                endpoint.stop()
                assert not sidecar.metrics.step()
            else:
                endpoint.payload = payload.encode()
                assert sidecar.metrics.step()
            clock.now += SECONDS
        sidecar.server.start()
        text = requests.get(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=10).text
    finally:
        sidecar.stop()
        endpoint.stop()
    out: Series = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out
