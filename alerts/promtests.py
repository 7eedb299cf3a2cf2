"""promtool unit tests for the generated rules: for every alert, input series where it must fire
(with its exact labels and rendered annotations) and series where it must stay quiet.

``promtestfiles.test_files(spec)`` assembles these cases (and those of ``objectivecases``, ``trafficcases``,
``nodata``, ``stall`` and ``headroom``) into ``{"tests/slo-<objective>.test.yml": ...,
"tests/operational.test.yml": ...}``, each runnable with ``promtool test rules``. The series are built from the same catalog names and
the same SLO objects as the rules, but the expected values are worked out here, by hand, from the
inputs: a rule that computes the wrong thing fails its test. (Watchdog has no quiet case: it fires
always, by design.)
"""

from __future__ import annotations

from decimal import Decimal

from tritonwatch import catalog
from tritonwatch.alerts import rules, where_time_went, windows
from tritonwatch.alerts.promcase import (  # noqa: F401 (re-exported: the case modules read them here)
    FRONT_INSTANCE,
    FRONT_JOB,
    GPU,
    INTERVAL,
    LONG,
    MAX_BATCH,
    RPM,
    SIDECAR_INSTANCE,
    SIDECAR_JOB,
    TRITON_INSTANCE,
    VERSION,
    Case,
    Check,
    counter,
    expected,
    front_buckets,
    front_series,
    front_traffic,
    gauge,
    group_labels,
    model_ticket_labels,
    pct,
    sidecar_labels,
    test_job,
    triton_labels,
)
from tritonwatch.slo import Objective, SLOFile

OPERATIONAL_RULES = ("catalog.rules.yml", "operational.rules.yml", "replica.rules.yml")


# --- SLO burn-rate and no-data cases ------------------------------------------------------------
def _burn_factors(spec: SLOFile) -> tuple[Decimal, Decimal]:
    """A burn rate that opens a ticket but never pages: halfway between the slowest page and the fastest
    ticket factor under it (at a short SLO window the slowest page is held at the fastest ticket)."""
    page = windows.slowest_page_factor(spec.window)
    ticket = max(Decimal(str(w.factor)) for w in windows.for_severity("ticket") if w.factor < page)
    return ((ticket + page) / 2).quantize(Decimal("0.1")), Decimal("0.5")


def _traffic(spec: SLOFile, case: Case, obj: Objective, bad_per_minute: Decimal, samples: int) -> Case:
    """RPM requests a minute for the objective's model, ``bad_per_minute`` of them bad."""
    model = obj.model
    if rules.front_counters(spec, obj) is not None:
        front_traffic(spec, case, obj, bad_per_minute, samples)
    elif rules.front_histogram(spec, obj) is not None:
        front_buckets(spec, case, obj, RPM - bad_per_minute, RPM, samples)
    elif obj.kind == "availability":
        case.add(catalog.TRITON_SUCCESS, triton_labels(spec, model), counter(RPM - bad_per_minute, samples))
        case.add(
            catalog.TRITON_FAILURE,
            triton_labels(spec, model, reason="BACKEND"),
            counter(bad_per_minute, samples),
        )
        case.add(catalog.TRITON_FAILURE, triton_labels(spec, model, reason="CANCELED"), counter(0, samples))
    else:
        lat = obj.latency
        assert lat is not None
        le = repr(lat.threshold)
        name, hist = _histogram(spec, obj)
        case.add(f"{name}_bucket", {**hist, "le": le}, counter(RPM - bad_per_minute, samples))
        case.add(f"{name}_bucket", {**hist, "le": "+Inf"}, counter(RPM, samples))
        case.add(f"{name}_count", hist, counter(RPM, samples))
        case.add(catalog.TRITON_SUCCESS, triton_labels(spec, model), counter(RPM, samples))
    return case


def _histogram(spec: SLOFile, obj: Objective) -> tuple[str, dict[str, str]]:
    """The sidecar histogram a latency-shaped objective reads, and its series' labels."""
    name, _fixed = rules.latency_histogram(obj.kind)
    labels = {catalog.MODEL: obj.model, catalog.VERSION: VERSION}
    if obj.kind == "latency":
        labels[catalog.PHASE] = "request"
    return name, sidecar_labels(spec, **labels)


