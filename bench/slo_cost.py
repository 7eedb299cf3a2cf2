"""What the SLO rules cost Prometheus, how exact they are, and when they page: tritonwatch beside Sloth.

One Prometheus 3.16 (``make stack``) per side over the same backfilled counters (``bench/slo_data.py``):
two models with the same diurnal traffic (+-80 %, errors ten times likelier at night, slow requests six
times likelier at the peak), one on 4 replicas and one on 8, scraped every 30 s for ``--days`` (29); and two
models on 2 replicas with flat traffic whose requests all fail and are slow from 40 minutes before the end,
on both replicas (``outage_all``) or on one (``outage_one``).

Each side's rules for an availability and a latency objective per model over 28 days (``bench/slo_rules.py``)
are parsed by Prometheus; the records they read are backfilled as Prometheus would have recorded them
(``promtool tsdb create-blocks-from rules``, every 30 s, stage by stage where records read records: only
what is read, over the range it is read; ``bench/slo_plan.py``). Then, at the end instant:

* every rule expression of the 4- and 8-replica models' SLOs runs as an instant query with ``stats=all``;
  ``samples.totalQueryableSamples`` summed per SLO (and per window: a rule's longest range) is what one
  evaluation of the SLO's rules reads;
* the SLO window's error ratio (the longest ``slo:sli_error:ratio_rate*`` record's expression) against the
  exact ratio counted from the generated counters;
* the page alerts of the outage models run as range queries from the outage on, every 30 s: the first
  point is the minute the page fires.

Prints the tables and writes ``bench/results/slo_cost.json``. The counters' blocks are cached under
``--workdir`` (default ``bench/.cache/slo_cost``) per data parameters. Run: ``python -m bench.slo_cost``
(``--days 4`` for a quick look; the SLO window stays 28 days, so its numbers are then partial).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench import slo_data, slo_plan, slo_prom, slo_rules
from bench.slo_data import DAY_S, ModelData, Outage, Traffic
from bench.slo_plan import Rule

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
END = datetime(2026, 11, 30, tzinfo=timezone.utc).timestamp()
STEP_S = 30
SLO_WINDOW_S = 28 * DAY_S
OUTAGE_S = 40 * 60
# A rule group is evaluated at an offset within its interval that Prometheus (and promtool's backfill)
# derives from a hash of its name and file: each side's records land somewhere in the 30 s after the scrape
# they read. The page alerts are queried just before the next scrape, when every record has been
# evaluated on the scrapes so far, and timed from the scrape they read: the minutes are whole scrapes.
SETTLED_S = STEP_S - 0.001
SIDES = ("tritonwatch", "sloth")


def stack_dir() -> Path:
    explicit = os.environ.get("TRITONWATCH_STACK_CACHE")
    base = Path(explicit) if explicit else Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base if explicit else base / "tritonwatch" / "stack"


@dataclass(frozen=True)
class Setup:
    days: float
    replicas: tuple[int, ...]
    requests_per_s: float
    history_h: float  # of the outage models, before their outage

    def cost_models(self) -> list[ModelData]:
        start = END - self.days * DAY_S
        return [
            ModelData(f"model_r{n}", n, Traffic(requests_per_s=self.requests_per_s), start, END, STEP_S)
            for n in self.replicas
        ]

    def outage_models(self) -> list[ModelData]:
        flat = Traffic(
            requests_per_s=self.requests_per_s,
            swing=0.0,
            error_ratio_day=0.0001,
            error_night_factor=1.0,
            slow_ratio_night=0.001,
            slow_peak_factor=1.0,
        )
        outage = END - OUTAGE_S
        start = outage - self.history_h * 3600
        return [
            ModelData("outage_all", 2, flat, start, END, STEP_S, Outage(outage)),
            ModelData("outage_one", 2, flat, start, END, STEP_S, Outage(outage, replicas=1)),
        ]

    def models(self) -> list[ModelData]:
        return self.cost_models() + self.outage_models()


def raw_blocks(setup: Setup, promtool: str, workdir: Path) -> Path:
    """The counters' blocks, made once per setup (kept under the workdir)."""
    key = json.dumps(asdict(setup), sort_keys=True)
    blocks = workdir / "raw-blocks"
    stamp = blocks / "setup.json"
    if stamp.exists() and stamp.read_text() == key:
        return blocks
    shutil.rmtree(blocks, ignore_errors=True)
    blocks.mkdir(parents=True)
    source = workdir / "counters.om"
    started = time.monotonic()
    with source.open("w") as out:
        samples = slo_data.write_openmetrics(setup.models(), out)
    wrote = time.monotonic() - started
    slo_prom.backfill_openmetrics(promtool, source, blocks)
    print(
        f"slo_cost: {samples:,} samples ({source.stat().st_size / 2**20:,.0f} MiB of OpenMetrics) written in "
        f"{wrote:.0f} s, backfilled in {time.monotonic() - started - wrote:.0f} s",
        file=sys.stderr,
    )
    source.unlink()
    stamp.write_text(key)
    return blocks


