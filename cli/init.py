"""``tritonwatch init``: a first SLO file for the models a running Triton serves.

Reads Triton's HTTP API (``tritonwatch.tritonapi``): the server's version (``GET /v2``), the repository
index (the ready models), each model's config (platform, backend, ``max_batch_size``, response cache,
decoupled, ensemble steps, histogram buckets) and the statistics; and, where Triton runs with
``summary_latencies=true``, the p99 of its request summaries from its metrics endpoint. With
``--observe S`` it reads the statistics twice, S seconds apart, and proposes objectives from the traffic
in between; without it, from the counters since each model loaded.

What it proposes is what the server supports and what ``tritonwatch rules --triton`` accepts:

* availability and latency only on the models clients call: an ensemble, or a model with traffic of its
  own; a step that only its ensembles call is their business (the ensemble counts a failed step);
* no availability on Triton's counters for a model whose errors Triton may not count (python backend,
  decoupled: ``tritonwatch.uncounted``), the same test ``rules --triton`` makes;
* a latency threshold that is a bucket bound of the histogram the SLI will read on this server's
  version (``alerts.model_metrics.source``), the first one above the measured p99 with a margin.

The file it writes says, beside every value, what was seen and how the value follows from it; it
passes ``tritonwatch rules`` as written. It never overwrites a file it did not write itself.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tritonwatch import catalog, modelconfig, slo, uncounted
from tritonwatch.cli import initlatency
from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.files import may_write, replace_file
from tritonwatch.tritonapi import ScrapeError, TritonClient, check_base_url

log = logging.getLogger("tritonwatch.init")
_T = TypeVar("_T")

HELP = "write a first SLO file for the models a running Triton serves, from what it sees"
MARKER = "# Written by tritonwatch init"
# Strictest first. An objective is proposed only if its error budget holds twice the errors seen and at
# least one request in the number seen: 1,000 clean requests do not show that 99.99 % is met.
AVAILABILITY_LADDER = (Decimal("99.99"), Decimal("99.9"), Decimal("99.5"), Decimal("99"), Decimal("95"))
COUNTERS = ("success", "fail", "queue", "cache_hit", "cache_miss")
COMPUTE = ("compute_input", "compute_infer", "compute_output")
# The operational objectives the starter proposes, by their SLO file keys and bounds (from the catalog).
_QUEUE = catalog.operational_objective(catalog.QUEUE_TIME_HIGH_ALERT)
_BATCH = catalog.operational_objective(catalog.BATCH_EFFICIENCY_LOW_ALERT)
_CACHE = catalog.operational_objective(catalog.CACHE_HIT_RATIO_LOW_ALERT)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Checked in run(), not by argparse's required=: the flag may come from TRITONWATCH_TRITON.
    parser.add_argument("--triton", metavar="URL", help="Triton's HTTP API, e.g. http://127.0.0.1:8000")
    # dest slo_out: TRITONWATCH_OUT is a directory for `rules` and `dashboards`, this is a file.
    parser.add_argument(
        "--out",
        dest="slo_out",
        default="slo.yaml",
        metavar="FILE",
        help="SLO file to write (default: slo.yaml)",
    )
    parser.add_argument(
        "--observe",
        type=float,
        default=0.0,
        metavar="S",
        help="read S seconds of traffic and propose from it (default: 0: the counters since each model loaded)",
    )
    parser.add_argument(
        "--name",
        dest="slo_name",
        default="triton",
        metavar="NAME",
        help="metadata.name of the SLO set (default: triton)",
    )
    parser.add_argument(
        "--triton-metrics",
        metavar="URL",
        default="",
        help="Triton's metrics endpoint, read for its request p99 (default: --triton's host, port 8002)",
    )
    parser.add_argument("--timeout", type=float, default=10.0, metavar="S", help="per request (default: 10)")


@dataclass(frozen=True)
class Model:
    name: str
    versions: tuple[str, ...]
    platform: str
    max_batch_size: int
    cache: bool
    decoupled: bool
    steps: tuple[str, ...] = ()  # an ensemble's step models, in order
    config: modelconfig.ModelConfig = field(default_factory=modelconfig.ModelConfig, compare=False)

    @property
    def ensemble(self) -> bool:
        return self.platform == "ensemble"


@dataclass
class Seen:
    """Counter increases of one model (all versions) over the observed span."""

    requests: int = 0  # successful
    failures: int = 0
    request_ns: int = 0
    cache_hit_ns: int = 0  # the successful requests the cache answered: their share of request_ns
    queue_ns: int = 0
    compute_ns: int = 0
    inferences: int = 0
    executions: int = 0
    cache_hits: int = 0
    cache_misses: int = 0

    def minus(self, before: Seen) -> Seen:
        # A reload inside the span restarts counters from 0: the later reading is then the whole increase.
        if self.requests < before.requests or self.failures < before.failures:
            return self
        return Seen(**{k: getattr(self, k) - getattr(before, k) for k in self.__dataclass_fields__})


@dataclass
class Entry:
    """One ``spec.slos[]`` item: fields in file order, each with the comment that says where it came from."""

    model: Model
    fields: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # objectives left out, and why


class Triton:
    def __init__(self, url: str, timeout: float) -> None:
        if check_base_url(url):
            raise UsageError(f"--triton: {url!r} is not an http(s) base URL (e.g. http://127.0.0.1:8000)")
        self.client = TritonClient(url, timeout)
        self.url = self.client.base

    def _read(self, read: Callable[..., _T], *args: str) -> _T:
        try:
            return read(*args)
        except ScrapeError as exc:
            if exc.unreachable:
                raise TritonwatchError(f"--triton {self.url}: cannot reach Triton: {exc}") from None
            raise TritonwatchError(f"--triton {self.url}: {exc}") from None

    def models(self) -> list[Model]:
        versions: dict[str, list[str]] = {}
        for item in self._read(self.client.index):
            if item.ready:
                versions.setdefault(item.name, []).append(item.version)
        out = []
        for name in sorted(versions):
            if not slo.valid_model_name(name):
                log.warning("skipping model %r: not a name an SLO file accepts", name[:100])
                continue
            out.append(self._model(name, tuple(sorted(versions[name]))))
        return out

    def _model(self, name: str, versions: tuple[str, ...]) -> Model:
        # A field of another shape (a hostile or a newer Triton) reads as absent, never as a crash.
        config = modelconfig.parse(self._read(self.client.config_json, name), lenient=True)
        return Model(
            name=name,
            versions=versions,
            platform=config.kind,
            max_batch_size=config.max_batch_size,
            cache=config.response_cache,
            decoupled=config.decoupled,
            steps=config.steps or (),
            config=config,
        )

    def version(self) -> str:
        """The server's version ("" where its metadata names none)."""
        return self._read(self.client.server_version)

    def stats(self) -> dict[str, Seen]:
        items = self._read(self.client.stats)
        where = self.client.stats_url().removeprefix(self.url)
        out: dict[str, Seen] = {}
        for item in items:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                seen = out.setdefault(item["name"], Seen())
                _add(seen, item, f"--triton {self.url}: {where} of {item['name']}")
        return out


