"""The SLO file (``apiVersion: tritonwatch/v1``): parsed and validated once into typed objects.

Everything downstream (rules, Alertmanager config, promtool tests, the capacity report) works on
``SLOFile`` only, never on raw YAML. Every error is a ``UsageError`` whose one line names the file and
the field, e.g. ``alerts/slo.yaml: spec.slos[0].availability.objective: must be between 0 and 100
(got 150)``. The format is documented field by field in ``docs/slo-file.md``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml

from tritonwatch import catalog, safeyaml, validators
from tritonwatch.durations import format_duration, parse_duration
from tritonwatch.errors import UsageError
from tritonwatch.frontcounters import FrontCounters
from tritonwatch.fronthistogram import FrontHistogram, parse_front_histogram
from tritonwatch.secrets_check import find_secret
from tritonwatch.selector import parse_selector
from tritonwatch.validators import kind as _kind

API_VERSION = "tritonwatch/v1"
KIND = "ServiceLevelObjectives"

DEFAULT_RUNBOOK_BASE_URL = "https://github.com/tritonwatch/tritonwatch/blob/main/docs/runbooks"
DEFAULT_UP_JOB = "triton"
DEFAULT_GPU_MEMORY_USED_MAX = 0.95
DEFAULT_LATENCY_MIN_SAMPLES = 20
MAX_MIN_REQUESTS = 10**9
_WHOLE_MIN_REQUESTS = f"must be a whole number from 1 to {MAX_MIN_REQUESTS}"
# Alertmanager receivers the generated routing tree uses; each may be configured in the SLO file.
RECEIVERS = ("default", "page", "ticket", "watchdog")
_MODEL_NAME = re.compile(r"[A-Za-z0-9_.\-]+")  # fullmatch: "$" would let a final newline through
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# A link in alert annotations (Go templates) and in YAML: no spaces, quotes, braces or backslashes.
_RUNBOOK_URL = re.compile(r"https?://[^\s\"'<>{}\\`]+")
_RESERVED_GROUPING = {catalog.MODEL, catalog.VERSION, "slo", "severity", "alertname", "le", "__name__"}


def valid_model_name(name: str) -> bool:
    """Whether ``spec.slos[].model`` accepts ``name`` (what ``tritonwatch init`` may write)."""
    return bool(_MODEL_NAME.fullmatch(name)) and len(name) <= 200


@dataclass(frozen=True)
class Availability:
    """Share of requests (percent) that succeed; failures with reason CANCELED are the client's.

    ``source`` None: from Triton's counters; else from the front's (``availability.from``).
    """

    objective: Decimal
    source: FrontCounters | None = None
    # A window that saw fewer requests counts its failures against this many (burn alerts only):
    # at low traffic one failure is a large share of the window, not a fast burn of the budget.
    min_requests: int = 1


def default_min_requests(objective: Decimal) -> int:
    """``1 / (2 x budget)`` requests (500 for 99.9%): one failed request alone then reads as a 2x burn,
    a third of the slowest page (6x), so a page needs more than 3 failures in 30 minutes and 6 hours."""
    budget = (Decimal(100) - objective) / Decimal(100)
    return max(1, math.ceil(1 / (2 * budget)))


@dataclass(frozen=True)
class Latency:
    """Share of requests (percent) whose request phase is at most ``threshold`` seconds.

    ``source`` None: from the sidecar's histogram; else from the front's (``latency.from``).
    """

    threshold: float
    objective: Decimal
    min_samples: int = DEFAULT_LATENCY_MIN_SAMPLES
    source: FrontHistogram | None = None


@dataclass(frozen=True)
class Capacity:
    """What one deployment of the model is sized for; read by the capacity report."""

    max_request_rate: float


@dataclass(frozen=True)
class SLO:
    model: str
    availability: Availability | None = None
    latency: Latency | None = None
    # the operational objectives, one attribute per catalog.OPERATIONAL_OBJECTIVES entry (``field``);
    # an objective the catalog adds later without an attribute here has its limit in ``limits``
    queue_time_ratio_max: float | None = None
    batch_efficiency_min: float | None = None
    cache_hit_ratio_min: float | None = None
    limits: tuple[tuple[str, float], ...] = ()
    capacity: Capacity | None = None
    # LLM serving (streaming models): the same shape as latency, on the LLM histograms.
    time_to_first_token: Latency | None = None
    inter_token_latency: Latency | None = None
    # Generated tokens per second one deployment is sized for (the capacity report's LLM section).
    max_tokens_per_second: float | None = None

    def latency_for(self, kind: str) -> Latency | None:
        """The latency-shaped objective of ``kind`` (latency, time_to_first_token, inter_token_latency)."""
        return getattr(self, kind) if kind in LATENCY_KINDS else None

    def limit(self, objective: catalog.OperationalObjective) -> float | None:
        """This model's limit for an operational objective, None when the file sets none."""
        if objective.field in _SLO_ATTRIBUTES:
            value: float | None = getattr(self, objective.field)
            return value
        return dict(self.limits).get(objective.field)