@dataclass
class SideResult:
    cost: dict[str, slo_plan.Cost]
    ratio: dict[str, float]  # SLO -> its SLO-window error ratio at the end
    page_min: dict[str, float | None]  # outage SLO -> minutes to the first page
    rules_queried: int
    backfills: list[dict[str, Any]]
    per_rule: dict[str, list[dict[str, Any]]]  # SLO -> its rules, most samples first


def _is_page(rule: Rule) -> bool:
    return not rule.is_record and rule.labels.get("severity") == "page"


def measure_side(
    side: str, rules: list[Rule], setup: Setup, bins: dict[str, str], workdir: Path, raw: Path
) -> SideResult:
    shutil.rmtree(workdir / "prom", ignore_errors=True)
    (workdir / "prom").mkdir(parents=True)
    shutil.copytree(raw, workdir / "prom" / "data", ignore=shutil.ignore_patterns("setup.json"))
    cost_slos = {f"{m.name}-{k}" for m in setup.cost_models() for k in ("availability", "latency")}
    outage_slos = {f"{m.name}-{k}" for m in setup.outage_models() for k in ("availability", "latency")}
    outage_at = END - OUTAGE_S
    with slo_prom.Server(bins["prometheus"], workdir / "prom") as server:
        rules = [
            Rule(
                r.side,
                r.group,
                r.name,
                r.is_record,
                r.expr,
                r.labels,
                tuple(slo_plan.selectors(server.parse(r.expr))),
            )
            for r in rules
        ]
        owners = slo_plan.attribution(rules)
        queried = [i for i, slos in owners.items() if slos & cost_slos]
        pages = [i for i, r in enumerate(rules) if _is_page(r) and owners.get(i, set()) & outage_slos]
        demands = {i: END for i in queried} | {i: outage_at for i in pages}
        plan = slo_plan.backfill_plan(rules, demands, END, STEP_S)
        backfills = []
        for stage in sorted({job.stage for job in plan}):
            out = workdir / f"blocks-{stage}"
            shutil.rmtree(out, ignore_errors=True)
            for job in (j for j in plan if j.stage == stage):
                rule_file = workdir / "backfill.rules.yml"  # the same path each time: see slo_prom
                slo_prom.write_rule_file(job.rules, rule_file)
                started = time.monotonic()
                slo_prom.backfill_rules(bins["promtool"], server.url, rule_file, job.start, END, out)
                backfills.append(
                    {
                        "stage": stage,
                        "records": sorted({r.name for r in job.rules}),
                        "rules": len(job.rules),
                        "hours": round((END - job.start) / 3600, 2),
                        "seconds": round(time.monotonic() - started, 1),
                    }
                )
                print(f"slo_cost: {side}: backfilled {backfills[-1]}", file=sys.stderr)
            server.load(out)
        samples = {i: server.instant(rules[i].expr, END)[1] for i in queried}
        ratio: dict[str, float] = {}
        for slo in sorted(cost_slos):
            longest = max(
                (
                    i
                    for i in queried
                    if rules[i].is_record
                    and rules[i].slo == slo
                    and rules[i].name.startswith("slo:sli_error:ratio_rate")
                ),
                key=lambda i: rules[i].window_s,
            )
            result, _ = server.instant(rules[longest].expr, END)
            ratio[slo] = float(result[0]["value"][1])
        page_min: dict[str, float | None] = {}
        for slo in sorted(outage_slos):
            firsts = []
            for i in pages:
                if slo in owners[i]:
                    for s in server.range(rules[i].expr, outage_at + SETTLED_S, END, STEP_S):
                        if rules[i].slo == slo or s["metric"].get("slo", s["metric"].get("sloth_slo")) == slo:
                            first = slo_plan.first_true(
                                ((float(t), float(v)) for t, v in s["values"]), outage_at + SETTLED_S
                            )
                            if first is not None:
                                firsts.append(first)
            page_min[slo] = min(firsts) if firsts else None
    per_rule: dict[str, list[dict[str, Any]]] = {}
    for i, n in samples.items():
        for slo in owners[i] & cost_slos:
            kind = "record" if rules[i].is_record else "alert"
            tag = ",".join(f"{k}={rules[i].labels[k]}" for k in ("severity", "cause") if k in rules[i].labels)
            per_rule.setdefault(slo, []).append(
                {
                    "rule": f"{kind} {rules[i].name}{f' ({tag})' if tag else ''}",
                    "window": slo_plan.window_label(rules[i].window_s),
                    "samples": n,
                }
            )
    for listed in per_rule.values():
        listed.sort(key=lambda r: (-r["samples"], r["rule"]))
    return SideResult(
        per_rule=per_rule,
        cost=slo_plan.cost_table(rules, samples),
        ratio=ratio,
        page_min=page_min,
        rules_queried=len(queried),
        backfills=backfills,
    )


