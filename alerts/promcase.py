"""The pieces every promtool case is made of: a case's input series and checks, the labels of the
synthetic Triton, sidecar and front series, promtool's expanding notation, and an alert as promtool must
see it (``expected``: labels and annotations rendered with the values a case works out by hand).

The modules that build an alert's rules and its cases together (``alerts/nodata.py``) and the case
modules (``promtests`` and the ``*cases`` modules) build on this one; it imports no rule step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from tritonwatch import catalog
from tritonwatch.alerts import build
from tritonwatch.alerts.texts import FOR, SEVERITY, TEXTS, render
from tritonwatch.errors import UsageError
from tritonwatch.fronthistogram import le_text
from tritonwatch.selector import satisfying_labels
from tritonwatch.slo import Objective, SLOFile

INTERVAL = "1m"
TRITON_INSTANCE = "triton:8002"
SIDECAR_INSTANCE = "sidecar:9450"
SIDECAR_JOB = "tritonwatch"
VERSION = "1"
GPU = "GPU-00000000-0000-0000-0000-000000000000"
MAX_BATCH = 64
# Requests per minute in the synthetic traffic (big enough that every ratio is exact to 4 digits).
RPM = Decimal(1000)
# Minutes of steady traffic in the slow-burn cases: past the 1h page window and the 2h ticket window.
LONG = 150


@dataclass(frozen=True)
class Check:
    eval_time: str
    alertname: str
    alerts: tuple[Mapping[str, Mapping[str, str]], ...] = ()  # {"exp_labels":..., "exp_annotations":...}


@dataclass
class Case:
    name: str
    series: list[tuple[str, str]] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)

    def add(self, metric: str, labels: Mapping[str, str], values: str) -> Case:
        body = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        self.series.append((f"{metric}{{{body}}}", values))
        return self

    def to_yaml(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "interval": INTERVAL,
            "input_series": [{"series": s, "values": v} for s, v in self.series],
            "alert_rule_test": [
                {
                    "eval_time": c.eval_time,
                    "alertname": c.alertname,
                    "exp_alerts": [dict(a) for a in c.alerts],
                }
                for c in self.checks
            ],
        }


class _Concrete(dict[str, str]):
    """Placeholder values for expected texts: a label the alert lacks renders as "" (missingkey=zero)."""

    def __missing__(self, key: str) -> str:
        return ""


def expected(
    spec: SLOFile,
    alert: str,
    labels: Mapping[str, str],
    values: Mapping[str, str],
    texts_key: str | None = None,
) -> dict[str, dict[str, str]]:
    """The alert as promtool must see it: labels, and annotations rendered with ``values``."""
    texts = TEXTS[texts_key or alert]
    fill = _Concrete(labels)
    if alert in FOR:
        fill["hold"] = FOR[alert]
    fill.update(values)
    return {
        "exp_labels": dict(sorted(labels.items())),
        "exp_annotations": {
            "description": render(texts.description, fill),
            "runbook_url": build.runbook_url(spec, alert),
            "summary": render(texts.summary, fill),
        },
    }


def pct(ratio: Decimal | float) -> str:
    """``humanizePercentage`` as Prometheus renders it (``%.4g%%`` of ratio * 100)."""
    return f"{float(ratio) * 100:.4g}%"


def counter(per_minute: Decimal | float, samples: int) -> str:
    """promtool expanding notation for a counter growing by ``per_minute`` each sample."""
    step = format(Decimal(str(per_minute)).normalize(), "f")
    return f"0+{step}x{samples}"


def gauge(value: Decimal | float, samples: int) -> str:
    return f"{format(Decimal(str(value)).normalize(), 'f')}x{samples}"


def test_job(spec: SLOFile) -> str:
    """A job value the configured ``up`` matcher selects (it is a regular expression)."""
    for candidate in (spec.up_job, spec.up_job.split("|")[0], "triton"):
        if re.fullmatch(spec.up_job, candidate):
            return candidate
    raise UsageError(
        f"spec.up_job: cannot find a job name that {spec.up_job!r} matches for the promtool tests"
    )


def group_labels(spec: SLOFile) -> dict[str, str]:
    return {g: f"test-{g}" for g in spec.grouping}


def triton_labels(spec: SLOFile, model: str, **extra: str) -> dict[str, str]:
    return {
        "instance": TRITON_INSTANCE,
        "job": test_job(spec),
        catalog.MODEL: model,
        catalog.VERSION: VERSION,
        **group_labels(spec),
        **extra,
    }


def sidecar_labels(spec: SLOFile, **extra: str) -> dict[str, str]:
    return {"instance": SIDECAR_INSTANCE, "job": SIDECAR_JOB, **group_labels(spec), **extra}


def model_ticket_labels(spec: SLOFile, model: str) -> dict[str, str]:
    """The labels of a per-model ticket alert (objectives, headroom): what its rule keeps of the series."""
    return {SEVERITY: "ticket", catalog.MODEL: model, catalog.VERSION: VERSION, **group_labels(spec)}


FRONT_INSTANCE = "front:8404"
FRONT_JOB = "front"


def front_series(spec: SLOFile, obj: Objective) -> tuple[str, dict[str, str], str, dict[str, str], bool]:
    """The front's series: one the errors selector picks, one only total picks, and whether total
    picks the error series too (HAProxy's, Envoy's and NGINX's do: one metric split by status): then
    the other series carries the good requests only, else every request."""
    assert obj.availability is not None
    front = obj.availability.source
    assert front is not None
    where = f"spec.slos[{spec.slos.index(spec.slo_for(obj.model))}].availability.from"
    base = {"instance": FRONT_INSTANCE, "job": FRONT_JOB, **group_labels(spec)}
    bad = satisfying_labels(front.errors, base)
    if bad is None:
        raise UsageError(f"{where}.errors: cannot build promtool test series that it selects")
    other = satisfying_labels(front.total, base, unlike=front.errors)
    if other is None:
        raise UsageError(f"{where}.total: every series it selects is an error too")
    included = front.total.matches(front.errors.metric, bad)
    return front.errors.metric, bad, front.total.metric, other, included


def front_traffic(spec: SLOFile, case: Case, obj: Objective, bad_per_minute: Decimal, samples: int) -> None:
    errors, bad, total, other, included = front_series(spec, obj)
    case.add(errors, bad, counter(bad_per_minute, samples))
    case.add(total, other, counter(RPM - bad_per_minute if included else RPM, samples))


def front_buckets(spec: SLOFile, case: Case, obj: Objective, under: Decimal, n: Decimal, size: int) -> None:
    """``size`` samples of the front's bucket at the threshold (``under`` a minute, none if < 0) and +Inf."""
    lat = obj.latency
    assert lat is not None and lat.source is not None
    front = lat.source
    labels = satisfying_labels(
        front.buckets, {"instance": FRONT_INSTANCE, "job": FRONT_JOB, **group_labels(spec)}
    )
    if labels is None:
        raise UsageError(f"{obj.name}: latency.from.histogram: cannot build promtool test series it selects")
    for le, per_minute in ((le_text(front.bound(lat.threshold)), under), ("+Inf", n)):
        if per_minute >= 0:
            case.add(front.buckets.metric, {**labels, "le": le}, counter(per_minute, size))