_SLO_ATTRIBUTES = frozenset(SLO.__dataclass_fields__)
# Objectives that are a share of requests under a threshold of a latency histogram.
LATENCY_KINDS = ("latency", "time_to_first_token", "inter_token_latency")


@dataclass(frozen=True)
class Objective:
    """One burn-rate SLO: a name (the ``slo`` label), its model, its kind, its error budget and its SLI as
    the SLO file states it (``availability`` or ``latency``: the one of its kind, the other None)."""

    name: str
    model: str
    kind: str  # "availability" | one of LATENCY_KINDS
    objective: Decimal  # percent
    availability: Availability | None = field(default=None, compare=False, repr=False)
    latency: Latency | None = field(default=None, compare=False, repr=False)  # and the LLM kinds'

    @property
    def budget(self) -> Decimal:
        """The error budget as a ratio: 99.9 -> 0.001 (exact, no float noise in generated rules)."""
        return (Decimal(100) - self.objective) / Decimal(100)


@dataclass(frozen=True)
class SLOFile:
    name: str
    window: float  # seconds
    slos: tuple[SLO, ...]
    grouping: tuple[str, ...] = ()
    runbook_base_url: str = DEFAULT_RUNBOOK_BASE_URL
    up_job: str = DEFAULT_UP_JOB
    gpu_memory_used_max: float = DEFAULT_GPU_MEMORY_USED_MAX
    receivers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @property
    def window_text(self) -> str:
        return format_duration(self.window)

    def objectives(self) -> tuple[Objective, ...]:
        return self._objectives

    # Derived once per file (the dataclass is frozen): generation asks for them per rule and per case.
    @cached_property
    def _objectives(self) -> tuple[Objective, ...]:
        out: list[Objective] = []
        for s in self.slos:
            if s.availability:
                a = s.availability
                out.append(Objective(f"{s.model}-availability", s.model, "availability", a.objective, a))
            if s.latency:
                out.append(
                    Objective(
                        f"{s.model}-latency", s.model, "latency", s.latency.objective, latency=s.latency
                    )
                )
            for kind in LATENCY_KINDS[1:]:
                lat = s.latency_for(kind)
                if lat:
                    name = f"{s.model}-{kind.replace('_', '-')}"
                    out.append(Objective(name, s.model, kind, lat.objective, latency=lat))
        return tuple(out)

    def slo_for(self, model: str) -> SLO:
        return self._by_model[model]

    @cached_property
    def _by_model(self) -> dict[str, SLO]:
        return {s.model: s for s in reversed(self.slos)}  # the first, were a model there twice


