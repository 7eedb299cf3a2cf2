"""PromQL rendering of the catalog's entries, aggregated across replicas.

``sum by (model, version, <grouping>)`` of rates, then divided; never ``sum without``: scrapers add
labels of their own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from decimal import Decimal

from tritonwatch.catalog.names import (
    ENSEMBLE_STEP_SECONDS,
    ENSEMBLE_TRACED_REQUESTS,
    MODEL_KEY,
    MODEL_ROLE_INFO,
    PHASE,
    REQUEST_DURATION,
    ROLE,
    ROLE_ENSEMBLE,
    ROLE_STEP,
    STEP,
    triton_duration,
)
from tritonwatch.catalog.signals import (
    BATCH_EFFICIENCY_SIGNAL,
    ConfigRatio,
    Signal,
    Term,
    ensemble_variant,
    signal,
)


# --- PromQL rendering ---------------------------------------------------------------------------
def by_clause(grouping: Sequence[str] = ()) -> str:
    labels = list(MODEL_KEY) + [g for g in grouping if g not in MODEL_KEY]
    return ", ".join(labels)


def sum_rate(terms: Sequence[Term], window: str, by: str, selector: str, fn: str = "rate") -> str:
    """``sum by (by) (fn(term[window]))`` per term (``selector`` added to its matchers), scaled, summed;
    ``fn`` is ``rate`` or ``increase``."""
    parts = []
    for t in terms:
        m = t.matcher()
        if selector:
            m = m[:-1] + "," + selector + "}" if m.endswith("}") else f"{m}{{{selector}}}"
        rate = f"sum by ({by}) ({fn}({m}[{window}]))"
        if t.scale != 1.0:
            rate = f"{rate} * {t.scale:g}"
        parts.append(rate)
    return " + ".join(parts) if len(parts) == 1 else "(" + " + ".join(parts) + ")"


def promql(sig: Signal, window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    """The signal as a PromQL expression aggregated across replicas.

    ``selector`` adds label matchers to every input (e.g. ``model="$model"`` in a dashboard).
    Missing cache families (models without a cache) make compute-phase means use successes alone.
    A signal computed otherwise for an ensemble (``ENSEMBLE_VARIANTS``) takes its ensemble formula
    where the sidecar's ``tritonwatch_model_role_info`` says ``role="ensemble"`` (none at all where
    the variant is None); without that series every model gets the plain formula.
    """
    plain = _formula(sig, window, grouping, selector)
    variant = ensemble_variant(sig)
    if variant is sig:
        return plain
    return ensemble_aware(plain, None if variant is None else _formula(variant, window, grouping, selector))


def ensemble_aware(plain: str, ensemble: str | None, on: Sequence[str] = MODEL_KEY) -> str:
    """``plain`` per model and version (``on``), but ``ensemble`` (None: nothing) for the ensembles."""
    ensembles = f'on ({", ".join(on)}) {MODEL_ROLE_INFO}{{{ROLE}="{ROLE_ENSEMBLE}"}}'
    expr = f"({plain} unless {ensembles})"
    return expr if ensemble is None else f"{expr} or ({ensemble} and {ensembles})"


def entries_only(expr: str) -> str:
    """``expr`` (per model and version) without ensemble steps: a fleet total of it counts each client
    request once, at the model the client called (the ensemble), not again at every step."""
    return f'({expr}) unless on ({", ".join(MODEL_KEY)}) {MODEL_ROLE_INFO}{{{ROLE}="{ROLE_STEP}"}}'


def _formula(sig: Signal, window: str, grouping: Sequence[str], selector: str) -> str:
    by = by_clause(grouping)
    num = sum_rate(sig.numerator, window, by, selector)
    if sig.minus:
        num = f"({num} - {sum_rate(sig.minus, window, by, selector)})"
    if sig.kind == "rate":
        return num
    if sig.kind == "gauge":
        m = sig.numerator[0].family + (f"{{{selector}}}" if selector else "")
        return f"sum by ({by}) ({m})"
    den = sum_rate(sig.denominator, window, by, selector)
    if sig.subtract:
        sub = sum_rate(sig.subtract, window, by, selector)
        den = f"({den} - ({sub} or {den} * 0))"
    return f"{num} / {den}"


def config_ratio_promql(
    entry: ConfigRatio, window: str = "5m", grouping: Sequence[str] = (), selector: str = ""
) -> str:
    """``entry.of`` over the config gauge ``entry.by`` where that is above 0 (``ConfigRatio.value``)."""
    by = by_clause(grouping)
    sel = f"{{{selector}}}" if selector else ""
    of = promql(signal(entry.of), window, grouping, selector)
    return f"({of}) / on ({by}) group_left max by ({by}) ({entry.by}{sel} > 0)"


def batch_efficiency_promql(window: str = "5m", grouping: Sequence[str] = (), selector: str = "") -> str:
    return config_ratio_promql(BATCH_EFFICIENCY_SIGNAL, window, grouping, selector)


def recorded(record: str, grouping: Sequence[str] = (), selector: str = "", phase: str = "") -> str:
    """A selector for a recording rule's output series (used by dashboards and the report)."""
    matchers = [m for m in (selector, f'phase="{phase}"' if phase else "") if m]
    return record + (f"{{{','.join(matchers)}}}" if matchers else "")