def _burn_alert(spec: SLOFile, obj: Objective, severity: str, burn: str) -> dict[str, dict[str, str]]:
    labels = {
        rules.SEVERITY: severity,
        rules.SLO_LABEL: obj.name,
        catalog.MODEL: obj.model,
        **group_labels(spec),
    }
    # The cases carry no Triton duration counters: a latency page says where the time went is unknown.
    where = f" {where_time_went.unknown(obj)}" if where_time_went.applies(obj) else ""
    values = {**rules.burn_texts(spec, obj), "value_x": burn, "budget_left": "0%", "split": where}
    return expected(spec, rules.BURN, labels, values)


def burn_cases(spec: SLOFile, obj: Objective) -> list[Case]:
    ticket_burn, quiet_burn = _burn_factors(spec)
    out = []
    # All requests bad: every window's error ratio is 1, the burn rate 1 / budget.
    full = _traffic(spec, Case(f"{obj.name}: total outage pages (and tickets)"), obj, RPM, 30)
    full_burn = f"{float(1 / obj.budget):.1f}"
    full.checks.append(
        Check(
            "10m",
            rules.BURN,
            (_burn_alert(spec, obj, "page", full_burn), _burn_alert(spec, obj, "ticket", full_burn)),
        )
    )
    out.append(full)
    slow = Case(f"{obj.name}: steady {ticket_burn}x burn opens a ticket and never pages")
    _traffic(spec, slow, obj, RPM * obj.budget * ticket_burn, LONG)
    for t in ("30m", f"{LONG}m"):
        slow.checks.append(Check(t, rules.BURN, (_burn_alert(spec, obj, "ticket", f"{ticket_burn:.1f}"),)))
    out.append(slow)
    quiet = Case(f"{obj.name}: {quiet_burn}x burn fires nothing")
    _traffic(spec, quiet, obj, RPM * obj.budget * quiet_burn, LONG)
    quiet.checks += [Check("10m", rules.BURN), Check(f"{LONG}m", rules.BURN)]
    out.append(quiet)
    if rules.front_counters(spec, obj) is not None:
        # Triton failing every request must not move an SLI that reads the front's counters.
        blind = Case(f"{obj.name}: Triton's own counters are not read")
        blind.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(0, 30))
        blind.add(catalog.TRITON_FAILURE, triton_labels(spec, obj.model, reason="BACKEND"), counter(RPM, 30))
        front_traffic(spec, blind, obj, Decimal(0), 30)
        blind.checks.append(Check("10m", rules.BURN))
        out.append(blind)
    elif obj.kind == "availability":
        canceled = Case(f"{obj.name}: requests the client canceled are not errors")
        canceled.add(catalog.TRITON_SUCCESS, triton_labels(spec, obj.model), counter(RPM / 2, 30))
        canceled.add(catalog.TRITON_FAILURE, triton_labels(spec, obj.model, reason="BACKEND"), counter(0, 30))
        canceled.add(
            catalog.TRITON_FAILURE, triton_labels(spec, obj.model, reason="CANCELED"), counter(RPM / 2, 30)
        )
        canceled.checks.append(Check("10m", rules.BURN))
        out.append(canceled)
    else:
        lat = obj.latency
        assert lat is not None
        # Every sampled request slow, but fewer samples in any window than min_samples.
        per_minute = Decimal(lat.min_samples - 1) / Decimal(LONG * 1.2)
        sparse = Case(f"{obj.name}: fewer than {lat.min_samples} samples per window never fire")
        name, hist = _histogram(spec, obj)
        if lat.source is not None:  # latency.from: the front's requests, not the sidecar's samples
            front_buckets(spec, sparse, obj, Decimal(0), per_minute.quantize(Decimal("0.0001")), LONG)
            blind = Case(f"{obj.name}: the sidecar's histogram is not read")
            blind.add(f"{name}_bucket", {**hist, "le": repr(lat.threshold)}, counter(0, 30))
            blind.add(f"{name}_count", hist, counter(RPM, 30))
            front_buckets(spec, blind, obj, RPM, RPM, 30)
            out.append(blind)
            blind.checks.append(Check("10m", rules.BURN))
        else:
            sparse.add(f"{name}_bucket", {**hist, "le": repr(lat.threshold)}, counter(0, LONG))
            sparse.add(f"{name}_count", hist, counter(per_minute.quantize(Decimal("0.0001")), LONG))
        sparse.checks += [Check("10m", rules.BURN), Check(f"{LONG}m", rules.BURN)]
        out.append(sparse)
    return out


