"""Text exposition (0.0.4) of a registry, written for the sidecar's sizes, and served from a cache.

prometheus_client's ``generate_latest`` validates and escapes every label name of every sample; with
2,000 models the sidecar serves ~60,000 samples and that took ~0.8 s a scrape here. The families come
from our own collector (names from the catalog, label names fixed), so this writer escapes only label
values and HELP text, and formats values as prometheus_client does. A test holds its output to
``generate_latest``'s, sample for sample.

``CachedExposition`` renders once per sidecar update, not once per request: sources call ``changed()``
after each scrape, a background thread renders the body (and its gzip, once a client has asked for
gzip), and a request is a lookup of the bytes of the current version. A family object the collector
yields again unchanged (its derived families, built once per Triton scrape) is not written again:
its text is kept by identity.
"""

from __future__ import annotations

import gzip
import logging
import math
import threading

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

log = logging.getLogger(__name__)

_TYPES = {"counter": "counter", "gauge": "gauge", "histogram": "histogram", "summary": "summary"}


def _value(v: float) -> str:
    if v != v:
        return "NaN"
    if v == math.inf:
        return "+Inf"
    if v == -math.inf:
        return "-Inf"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v)}.0"
    return repr(float(v))


def _label_value(v: str) -> str:
    if "\\" in v or '"' in v or "\n" in v:
        return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return v


def family_text(metric: Metric) -> str:
    """One family's HELP, TYPE and sample lines."""
    mtype = metric.type
    name = metric.name
    if mtype == "counter":
        name += "_total"
    elif mtype == "info":
        name += "_info"
        mtype = "gauge"
    help_text = metric.documentation.replace("\\", "\\\\").replace("\n", "\\n")
    out = [f"# HELP {name} {help_text}\n# TYPE {name} {_TYPES.get(mtype, 'untyped')}\n"]
    append = out.append
    for s in metric.samples:
        if s.name.endswith("_created"):
            continue
        if s.labels:
            labels = ",".join([f'{k}="{_label_value(v)}"' for k, v in s.labels.items()])
            append(f"{s.name}{{{labels}}} {_value(s.value)}\n")
        else:
            append(f"{s.name} {_value(s.value)}\n")
    return "".join(out)


def exposition(registry: CollectorRegistry) -> bytes:
    return "".join(family_text(m) for m in registry.collect()).encode()


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an Accept-Encoding header admits gzip (``gzip;q=0`` refuses it; ``*`` admits it)."""
    if not accept_encoding:
        return False
    qualities: dict[str, float] = {}
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        q = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        qualities[coding.strip().lower()] = q
    for coding in ("gzip", "x-gzip"):
        if coding in qualities:
            return qualities[coding] > 0
    return qualities.get("*", 0.0) > 0


class _Body:
    """One rendered version: the text, and its gzip made at most once."""

    def __init__(self, version: int, text: bytes) -> None:
        self.version = version
        self.text = text
        self._gzip: bytes | None = None
        self._lock = threading.Lock()

    def gzipped(self) -> bytes:
        if self._gzip is None:
            with self._lock:
                if self._gzip is None:
                    self._gzip = gzip.compress(self.text, compresslevel=1)
        return self._gzip


class CachedExposition:
    """The registry's exposition, rendered once per ``changed()`` and served as cached bytes.

    ``body()`` never serves a version older than the last ``changed()`` before it: a request that
    arrives before the background render finishes waits for that render (it does not start another).
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._version = 0
        self._version_lock = threading.Lock()
        self._render_lock = threading.Lock()
        self._body: _Body | None = None
        self._texts: dict[int, tuple[Metric, str]] = {}  # id(family) -> (family, its text)
        self._gzip_wanted = False
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.renders = 0

    def changed(self) -> None:
        """Something the collector reads has changed: render again (in the background)."""
        with self._version_lock:
            self._version += 1
        self._wake.set()

    def body(self, gzipped: bool = False) -> bytes:
        body = self._body
        if body is None or body.version != self._version:
            body = self._render()
        if gzipped:
            self._gzip_wanted = True
            return body.gzipped()
        return body.text

    def _render(self) -> _Body:
        with self._render_lock:
            version = self._version
            body = self._body
            if body is not None and body.version == version:
                return body  # rendered while this thread waited
            texts: dict[int, tuple[Metric, str]] = {}
            parts: list[str] = []
            for metric in self.registry.collect():
                known = self._texts.get(id(metric))
                text = known[1] if known is not None and known[0] is metric else family_text(metric)
                texts[id(metric)] = (metric, text)
                parts.append(text)
            self._texts = texts
            body = self._body = _Body(version, "".join(parts).encode())
            self.renders += 1
        return body

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.body(gzipped=self._gzip_wanted)
            except Exception:  # a collector bug must not end rendering for good
                log.exception("rendering /metrics failed")

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="metrics-render", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
