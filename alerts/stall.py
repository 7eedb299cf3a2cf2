"""Stall alerts: requests pending, none completing (PromQL from the catalog's stall definition).

A wedged Triton (a crash that did not exit, a backend blocked in ``execute``) keeps answering
``/metrics`` with frozen counters: every target stays up and request rates only decay to 0, which an
idle model does too. What tells the two apart is work waiting: a stalled model has had requests
pending at every scrape of a window and completed none (success or failure) in it.

Emits, across replicas and per Triton process (``instance``) and the SLO file's grouping labels:

* ``model:tritonwatch_stall_window_seconds:max6h{model,version}``: ``STALL_LATENCY_FACTOR`` x the
  worst 5m mean request latency over ``STALL_LATENCY_LOOKBACK``, at least the first stall window;
* ``TritonModelStalled`` (page): per model, version and instance, the window chosen from that record
  among ``STALL_WINDOWS`` (``STALL_DEFAULT_WINDOW`` for a model with no latency in the lookback);
  its value is the fewest requests pending over the window; a series younger than its window is
  not judged (``_aged``);
* ``TritonServerStalled`` (page): per instance, every stalled model counted, while no model on it
  completed anything over the first window; its value is the number of stalled models.

``alerts(spec)`` builds both alerts and ``stall_cases(spec)`` the promtool cases that prove them: a
wedge pages; idle periods, slow batches, restarts and a replica joining with requests pending stay
quiet; a slow model that really wedges pages after its longer window.

Samples are a minute apart (``promcase.INTERVAL``). Traffic stops after sample 9 (9m); the fast
model's mean latency is 50 ms (its stall window the first, 2m), the slow one's 40 s (400 s: 10m).
"""

from __future__ import annotations

from collections.abc import Sequence

from tritonwatch import catalog
from tritonwatch.alerts import build
from tritonwatch.alerts.model import Alert
from tritonwatch.alerts.promcase import Case, Check, expected, triton_labels
from tritonwatch.alerts.texts import MODEL_STALLED, SERVER_STALLED, SEVERITY
from tritonwatch.slo import SLOFile, format_duration, parse_duration


def _by(*labels: str, grouping: Sequence[str]) -> str:
    return ", ".join(dict.fromkeys([*labels, *grouping]))


def model_by(grouping: Sequence[str]) -> str:
    return _by(catalog.MODEL, catalog.VERSION, grouping=grouping)


def instance_model_by(grouping: Sequence[str]) -> str:
    return _by(catalog.MODEL, catalog.VERSION, "instance", grouping=grouping)


def server_by(grouping: Sequence[str]) -> str:
    return _by("instance", grouping=grouping)


def seconds(window: str) -> int:
    return int(parse_duration(window, "stall window"))


def window_record_expr(grouping: Sequence[str] = ()) -> str:
    """The stall window each model needs, in seconds, from its own latency (the recording rule)."""
    latency = catalog.signal(catalog.LATENCY, phase="request").record
    worst = f'max_over_time({latency}{{{catalog.PHASE}="request"}}[{catalog.STALL_LATENCY_LOOKBACK}])'
    first = seconds(catalog.STALL_WINDOWS[0])
    return f"clamp_min(max by ({model_by(grouping)}) ({worst}) * {catalog.STALL_LATENCY_FACTOR}, {first})"


def _completed(by: str, window: str, family: str) -> str:
    return f"sum by ({by}) (increase({family}[{window}]))"


def _aged(by: str, window: str) -> str:
    # Only a series that already had a sample a whole window ago is judged: VictoriaMetrics reads
    # increase() over a series' first samples as 0 where Prometheus returns nothing, so a replica
    # that just started (scale-up, restart, model load) with requests pending would page on one
    # engine and not the other. An instant ``offset`` selector finds no sample before a series'
    # first on both, whatever the scrape interval.
    return f"count by ({by}) ({catalog.STALL_COMPLETIONS[0]} offset {window})"


def stalled(by: str, window: str) -> str:
    """Requests pending at every sample of ``window`` and no success or failure in it, per ``by``,
    on a series that existed a whole ``window`` ago."""
    success, failure = catalog.STALL_COMPLETIONS
    pending = f"sum by ({by}) (min_over_time({catalog.TRITON_PENDING}[{window}])) > 0"
    return (
        f"(({pending})\n  and on ({by}) ({_completed(by, window, success)} == 0)\n"
        f"  and on ({by}) {_aged(by, window)}\n"
        f"  unless on ({by}) ({_completed(by, window, failure)} > 0))"
    )


