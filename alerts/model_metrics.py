"""Buckets that fit the SLO: Triton's ``model_metrics`` stanza per model with a latency objective.

Triton (>= 2.65, ``--metrics-config histogram_latencies=true``) observes
``nv_inference_first_response_histogram_ms`` for every model, in whole milliseconds (integer division:
25.9 ms counts as 25), with default buckets 100, 500, 2000, 5000 ms unless the model's config sets
others. The sidecar serves that histogram as a non-decoupled model's request latency (and a decoupled
one's time to first token); the SLO's SLI reads the bucket whose bound is the threshold, so it is exact
only where the threshold is one of Triton's bounds.

* ``stanza_files``: ``rules --out DIR`` writes ``DIR/triton/<model>.model_metrics.pbtxt`` per model with a
  latency or time-to-first-token objective: every such threshold in ms plus a ladder around it (a tenth
  to ten times the threshold, finer near it, so p50-p99 interpolate within narrow buckets). Merge it into
  the model's ``config.pbtxt`` and reload the model (``init`` says how).
* ``check``: ``rules --triton URL`` reads each such model's config and warns where its buckets do not
  hold a threshold: the SLI then reads no bucket at that bound, and the nearest bounds say how far off an
  estimate between them could be. Which histogram the SLI reads depends on the server's version
  (``GET /v2``, ``source``): Triton keeps the family for every model from 2.65 and for decoupled ones
  from 2.52; elsewhere the sidecar serves its trace histogram, whose bounds are the sidecar's
  (``catalog.DEFAULT_BUCKETS`` unless ``--latency-buckets``), so the threshold is checked against those.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from tritonwatch import catalog
from tritonwatch.fetch import ScrapeError
from tritonwatch.modelconfig import ModelConfig
from tritonwatch.slo import SLO, SLOFile
from tritonwatch.tritonapi import TritonClient

log = logging.getLogger(__name__)

FAMILY = catalog.TRITON_FIRST_RESPONSE
TRITON_DEFAULT_BUCKETS_MS = (100.0, 500.0, 2000.0, 5000.0)  # Triton core's default for this family
# Multiples of a threshold that make the ladder: coarse far from it, fine near it (p99 near the
# threshold is what an SLO asks about), from a tenth to ten times it.
LADDER = (0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.1, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0)
STANZA_DIR = "triton"
SUFFIX = ".model_metrics.pbtxt"
TIMEOUT = 10.0
VLLM_BACKEND = "vllm"
# Triton versions that keep FAMILY (docs/latency-sources.md; server#8580, core#464)
EVERY_MODEL_SINCE = (2, 65)
DECOUPLED_SINCE = (2, 52)
SIDECAR_BUCKETS_MS = tuple(round(b * 1000.0, 6) for b in catalog.DEFAULT_BUCKETS)


def parse_version(text: str) -> tuple[int, int] | None:
    """``(major, minor)`` of a Triton server version such as ``2.51.0``; None if it is not one."""
    found = re.match(r"(\d+)\.(\d+)", text.strip())
    return (int(found[1]), int(found[2])) if found else None


@dataclass(frozen=True)
class Source:
    """The histogram a model's latency SLI reads, and its bucket bounds in ms."""

    native: bool  # Triton's own FAMILY; else the sidecar's trace histogram
    buckets_ms: tuple[float, ...]
    origin: str  # where the bounds come from, for messages
    why: str  # one line: which histogram and why

    @property
    def name(self) -> str:
        return f"Triton's own {FAMILY}" if self.native else "the sidecar's trace histogram"

    def holds(self, threshold_ms: float) -> bool:
        return any(abs(b - threshold_ms) <= 1e-9 * max(1.0, threshold_ms) for b in self.buckets_ms)


def source(version: str, cfg: ModelConfig) -> Source:
    """Which histogram a model's request latency (time to first token if decoupled) comes from on a
    Triton of ``version`` ("" when unknown: read as one that keeps none)."""
    parsed = parse_version(version)
    served = f"Triton {version}" if parsed else "a Triton of unknown version"
    every = parsed is not None and parsed >= EVERY_MODEL_SINCE
    decoupled = cfg.decoupled and parsed is not None and parsed >= DECOUPLED_SINCE
    if every or decoupled:
        set_here = cfg.buckets(FAMILY)
        buckets = tuple(set_here) if set_here else TRITON_DEFAULT_BUCKETS_MS
        since = ">= 2.65: every model" if every else ">= 2.52: decoupled models"
        return Source(
            True,
            buckets,
            "its model_metrics" if set_here else "Triton's defaults",
            f"{served} keeps {FAMILY} for this model ({since})",
        )
    return Source(
        False,
        SIDECAR_BUCKETS_MS,
        "the sidecar's default buckets",
        f"{served} keeps no {FAMILY} for this model (every model from 2.65, decoupled ones from 2.52)",
    )


def thresholds_ms(slo: SLO, ttft: bool = True) -> tuple[float, ...]:
    """The thresholds (ms) that read Triton's first-response histogram: request latency and time to
    first token (a decoupled model's first response; ``ttft`` False where the backend's own histogram
    feeds it, as vLLM's does); not inter-token latency."""
    kinds = (slo.latency, slo.time_to_first_token) if ttft else (slo.latency,)
    found = {round(lat.threshold * 1000.0, 6) for lat in kinds if lat}
    return tuple(sorted(found))


