"""``tritonwatch rules --check-prometheus URL``: the latency SLIs' ``_bucket`` series are where the rules read them.

A Prometheus 3 can keep a classic histogram as a native histogram with custom buckets
(``convert_classic_histograms_to_nhcb: true`` in ``global`` or in a scrape job; since 3.9 native histograms
are stable). It then stores no ``<family>_bucket`` series, unless the job also sets
``always_scrape_classic_histograms: true``. Every generated latency rule reads ``_bucket`` series (so does
Prometheus 2.x, Thanos, VictoriaMetrics): that SLI would be empty, and only its no-data ticket would say so.

This asks the Prometheus, for each latency-shaped objective's histogram (the sidecar's, a vLLM one, a
front's ``latency.from``), whether it holds the ``_bucket`` series and, where it does not, whether it holds
the native histogram (``histogram_count`` of the bare family). That case fails in one line naming the family
and the setting to change. A histogram with neither is not scraped yet: a warning, not a failure.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import requests

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError, UsageError
from tritonwatch.slo import SLOFile
from tritonwatch.validators import promql_string

log = logging.getLogger(__name__)
TIMEOUT = 10.0
FIX = (
    "set always_scrape_classic_histograms: true on the scrape job that collects it "
    "(or drop convert_classic_histograms_to_nhcb / scrape_native_histograms there)"
)


@dataclass(frozen=True)
class Histogram:
    """A classic histogram an SLI reads: ``family`` (no ``_bucket``) and the matchers the rules add."""

    slo: str
    family: str
    matchers: str  # PromQL matchers without braces, e.g. phase="request",model="m"

    def select(self, suffix: str = "") -> str:
        return f"{self.family}{suffix}{{{self.matchers}}}" if self.matchers else f"{self.family}{suffix}"


def histograms(spec: SLOFile) -> list[Histogram]:
    """The histogram behind every latency-shaped objective, as the generated rules select it."""
    from tritonwatch.alerts import rules

    out: list[Histogram] = []
    for obj in spec.objectives():
        lat = obj.latency
        if lat is None:
            continue
        if lat.source is not None:
            sel = lat.source.buckets
            family = sel.metric.removesuffix("_bucket")
            out.append(Histogram(obj.name, family, ",".join(m.promql() for m in sel.matchers)))
            continue
        family, fixed = rules.latency_histogram(obj.kind)
        model = f"{catalog.MODEL}={promql_string(obj.model)}"
        out.append(Histogram(obj.name, family, ",".join([*fixed, model])))
    return out


def _count(url: str, expr: str) -> float:
    """``count(expr)`` on the server: 0 where nothing matches."""
    try:
        resp = requests.get(f"{url}/api/v1/query", params={"query": f"count({expr})"}, timeout=TIMEOUT)
    except requests.RequestException as exc:
        raise TritonwatchError(f"--check-prometheus {url}: {type(exc).__name__}") from None
    if resp.status_code != 200:
        raise TritonwatchError(f"--check-prometheus {url}: HTTP {resp.status_code} for {expr}")
    try:
        result = resp.json()["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0
    except (ValueError, KeyError, IndexError, TypeError):
        raise TritonwatchError(
            f"--check-prometheus {url}: not a Prometheus query answer for {expr}"
        ) from None


def check(spec: SLOFile, url: str) -> None:
    """Raise (one line) where an SLI's histogram is stored only as a native histogram."""
    url = check_url(url)
    native: list[Histogram] = []
    for h in histograms(spec):
        if _count(url, h.select("_bucket")) > 0:
            continue
        if _count(url, f"histogram_count({h.select()})") > 0:
            native.append(h)
        else:
            log.warning(
                "--check-prometheus %s: no %s series yet (SLO %s): not scraped yet?",
                url,
                h.select("_bucket"),
                h.slo,
            )
    if native:
        names = ", ".join(dict.fromkeys(h.family for h in native))
        slos = ", ".join(h.slo for h in native)
        raise TritonwatchError(
            f"--check-prometheus {url}: {names} is stored as a native histogram, without _bucket series: "
            f"the latency SLI of {slos} would be empty; {FIX}"
        )


def check_url(url: str) -> str:
    if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
        raise UsageError(
            f"--check-prometheus {url!r}: must be Prometheus's base URL, e.g. http://127.0.0.1:9090"
        )
    return url.rstrip("/")
