"""A front's latency histogram (``latency.from``): what clients lived through, as the proxy timed it.

``latency: {threshold: 50ms, objective: 99, from: {histogram: '<bucket selector>', unit: ...}}``
names the ``_bucket`` series of a histogram kept by the ingress, proxy or gateway in front of Triton
(Envoy/Istio, NGINX ingress, Caddy, Traefik, Knative's queue-proxy). The selector takes the strict
grammar of ``availability.from`` (``tritonwatch/selector.py``); the metric name must end in
``_bucket`` and must not match ``le`` (the rules choose the bucket). The unit comes from the family
name (``_seconds``, ``_ms``/``_milliseconds``, or a known front's name such as Envoy's
``envoy_cluster_upstream_rq_time``, in milliseconds) or from ``unit:``; a name that says neither needs
``unit:``, since a histogram read in the wrong unit leaves the SLI blind or wrong.

The SLI reads the bucket whose bound is the threshold, so it is exact by construction::

    1 - sum(rate(h_bucket{...,le=~"0\\\\.050*"}[5m])) / sum(rate(h_bucket{...,le="+Inf"}[5m]))

``le`` is matched as a number is written, not as one particular client prints it: ``0.05``,
``0.050``, ``50``, ``50.0`` (Go prints ``50``, Python ``50.0``, OpenMetrics ``50.0``). A front without
a bucket at the threshold yields no SLI series at all (never a wrong one) and the SLO's no-data alert
says so; ``docs/latency-sources.md`` lists the default buckets of the usual fronts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from tritonwatch.catalog.render import prometheus3_le
from tritonwatch.errors import UsageError
from tritonwatch.selector import Selector, parse_selector
from tritonwatch.validators import kind as _kind
from tritonwatch.validators import promql_string

UNITS = {"seconds": Decimal(1), "milliseconds": Decimal(1000)}
# Fronts' histograms whose names do not say their unit (from each project's metric docs).
KNOWN_UNITS = {
    "envoy_cluster_upstream_rq_time": "milliseconds",
    "envoy_cluster_internal_upstream_rq_time": "milliseconds",
    "envoy_cluster_external_upstream_rq_time": "milliseconds",
    "envoy_http_downstream_rq_time": "milliseconds",
    "revision_app_request_latencies": "milliseconds",
    "revision_request_latencies": "milliseconds",
}
_MS_NAME = re.compile(r"_(ms|milliseconds)(_|$)")
_SECONDS_NAME = re.compile(r"_seconds(_|$)")


def le_text(value: Decimal) -> str:
    """The plain decimal spelling of a bucket bound: 0.05 -> "0.05", 50 -> "50" (no exponent)."""
    return format(value.normalize(), "f")


def le_regex(value: Decimal) -> str:
    """An RE2 pattern for ``le`` that every usual spelling of ``value`` matches, and nothing else:
    trailing zeros after the point (``0.050``, ``50.0``, Prometheus 3's ``100.0``) and the exponent
    forms (Python's ``%g`` ``1e-05``, Prometheus 3's shortest ``1.234567e+06``)."""
    text = le_text(value)
    plain = text.replace(".", "\\.") + ("0*" if "." in text else "(\\.0*)?")
    # Go's and Python's exponent forms, where they use one (Python's %g keeps 6 digits, Go's all)
    shorts = dict.fromkeys(s for s in (f"{float(value):g}", prometheus3_le(float(value))) if "e" in s)
    return "|".join([plain, *(s.replace(".", "\\.").replace("+", "\\+") for s in shorts)])


@dataclass(frozen=True)
class FrontHistogram:
    """The ``_bucket`` series of the front's latency histogram and the unit of its ``le`` bounds."""

    buckets: Selector
    unit: str = "seconds"  # a key of UNITS

    def bound(self, threshold: float) -> Decimal:
        """The threshold (seconds) in the histogram's unit, exactly: 0.05 s -> 50 for milliseconds."""
        return Decimal(repr(float(threshold))) * UNITS[self.unit]

    def _with_le(self, matcher: str) -> str:
        text = self.buckets.promql()
        return text[:-1] + "," + matcher + "}" if text.endswith("}") else f"{text}{{{matcher}}}"

    def under(self, threshold: float) -> str:
        """The bucket of requests at most ``threshold`` seconds."""
        return self._with_le(f"le=~{promql_string(le_regex(self.bound(threshold)))}")

    def total(self) -> str:
        return self._with_le('le="+Inf"')

    def error_ratio_promql(
        self,
        window: str,
        threshold: float,
        min_samples: int,
        grouping: tuple[str, ...] = (),
        fn: str = "rate",
    ) -> str:
        """Share of the front's requests over ``threshold``; absent below ``min_samples`` requests or
        when the front has no bucket at the threshold. Summed by the grouping labels only: the front's
        series do not name the model."""
        by = f"sum by ({', '.join(grouping)}) " if grouping else "sum"
        on = f"on ({', '.join(grouping)})"
        under = f"{by}({fn}({self.under(threshold)}[{window}]))"
        total = f"{by}({fn}({self.total()}[{window}]))"
        return (
            f"1 - (\n  {under}\n  /\n  {total}\n)\n"
            f"and {on}\n{by}(increase({self.total()}[{window}])) >= {min_samples}"
        )


def parse_front_histogram(raw: object, where: str) -> FrontHistogram:
    """``latency.from``: ``{histogram: '<bucket selector>', unit: seconds|milliseconds}``."""
    if not isinstance(raw, dict):
        raise UsageError(f"{where}: must be a mapping with histogram (and unit) (got {_kind(raw)})")
    for key in raw:
        if key not in ("histogram", "unit"):
            raise UsageError(f"{where}.{key}: unknown field (expected one of: histogram, unit)")
    if raw.get("histogram") is None:
        raise UsageError(f"{where}.histogram: required")
    at = f"{where}.histogram"
    sel = parse_selector(raw["histogram"], at, "histogram bucket")
    if not sel.metric.endswith("_bucket"):
        raise UsageError(f"{at}: must select a histogram's _bucket series (got {sel.metric!r})")
    if any(m.label == "le" for m in sel.matchers):
        raise UsageError(f"{at}: must not match le (the rules pick the bucket at the threshold)")
    family = sel.metric[: -len("_bucket")]
    named = "milliseconds" if _MS_NAME.search(family) else "seconds" if _SECONDS_NAME.search(family) else None
    named = named or KNOWN_UNITS.get(family)
    unit = raw.get("unit")
    if unit is None:
        if named is None:
            # Read in the wrong unit, a threshold matches no bucket (a blind SLO) or the wrong one.
            raise UsageError(
                f"{where}.unit: required: the family name {family!r} does not say its unit "
                "(seconds or milliseconds; Envoy's *_rq_time and Knative's *_latencies are milliseconds)"
            )
        return FrontHistogram(sel, named)
    if not isinstance(unit, str) or unit not in UNITS:
        raise UsageError(f"{where}.unit: must be one of: {', '.join(UNITS)} (got {unit!r})")
    if named is not None and named != unit:
        raise UsageError(f"{where}.unit: {unit} contradicts the family name {family!r} ({named})")
    return FrontHistogram(sel, unit)
