"""Hold the sidecar's window and the generated recording rules to each other on the same payloads.

Each replica (one Triton, one sidecar) is a timeline of exposition payloads, payload ``k`` taken at
``k * STEP`` seconds. The sidecar side feeds them, with that fake clock, through the sidecar's own
scrape path (``TritonMetrics``: parser, model cap, ``CounterWindow``) with ``--window`` = ``WINDOW``
and evaluates every catalog signal. The Prometheus side is ``promtool test rules``: the same values are
its input series (one per replica, told apart by ``instance``), the generated
``alerts/generated/catalog.rules.yml`` records them every ``STEP``, and one ``promql_expr_test`` per
(time, record, model) asserts inside promtool that the recorded value is the sidecar's to 1e-9.

Why the comparison is exact and not approximate: Prometheus 2's ``rate(x[5m])`` at time T takes the
samples in [T-5m, T] and extrapolates the increase towards the range's ends when the first/last sample
is not on them. Every evaluation time here is a multiple of ``STEP`` at least ``WINDOW`` after the first
payload, so there is a sample exactly on each end: the extrapolation factor is exactly 1 and ``rate`` is
(reset-adjusted last - first) / 300 s, which is the sidecar's definition (sum of per-scrape reset-aware
increases over a 300 s span). Prometheus 3's ranges are left-open: (T-5m, T] holds the samples from
T-285 s, and the one missing ``STEP`` is extrapolated at the average rate over the 285 s, so ``rate`` is
(last - first) / 285 s: the sidecar with ``--window`` 285 s (``left_open``), from the second time on (at
the first, a replica whose counters started near 0 makes Prometheus 3 stop the extrapolation at their
zero point instead). Both treat a drop as a reset that counts from 0. Ratios divide the same sums, so only float rounding (summation order) may
differ: hence 1e-9 relative, and exact equality for the gauge (an integer count, read as is).
Where the sidecar has no value (a zero denominator), Prometheus must have no finite value either
(absent, NaN or Inf: PromQL's 0/0 and x/0).
"""

from __future__ import annotations

import math
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import requests
import yaml

from tritonwatch import catalog
from tritonwatch.expfmt import LabelSet, Samples, parse
from tritonwatch.exporters.derive import evaluate
from tritonwatch.exporters.triton import TritonMetrics
from tritonwatch.exporters.window import CounterWindow, ModelKey

ROOT = Path(__file__).resolve().parent.parent.parent
RULES = ROOT / "alerts" / "generated" / "catalog.rules.yml"
STEP = 15  # seconds between payloads: promtool's input interval and rule evaluation interval
WINDOW = 300  # the rules' [5m], and the sidecar's --window
# What the catalog rules read (Triton's summaries, with their NaNs, are left out: no rule reads them).
INPUT_FAMILIES = frozenset(f for s in catalog.SIGNALS for f in s.all_families())


@dataclass
class Replica:
    """One Triton's payloads, ``payloads[k]`` at ``k * STEP`` s, and its models' max_batch_size."""

    instance: str
    payloads: list[str]
    max_batch_size: Mapping[str, int] = field(default_factory=dict)
    # Its ensembles: the sidecar takes their formulas (catalog.ENSEMBLE_VARIANTS) and serves their
    # tritonwatch_model_role_info{role="ensemble"}, which the rules read; promtool gets that series too.
    ensembles: frozenset[str] = frozenset()


class _Replay:
    """Hands ``TritonMetrics`` the next recorded payload instead of fetching it."""

    def __init__(self, payloads: Sequence[str]) -> None:
        self.payloads = list(payloads)
        self.next = 0
        self.skipped: list[str] = []  # as ``Fetcher.skipped``: recorded payloads have no over-long line

    def get(self, url: str) -> bytes:
        payload = self.payloads[self.next]
        self.next += 1
        return payload.encode()


Key = tuple[int, str, LabelSet]  # (payload index, record name, output labels of the record)


def _record_labels(sig: catalog.Signal, key: ModelKey) -> LabelSet:
    return tuple(sorted({catalog.MODEL: key[0], catalog.VERSION: key[1], **dict(sig.labels)}.items()))


