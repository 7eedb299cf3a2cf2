"""Text exposition (0.0.4) of a registry, written for the sidecar's sizes, and served from a cache.

prometheus_client's ``generate_latest`` validates and escapes every label name of every sample; with
2,000 models the sidecar serves ~60,000 samples and that took ~0.8 s a scrape here. The families come
from our own collector (names from the catalog, label names fixed), so this writer escapes only label
values and HELP text, and formats values as prometheus_client does. A test holds its output to
``generate_latest``'s, sample for sample.

``CachedExposition`` renders once per sidecar update, not once per request: sources say when an
update begins and ends, a background thread prepares the costly families and renders the body, the
first request that asks for gzip compresses it once, and a request is a lookup of those bytes. A
family object the collector yields again unchanged (its derived families, built once per Triton
scrape) is not written again: its text is kept by identity.
"""

from __future__ import annotations

import gzip
import logging
import math
import threading
from collections.abc import Callable, Sequence
from typing import cast

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

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


_MAX_PREFIXES = 500_000  # per family: label churn starts the family's text cache afresh
# The cache is started afresh too once it holds twice the label sets the family's last build used
# (at least _MIN_PREFIXES): models that come and go (6,000 new names a scrape) cost memory in
# proportion to what is served, not to how many names have ever been seen.
_MIN_PREFIXES = 10_000


class Texts:
    """Label text per sample name and label values, kept across builds of the same families.

    The sidecar's large families carry the same models every update, so a sample's line costs a
    lookup and a value format. One per owner of families (a sidecar's collector and parts share
    theirs): two sidecars in a process never see each other's labels. A family built without one
    writes every label text afresh (the same text)."""

    def __init__(self) -> None:
        self.prefixes: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], str]] = {}
        self.last_build: dict[tuple[str, tuple[str, ...]], TextFamily] = {}
        # Per sample name and label names: the label sets of the last add_many and their prefixes.
        self.last_known: dict[tuple[str, tuple[str, ...]], tuple[list[tuple[str, ...]], list[str]]] = {}


class TextFamily(Metric):
    """A gauge or counter family that writes its exposition lines as samples are added.

    For the sidecar's large families (thousands of models): ``family_text`` joins the lines it wrote,
    and the ``Sample`` objects other readers (tests, ``generate_latest``) see are made only if asked for.
    """

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        typ: str = "gauge",
        texts: Texts | None = None,
    ) -> None:
        if typ not in ("gauge", "counter"):
            raise ValueError(f"TextFamily {name}: gauge or counter, not {typ}")
        self._built: list[Sample] | None = []
        super().__init__(name, documentation, typ)
        self._labelnames = tuple(labels)
        self._sample_name = name + "_total" if typ == "counter" else name
        key = self._key = (self._sample_name, self._labelnames)
        self._texts = texts = texts or Texts()
        prefixes = texts.prefixes.get(key)
        last = texts.last_build.get(key)
        limit = min(_MAX_PREFIXES, max(_MIN_PREFIXES, 2 * len(last._labels) if last else 0))
        if prefixes is None or len(prefixes) > limit:
            prefixes = texts.prefixes[key] = {}
            texts.last_known.pop(key, None)  # its prefixes are the old cache's
        texts.last_build[key] = self
        self._prefixes = prefixes
        # Label sets and values side by side, not as (labels, value) pairs: tens of thousands of
        # pairs a build would be as many objects for the garbage collector to walk.
        self._labels: list[tuple[str, ...]] = []
        self._values: list[float] = []
        self.lines: list[str] = []

    @property  # type: ignore[override]
    def samples(self) -> list[Sample]:
        if self._built is None:
            names = self._labelnames
            self._built = [
                Sample(self._sample_name, dict(zip(names, labels, strict=True)), value, None, None)
                for labels, value in zip(self._labels, self._values, strict=True)
            ]
        return self._built

    @samples.setter
    def samples(self, value: list[Sample]) -> None:
        if value:  # Metric.__init__ sets it empty; samples are added by add_metric only
            raise TypeError("TextFamily samples are added with add_metric")

    def add_metric(self, labels: Sequence[str], value: float) -> None:
        key = tuple(labels)
        prefix = self._prefixes.get(key)
        if prefix is None:
            prefix = self._prefix(key)
        self._labels.append(key)
        self._values.append(value)
        self.lines.append(f"{prefix}{_value(value)}\n")
        self._built = None

    def add_many(self, labels: Sequence[tuple[str, ...]], values: Sequence[float]) -> None:
        """``add_metric`` for many samples at once, the per-sample work done in C where it can be."""
        if len(labels) != len(values):
            raise ValueError(f"{self.name}: {len(labels)} label sets for {len(values)} values")
        if not labels:
            return
        floats = list(map(float, values))
        # A label set's prefix depends on it alone: the same label sets as this family's last
        # add_many (the sidecar's large families, every update) are the same prefixes. Comparing
        # two lists of the very same tuples costs a pointer comparison each.
        last = self._texts.last_known.get(self._key)
        if last is not None and last[0] == labels:
            known = last[1]
        else:
            found = list(map(self._prefixes.get, labels))
            if None in found:
                for i, prefix in enumerate(found):
                    if prefix is None:
                        found[i] = self._prefix(labels[i])
            known = cast(list[str], found)  # every None replaced
            self._texts.last_known[self._key] = (list(labels), known)
        if all(map(math.isfinite, floats)):
            texts = list(map(repr, floats))  # what _value gives for every finite float
        else:  # nan, inf: written as prometheus_client writes them
            texts = list(map(_value, floats))
        self._labels.extend(labels)
        self._values.extend(floats)
        self.lines.append("\n".join(map(str.__add__, known, texts)) + "\n")  # type: ignore[arg-type]
        self._built = None

    def _prefix(self, key: tuple[str, ...]) -> str:
        body = ",".join([f'{k}="{_label_value(v)}"' for k, v in zip(self._labelnames, key, strict=True)])
        prefix = self._prefixes[key] = f"{self._sample_name}{{{body}}} " if body else f"{self._sample_name} "
        return prefix


