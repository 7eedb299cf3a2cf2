"""promtool cases for the stall alerts (``alerts/stall.py``): a wedge pages; idle periods, slow
batches, restarts and a replica joining with requests pending stay quiet; a slow model that really
wedges pages after its longer window.

Samples are a minute apart (``promtests.INTERVAL``). Traffic stops after sample 9 (9m); the fast
model's mean latency is 50 ms (its stall window the first, 2m), the slow one's 40 s (400 s: 10m).
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.alerts import rules
from tritonwatch.alerts.promtests import Case, Check, expected, triton_labels
from tritonwatch.slo import SLOFile

FAST = "stall_fast"
SLOW = "stall_slow"


def _model(c: Case, spec: SLOFile, model: str, success: str, duration: str, pending: str) -> Case:
    labels = triton_labels(spec, model)
    c.add(catalog.TRITON_SUCCESS, labels, success)
    c.add(catalog.TRITON_FAILURE, triton_labels(spec, model, reason="BACKEND"), "0x30")
    c.add(catalog.triton_duration("request"), labels, duration)
    c.add(catalog.TRITON_PENDING, labels, pending)
    return c


def _fast(c: Case, spec: SLOFile, pending: str, success: str = "0+60x9 540x20") -> Case:
    # 60 requests a minute at 50 ms each until 9m.
    return _model(c, spec, FAST, success, "0+3000000x9 27000000x20", pending)


def _alerts(spec: SLOFile, model: str, pending: str, stalled_models: str) -> list[Check]:
    labels = triton_labels(spec, model)
    del labels["job"]
    texts = rules.operational_texts(spec, rules.MODEL_STALLED)
    model_alert = expected(
        spec, rules.MODEL_STALLED, {**labels, rules.SEVERITY: "page"}, {**texts, "value": pending}
    )
    server_labels = {k: v for k, v in labels.items() if k not in (catalog.MODEL, catalog.VERSION)}
    server_alert = expected(
        spec,
        rules.SERVER_STALLED,
        {**server_labels, rules.SEVERITY: "page"},
        {**rules.operational_texts(spec, rules.SERVER_STALLED), "value": stalled_models},
    )
    return [Check("", rules.MODEL_STALLED, (model_alert,)), Check("", rules.SERVER_STALLED, (server_alert,))]


def _at(at: str, checks: list[Check]) -> list[Check]:
    return [Check(at, c.alertname, c.alerts) for c in checks]


def _quiet(*times: str) -> list[Check]:
    return [Check(t, name) for t in times for name in (rules.MODEL_STALLED, rules.SERVER_STALLED)]


def stall_cases(spec: SLOFile) -> list[Case]:
    # Frozen counters, 12 requests pending from 10m: quiet while 9m's completions are in the 2m
    # window, paging at 12m (both alerts: the one model is the whole server). The last quiet check
    # sits half a scrape before 11m: there the 2m window starts on the 9m sample, which Prometheus 2
    # reads and Prometheus 3 does not (its ranges are left-open), so 3.x pages one scrape sooner.
    wedge = _fast(Case("a wedged fast model pages within its 2m window"), spec, "0x9 12x20")
    wedge.checks += _quiet("10m30s") + _at("12m", _alerts(spec, FAST, "12", "1"))

    idle = _fast(Case("an idle model (nothing pending) is quiet"), spec, "1x9 0x20")
    idle.checks += _quiet("12m", "25m")

    # Triton restarts at 10m (two scrapes lost, counters from 0) and serves again at once.
    restart = _fast(Case("a restart is quiet"), spec, "3x9 _x2 0 3x16", success="0+60x9 _x2 0+60x16")
    restart.checks += _quiet("11m", "12m", "13m", "14m", "20m")

    # One request a minute at 40 s each until 9m, then a batch that takes 4 minutes: longer than
    # the first window, inside the slow model's 10m one.
    slow = _model(
        Case("a slow batch inside the model's own stall window is quiet"),
        spec,
        SLOW,
        "0+1x9 9x4 10+1x16",
        "0+40000000x9 360000000x4 400000000+40000000x16",
        "0x9 1x4 0x16",
    )
    slow.checks += _quiet("13m", "14m", "20m")

    # The slow model wedged for good: its 10m window has no completion from 20m on.
    slow_wedge = _model(
        Case("a wedged slow model pages after its 10m window"),
        spec,
        SLOW,
        "0+1x9 9x20",
        "0+40000000x9 360000000x20",
        "0x9 1x20",
    )
    slow_wedge.checks += _quiet("14m", "18m30s") + _at("20m", _alerts(spec, SLOW, "1", "1"))  # as above

    # A replica joins at 5m (a scale-up; a restart, model load or new version starts series the
    # same way) with 4 requests pending from its first sample and its first completions in its
    # second minute, beside one serving steadily all along (which gives the model its 2m window).
    # At 6m its two samples show no completion: a rule judging a series younger than its window
    # pages there (and VictoriaMetrics reads increase() over a lone first sample as 0).
    young = _fast(Case("a replica joining with requests pending is quiet"), spec, "1x29", "0+60x29")
    labels = triton_labels(spec, FAST, instance="triton-new:8002")
    young.add(catalog.TRITON_SUCCESS, labels, "_x5 0 0 60+60x22")
    young.add(catalog.TRITON_FAILURE, {**labels, "reason": "BACKEND"}, "_x5 0x24")
    young.add(catalog.triton_duration("request"), labels, "_x5 0 0 3000000+3000000x22")
    young.add(catalog.TRITON_PENDING, labels, "_x5 4x24")
    young.checks += _quiet("5m", "6m", "7m", "12m")
    return [wedge, idle, restart, slow, slow_wedge, young]