def _field(doc: Any, key: str, kind: type = dict) -> Any:
    """``doc[key]`` if it is of ``kind``, else an empty one: a config or statistics field of another
    shape (a hostile or a newer Triton) is read as absent, never as a crash."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, kind) else kind()


def _count(value: object, where: str) -> int:
    if isinstance(value, str) and value.isdigit():  # Triton's JSON writer quotes 64-bit integers at times
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TritonwatchError(f"{where}: not a count ({str(value)[:40]!r})")
    return value


def _add(seen: Seen, item: Mapping[str, Any], where: str) -> None:
    stats = _field(item, "inference_stats")

    def pair(key: str) -> tuple[int, int]:
        p = _field(stats, key)
        return _count(p.get("count", 0), f"{where}.{key}.count"), _count(p.get("ns", 0), f"{where}.{key}.ns")

    success, fail, queue, hit, miss = (pair(k) for k in COUNTERS)
    seen.requests += success[0]
    seen.request_ns += success[1]
    seen.failures += fail[0]
    seen.queue_ns += queue[1]
    seen.compute_ns += sum(pair(k)[1] for k in COMPUTE)
    seen.cache_hits += hit[0]
    seen.cache_hit_ns += hit[1]
    seen.cache_misses += miss[0]
    seen.inferences += _count(item.get("inference_count", 0), f"{where}.inference_count")
    seen.executions += _count(item.get("execution_count", 0), f"{where}.execution_count")


def _num(value: float) -> str:
    """Two significant digits, as a plain decimal: 0.0123 -> 0.012."""
    return format(Decimal(f"{value:.2g}").normalize(), "f")


def _availability(seen: Seen | None) -> tuple[Decimal, str]:
    total = seen.requests + seen.failures if seen else 0
    if not seen or total == 0:
        return Decimal("99.9"), "no requests seen: a common starting point"
    ratio = seen.failures / total
    for objective in AVAILABILITY_LADDER:
        budget = float(1 - objective / 100)
        if budget >= 2 * ratio and budget >= 1 / total:
            return objective, (
                f"{seen.failures} of {total} requests failed ({ratio:.3%}): the strictest of "
                f"{', '.join(map(str, AVAILABILITY_LADDER))} whose budget holds twice that and one request in {total}"
            )
    floor = AVAILABILITY_LADDER[-1]
    if 2 * ratio > float(1 - floor / 100):
        return (
            floor,
            f"{seen.failures} of {total} requests failed ({ratio:.3%}): above its budget now, fix or relax",
        )
    return floor, f"{seen.failures} of {total} requests failed: too few requests to show more than {floor}"


def _latency(entry: Entry, model: Model, seen: Seen, version: str, p99: float | None) -> None:
    field_, notes = initlatency.propose(
        model.name,
        model.config,
        version,
        p99,
        initlatency.Means(seen.requests, seen.request_ns, seen.cache_hits, seen.cache_hit_ns),
    )
    if field_:
        entry.fields.append(field_)
    entry.notes += notes


def propose(
    model: Model,
    seen: Seen | None,
    step_of: str | None,
    version: str = "",
    p99: float | None = None,
    direct: int = 0,
) -> Entry:
    """One model's entry. ``step_of``: the ensemble it is a step of; ``direct``: its requests beyond
    what its ensembles sent it (clients calling it directly)."""
    entry = Entry(model)
    called = step_of is None or direct > 0
    traffic = seen is not None and seen.requests > 0
    if not called:
        entry.notes.append(
            f"a step of ensemble {step_of}: its clients' objectives (availability, latency) are on the "
            "ensemble, which counts a failed step as its own failure"
        )
    else:
        if step_of:
            entry.notes.append(f"a step of ensemble {step_of}, also called directly ({direct} requests)")
        blind = uncounted.reasons({model.name: uncounted.shape(model.config)}).get(model.name)
        if blind:
            entry.notes.append(
                f"availability: not proposed on Triton's counters, which do not count this model's errors "
                f"({', '.join(blind)}): give it availability.from (docs/uncounted-errors.md)"
            )
        else:
            objective, why = _availability(seen)
            entry.fields.append(("availability", {"objective": objective}, why))
        if model.decoupled:
            entry.notes.append("decoupled (streaming): set time_to_first_token by hand, see docs/llm.md")
        elif traffic and seen:
            _latency(entry, model, seen, version, p99)
        else:
            entry.notes.append("latency: no requests seen, so no threshold proposed")
    if traffic and seen and seen.request_ns > 0:
        if model.ensemble:
            # An ensemble's own queue is its scheduling only (microseconds); its requests wait in its
            # steps' queues and hand-overs: the share of its request time its steps do not compute.
            share = max(0, seen.request_ns - seen.compute_ns) / seen.request_ns
            seen_as = f"not computing in its steps {share:.1%} of request time"
        else:
            share = seen.queue_ns / seen.request_ns
            seen_as = f"queued {share:.1%} of request time"
        limit = min(0.9, max(0.25, 2 * share))
        entry.fields.append(
            (_QUEUE.key, {_QUEUE.bound: Decimal(_num(limit))}, f"{seen_as}; twice that, 0.25-0.9")
        )
    if model.max_batch_size and not model.ensemble and seen and seen.executions > 0:
        batch = seen.inferences / seen.executions
        efficiency = catalog.BATCH_EFFICIENCY_SIGNAL.value(batch, model.max_batch_size) or 0.0
        if efficiency / 2 > 1 / model.max_batch_size:
            entry.fields.append(
                (
                    _BATCH.key,
                    {_BATCH.bound: Decimal(_num(efficiency / 2))},
                    f"mean batch {batch:.3g} of max_batch_size {model.max_batch_size}; half the share seen",
                )
            )
        else:
            entry.notes.append(f"batch_efficiency: mean batch {batch:.3g} seen, nothing lower to alert on")
    if model.cache and seen and seen.cache_hits > 0:
        hit = seen.cache_hits / (seen.cache_hits + seen.cache_misses)
        entry.fields.append(
            (_CACHE.key, {_CACHE.bound: Decimal(_num(hit / 2))}, f"hit ratio {hit:.1%} seen; half that")
        )
    return entry


def _yaml_value(value: Any) -> str:
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value)  # a JSON string is a YAML string whatever it holds


def render(entries: Sequence[Entry], name: str, source: str) -> str:
    lines = [
        f"{MARKER} from {source}.",
        "# Every value below is a proposal from what Triton's statistics API showed; the comment beside",
        "# it says what was seen and how the value follows. Review them, then:",
        "#   tritonwatch rules --slo THIS_FILE --out rules/   (format: docs/slo-file.md)",
        "# tritonwatch init overwrites this file only while this first line is unchanged.",
        f"apiVersion: {slo.API_VERSION}",
        f"kind: {slo.KIND}",
        "metadata:",
        f"  name: {json.dumps(name)}",
        "spec:",
        "  window: 28d",
        "  slos:",
    ]
    for e in entries:
        m = e.model
        # Platform and step names come from the model config: quoted, so no newline escapes the comment.
        kind = (
            f"ensemble of {', '.join(map(json.dumps, m.steps))}"
            if m.ensemble
            else json.dumps(m.platform)
            if m.platform
            else "no platform in its config"
        )
        lines.append(f"    # {json.dumps(m.name)}: {kind}, versions {', '.join(m.versions)}")
        lines += [f"    # {note}" for note in e.notes]
        if not e.fields:  # an SLO entry needs an objective: nothing to propose is a comment
            lines.append(f"    # - model: {json.dumps(m.name)}  (no objective proposed)")
            continue
        lines.append(f"    - model: {json.dumps(m.name)}")
        for key, values, why in e.fields:
            flow = ", ".join(f"{k}: {_yaml_value(v)}" for k, v in values.items())
            lines.append(f"      {key}: {{{flow}}}  # {why}")
        lines.append("      # capacity: {max_request_rate: N}  # requests/s one deployment is sized for")
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` unless something there was not written by this command."""
    if not may_write(path, MARKER):
        raise UsageError(f"--out {path}: exists and was not written by tritonwatch init; not overwriting it")
    try:
        replace_file(path, text)
    except OSError as exc:
        raise UsageError(f"--out {path}: cannot write ({exc.strerror})") from None


