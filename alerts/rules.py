"""Prometheus rules from an ``SLOFile``, as a chain of small named steps.

``groups(spec)`` returns the typed groups (``alerts/model.py``), each tagged with its family, layer,
objective and model; ``alerts/rulefiles.py`` picks each one's file:

* ``catalog.rules.yml`` -- ``records.catalog_rules``: one recording rule per catalog signal (and batch
  efficiency), ``sum by (model, version, <grouping>)`` of rates, then divided, e.g.
  ``model:tritonwatch_queue_time_ratio:rate5m``; and the catalog's GPU rules (busy share per model
  and GPU, watts per GPU, joules per inference).
* ``model-<model>.rules.yml`` -- the model's operational group and one group per SLO: ``sli_rules`` (``alerts/sli.py``: the 5m rates of the SLI's
  bad and total events from the raw series, then ``slo:sli_total:rate<window>`` and
  ``slo:sli_error:ratio_rate<window>`` for 5m, 30m, 1h, 2h, 6h, 1d, 3d and the SLO window from those
  records, labels ``slo``, ``model``, grouping; ``slo:sli_requests:increase<window>``),
  ``budget_rules`` (``slo:objective:ratio``, ``slo:error_budget_remaining:ratio``), ``burn_alerts``
  (``TritonSLOErrorBudgetBurn``, one rule per severity) and ``nodata_alerts`` (``TritonSLONoData``).
  The model's operational group (``model_alerts``): queue time, batch efficiency, cache hit ratio, an
  availability SLI blind to uncounted errors.
* ``operational.rules.yml`` -- the fleet's operational alerts: a Triton target gone, stalls, near
  capacity, sidecar down, Watchdog; ``replica.rules.yml`` those that read one target's series (server
  down, model not ready, GPU memory, XID, sidecar stale).

``add_runbook_links`` runs last and gives every alert its ``runbook_url``.

Alert texts are Python format strings over placeholders (``{model}``, ``{value_pct}``...): the rules
fill them with Go template snippets, the promtool tests (``alerts/promtests.py``) with the values
they expect, so the tests prove the rendered text too.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from tritonwatch import catalog
from tritonwatch.alerts import (
    build,
    headroom,
    layers,
    nodata,
    records,
    sli,
    stall,
    traffic,
    where_time_went,
    windows,
)
from tritonwatch.alerts import model as typed
from tritonwatch.alerts.model import Alert, Group, Rule
from tritonwatch.alerts.texts import (  # noqa: F401 (re-exported: rules.X is how the rest reads them)
    ALERTS,
    BUDGET_REMAINING_RECORD,
    BURN,
    CAUSE,
    ERRORS_UNCOUNTED,
    FOR,
    GPU_MEMORY_NEAR_FULL,
    GPU_XID,
    MODEL_NOT_READY,
    MODEL_STALLED,
    NO_DATA,
    NO_DATA_ABSENT,
    NO_DATA_BUCKET,
    NO_DATA_FRONT,
    NO_DATA_FRONT_SERIES,
    NO_DATA_SERIES,
    NO_DATA_TRAFFIC_WINDOW,
    OBJECTIVE_RECORD,
    OPERATIONAL,
    QUEUE_TIME_HIGH,
    SERVER_ABSENT_TEXTS,
    SERVER_DOWN,
    SERVER_STALLED,
    SEVERITY,
    SIDECAR_DOWN,
    SIDECAR_STALE,
    SLO_LABEL,
    STALE_WINDOW,
    TEXTS,
    WATCHDOG,
    XID_WINDOW,
    _go_vars,
    render,
)
from tritonwatch.slo import SLO, Objective, SLOFile, format_duration
from tritonwatch.validators import promql_string

# --- PromQL and rule helpers (alerts/build.py) --------------------------------------------------
_by = build.by
_select = build.select
_model = build.model
_num = build.num
_request_phase = build.request_phase
_alert = build.alert


# --- step 2: SLI records per window (alerts/sli.py) ----------------------------------------------
latency_histogram = sli.latency_histogram
front_counters = sli.front_counters
front_histogram = sli.front_histogram


def sli_record(window: str) -> str:
    return catalog.slo_sli_error_record(window)


def sli_rules(spec: SLOFile, obj: Objective) -> list[Rule]:
    return sli.sli_rules(spec, obj) + traffic.requests_rules(spec, obj, sli.sli_labels(spec, obj))


def _slo_selector(obj: Objective) -> str:
    return f'{SLO_LABEL}="{obj.name}"'


def budget_rules(spec: SLOFile, obj: Objective) -> list[Rule]:
    """The objective as a ratio and the share of the window's error budget still unspent."""
    whole = _select(sli_record(spec.window_text), _slo_selector(obj))
    return [
        build.record(
            OBJECTIVE_RECORD,
            f"vector({_num(obj.objective / 100)})",
            {catalog.MODEL: obj.model, SLO_LABEL: obj.name},
        ),
        build.record(BUDGET_REMAINING_RECORD, f"1 - {whole} / {_num(obj.budget)}", {SLO_LABEL: obj.name}),
    ]