def truths(setup: Setup) -> dict[str, float]:
    out = {}
    for m in setup.cost_models():
        start = max(m.start, END - SLO_WINDOW_S)
        t = slo_data.exact(m, start, END)
        out[f"{m.name}-availability"] = t.error_ratio
        out[f"{m.name}-latency"] = t.slow_ratio
    return out


def _n(x: float) -> str:
    return f"{x:,.0f}"


def tables(setup: Setup, results: dict[str, SideResult], truth: dict[str, float]) -> str:
    sides = [s for s in SIDES if s in results]
    lines = ["samples read per evaluation, per SLO", ""]
    lines.append("| SLO | replicas | " + " | ".join(sides) + " |")
    lines.append("|---|---:|" + "---:|" * len(sides))
    for kind in ("availability", "latency"):
        for m in setup.cost_models():
            slo = f"{m.name}-{kind}"
            row = [_n(results[s].cost[slo].total) if slo in results[s].cost else "-" for s in sides]
            lines.append(f"| {kind} | {m.replicas} | " + " | ".join(row) + " |")
    biggest = setup.cost_models()[-1]
    row = []
    for s in sides:
        per_model = sum(results[s].cost[f"{biggest.name}-{k}"].total for k in ("availability", "latency"))
        row.append(f"{200 * per_model:.2e}")
    lines.append(f"| 200 models x {biggest.replicas} replicas, both SLOs | | " + " | ".join(row) + " |")
    lines += ["", "per window (a rule's longest range; instant: reads recorded values only)", ""]
    cols = [(s, kind, m) for s in sides for kind in ("availability", "latency") for m in setup.cost_models()]
    lines.append("| window | " + " | ".join(f"{s} {k[:5]}. x{m.replicas}" for s, k, m in cols) + " |")
    lines.append("|---|" + "---:|" * len(cols))
    windows = sorted({w for s in sides for c in results[s].cost.values() for w in c.by_window})
    for w in windows:
        cells = []
        for s, kind, m in cols:
            c = results[s].cost.get(f"{m.name}-{kind}")
            cells.append(_n(c.by_window.get(w, 0)) if c else "-")
        lines.append(f"| {slo_plan.window_label(w)} | " + " | ".join(cells) + " |")
    lines += ["", "SLO-window (28d) error ratio against the exact ratio of the generated counters", ""]
    lines.append("| SLO | exact | " + " | ".join(f"{s} | {s} off" for s in sides) + " |")
    lines.append("|---|---:|" + "---:|---:|" * len(sides))
    for slo, exact in sorted(truth.items()):
        cells = []
        for s in sides:
            got = results[s].ratio.get(slo)
            cells += ["-", "-"] if got is None else [f"{got:.6g}", f"{100 * (got - exact) / exact:+.4f} %"]
        lines.append(f"| {slo} | {exact:.6g} | " + " | ".join(cells) + " |")
    lines += ["", "minutes from the outage to the first page (30 s evaluations)", ""]
    lines.append("| scenario | SLO | " + " | ".join(sides) + " |")
    lines.append("|---|---|" + "---:|" * len(sides))
    names = {"outage_all": "total outage", "outage_one": "one replica of two"}
    for m in setup.outage_models():
        for kind in ("availability", "latency"):
            slo = f"{m.name}-{kind}"
            cells = []
            for s in sides:
                v = results[s].page_min.get(slo)
                cells.append("none" if v is None else f"{v:g}")
            lines.append(f"| {names[m.name]} | {kind} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _commit() -> str:
    proc = subprocess.run(
        ["git", "-C", str(ROOT), "log", "-1", "--format=%h %s"], capture_output=True, text=True
    )
    return proc.stdout.strip()[:120]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.slo_cost", description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=29, help="days of counters before the end (default 29)")
    ap.add_argument("--replicas", default="4,8", help="replica counts of the measured models")
    ap.add_argument("--requests-per-s", type=float, default=80.0, help="each model's mean request rate")
    ap.add_argument("--history-hours", type=float, default=8.0, help="outage models' data before the outage")
    ap.add_argument("--sides", default=",".join(SIDES))
    ap.add_argument(
        "--tritonwatch",
        default="",
        help="the tritonwatch command that writes the rules (default: this checkout's); another checkout's "
        "venv/bin/tritonwatch measures its rules",
    )
    ap.add_argument("--workdir", type=Path, default=ROOT / "bench" / ".cache" / "slo_cost")
    ap.add_argument("--results", type=Path, default=RESULTS / "slo_cost.json")
    args = ap.parse_args(argv)
    setup = Setup(
        days=args.days,
        replicas=tuple(int(x) for x in args.replicas.split(",")),
        requests_per_s=args.requests_per_s,
        history_h=args.history_hours,
    )
    stack = stack_dir()
    bins = {
        "prometheus": str(stack / "prometheus-v0.316.0" / "bin" / "prometheus"),
        "promtool": str(stack / "prometheus-v0.316.0" / "bin" / "promtool"),
        "sloth": str(stack / "sloth-v0.16.0" / "bin" / "sloth"),
    }
    sides = args.sides.split(",")
    needed = ["prometheus", "promtool", *(["sloth"] if "sloth" in sides else [])]
    for path in (bins[b] for b in needed):
        if not Path(path).is_file():
            print(f"slo_cost: {path} missing: run make stack (Prometheus) and make sloth", file=sys.stderr)
            return 2
    args.workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    raw = raw_blocks(setup, bins["promtool"], args.workdir)
    models = [m.name for m in setup.models()]
    results: dict[str, SideResult] = {}
    for side in sides:
        sidedir = args.workdir / side
        shutil.rmtree(sidedir, ignore_errors=True)
        if side == "tritonwatch":
            files = slo_rules.generate_tritonwatch(models, sidedir / "rules", args.tritonwatch.split())
        elif side == "sloth":
            files = slo_rules.generate_sloth(bins["sloth"], models, sidedir / "rules")
        else:
            print(f"slo_cost: --sides: unknown side {side!r} (tritonwatch, sloth)", file=sys.stderr)
            return 2
        results[side] = measure_side(side, slo_rules.load(side, files), setup, bins, sidedir, raw)
    truth = truths(setup)
    text = tables(setup, results, truth)
    print(text)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, shared",
        "commit": _commit(),
        "tritonwatch": args.tritonwatch or "this checkout",
        "setup": asdict(setup),
        "seconds": round(time.monotonic() - started),
        "exact": truth,
        "sides": {
            s: {
                "cost": {
                    k: {
                        "total": c.total,
                        "by_window": {slo_plan.window_label(w): n for w, n in sorted(c.by_window.items())},
                    }
                    for k, c in sorted(r.cost.items())
                },
                "ratio": r.ratio,
                "page_minutes": r.page_min,
                "rules_queried": r.rules_queried,
                "backfills": r.backfills,
                "per_rule": r.per_rule,
            }
            for s, r in results.items()
        },
        "tables": text,
    }
    args.results.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
