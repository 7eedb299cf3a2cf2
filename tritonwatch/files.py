"""Files the project writes: only over a file it wrote before, and atomically.

Every command that writes (``rules --out``, ``init --out``, ``advise --textfile``) starts its files
with a marker line; a path that holds anything else (another file, a link, a FIFO) is left alone.
A reader (Prometheus, the textfile collector, an editor) sees the old file or the new one, never half.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def written_by(path: Path, marker: str) -> bool:
    """Whether ``path`` is a regular file starting with ``marker`` (never follows a link, never
    opens a FIFO or a device, never reads more than the marker)."""
    head = marker.encode()
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            return False
        with path.open("rb") as f:
            return f.read(len(head)) == head
    except OSError:
        return False


def may_write(path: Path, marker: str) -> bool:
    """Whether ``path`` is free, or holds a file that ``marker`` says this project wrote."""
    return not os.path.lexists(path) or written_by(path, marker)


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename (mode 0644)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