# --- step 3: multiwindow multi-burn-rate alerts -------------------------------------------------
def burn_expr(spec: SLOFile, obj: Objective, severity: str) -> str:
    """Burn rate (error ratio / budget) over both windows of each pair above the factor; the alert's
    value is the long window's burn rate of the first pair that fires. Availability reads each ratio
    through the minimum-traffic guard (``alerts/traffic.py``)."""
    pairs = []
    for w in windows.for_severity(severity):
        factor = _num(windows.burn_factor(w, spec.window))
        long_ = traffic.guarded_ratio(spec, obj, w.long, _slo_selector(obj))
        short = traffic.guarded_ratio(spec, obj, w.short, _slo_selector(obj))
        budget = _num(obj.budget)
        pairs.append(f"(\n  {long_} / {budget} > {factor}\nand\n  {short} / {budget} > {factor}\n)")
    return "\nor\n".join(pairs)


def budget_left_template(spec: SLOFile) -> str:
    """Go template: the unspent share of the error budget, read at alert time."""
    fmt = [f"{SLO_LABEL}=%q", f"{catalog.MODEL}=%q", *(f"{g}=%q" for g in spec.grouping)]
    args = " ".join(f"$labels.{label}" for label in (SLO_LABEL, catalog.MODEL, *spec.grouping))
    query = f"clamp_min({BUDGET_REMAINING_RECORD}{{{','.join(fmt)}}}, 0)"
    return (
        f'{{{{ with printf "{query}" {args} | query }}}}'
        "{{ . | first | value | humanizePercentage }}{{ else }}an unknown share{{ end }}"
    )


LATENCY_GOOD = {
    "latency": "within {threshold}",
    "time_to_first_token": "get their first token within {threshold}",
    "inter_token_latency": "stream tokens at most {threshold} apart",
}


def burn_texts(spec: SLOFile, obj: Objective) -> dict[str, str]:
    """The placeholders of the burn alert that are fixed when the rules are generated."""
    lat = obj.latency
    if lat is None:
        good = "succeed"
    else:
        good = LATENCY_GOOD[obj.kind].format(threshold=format_duration(lat.threshold))
    return {"objective": _num(obj.objective), "good": good, "window": spec.window_text}


def burn_alerts(spec: SLOFile, obj: Objective) -> list[Rule]:
    where = (
        where_time_went.template(spec, obj, front_histogram(spec, obj) is not None)
        if where_time_went.applies(obj)
        else ""
    )
    fixed = {**burn_texts(spec, obj), "budget_left": budget_left_template(spec), "split": where}
    return [
        _alert(
            BURN,
            burn_expr(spec, obj, severity),
            {SEVERITY: severity, SLO_LABEL: obj.name, catalog.MODEL: obj.model},
            fixed,
        )
        for severity in windows.SEVERITIES
    ]