# --- operational cases --------------------------------------------------------------------------
def _between(limit: float, upper: bool) -> Decimal:
    """A ratio clearly past ``limit``: halfway to 1 (upper) or to 0."""
    d = Decimal(str(limit))
    return ((d + 1) / 2) if upper else (d / 2)


def server_cases(spec: SLOFile) -> list[Case]:
    job = test_job(spec)
    up = {"instance": TRITON_INSTANCE, "job": job, **group_labels(spec)}
    values = rules.operational_texts(spec, rules.SERVER_DOWN)
    down = Case("Triton target down pages").add("up", up, "1x5 0x20")
    down.checks += [
        Check("4m", rules.SERVER_DOWN),
        Check(
            "15m",
            rules.SERVER_DOWN,
            (
                expected(
                    spec,
                    rules.SERVER_DOWN,
                    {**up, rules.SEVERITY: "page", rules.CAUSE: "scrape_failed"},
                    values,
                ),
            ),
        ),
    ]
    absent = Case("no Triton target at all pages").add(
        catalog.UP, sidecar_labels(spec, target="triton"), gauge(1, 20)
    )
    absent_labels = {rules.SEVERITY: "page", rules.CAUSE: "no_target"}
    absent_alert = expected(spec, rules.SERVER_DOWN, absent_labels, values, rules.SERVER_ABSENT_TEXTS)
    absent.checks.append(Check("10m", rules.SERVER_DOWN, (absent_alert,)))
    healthy = Case("Triton target up is quiet").add("up", up, gauge(1, 20))
    healthy.checks.append(Check("15m", rules.SERVER_DOWN))
    return [down, absent, healthy]


def ready_cases(spec: SLOFile) -> list[Case]:
    model = "any_model"
    labels = sidecar_labels(spec, **{catalog.MODEL: model, catalog.VERSION: VERSION})
    down = Case("a model version that is not READY").add(catalog.MODEL_READY, labels, "1x5 0x20")
    exp_labels = {catalog.MODEL: model, catalog.VERSION: VERSION, "instance": SIDECAR_INSTANCE}
    exp_labels.update({**group_labels(spec), rules.SEVERITY: "ticket"})
    down.checks.append(
        Check("15m", rules.MODEL_NOT_READY, (expected(spec, rules.MODEL_NOT_READY, exp_labels, {}),))
    )
    ready = Case("a READY model version is quiet").add(catalog.MODEL_READY, labels, gauge(1, 20))
    ready.checks.append(Check("15m", rules.MODEL_NOT_READY))
    return [down, ready]


def uncounted_cases(spec: SLOFile, model: str) -> list[Case]:
    """An availability SLO on Triton's counters of a model marked as not counting its errors fires;
    the same SLO's model unmarked, and another model marked, are quiet."""
    out = []
    for obj in (o for o in rules.uncounted_objectives(spec) if o.model == model):
        marked = sidecar_labels(spec, **{catalog.MODEL: obj.model, catalog.VERSION: VERSION})
        blind = Case(f"{obj.name} reads Triton's counters of a python model")
        blind.add(catalog.MODEL_UNCOUNTED_ERRORS, {**marked, "reason": "python_backend"}, gauge(1, 10))
        labels = {catalog.MODEL: obj.model, "reason": "python_backend", **group_labels(spec)}
        labels.update({rules.SEVERITY: "ticket", rules.SLO_LABEL: obj.name})
        alert = expected(spec, rules.ERRORS_UNCOUNTED, labels, {"slo": obj.name})
        blind.checks.append(Check("5m", rules.ERRORS_UNCOUNTED, (alert,)))
        other = {**marked, catalog.MODEL: f"not_{obj.model}", "reason": "decoupled"}
        seeing = Case(f"{obj.name} on a model Triton counts is quiet")
        seeing.add(catalog.MODEL_UNCOUNTED_ERRORS, other, gauge(1, 10))
        seeing.add(catalog.MODEL_READY, marked, gauge(1, 10))
        seeing.checks.append(Check("5m", rules.ERRORS_UNCOUNTED))
        out += [blind, seeing]
    return out


