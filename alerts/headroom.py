"""Rules on the sidecar's SLO-bound capacity (issue 39, docs/headroom.md), and their promtool cases.

* records, in ``catalog.rules.yml`` (group ``tritonwatch-headroom``):
  ``model:tritonwatch_capacity_requests_per_second:sum`` = the fleet's capacity, summed over replicas
  by (model, version, <grouping>), and ``model:tritonwatch_capacity_utilisation:ratio`` = the fleet's
  request rate (``model:tritonwatch_request_rate:rate5m``) over it: the dashboards' and the ticket's
  (the autoscalers read the same ratio from the raw series, scoped to their Deployment: deploy/scaling.py);
* ``TritonModelNearCapacity`` (ticket), in ``operational.rules.yml``: utilisation above 80 % for 30m.
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.alerts import build
from tritonwatch.alerts.model import CATALOG, Group
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