def slo_groups(spec: SLOFile) -> list[Group]:
    """One group per objective, tagged with it and its model (its rule file is its model's)."""
    return [
        Group(
            f"tritonwatch-slo-{obj.name}",
            tuple(sli_rules(spec, obj) + budget_rules(spec, obj) + burn_alerts(spec, obj))
            + tuple(nodata.nodata_alerts(spec, obj)),
            typed.SLO,
            objective=obj.name,
            model=obj.model,
        )
        for obj in sorted(spec.objectives(), key=lambda o: o.name)
    ]


# --- step 4: operational alerts -----------------------------------------------------------------
def up_matcher(spec: SLOFile) -> str:
    return f"{catalog.TARGET_UP}{{job=~{promql_string(spec.up_job)}}}"


def operational_texts(spec: SLOFile, name: str, slo: SLO | None = None) -> dict[str, str]:
    """Placeholders fixed at generation time for an operational alert (shared with the tests)."""
    fixed: dict[str, str] = {}
    if name == SERVER_DOWN:
        fixed["up_job"] = f"job=~{promql_string(spec.up_job)}"
    elif name in OPERATIONAL and slo and (limit := slo.limit(OPERATIONAL[name])) is not None:
        fixed["limit"] = _pct(limit)
    elif name == GPU_MEMORY_NEAR_FULL:
        fixed["limit"] = _pct(spec.gpu_memory_used_max)
    elif name == SIDECAR_DOWN:
        fixed["up"] = catalog.UP
    elif name == SIDECAR_STALE:
        fixed["stale_window"] = STALE_WINDOW
    elif name in (SERVER_STALLED, MODEL_STALLED):
        fixed.update(stall.texts())
    return fixed


def _pct(ratio: float) -> str:
    return f"{_num(Decimal(str(ratio)) * 100)}%"


def _per_model(spec: SLOFile, name: str, slo: SLO, record: str, op: str, limit: float) -> Rule:
    expr = f"{_select(record, _model(slo.model))} {op} {_num(limit)}"
    return _alert(name, expr, {SEVERITY: "ticket"}, operational_texts(spec, name, slo), about=slo.model)


def operational_alerts(spec: SLOFile) -> list[Group]:
    """The fleet's operational alerts (global layer) and, in their own group, the alerts whose every
    result reads one target's series (replica layer, ``alerts/layers.py``): decided here, rule by rule."""
    ticket = {SEVERITY: "ticket"}
    by_model = _by(spec, catalog.MODEL, catalog.VERSION, "instance")
    by_target = _by(spec, "instance", catalog.TARGET)
    stale = (
        f"max by ({by_target}) ({catalog.UP}) == 0\nor\n"
        f"max by ({by_target}) (changes({catalog.SCRAPE_DURATION}[{STALE_WINDOW}])) == 0"
    )
    # Per target: up == 0 of one target (not the absent() one); min by (model, version, instance) of
    # one sidecar; one sidecar's gauge per GPU, no aggregation (memory, XID); max by (instance, target)
    # of one sidecar.
    replica: list[Rule] = [
        _alert(
            SERVER_DOWN,
            f"{up_matcher(spec)} == 0",
            {SEVERITY: "page", CAUSE: "scrape_failed"},
            operational_texts(spec, SERVER_DOWN),
        ),
        _alert(MODEL_NOT_READY, f"min by ({by_model}) ({catalog.MODEL_READY}) == 0", ticket),
        _alert(
            GPU_MEMORY_NEAR_FULL,
            f"{catalog.GPU_MEMORY_USED_RATIO} > {_num(spec.gpu_memory_used_max)}",
            ticket,
            operational_texts(spec, GPU_MEMORY_NEAR_FULL),
        ),
        # DCGM keeps the last XID code until the GPU resets: alert when a code appears or changes,
        # and resolve an hour later, instead of paging on an old code for ever.
        _alert(GPU_XID, f"{catalog.GPU_XID} > 0 and changes({catalog.GPU_XID}[{XID_WINDOW}]) > 0", ticket),
        _alert(SIDECAR_STALE, stale, ticket, operational_texts(spec, SIDECAR_STALE)),
    ]
    fleet: list[Rule] = [
        _alert(
            SERVER_DOWN,
            f"absent({up_matcher(spec)})",
            {SEVERITY: "page", CAUSE: "no_target"},
            operational_texts(spec, SERVER_DOWN),
            SERVER_ABSENT_TEXTS,
            grouped=False,
        ),
        *stall.alerts(spec),
    ]
    fleet += [
        headroom.near_capacity_alert(),
        _alert(
            SIDECAR_DOWN,
            f"absent({catalog.UP})",
            ticket,
            operational_texts(spec, SIDECAR_DOWN),
            grouped=False,
        ),
        _alert(WATCHDOG, "vector(1)", {SEVERITY: "none"}, grouped=False),
    ]
    return [
        Group("tritonwatch-operational", tuple(fleet), typed.OPERATIONAL),
        Group(layers.REPLICA_GROUP, tuple(replica), typed.OPERATIONAL, layer=layers.REPLICA),
    ]


