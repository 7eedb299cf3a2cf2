"""Where the time went: a latency page says how Triton's request time split between queue and compute.

The burn alert of a latency objective ends its description with a Go template that queries Triton's
own duration counters (no tracing needed) over ``WINDOW``, and the same a week before (``LOOKBACK``):

* the share of request time computing (compute input + infer + output over request duration) and
  the rest, queued (for an ensemble: its steps' queues and hand-overs, which is what request minus
  compute is there);
* queueing dominates: capacity or batching (``tritonwatch advise``, the headroom signal); compute
  dominates: the model or the GPU;
* an SLI read ``from:`` a front also gets Triton's own time a request now against a week before: a
  front that burns while Triton's time is flat (under ``FLAT`` times a week before) spends the time
  outside Triton.

With no duration counters for the model the text says the split is unknown, in one sentence (what
the promtool cases, which carry no such counters, expect).
"""

from __future__ import annotations

from tritonwatch import catalog
from tritonwatch.slo import Objective, SLOFile

WINDOW = "1h"
LOOKBACK = "1w"
FLAT = 1.2  # Triton's own time a request at most this many times a week before reads as flat
ADVICE_QUEUE = (
    "Queueing dominates: capacity or batching; see tritonwatch advise and "
    f"{catalog.CAPACITY} against the request rate."
)
ADVICE_COMPUTE = (
    "Compute dominates: the model or the GPU (a new version, larger inputs, a slower or busier GPU)."
)
OUTSIDE = "the time is spent outside Triton (the front, the network or the client)."


def _selector(spec: SLOFile, obj: Objective) -> tuple[str, str]:
    """A printf format of the model's series selector, and its arguments (grouping labels from the
    alert's own labels, so that the split is the alerting cluster's)."""
    matchers = [f"{catalog.MODEL}=%q", *(f"{g}=%q" for g in spec.grouping)]
    args = " ".join([f'"{obj.model}"', *(f"$labels.{g}" for g in spec.grouping)])
    return ",".join(matchers), args


def _sum_rate(family: str, sel: str, offset: str) -> str:
    off = f" offset {offset}" if offset else ""
    return f"sum(rate({family}{{{sel}}}[{WINDOW}]{off}))"


def _compute_share(sel: str, offset: str) -> str:
    return catalog.compute_share_promql(sel, WINDOW, offset)


def _request_time(sel: str, offset: str) -> str:
    return f"{_sum_rate(catalog.triton_duration('request'), sel, offset)} / {_sum_rate(catalog.TRITON_SUCCESS, sel, offset)}"


SEL = "{SEL}"  # where a query takes the model's selector


def _assign(var: str, query: str, spec: SLOFile, obj: Objective) -> str:
    """``$var`` = the query's first value, -1 when it has none (the query has no double quotes:
    label values come in through printf's %q)."""
    sel, args = _selector(spec, obj)
    fmt = query.replace(SEL, sel)
    call = " ".join([f'printf "{fmt}"', *[args] * query.count(SEL)])
    return (
        f"{{{{- ${var} := -1.0 -}}}}{{{{- with {call} | query -}}}}"
        f"{{{{- ${var} = . | first | value -}}}}{{{{- end -}}}}"
    )


def template(spec: SLOFile, obj: Objective, front: bool) -> str:
    """The Go template appended to a latency burn alert's description."""
    week = LOOKBACK
    parts = [
        _assign("c", _compute_share(SEL, ""), spec, obj),
        _assign("q", f"1 - {_compute_share(SEL, '')}", spec, obj),
        _assign("cw", _compute_share(SEL, week), spec, obj),
        _assign("qw", f"1 - {_compute_share(SEL, week)}", spec, obj),
    ]
    if front:
        ratio = f"({_request_time(SEL, '')}) / ({_request_time(SEL, week)})"
        parts.append(_assign("r", ratio, spec, obj))
    pct = "{{ $%s | humanizePercentage }}"
    verdict = f"{{{{ if gt $q $c }}}}{ADVICE_QUEUE}{{{{ else }}}}{ADVICE_COMPUTE}{{{{ end }}}}"
    if front:
        verdict = (
            f"{{{{ if and (ge $r 0.0) (lt $r {FLAT}) }}}}Triton's own time a request is flat "
            f'(x{{{{ $r | printf "%.2f" }}}} a week before): {OUTSIDE}'
            f"{{{{ else }}}}{verdict}{{{{ end }}}}"
        )
    return "".join(parts) + (
        f"{{{{ if lt $c 0.0 }}}} {unknown(obj)}{{{{ else }}}} Over the last {WINDOW} Triton's request time "
        f"was {pct % 'q'} queued and {pct % 'c'} computing (a week before: "
        f"{{{{ if ge $cw 0.0 }}}}{pct % 'qw'} and {pct % 'cw'}{{{{ else }}}}no data{{{{ end }}}}). "
        f"{verdict}{{{{ end }}}}"
    )


def applies(obj: Objective) -> bool:
    return obj.kind == "latency"


def unknown(obj: Objective) -> str:
    """What the template says with no duration counters for the model (after its leading space)."""
    return f"Where the time went is unknown: Triton's duration counters of {obj.model} have no data over the last {WINDOW}."