def _pooled(windows: Sequence[CounterWindow], sig: catalog.Signal, key: ModelKey) -> float | None:
    """The catalog formula over the summed increases of several sidecars (what ``sum by`` pools)."""
    if len(windows) == 1:
        return evaluate(windows[0], sig, key)  # the sidecar's own value
    values = [evaluate(w, sig, key) for w in windows]
    if sig.kind in ("rate", "gauge"):
        present = [v for v in values if v is not None]
        return sum(present) if present else None
    num = sum(w.increase(t, key) for w in windows for t in sig.numerator)
    num -= sum(w.increase(t, key) for w in windows for t in sig.minus)
    den = sum(w.increase(t, key) for w in windows for t in sig.denominator)
    den -= sum(w.increase(t, key) for w in windows for t in sig.subtract)
    return max(num, 0.0) / den if den > 0 else None


def sidecar_values(
    replicas: Sequence[Replica], window: int = WINDOW, first: int = WINDOW
) -> dict[Key, float | None]:
    """Every catalog signal (and batch efficiency) per model at each time from ``first`` s (at least a full
    ``WINDOW`` behind it), the sidecar's ``--window`` being ``window``."""
    steps = len(replicas[0].payloads)
    assert all(len(r.payloads) == steps for r in replicas), "one payload per replica per step"
    clock = [0.0]
    scrapers = []
    for r in replicas:
        m = TritonMetrics("replay", CounterWindow(window), 1.0, 1.0, 1 << 30, clock=lambda: clock[0])
        m.fetcher = _Replay(r.payloads)  # type: ignore[assignment]
        scrapers.append(m)
    out: dict[Key, float | None] = {}
    batch = catalog.signal(catalog.BATCH_SIZE_MEAN)
    for k in range(steps):
        clock[0] = float(k * STEP)
        for m in scrapers:
            m.scrape()
        if k * STEP < first:
            continue
        by_model: dict[ModelKey, list[int]] = {}
        for i, m in enumerate(scrapers):
            for key in m.window.models:
                by_model.setdefault(key, []).append(i)
        for key, idx in sorted(by_model.items()):
            windows = [scrapers[i].window for i in idx]
            ensemble = any(key[0] in replicas[i].ensembles for i in idx)
            for sig in catalog.SIGNALS:
                use = catalog.ensemble_variant(sig) if ensemble else sig
                out[(k, sig.record, _record_labels(sig, key))] = (
                    None if use is None else _pooled(windows, use, key)
                )
            size = None if ensemble else _pooled(windows, batch, key)
            limit = max((replicas[i].max_batch_size.get(key[0], 0) for i in idx), default=0)
            if limit > 0:  # the collector's formula: mean batch / max_batch_size from the config
                eff = catalog.BATCH_EFFICIENCY_SIGNAL.value(size, limit)
                out[(k, catalog.BATCH_EFFICIENCY_RECORD, _record_labels(batch, key))] = eff
    return out


def _num(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v))


def _labels_text(labels: Iterable[tuple[str, str]]) -> str:
    return "{" + ", ".join(f'{k}="{v}"' for k, v in labels) + "}"


def replica_series(replicas: Sequence[Replica]) -> dict[tuple[str, LabelSet], list[float]]:
    """Every catalog family's series of every replica, labels with ``instance`` and ``job`` added, by
    (family, sorted labels), with one value per payload."""
    series: dict[tuple[str, str, LabelSet], list[float]] = {}
    for r in replicas:
        for k, payload in enumerate(r.payloads):
            samples: Samples = parse(payload, INPUT_FAMILIES)
            for family, rows in samples.items():
                for labels, value in rows.items():
                    series.setdefault((r.instance, family, labels), [math.nan] * len(r.payloads))[k] = value
        for model, limit in sorted(r.max_batch_size.items()):
            labels = ((catalog.MODEL, model), (catalog.VERSION, "1"))
            series[(r.instance, catalog.MAX_BATCH_SIZE, labels)] = [float(limit)] * len(r.payloads)
        for model in sorted(r.ensembles):
            labels = ((catalog.MODEL, model), (catalog.ROLE, catalog.ROLE_ENSEMBLE), (catalog.VERSION, "1"))
            series[(r.instance, catalog.MODEL_ROLE_INFO, labels)] = [1.0] * len(r.payloads)
    out = {}
    for (instance, family, labels), values in sorted(series.items()):
        assert not any(math.isnan(v) for v in values), f"{family}{dict(labels)} missing from a payload"
        out[(family, tuple(sorted(dict(labels, instance=instance, job="triton").items())))] = values
    return out


def input_series(replicas: Sequence[Replica]) -> list[dict[str, str]]:
    """promtool input series: every catalog family's series of every replica, ``instance`` added."""
    return [
        {"series": family + _labels_text(labels), "values": " ".join(map(_num, values))}
        for (family, labels), values in replica_series(replicas).items()
    ]