# --- parsing ------------------------------------------------------------------------------------
class _Fields:
    """A mapping being read: unknown keys and missing required keys become errors naming the field."""

    def __init__(self, raw: object, where: str, allowed: tuple[str, ...]) -> None:
        if not isinstance(raw, dict):
            raise UsageError(f"{where or '(top level)'}: must be a mapping (got {_kind(raw)})")
        for key in raw:
            if key not in allowed:
                raise UsageError(
                    f"{_join(where, str(key))}: unknown field (expected one of: {', '.join(allowed)})"
                )
        self.raw: dict[str, Any] = raw
        self.where = where

    def at(self, key: str) -> str:
        return _join(self.where, key)

    def has(self, key: str) -> bool:
        return self.raw.get(key) is not None

    def required(self, key: str) -> Any:
        if not self.has(key):
            raise UsageError(f"{self.at(key)}: required")
        return self.raw[key]

    def string(self, key: str, default: str | None = None) -> str:
        if not self.has(key):
            if default is None:
                raise UsageError(f"{self.at(key)}: required")
            return default
        value = self.raw[key]
        if not isinstance(value, str) or not value:
            raise UsageError(f"{self.at(key)}: must be a non-empty string (got {_kind(value)})")
        return value

    def number(
        self, key: str, check: Callable[[Decimal], str | None], default: float | None = None
    ) -> Decimal:
        if not self.has(key):
            if default is None:
                raise UsageError(f"{self.at(key)}: required")
            return Decimal(str(default))
        value = self.raw[key]
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise UsageError(f"{self.at(key)}: must be a number (got {_kind(value)})")
        try:
            d = Decimal(str(value))
        except InvalidOperation:
            raise UsageError(f"{self.at(key)}: must be a number (got {value!r})") from None
        if not d.is_finite():
            raise UsageError(f"{self.at(key)}: must be a finite number (got {value!r})")
        problem = check(d)
        if problem:
            raise UsageError(f"{self.at(key)}: {problem} (got {value})")
        return d


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _percent(d: Decimal) -> str | None:
    return None if Decimal(0) < d < Decimal(100) else "must be between 0 and 100"


def _ratio(d: Decimal) -> str | None:
    # Exclusive: a limit of 0 or 1 could never be crossed (or always is), so its alert means nothing.
    return None if Decimal(0) < d < Decimal(1) else "must be a ratio between 0 and 1"


def _positive(d: Decimal) -> str | None:
    return None if d > 0 else "must be greater than 0"


def _bucket(threshold: float) -> float | None:
    for b in catalog.DEFAULT_BUCKETS:
        if abs(b - threshold) <= 1e-9 * max(1.0, b):
            return b
    return None


def _parse_latency(raw: object, where: str, front: bool = False) -> Latency:
    """``front``: request latency, which may read a front's histogram (``from``), whose bounds are its
    own, or the sidecar's, whose bounds on Triton 2.65+ are the model's ``model_metrics`` buckets
    (``tritonwatch rules`` writes a stanza with every threshold): any positive threshold. A threshold
    the served histogram lacks leaves the SLI blind and raises ``TritonSLONoData`` naming the bound."""
    f = _Fields(raw, where, ("threshold", "objective", "min_samples", *(("from",) if front else ())))
    raw_threshold = f.required("threshold")
    if isinstance(raw_threshold, int | float) and not isinstance(raw_threshold, bool):
        threshold = float(raw_threshold)  # plain number: seconds
    else:
        threshold = parse_duration(raw_threshold, f.at("threshold"))
    source = parse_front_histogram(f.raw["from"], f.at("from")) if f.has("from") else None
    if front and not threshold > 0:
        raise UsageError(f"{f.at('threshold')}: must be greater than 0 (got {raw_threshold})")
    bucket = (_bucket(threshold) or threshold) if front else _bucket(threshold)
    if bucket is None:
        choices = ", ".join(format_duration(b) for b in catalog.DEFAULT_BUCKETS)
        raise UsageError(
            f"{f.at('threshold')}: must be a latency histogram bucket boundary (got {raw_threshold}; one of {choices})"
        )
    objective = f.number("objective", _percent)
    min_samples = f.number(
        "min_samples",
        lambda d: None if d >= 1 and d == int(d) else "must be a whole number of at least 1",
        DEFAULT_LATENCY_MIN_SAMPLES,
    )
    return Latency(threshold=bucket, objective=objective, min_samples=int(min_samples), source=source)


