"""Rules on the sidecar's SLO-bound capacity (docs/headroom.md), and their promtool cases.

* records, in ``catalog.rules.yml`` (group ``tritonwatch-headroom``):
  ``model:tritonwatch_capacity_requests_per_second:sum`` = the fleet's capacity, summed over replicas
  by (model, version, <grouping>), and ``model:tritonwatch_capacity_utilisation:ratio`` = the fleet's
  request rate (``model:tritonwatch_request_rate:rate5m``) over it: the dashboards' and the ticket's
  (the autoscalers read the same ratio from the raw series, scoped to their Deployment: deploy/scaling.py);
* ``TritonModelNearCapacity`` (ticket), in ``operational.rules.yml``: utilisation above 80 % for 30m;
  ``headroom_cases`` are the promtool cases that prove it: two replicas of one model, each with its own
  capacity, and the fleet's request rate against their sum (never one replica's).
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import build
from tritonwatch.alerts.model import CATALOG, Alert, Group
from tritonwatch.alerts.promcase import (
    RPM,
    SIDECAR_INSTANCE,
    TRITON_INSTANCE,
    VERSION,
    Case,
    Check,
    counter,
    expected,
    gauge,
    model_ticket_labels,
    pct,
    sidecar_labels,
    triton_labels,
)
from tritonwatch.alerts.texts import SEVERITY
from tritonwatch.slo import SLOFile


def capacity_expr(spec: SLOFile) -> str:
    return f"sum by ({catalog.by_clause(spec.grouping)}) ({catalog.CAPACITY})"


def utilisation_expr(spec: SLOFile) -> str:
    rate = catalog.signal(catalog.REQUEST_RATE).record
    return f"{rate} / {catalog.CAPACITY_RECORD}"


def records(spec: SLOFile) -> Group:
    """The group of headroom records (catalog.rules.yml)."""
    return Group(
        "tritonwatch-headroom",
        (
            build.record(catalog.CAPACITY_RECORD, capacity_expr(spec)),
            build.record(catalog.CAPACITY_UTILISATION_RECORD, utilisation_expr(spec)),
        ),
        CATALOG,
    )


def near_capacity_expr() -> str:
    limit = format(catalog.NEAR_CAPACITY_LIMIT, "g")
    return f"{catalog.CAPACITY_UTILISATION_RECORD} > {limit}"


def near_capacity_texts() -> dict[str, str]:
    return {"limit": f"{catalog.NEAR_CAPACITY_LIMIT * 100:g}%"}


def near_capacity_alert() -> Alert:
    return build.alert(
        catalog.NEAR_CAPACITY_ALERT, near_capacity_expr(), {SEVERITY: "ticket"}, near_capacity_texts()
    )


# --- the promtool cases -------------------------------------------------------------------------
MODEL = "any_model"
SAMPLES = 50  # minutes: past the 5m rate window and the alert's 30m hold


def _case(spec: SLOFile, name: str, capacities: tuple[Decimal, Decimal]) -> tuple[Case, Decimal]:
    """Two replicas, each serving RPM requests a minute; their sidecars serve ``capacities`` (req/s)."""
    c = Case(name)
    key = {catalog.MODEL: MODEL, catalog.VERSION: VERSION}
    for i, capacity in enumerate(capacities):
        triton = {**triton_labels(spec, MODEL), "instance": f"{i}-{TRITON_INSTANCE}"}
        c.add(catalog.TRITON_SUCCESS, triton, counter(RPM, SAMPLES))
        sidecar = {**sidecar_labels(spec, **key), "instance": f"{i}-{SIDECAR_INSTANCE}"}
        c.add(catalog.CAPACITY, sidecar, gauge(capacity, SAMPLES))
    utilisation = 2 * RPM / 60 / sum(capacities)
    return c, utilisation


def headroom_cases(spec: SLOFile) -> list[Case]:
    labels = model_ticket_labels(spec, MODEL)
    # 2 x 1000 requests a minute = 33.3 req/s against 20 + 20 req/s: 83 % of the fleet's capacity
    near, u = _case(spec, "a fleet above 80 % of its capacity opens a ticket", (Decimal(20), Decimal(20)))
    values = {**near_capacity_texts(), "value_pct": pct(u)}
    alert = expected(spec, catalog.NEAR_CAPACITY_ALERT, labels, values)
    near.checks += [
        Check("20m", catalog.NEAR_CAPACITY_ALERT),  # pending: not yet held for 30m
        Check("45m", catalog.NEAR_CAPACITY_ALERT, (alert,)),
    ]
    # the same rate against 30 + 20 req/s is 67 %: one replica alone (33.3 / 20) would read 167 %
    room, _ = _case(spec, "a fleet below 80 % of its capacity is quiet", (Decimal(30), Decimal(20)))
    room.checks.append(Check("45m", catalog.NEAR_CAPACITY_ALERT))
    return [near, room]
