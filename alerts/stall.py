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
"""

from __future__ import annotations

from collections.abc import Sequence

from tritonwatch import catalog
from tritonwatch.slo import format_duration, parse_duration


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