def _parse_front(raw: object, where: str) -> FrontCounters:
    f = _Fields(raw, where, ("errors", "total"))
    errors = parse_selector(f.required("errors"), f.at("errors"))
    total = parse_selector(f.required("total"), f.at("total"))
    if errors == total:
        raise UsageError(f"{f.at('errors')}: selects the same series as {f.at('total')}")
    return FrontCounters(errors=errors, total=total)


def _one(raw: object, where: str, key: str, check: Callable[[Decimal], str | None]) -> float:
    return float(_Fields(raw, where, (key,)).number(key, check))


_SLO_FIELDS = (
    "model",
    "availability",
    "latency",
    *(o.key for o in catalog.OPERATIONAL_OBJECTIVES),  # queue_time_ratio, batch_efficiency, cache_hit_ratio
    "time_to_first_token",
    "inter_token_latency",
    "capacity",
    "token_capacity",
)
_OBJECTIVES = tuple(f for f in _SLO_FIELDS if f not in ("model", "capacity", "token_capacity"))


def _parse_slo(raw: object, where: str) -> SLO:
    f = _Fields(raw, where, _SLO_FIELDS)
    model = validators.fullmatch(_MODEL_NAME, f.string("model"), f.at("model"), "not a Triton model name")
    if not any(f.has(k) for k in _OBJECTIVES):
        raise UsageError(f"{where}: needs at least one objective ({', '.join(_OBJECTIVES)})")
    availability = None
    if f.has("availability"):
        a = _Fields(f.raw["availability"], f.at("availability"), ("objective", "min_requests", "from"))
        source = _parse_front(a.raw["from"], a.at("from")) if a.has("from") else None
        objective = a.number("objective", _percent)
        min_requests = a.number(
            "min_requests",
            lambda d: None if 1 <= d <= MAX_MIN_REQUESTS and d == int(d) else _WHOLE_MIN_REQUESTS,
            default_min_requests(objective),
        )
        availability = Availability(objective=objective, source=source, min_requests=int(min_requests))
    latency = _parse_latency(f.raw["latency"], f.at("latency"), front=True) if f.has("latency") else None
    capacity = None
    if f.has("capacity"):
        capacity = Capacity(_one(f.raw["capacity"], f.at("capacity"), "max_request_rate", _positive))
    limits = {
        o.field: _one(f.raw[o.key], f.at(o.key), o.bound, _ratio)
        for o in catalog.OPERATIONAL_OBJECTIVES
        if f.has(o.key)
    }
    return SLO(
        model=model,
        availability=availability,
        latency=latency,
        **{k: v for k, v in limits.items() if k in _SLO_ATTRIBUTES},
        limits=tuple((k, v) for k, v in limits.items() if k not in _SLO_ATTRIBUTES),
        capacity=capacity,
        time_to_first_token=_parse_latency(f.raw["time_to_first_token"], f.at("time_to_first_token"))
        if f.has("time_to_first_token")
        else None,
        inter_token_latency=_parse_latency(f.raw["inter_token_latency"], f.at("inter_token_latency"))
        if f.has("inter_token_latency")
        else None,
        max_tokens_per_second=_one(
            f.raw["token_capacity"], f.at("token_capacity"), "max_tokens_per_second", _positive
        )
        if f.has("token_capacity")
        else None,
    )


def _parse_receivers(raw: object, where: str) -> dict[str, dict[str, Any]]:
    f = _Fields(raw, where, RECEIVERS)
    out: dict[str, dict[str, Any]] = {}
    for name in RECEIVERS:
        if not f.has(name):
            continue
        r = f.raw[name]
        if not isinstance(r, dict):
            raise UsageError(f"{f.at(name)}: must be a mapping of Alertmanager *_configs (got {_kind(r)})")
        for key in r:
            if not str(key).endswith("_configs"):
                raise UsageError(f"{f.at(name)}.{key}: unknown field (expected Alertmanager *_configs lists)")
        secret = find_secret(r, f.at(name))
        if secret:
            raise UsageError(secret)
        out[name] = r
    return out