def _header(metric: Metric) -> str:
    mtype = metric.type
    name = metric.name
    if mtype == "counter":
        name += "_total"
    elif mtype == "info":
        name += "_info"
        mtype = "gauge"
    help_text = metric.documentation.replace("\\", "\\\\").replace("\n", "\\n")
    return f"# HELP {name} {help_text}\n# TYPE {name} {_TYPES.get(mtype, 'untyped')}\n"


def family_text(metric: Metric) -> str:
    """One family's HELP, TYPE and sample lines."""
    if isinstance(metric, TextFamily):
        return _header(metric) + "".join(metric.lines)
    out = [_header(metric)]
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
    """One rendered text, and its gzip made at most once."""

    def __init__(self, text: bytes) -> None:
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
    """The registry's exposition, rendered once per update and served as cached bytes.

    Sources say when an update ``begin()``s and ``end()``s. ``body()`` serves the cached bytes when no
    update ended since they were rendered and none is under way; otherwise it renders (so a reader
    never sees less than what the sidecar's state showed when its request came). What makes a render
    costly, the derived families of thousands of models, is built apart by the ``prepare`` callables,
    which the background thread runs after each update: a request's render reuses what they built
    (at most one update behind while they run) and costs a join of cached texts. A body is compressed
    for gzip once, by the first request that asks for it.
    """

    def __init__(self, registry: CollectorRegistry, prepare: Sequence[Callable[[], bool]] = ()) -> None:
        self.registry = registry
        self.prepare = list(prepare)
        self._version = 0
        self._busy = 0  # updates under way
        self._state_lock = threading.Lock()
        self._render_lock = threading.Lock()
        self._body: _Body | None = None
        self._body_version = -1
        self._last: tuple[list[bytes], _Body | None] = ([], None)  # the last render: its texts, its body
        self._texts: dict[int, tuple[Metric, bytes]] = {}  # id(family) -> (family, its text)
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.renders = 0

    def begin(self) -> None:
        with self._state_lock:
            self._busy += 1

    def end(self) -> None:
        with self._state_lock:
            self._busy -= 1
            self._version += 1
        self._wake.set()

    def changed(self) -> None:
        """Something the collector reads has changed."""
        self.begin()
        self.end()

    def _current(self, body: _Body) -> bool:
        return self._body_version == self._version and not self._busy

    def body(self, gzipped: bool = False) -> bytes:
        body = self._body
        if body is None or not self._current(body):
            body = self._render()
        if gzipped:
            return body.gzipped()
        return body.text

    def _render(self) -> _Body:
        with self._render_lock:
            with self._state_lock:
                version, busy = self._version, self._busy
            body = self._body
            if body is not None and self._body_version == version and not busy:
                return body  # rendered while this thread waited
            texts: dict[int, tuple[Metric, bytes]] = {}
            parts: list[bytes] = []
            for metric in self.registry.collect():
                known = self._texts.get(id(metric))
                if known is not None and known[0] is metric:
                    text = known[1]
                else:
                    text = family_text(metric).encode()
                texts[id(metric)] = (metric, text)
                parts.append(text)
            self._texts = texts
            # Most renders (another source's step, an update under way) change nothing: the same
            # texts, mostly the very same objects, are the same bytes and the same gzip.
            last_parts, body = self._last
            if body is None or parts != last_parts:
                body = _Body(b"".join(parts))
                self._last = (parts, body)
            if not busy:  # under way, the render is this request's alone
                self._body, self._body_version = body, version
            self.renders += 1
        return body

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                built = [prepare() for prepare in self.prepare]
                if any(built):
                    self.changed()  # what a request rendered meanwhile lacks these
                self.body()  # gzip on the first request that asks: many bodies are never asked for it
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
