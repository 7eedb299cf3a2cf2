"""Keep the sidecar's resident memory flat on glibc.

Each scrape of a large Triton allocates and frees tens of MB of short-lived strings in one thread while
HTTP threads serve /metrics. glibc gives each thread its own malloc arena and keeps freed pages, so
the resident size crept up over minutes here although Python's own allocations were flat (measured
with tracemalloc). Two arenas are enough for the sidecar's few threads, and handing freed pages back
after a scrape keeps the resident size where the work needs it. Elsewhere (musl, macOS) these are
no-ops.
"""

from __future__ import annotations

import ctypes
import ctypes.util

_M_ARENA_MAX = -8


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt  # noqa: B018 - glibc only
        libc.malloc_trim  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


_libc = _glibc()


def limit_arenas(arenas: int = 2) -> None:
    """Call before threads start."""
    if _libc is not None:
        _libc.mallopt(_M_ARENA_MAX, arenas)


def trim() -> None:
    """Return freed heap pages to the system (a few ms)."""
    if _libc is not None:
        _libc.malloc_trim(0)
