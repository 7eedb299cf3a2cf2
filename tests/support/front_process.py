"""What the real fronts the tests start in front of a Triton (HAProxy, Caddy) share: names they can route
by, and a process that is ready once its metrics endpoint answers."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

from tritonwatch.local.procs import Managed, http_ok, wait_until

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")
_F = TypeVar("_F", bound="FrontProcess")


def check_names(models: Sequence[str]) -> None:
    """Model names go into the front's config as they are: only those that need no quoting."""
    for m in models:
        assert _NAME.match(m), m


class FrontProcess:
    proc: Managed
    metrics_address: str  # host:port of the front's own /metrics

    def wait_ready(self: _F, timeout: float = 20.0) -> _F:
        def ready() -> bool:
            if not self.proc.alive():
                raise AssertionError(f"{self.proc.name} exited: {self.proc.log_tail()}")
            return http_ok(f"http://{self.metrics_address}/metrics")

        wait_until(ready, timeout, f"{self.proc.name}'s metrics")
        return self

    def stop(self) -> None:
        self.proc.stop()