_SPEC_FIELDS = (
    "window",
    "grouping",
    "runbook_base_url",
    "up_job",
    "gpu_memory_used_max",
    "alertmanager",
    "slos",
)
# The longest burn-rate window: an SLO window shorter than it makes the ticket alerts meaningless.
MIN_WINDOW = 3 * 86400


def parse(raw: object, source: str = "") -> SLOFile:
    """Validate a loaded SLO document; errors are prefixed by ``source`` (the file name)."""
    try:
        return _parse(raw)
    except UsageError as exc:
        if source:
            raise UsageError(f"{source}: {exc}") from None
        raise


def _parse(raw: object) -> SLOFile:
    top = _Fields(raw, "", ("apiVersion", "kind", "metadata", "spec"))
    if top.string("apiVersion") != API_VERSION:
        raise UsageError(f"apiVersion: must be {API_VERSION} (got {top.raw['apiVersion']})")
    if top.string("kind") != KIND:
        raise UsageError(f"kind: must be {KIND} (got {top.raw['kind']})")
    meta = _Fields(top.required("metadata"), "metadata", ("name", "labels", "annotations"))
    name = validators.label_value(meta.string("name"), "metadata.name")
    spec = _Fields(top.required("spec"), "spec", _SPEC_FIELDS)
    window = parse_duration(spec.required("window"), spec.at("window"))
    if window < MIN_WINDOW:
        raise UsageError(
            f"spec.window: must be at least 3d, the longest burn-rate window (got {spec.raw['window']})"
        )

    grouping: tuple[str, ...] = ()
    if spec.has("grouping"):
        g = spec.raw["grouping"]
        if not isinstance(g, list):
            raise UsageError(f"spec.grouping: must be a list of label names (got {_kind(g)})")
        for i, label in enumerate(g):
            if not isinstance(label, str) or not _LABEL_NAME.fullmatch(label) or label in _RESERVED_GROUPING:
                raise UsageError(f"spec.grouping[{i}]: not a usable label name (got {label!r})")
        grouping = tuple(dict.fromkeys(g))

    receivers: dict[str, dict[str, Any]] = {}
    if spec.has("alertmanager"):
        am = _Fields(spec.raw["alertmanager"], "spec.alertmanager", ("receivers",))
        if am.has("receivers"):
            receivers = _parse_receivers(am.raw["receivers"], "spec.alertmanager.receivers")

    raw_slos = spec.required("slos")
    if not isinstance(raw_slos, list) or not raw_slos:
        raise UsageError(f"spec.slos: must be a non-empty list (got {_kind(raw_slos)})")
    slos: list[SLO] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw_slos):
        s = _parse_slo(item, f"spec.slos[{i}]")
        if s.model in seen:
            raise UsageError(
                f"spec.slos[{i}].model: duplicate model {s.model!r} (first in spec.slos[{seen[s.model]}])"
            )
        seen[s.model] = i
        slos.append(s)

    base_url = spec.string("runbook_base_url", DEFAULT_RUNBOOK_BASE_URL).rstrip("/")
    if not _RUNBOOK_URL.fullmatch(base_url):
        raise UsageError(
            f"spec.runbook_base_url: must be an http(s) URL without spaces, quotes or braces (got {base_url[:80]!r})"
        )
    up_job = validators.re2_regex(spec.string("up_job", DEFAULT_UP_JOB), "spec.up_job")
    gpu_max = float(spec.number("gpu_memory_used_max", _ratio, DEFAULT_GPU_MEMORY_USED_MAX))
    return SLOFile(
        name=name,
        window=window,
        slos=tuple(slos),
        grouping=grouping,
        runbook_base_url=base_url,
        up_job=up_job,
        gpu_memory_used_max=gpu_max,
        receivers=receivers,
    )


def load(path: Path | str) -> SLOFile:
    """Read and validate an SLO file; any problem is one ``UsageError`` line naming file and field."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise UsageError(f"{p}: cannot read SLO file ({exc.strerror})") from None
    try:
        raw = safeyaml.load(text)
    except safeyaml.AliasBudgetError as exc:
        raise UsageError(f"{p}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{p}: not valid YAML{at}") from None
    return parse(raw, str(path))