def model_stalled_expr(grouping: Sequence[str] = ()) -> str:
    """``TritonModelStalled``: each model judged over the stall window its latency calls for."""
    by = instance_model_by(grouping)
    on = model_by(grouping)
    record = catalog.STALL_WINDOW_RECORD
    tiers = catalog.STALL_WINDOWS
    parts = []
    for i, window in enumerate(tiers):
        bounds = ([f"> {seconds(tiers[i - 1])}"] if i else []) + (
            [f"<= {seconds(window)}"] if i < len(tiers) - 1 else []
        )
        parts.append(f"{stalled(by, window)}\nand on ({on}) ({record} {' '.join(bounds)})")
    parts.append(f"{stalled(by, catalog.STALL_DEFAULT_WINDOW)}\nunless on ({on}) {record}")
    return "\n or\n".join(f"(\n{p}\n)" for p in parts)


def server_stalled_expr(grouping: Sequence[str] = ()) -> str:
    """``TritonServerStalled``: stalled models on an instance that completed nothing at all."""
    by = server_by(grouping)
    window = catalog.STALL_WINDOWS[0]
    success, failure = catalog.STALL_COMPLETIONS
    return (
        f"count by ({by}) (\n{model_stalled_expr(grouping)}\n)\n"
        f"and on ({by}) ({_completed(by, window, success)} == 0)\n"
        f"unless on ({by}) ({_completed(by, window, failure)} > 0)"
    )


def texts() -> dict[str, str]:
    """The placeholders of both alerts fixed when the rules are generated."""
    tiers = catalog.STALL_WINDOWS
    return {
        "windows": ", ".join(tiers[:-1]) + f" or {tiers[-1]}",
        "factor": str(catalog.STALL_LATENCY_FACTOR),
        "lookback": catalog.STALL_LATENCY_LOOKBACK,
        "default": catalog.STALL_DEFAULT_WINDOW,
        "window": format_duration(seconds(tiers[0])),
    }


def alerts(spec: SLOFile) -> list[Alert]:
    """``TritonServerStalled`` and ``TritonModelStalled`` (operational.rules.yml, global layer: they read
    the fleet's stall-window record)."""
    page = {SEVERITY: "page"}
    return [
        build.alert(SERVER_STALLED, server_stalled_expr(spec.grouping), page, texts()),
        build.alert(MODEL_STALLED, model_stalled_expr(spec.grouping), page, texts()),
    ]


# --- the promtool cases -------------------------------------------------------------------------
FAST = "stall_fast"
SLOW = "stall_slow"


def _series(c: Case, spec: SLOFile, model: str, success: str, duration: str, pending: str) -> Case:
    labels = triton_labels(spec, model)
    c.add(catalog.TRITON_SUCCESS, labels, success)
    c.add(catalog.TRITON_FAILURE, triton_labels(spec, model, reason="BACKEND"), "0x30")
    c.add(catalog.triton_duration("request"), labels, duration)
    c.add(catalog.TRITON_PENDING, labels, pending)
    return c


def _fast(c: Case, spec: SLOFile, pending: str, success: str = "0+60x9 540x20") -> Case:
    # 60 requests a minute at 50 ms each until 9m.
    return _series(c, spec, FAST, success, "0+3000000x9 27000000x20", pending)


def _alerts(spec: SLOFile, model: str, pending: str, stalled_models: str) -> list[Check]:
    labels = triton_labels(spec, model)
    del labels["job"]
    fixed = texts()
    model_alert = expected(spec, MODEL_STALLED, {**labels, SEVERITY: "page"}, {**fixed, "value": pending})
    server_labels = {k: v for k, v in labels.items() if k not in (catalog.MODEL, catalog.VERSION)}
    server_alert = expected(
        spec,
        SERVER_STALLED,
        {**server_labels, SEVERITY: "page"},
        {**texts(), "value": stalled_models},
    )
    return [Check("", MODEL_STALLED, (model_alert,)), Check("", SERVER_STALLED, (server_alert,))]


def _at(at: str, checks: list[Check]) -> list[Check]:
    return [Check(at, c.alertname, c.alerts) for c in checks]


def _quiet(*times: str) -> list[Check]:
    return [Check(t, name) for t in times for name in (MODEL_STALLED, SERVER_STALLED)]


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
    slow = _series(
        Case("a slow batch inside the model's own stall window is quiet"),
        spec,
        SLOW,
        "0+1x9 9x4 10+1x16",
        "0+40000000x9 360000000x4 400000000+40000000x16",
        "0x9 1x4 0x16",
    )
    slow.checks += _quiet("13m", "14m", "20m")

    # The slow model wedged for good: its 10m window has no completion from 20m on.
    slow_wedge = _series(
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