def ladder(thresholds: Sequence[float]) -> tuple[float, ...]:
    """Every threshold, and rungs around each in whole milliseconds (Triton counts whole ms: a bound
    under 1 ms or between two integers holds the same requests as the integer below it)."""
    out = set(thresholds)
    for t in thresholds:
        for m in LADDER:
            rung = math.floor(t * m)
            if rung >= 1:
                out.add(float(rung))
    return tuple(sorted(out))


def _num(ms: float) -> str:
    return str(int(ms)) if ms == int(ms) else repr(ms)


def stanza(thresholds: Sequence[float]) -> str:
    """The ``model_metrics`` block (protobuf text format of Triton's ``ModelConfig``)."""
    buckets = ", ".join(_num(b) for b in ladder(thresholds))
    return (
        "model_metrics {\n"
        "  metric_control: [\n"
        "    {\n"
        f'      metric_identifier: {{ family: "{FAMILY}" }}\n'
        f"      histogram_options: {{ buckets: [ {buckets} ] }}\n"
        "    }\n"
        "  ]\n"
        "}\n"
    )


def stanza_files(spec: SLOFile) -> dict[str, str]:
    """``triton/<model>.model_metrics.pbtxt`` -> its text (no header), per model with such a threshold."""
    out = {}
    for slo in spec.slos:
        found = thresholds_ms(slo)
        if found:
            listed = ", ".join(f"{_num(t)} ms" for t in found)
            note = (
                f"# Model {slo.model}: the buckets of Triton's {FAMILY} hold the SLO's threshold ({listed}),\n"
                "# so its SLI is exact. Add this block to the model's config.pbtxt, run Triton with\n"
                "# --metrics-config histogram_latencies=true, and reload the model (or restart Triton).\n"
            )
            out[f"{STANZA_DIR}/{slo.model}{SUFFIX}"] = note + stanza(found)
    return out


def bounds_around(buckets: Sequence[float], threshold: float) -> tuple[float, float]:
    """The bucket bounds (ms) on either side of ``threshold``: 0 below the first, +Inf above the last."""
    below = max((b for b in buckets if b < threshold), default=0.0)
    above = min((b for b in buckets if b > threshold), default=math.inf)
    return below, above


def check(spec: SLOFile, base: str, timeout: float = TIMEOUT) -> list[str]:
    """One warning line per model whose latency histogram, on this server's version, has no bucket at
    a threshold (logged and returned)."""
    client = TritonClient(base, timeout)
    lines = []
    try:
        version = ""
        if any(thresholds_ms(s) for s in spec.slos):
            try:
                version = client.server_version()
            except ScrapeError as exc:
                lines.append(
                    f"{base}/v2: server version not read ({exc}): checked as a Triton that keeps no {FAMILY}"
                )
        for i, slo in enumerate(spec.slos):
            found = thresholds_ms(slo)
            if not found:
                continue
            where = f"spec.slos[{i}] ({slo.model})"
            try:
                cfg = client.config(slo.model)
            except (ScrapeError, ValueError) as exc:
                lines.append(f"{where}: latency buckets not checked: {exc}")
                continue
            # vLLM's own time-to-first-token histogram wins over Triton's (exporters/llm.py)
            found = thresholds_ms(slo, ttft=cfg.backend != VLLM_BACKEND)
            src = source(version, cfg)
            for t in found:
                if src.holds(t):
                    continue
                below, above = bounds_around(src.buckets_ms, t)
                span = "+Inf" if math.isinf(above) else f"{_num(above)} ms"
                off = "the whole tail" if math.isinf(above) else f"{_num(above - below)} ms"
                fix = (
                    f"apply {STANZA_DIR}/{slo.model}{SUFFIX} from rules --out"
                    if src.native
                    else "run the sidecar with --latency-buckets holding it, or choose a threshold among them"
                )
                lines.append(
                    f"{where}: threshold {_num(t)} ms is not a bucket of {src.name} ({src.origin}: "
                    f"{', '.join(_num(b) for b in src.buckets_ms)} ms; {src.why}): the SLI would be inexact "
                    f"(no bucket to read there: its requests are left out of the SLI); any latency between "
                    f"{_num(below)} ms and {span} is indistinguishable (off by up to {off}); {fix}"
                )
    finally:
        client.close()
    for line in lines:
        log.warning("%s", line)
    return lines


def init_notes(model: str, threshold: float, src: Source) -> list[str]:
    """What ``tritonwatch init`` says beside a proposed latency threshold (seconds): which histogram the
    SLI reads on this server and why, and what that histogram needs."""
    ms = round(threshold * 1000.0, 6)
    head = f"latency source: {src.name}: {src.why}" + (", no tracing needed." if src.native else ".")
    if not src.native:
        return [
            head,
            "It needs sampled traces: Triton with trace files (or OpenTelemetry at rate 10 or more, never 1",
            "on 2.51) and the sidecar reading them (--trace-file or --otlp-listen; docs/tracing.md).",
            "The threshold is one of the sidecar's default bucket bounds, so the SLI is exact.",
        ]
    lines = [head]
    if src.holds(ms):
        lines.append(f"The threshold is one of its bucket bounds ({src.origin}), so the SLI is exact.")
    lines += [
        f"Finer buckets around the threshold: add to models/{model}/config.pbtxt (also written by rules --out as",
        f"{STANZA_DIR}/{model}{SUFFIX}):",
        *(f"  {line}" for line in stanza([ms]).splitlines()),
        "then run Triton with --metrics-config histogram_latencies=true and reload the model",
        f"(POST /v2/repository/models/{model}/load, or restart Triton).",
    ]
    return lines