def model_alerts(spec: SLOFile) -> list[Group]:
    """Per model, its operational objectives' alerts and the alert that its availability SLI on Triton's
    counters is blind, in a group tagged with the model (its rule file is the model's: a fleet's
    operational file and its tests do not grow with the models)."""
    out = []
    uncounted = uncounted_objectives(spec)
    for slo in sorted(spec.slos, key=lambda s: s.model):
        alerts: list[Rule] = []
        for o in catalog.OPERATIONAL_OBJECTIVES:
            limit = slo.limit(o)
            if limit is not None:
                alerts.append(_per_model(spec, o.alert.name, slo, o.record, o.op, limit))
        alerts += [uncounted_alert(spec, o) for o in uncounted if o.model == slo.model]
        if alerts:
            out.append(
                Group(
                    f"tritonwatch-operational-{slo.model}", tuple(alerts), typed.OPERATIONAL, model=slo.model
                )
            )
    return out


def uncounted_objectives(spec: SLOFile) -> list[Objective]:
    """The availability objectives whose SLI reads Triton's counters (not ``from:`` a front)."""
    objs = (o for o in spec.objectives() if o.kind == "availability" and front_counters(spec, o) is None)
    return sorted(objs, key=lambda o: o.name)


def uncounted_alert(spec: SLOFile, obj: Objective) -> Rule:
    """That SLI is blind while the sidecar marks its model as one whose errors Triton may not count."""
    marked = _select(catalog.MODEL_UNCOUNTED_ERRORS, _model(obj.model))
    expr = f"max by ({_by(spec, catalog.MODEL, 'reason')}) ({marked}) > 0"
    # The SLO is a static label, not in $labels at template time: spelled out.
    return _alert(
        ERRORS_UNCOUNTED, expr, {SEVERITY: "ticket", SLO_LABEL: obj.name}, {"slo": obj.name}, about=obj.model
    )


# --- step 5: runbook links ----------------------------------------------------------------------
runbook_url = build.runbook_url


def add_runbook_links(spec: SLOFile, groups: list[Group]) -> list[Group]:
    def linked(rule: Rule) -> Rule:
        return rule.annotated(runbook_url=runbook_url(spec, rule.alert)) if isinstance(rule, Alert) else rule

    return [g.with_rules(tuple(linked(r) for r in g.rules)) for g in groups]


# --- the chain ----------------------------------------------------------------------------------
def groups(spec: SLOFile) -> list[Group]:
    """Every rule group, typed and tagged, in generation order."""
    return (
        records.catalog_rules(spec)
        + add_runbook_links(spec, operational_alerts(spec))
        + add_runbook_links(spec, model_alerts(spec))
        + add_runbook_links(spec, slo_groups(spec))
    )


def rule_files(spec: SLOFile) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Every rule file, by name, as the files hold it (``alerts/rulefiles.py``)."""
    from tritonwatch.alerts import rulefiles

    return rulefiles.documents(groups(spec))
