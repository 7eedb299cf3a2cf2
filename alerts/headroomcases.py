"""promtool cases for ``TritonModelNearCapacity`` (alerts/headroom.py): two replicas of one model, each
with its own capacity, and the fleet's request rate against their sum (never one replica's)."""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import headroom
from tritonwatch.alerts.promtests import (
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
from tritonwatch.slo import SLOFile

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
    values = {**headroom.near_capacity_texts(), "value_pct": pct(u)}
    alert = expected(spec, catalog.NEAR_CAPACITY_ALERT, labels, values)
    near.checks += [
        Check("20m", catalog.NEAR_CAPACITY_ALERT),  # pending: not yet held for 30m
        Check("45m", catalog.NEAR_CAPACITY_ALERT, (alert,)),
    ]
    # the same rate against 30 + 20 req/s is 67 %: one replica alone (33.3 / 20) would read 167 %
    room, _ = _case(spec, "a fleet below 80 % of its capacity is quiet", (Decimal(30), Decimal(20)))
    room.checks.append(Check("45m", catalog.NEAR_CAPACITY_ALERT))
    return [near, room]