# --- latency histogram buckets ------------------------------------------------------------------
# Log-spaced from 100 us to 60 s (about 3 per decade, 1-2.5-5 steps) so that every usual SLO
# threshold (5, 10, 25, 50, 100, 250, 500 ms, 1, 2.5, 5 s) is a bucket boundary: a latency SLI
# "share of requests under T" is then exact, and PromQL percentiles are right to within one bucket.
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.0001, 0.00025, 0.0005,
    0.001, 0.0025, 0.005,
    0.01, 0.025, 0.05,
    0.1, 0.25, 0.5,
    1.0, 2.5, 5.0,
    10.0, 30.0, 60.0,
)  # fmt: skip


def prometheus3_le(bound: float) -> str:
    """A bucket bound as Prometheus 3 stores ``le`` (and ``quantile``): it parses the label at ingestion
    and writes Go's shortest ``%g`` (exponent form from 1e6 and under 1e-4), adding ".0" to a whole
    number (``model/labels/float.go``): ``le="100"`` from Triton's text arrives as ``le="100.0"``."""
    if math.isinf(bound):
        return "+Inf" if bound > 0 else "-Inf"
    exact = Decimal(repr(float(bound)))  # the shortest digits that read back as the float, as Go's
    sign, digits, _ = exact.normalize().as_tuple()
    exp = exact.adjusted()
    if exp < -4 or exp >= 6:
        rest = "".join(map(str, digits[1:]))
        text = f"{digits[0]}{'.' + rest if rest else ''}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    else:
        text = format(abs(exact.normalize()), "f")
        text = text if "." in text else text + ".0"
    return ("-" if sign else "") + text


def le_matcher(threshold: float) -> str:
    """Bucket ``le`` values as the Python (``0.05``, ``1.0``) and Go (``1``) clients print them, and as
    Prometheus 3 stores them (``prometheus3_le``).

    One matcher for the SLO's rules and the report's query of the share of requests under a threshold.
    """
    forms = dict.fromkeys([repr(float(threshold)), f"{threshold:g}", prometheus3_le(threshold)])
    return 'le=~"' + "|".join(re.sub(r"[.+]", lambda m: "\\\\" + m[0], f) for f in forms) + '"'


# --- latency distribution across replicas (from the sidecar's trace histogram) --------------------
def bucket_rate_promql(phase: str = "request", window: str = "5m", by: str = "le", selector: str = "") -> str:
    """Per-bucket rate of the trace histogram, summed ``by`` the given labels (``le`` must be among them)."""
    matchers = ",".join(m for m in (f'{PHASE}="{phase}"', selector) if m)
    return f"sum by ({by}) (rate({REQUEST_DURATION}_bucket{{{matchers}}}[{window}]))"


def histogram_quantile_promql(
    quantile: str,
    phase: str = "request",
    window: str = "5m",
    grouping: Sequence[str] = (),
    selector: str = "",
) -> str:
    """The ``quantile`` (e.g. "0.99") of a phase's latency across replicas, per model and version."""
    by = "le, " + by_clause(grouping)
    return f"histogram_quantile({quantile}, {bucket_rate_promql(phase, window, by, selector)})"


def ensemble_step_promql(window: str = "5m", selector: str = "") -> str:
    """Mean time per traced request of each ensemble in each step and phase, across replicas: summed
    step time over summed traced requests (never an average of the sidecars' means)."""
    by = by_clause()
    sel = f"{{{selector}}}" if selector else ""
    steps = f"sum by ({by}, {STEP}, {PHASE}) (rate({ENSEMBLE_STEP_SECONDS}{sel}[{window}]))"
    traced = f"sum by ({by}) (rate({ENSEMBLE_TRACED_REQUESTS}{sel}[{window}]))"
    return f"{steps} / on ({by}) group_left () ({traced} > 0)"


def objective_quantile(percent: Decimal) -> str:
    """An objective in percent as the ``quantile`` label of CAPACITY_OBJECTIVE spells it (99 -> "0.99",
    99.9 -> "0.999"): the sidecar writes it and the autoscalers' query selects it (deploy/scaling.py)."""
    return format((Decimal(percent) / Decimal(100)).normalize(), "f")


# --- where the request time went (a latency page's split, the SLO dashboard) ----------------------
COMPUTE_PHASES = ("compute_input", "compute_infer", "compute_output")


def compute_share_promql(selector: str, window: str = "1h", offset: str = "", by: str = "") -> str:
    """Share of Triton's request time spent computing, from its duration counters (no tracing): compute
    input + infer + output over request duration, summed ``by`` (empty: over everything selected);
    one minus it is the time queued (for an ensemble, in its steps' queues and hand-overs).
    ``offset``: e.g. ``1w`` for the same window a week before."""
    agg = f"sum by ({by}) " if by else "sum"
    off = f" offset {offset}" if offset else ""

    def total(phase: str) -> str:
        return f"{agg}(rate({triton_duration(phase)}{{{selector}}}[{window}]{off}))"

    compute = " + ".join(total(p) for p in COMPUTE_PHASES)
    return f"({compute}) / {total('request')}"
