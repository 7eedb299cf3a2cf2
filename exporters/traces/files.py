"""``TraceFileReader`` (``--trace-file``): Triton's mode=triton JSON trace files, each once complete."""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import Metric

from tritonwatch.exporters.source import Source
from tritonwatch.exporters.traces.join import TraceFileError, trace_file_timings
from tritonwatch.exporters.traces.timing import TimingSink

log = logging.getLogger(__name__)

_ROTATED = re.compile(r"^\.(\d+)$")
# A folder changed within this many seconds of being listed may change again without its mtime
# moving (a filesystem's timestamps are coarser than some writes): it is listed again until then.
RACY_SECONDS = 2.0


class TraceFileReader(Source):
    """Reads Triton's mode=triton trace files: ``PATH`` and its rotations ``PATH.N``, each once complete.

    A file is read when it parses as a whole JSON list (Triton writes each rotation at once). ``PATH``
    growing in place is read again from the first trace not yet seen; a rotation that changes was
    rewritten by a restarted Triton and is read whole. Files older than the quantile window at start
    are history and are skipped.

    The folder is listed again only when its mtime moves (a file created, renamed or removed); each
    tick costs one ``stat`` per file of ours, which is how a file growing or rewritten in place is
    seen. Files are never deleted: they are Triton's, written where the operator pointed it, and
    other readers (an archive, a trace viewer, a test computing the truth from them) may need them.
    Triton never removes its rotations either, so pruning old ones (by age or count) is the
    operator's job; ``docs/architecture.md`` says so.
    """

    target = "trace_file"

    def __init__(self, path: str, latency: TimingSink, interval: float, skip_older_than: float) -> None:
        super().__init__(interval)
        self.path = Path(path)
        self.latency = latency
        self.started = time.time()
        self.skip_before = self.started - skip_older_than
        # path -> (inode, size, mtime_ns, traces already recorded)
        self._seen: dict[str, tuple[int, int, int, int]] = {}
        self._names: list[str] = []  # our files in the folder, as last listed
        self._listed: int | None = None  # the folder's mtime_ns when listed
        self._racy = False
        self.files_read = 0
        self.bad_files = 0
        self.listings = 0

    def describe(self) -> str:
        return str(self.path)

    def _candidates(self) -> list[str]:
        """Our file names in the folder, listed again only when the folder changed."""
        folder = self.path.parent
        try:
            mtime = os.stat(folder).st_mtime_ns
        except OSError:
            self._listed = None
            return []
        if mtime == self._listed and not self._racy:
            return self._names
        try:
            names = os.listdir(folder)
        except OSError:
            self._listed = None
            return []
        base = self.path.name
        out = []
        for name in names:
            suffix = name[len(base) :] if name.startswith(base) else None
            if suffix == "" or (suffix is not None and _ROTATED.match(suffix)):
                out.append(name)
        self._names, self._listed = out, mtime
        self._racy = time.time() - mtime / 1e9 < RACY_SECONDS
        self.listings += 1
        return out

    def scrape(self) -> None:
        folder = self.path.parent
        live = set()
        changed: list[tuple[float, str, Path, os.stat_result]] = []
        for name in self._candidates():
            path = folder / name
            key = str(path)
            live.add(key)
            try:
                st = path.stat()
            except OSError:
                continue
            prev = self._seen.get(key)
            if prev and prev[:3] == (st.st_ino, st.st_size, st.st_mtime_ns):
                continue
            changed.append((st.st_mtime, name, path, st))
        # Oldest first, so timings reach the window in the order Triton wrote them.
        for _mtime, _name, path, st in sorted(changed, key=lambda c: (c[0], c[1])):
            self._read(path, st)
        self._seen = {k: v for k, v in self._seen.items() if k in live}

    def _read(self, path: Path, st: os.stat_result) -> None:
        key = str(path)
        prev = self._seen.get(key)
        ident = (st.st_ino, st.st_size, st.st_mtime_ns)
        if prev is None and st.st_mtime < self.skip_before:
            self._seen[key] = (*ident, -1)  # history from before the sidecar: not in the window
            return
        try:
            entries = json.loads(path.read_bytes())
            timings = trace_file_timings(entries)
        except (OSError, ValueError, RecursionError):
            return  # still being written: try again next round
        except TraceFileError as exc:
            self.bad_files += 1
            log.warning("--trace-file %s: %s", path, exc)
            self._seen[key] = (*ident, 0)
            return
        # Only PATH itself grows in place; a rotation that changes was rewritten (Triton restarted).
        grew = path == self.path and prev and prev[0] == st.st_ino and prev[1] <= st.st_size
        done = prev[3] if prev and grew else 0
        if done < 0:
            done = len(timings)  # history file that changed: only what is new
        self.latency.record(timings[done:])
        self._seen[key] = (*ident, len(timings))
        self.files_read += 1

    def collect(self) -> Iterator[Metric]:
        return iter(())
