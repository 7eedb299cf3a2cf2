"""One scraping client of the sidecar's /metrics for ``bench.scrape``: GETs every ``--every`` seconds over
a kept-alive connection (as Prometheus does), and writes each GET's seconds (request sent to the last
byte read) to ``--out`` as JSON. A process of its own, so that no client's timing waits on another's GIL.

Run: ``python -m bench.client --url URL --seconds S [--gzip] [--every 1] [--offset 0] --out FILE``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import time
import urllib.parse
from pathlib import Path


def scrape(url: str, seconds: float, every: float, offset: float, gzip: bool) -> list[float]:
    parts = urllib.parse.urlsplit(url)
    headers = {"Accept-Encoding": "gzip" if gzip else "identity"}
    conn: http.client.HTTPConnection | None = None
    out: list[float] = []
    start = time.monotonic() + offset
    end = time.monotonic() + seconds
    next_at = start
    while True:
        now = time.monotonic()
        if next_at > now:
            time.sleep(next_at - now)
        if time.monotonic() >= end:
            break
        t0 = time.perf_counter()
        try:
            if conn is None:
                conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=10)
            conn.request("GET", parts.path or "/metrics", headers=headers)
            resp = conn.getresponse()
            resp.read()
            ok = resp.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            if conn is not None:
                conn.close()
            conn = None
        out.append(time.perf_counter() - t0 if ok else float("nan"))
        next_at += every
    if conn is not None:
        conn.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.client", description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--every", type=float, default=1.0)
    ap.add_argument("--offset", type=float, default=0.0)
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    times = scrape(args.url, args.seconds, args.every, args.offset, args.gzip)
    Path(args.out).write_text(json.dumps(times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