def gpu_cases(spec: SLOFile) -> list[Case]:
    labels = sidecar_labels(spec, gpu_uuid=GPU)
    out = []
    for fire, ratio in (
        (True, _between(spec.gpu_memory_used_max, True)),
        (False, _between(spec.gpu_memory_used_max, False)),
    ):
        c = Case(f"GPU memory {pct(ratio)} used {'fires' if fire else 'is quiet'}")
        c.add(catalog.GPU_MEMORY_USED_RATIO, labels, gauge(ratio, 20))
        values = {**rules.operational_texts(spec, rules.GPU_MEMORY_NEAR_FULL), "value_pct": pct(ratio)}
        alerts = (
            (expected(spec, rules.GPU_MEMORY_NEAR_FULL, {**labels, rules.SEVERITY: "ticket"}, values),)
            if fire
            else ()
        )
        c.checks.append(Check("15m", rules.GPU_MEMORY_NEAR_FULL, alerts))
        out.append(c)
    xid = Case("an XID error fires").add(catalog.GPU_XID, labels, "0x5 79x10")
    xid_alert = expected(spec, rules.GPU_XID, {**labels, rules.SEVERITY: "ticket"}, {"value": "79"})
    xid.checks += [Check("3m", rules.GPU_XID), Check("8m", rules.GPU_XID, (xid_alert,))]
    no_xid = Case("no XID error is quiet").add(catalog.GPU_XID, labels, gauge(0, 15))
    no_xid.checks.append(Check("10m", rules.GPU_XID))
    # The code stays until the GPU resets: an hour after it appeared, it no longer alerts.
    old_xid = Case("an XID code unchanged for an hour is quiet").add(catalog.GPU_XID, labels, "0x5 79x100")
    old_xid.checks += [Check("10m", rules.GPU_XID, (xid_alert,)), Check("90m", rules.GPU_XID)]
    return [*out, xid, no_xid, old_xid]


def sidecar_cases(spec: SLOFile) -> list[Case]:
    up_triton = {"instance": TRITON_INSTANCE, "job": test_job(spec), **group_labels(spec)}
    gone = Case("no sidecar series at all").add("up", up_triton, gauge(1, 20))
    gone_alert = expected(
        spec,
        rules.SIDECAR_DOWN,
        {rules.SEVERITY: "ticket"},
        rules.operational_texts(spec, rules.SIDECAR_DOWN),
    )
    gone.checks.append(Check("10m", rules.SIDECAR_DOWN, (gone_alert,)))

    labels = sidecar_labels(spec, target="triton")
    exp = {
        "instance": SIDECAR_INSTANCE,
        catalog.TARGET: "triton",
        **group_labels(spec),
        rules.SEVERITY: "ticket",
    }
    stale_values = rules.operational_texts(spec, rules.SIDECAR_STALE)
    failing = Case("the sidecar cannot scrape Triton")
    failing.add(catalog.UP, labels, "1x5 0x20").add(catalog.SCRAPE_DURATION, labels, "0.01+0.001x25")
    failing.checks.append(
        Check("15m", rules.SIDECAR_STALE, (expected(spec, rules.SIDECAR_STALE, exp, stale_values),))
    )
    stuck = Case("the sidecar stopped scraping Triton")
    stuck.add(catalog.UP, labels, gauge(1, 25)).add(catalog.SCRAPE_DURATION, labels, "0.01+0.001x5 0.015x20")
    stuck.checks.append(
        Check("17m", rules.SIDECAR_STALE, (expected(spec, rules.SIDECAR_STALE, exp, stale_values),))
    )
    healthy = Case("a healthy sidecar is quiet")
    healthy.add(catalog.UP, labels, gauge(1, 25)).add(catalog.SCRAPE_DURATION, labels, "0.01+0.001x25")
    healthy.checks += [Check("15m", rules.SIDECAR_STALE), Check("15m", rules.SIDECAR_DOWN)]
    return [gone, failing, stuck, healthy]


def watchdog_cases(spec: SLOFile) -> list[Case]:
    c = Case("Watchdog always fires").add(
        "up", {"instance": TRITON_INSTANCE, "job": test_job(spec)}, gauge(1, 5)
    )
    c.checks.append(
        Check("1m", rules.WATCHDOG, (expected(spec, rules.WATCHDOG, {rules.SEVERITY: "none"}, {}),))
    )
    return [c]
