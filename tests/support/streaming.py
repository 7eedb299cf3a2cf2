"""One streaming request through Triton's HTTP ``generate_stream``, on a connection of its own.

A client that keeps the connection alive between streamed requests races Triton closing it: the next
POST then fails with "Remote end closed connection without response" before any byte comes back (seen
in CI on a loaded 2-core machine, killing a test's client thread). A fresh loopback connection per
request costs well under a millisecond and leaves no kept-alive connection to race.
"""

from __future__ import annotations

import requests


def open_stream(url: str, body: dict[str, float]) -> requests.Response:
    """POST ``body`` and return the streaming response; use it as a context manager."""
    return requests.post(url, json=body, stream=True, timeout=30, headers={"Connection": "close"})