def expr_tests(expected: Mapping[Key, float | None]) -> list[dict[str, object]]:
    """One promql_expr_test per value: promtool itself checks the recorded value against the sidecar's."""
    tests: list[dict[str, object]] = []
    for (k, record, labels), value in sorted(expected.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
        sel = f"{record}{_labels_text(labels)}"
        at = f"{k * STEP}s"
        if value is None:
            # No finite value: absent, NaN and +-Inf all fail `< Inf`, so nothing may come out.
            tests.append({"expr": f"abs({sel}) < Inf", "eval_time": at, "exp_samples": []})
            continue
        gauge = record == catalog.signal(catalog.PENDING_REQUESTS).record
        tol = 0.0 if gauge else 1e-9 * abs(value)
        tests.append(
            {
                "expr": f"abs({sel} - {_num(value)}) <= bool {_num(tol)}",
                "eval_time": at,
                "exp_samples": [{"labels": _labels_text(labels), "value": 1}],
            }
        )
    return tests


def promtool_agree(
    replicas: Sequence[Replica], workdir: Path, promtool: str, left_open: bool = False
) -> tuple[int, str]:
    """Run the agreement through ``promtool test rules``; (number of values compared, promtool's output).
    ``left_open``: a Prometheus 3 promtool, whose [5m] is the sidecar's 285 s window here (see above)."""
    expected = (
        sidecar_values(replicas, WINDOW - STEP, WINDOW + STEP) if left_open else sidecar_values(replicas)
    )
    defined = sum(1 for v in expected.values() if v is not None)
    test = {
        "rule_files": [str(RULES)],
        "evaluation_interval": f"{STEP}s",
        "tests": [
            {
                "interval": f"{STEP}s",
                "input_series": input_series(replicas),
                "promql_expr_test": expr_tests(expected),
            }
        ],
    }
    path = workdir / "agreement.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 16))
    proc = subprocess.run([promtool, "test", "rules", str(path)], capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, "promtool disagrees with the sidecar:\n" + output[-6000:]
    return defined, output


def victoriametrics_agree(replicas: Sequence[Replica], store_url: str, base: int) -> int:
    """The same input, imported into a VictoriaMetrics store with payload ``k`` at ``base + k * STEP``
    (Unix seconds), and every catalog expression queried there over the times with a full window:
    each value equals the sidecar's to 1e-9. Returns the number of values compared.

    Why exact on VictoriaMetrics too: its ``rate(x[5m])`` at T reads the samples in (T-5m, T] and takes
    the last sample at or before T-5m as the starting point, dividing by the time between the two; with
    a sample on each end that is (last - first) / 300 s, reset-adjusted, as the sidecar's.
    """
    lines = [
        f"{family}{_labels_text(labels)} {_num(v)} {(base + k * STEP) * 1000}"
        for (family, labels), values in replica_series(replicas).items()
        for k, v in enumerate(values)
    ]
    resp = requests.post(f"{store_url}/api/v1/import/prometheus", data="\n".join(lines) + "\n", timeout=60)
    resp.raise_for_status()
    requests.get(f"{store_url}/internal/force_flush", timeout=30).raise_for_status()
    expected = sidecar_values(replicas)
    steps = len(replicas[0].payloads)
    # (record, constant labels the rule adds, expression)
    exprs = [(s.record, dict(s.labels), catalog.promql(s, "5m")) for s in catalog.SIGNALS]
    exprs.append((catalog.BATCH_EFFICIENCY_RECORD, {}, catalog.batch_efficiency_promql("5m", ())))
    got: dict[Key, float] = {}
    for record, constant, expr in exprs:
        params = {"query": expr, "start": base + WINDOW, "end": base + (steps - 1) * STEP, "step": STEP}
        resp = requests.get(f"{store_url}/api/v1/query_range", params=params, timeout=60)
        assert resp.status_code == 200, f"{expr}: {resp.status_code} {resp.text[:300]}"
        for row in resp.json()["data"]["result"]:
            labels = tuple(sorted({**row["metric"], **constant}.items()))
            for t, v in row["values"]:
                got[((int(t) - base) // STEP, record, labels)] = float(v)
    compared = 0
    for key, value in expected.items():
        vm = got.get(key)
        if value is None:
            assert vm is None or not math.isfinite(vm), (key, vm)
            continue
        assert vm is not None and math.isclose(vm, value, rel_tol=1e-9, abs_tol=0), (key, vm, value)
        compared += 1
    return compared
