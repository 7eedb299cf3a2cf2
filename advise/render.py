"""Text output of ``tritonwatch advise``: per model the before/after, the config.pbtxt diff, the evidence."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from tritonwatch import modelconfig
from tritonwatch.advise.advice import PESSIMISTIC_SE
from tritonwatch.modelconfig import DynamicBatching


def pbtxt(config: Mapping[str, Any]) -> list[str]:
    """The tuned fields of a contract ``config`` as config.pbtxt lines."""
    cfg = modelconfig.parse(config, lenient=True)
    db = cfg.dynamic_batching or DynamicBatching()
    lines = ["dynamic_batching {"]
    if db.preferred:
        lines.append(f"  preferred_batch_size: [ {', '.join(str(p) for p in db.preferred)} ]")
    lines.append(f"  max_queue_delay_microseconds: {db.max_queue_delay_us}")
    lines += ["}", "instance_group ["]
    for i, g in enumerate(cfg.instance_groups):
        gpus = f"\n    gpus: [ {', '.join(str(x) for x in g.gpus)} ]" if g.gpus else ""
        comma = "," if i < len(cfg.instance_groups) - 1 else ""
        lines.append(f"  {{\n    count: {g.count}\n    kind: {g.kind}{gpus}\n  }}{comma}")
    lines.append("]")
    return "\n".join(lines).splitlines()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def model_text(entry: Mapping[str, Any]) -> list[str]:
    out = [f"{entry['model']} (version {entry['version']})"]
    if entry["refusal"]:
        return out + [f"  no recommendation: {entry['refusal']}"]
    d = entry["details"]
    cur, rec = entry["current"], entry["recommended"]
    pc, pr = d["predicted"]["current"], d["predicted"]["recommended"]
    obj = d["objective"]
    q = f"p{obj['quantile'] * 100:g}"
    out.append(
        f"  objective: {q} within {_ms(obj['threshold_seconds'])}; load now {d['arrival_rps']:.1f} req/s "
        f"({d['requests_in_read']} requests in {d['read_seconds']:.1f} s)"
    )
    gain = rec["slo_capacity_rps"] / cur["slo_capacity_rps"] - 1 if cur["slo_capacity_rps"] else float("inf")
    rows = [
        ("", "current", "recommended"),
        ("p99 at today's load", _ms(cur["p99_seconds"]), _ms(rec["p99_seconds"])),
        *(
            [
                (
                    f"{q} at today's load",
                    _ms(pc["objective_quantile_seconds"]),
                    _ms(pr["objective_quantile_seconds"]),
                )
            ]
            if obj["quantile"] != 0.99
            else []
        ),
        (
            "SLO-bound capacity",
            f"{cur['slo_capacity_rps']:.1f} req/s",
            f"{rec['slo_capacity_rps']:.1f} req/s ({gain:+.0%})",
        ),
        (
            f"  at the fit's +{PESSIMISTIC_SE:g} s.e.",
            f"{pc['slo_capacity_rps_pessimistic']:.1f} req/s",
            f"{pr['slo_capacity_rps_pessimistic']:.1f} req/s",
        ),
        ("mean batch at today's load", f"{pc['mean_batch']:.2f}", f"{pr['mean_batch']:.2f}"),
        (
            "compute s per 1,000 requests",
            f"{pc['compute_seconds_per_1000_requests']:.1f}",
            f"{pr['compute_seconds_per_1000_requests']:.1f}",
        ),
    ]
    out += [f"  {a:<30}{b:>16}{c:>26}" for a, b, c in rows]
    if not d["keeps_objective_now"]:
        out.append("  no configuration keeps the objective at today's load: this one has the most capacity")
    diff = list(
        difflib.unified_diff(
            pbtxt(cur["config"]),
            pbtxt(rec["config"]),
            "config.pbtxt (current)",
            "config.pbtxt (recommended)",
            lineterm="",
            n=8,
        )
    )
    out += (
        ["  config.pbtxt:"] + [f"    {line}" for line in diff] if diff else ["  config.pbtxt: keep as it is"]
    )
    f = d["fit"]
    out.append(
        f"  evidence: compute = {_ms(f['fixed_seconds'])} (±{f['fixed_stderr_seconds'] * 1000:.2g} ms) + "
        f"{_ms(f['per_item_seconds'])} (±{f['per_item_stderr_seconds'] * 1000:.2g} ms) x batch; fit error "
        f"{f['rms_relative_error']:.1%} rms; server overhead {_ms(d['overhead_seconds'])} per request"
    )
    out.append(f"    {'batch size':>10} {'executions':>11} {'mean':>10} {'fitted':>10}")
    out += [
        f"    {b['batch_size']:>10} {b['executions']:>11} {_ms(b['mean_seconds']):>10} {_ms(b['fitted_seconds']):>10}"
        for b in f["batch_sizes"]
    ]
    return out


def text(entries: Sequence[Mapping[str, Any]]) -> str:
    return "\n\n".join("\n".join(model_text(e)) for e in entries) + "\n"