def _direct(model: Model, models: Sequence[Model], seen: Mapping[str, Seen]) -> int:
    """A step's requests beyond what its ensembles sent it: clients that call it directly. Each ensemble
    request reaches a step at most once; an ensemble's failures count twice (Triton 2.51), so the
    ensembles' totals bound what they sent from above and a step is never taken for called by mistake."""
    own = seen.get(model.name)
    if own is None:
        return 0
    sent = sum(
        s.requests + s.failures
        for m in models
        if m.ensemble and model.name in m.steps and (s := seen.get(m.name)) is not None
    )
    return max(0, own.requests + own.failures - sent)


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.observe <= 86400:
        raise UsageError(f"--observe: must be between 0 and 86400 seconds (got {args.observe})")
    if args.timeout <= 0:
        raise UsageError(f"--timeout: must be > 0 (got {args.timeout})")
    if not args.triton:
        raise UsageError("--triton: required (or TRITONWATCH_TRITON)")
    if not slo.valid_model_name(args.slo_name):
        raise UsageError(f"--name: letters, digits, '_', '.', '-' only (got {args.slo_name[:40]!r})")
    out = Path(args.slo_out)
    triton = Triton(args.triton, args.timeout)
    models = triton.models()
    if not models:
        raise TritonwatchError(f"--triton {triton.url}: no model is READY in the repository index")
    before = triton.stats()
    if args.observe:
        log.info("observing %d models for %g s", len(models), args.observe)
        time.sleep(args.observe)
        after = triton.stats()
        seen = {m: after[m].minus(before[m]) if m in before else after[m] for m in after}
        source = f"{triton.url}, {args.observe:g} s of traffic observed"
    else:
        seen = before
        source = f"{triton.url}, counters since each model loaded"
    version = triton.version()
    p99 = initlatency.request_p99(initlatency.metrics_url(triton.url, args.triton_metrics), args.timeout)
    step_of = {step: m.name for m in models if m.ensemble for step in m.steps}
    # Ensembles first: they are what clients call.
    ordered = sorted(models, key=lambda m: (not m.ensemble, m.name in step_of, m.name))
    entries = [
        propose(m, seen.get(m.name), step_of.get(m.name), version, p99.get(m.name), _direct(m, models, seen))
        for m in ordered
    ]
    text = render(entries, args.slo_name, f"{source}, Triton {version or '(version unknown)'}")
    slo.parse(yaml.safe_load(text), str(out))  # what we write must be what `rules` reads
    write(out, text)
    print(
        f"wrote {out}: {len(entries)} models; next: tritonwatch rules --slo {out} --out rules/",
        file=sys.stderr,
    )
    return 0
