"""Generation at fleet size: an SLO file of N models (each an availability and a latency objective).

* ``tritonwatch rules`` and ``tritonwatch k8s`` at each of ``--models`` (default 1,000): wall time and peak
  RSS of the command in a child process (``ru_maxrss`` of a parent that has only that child), up to
  ``--gen-timeout`` seconds each; with ``--heap``, its peak Python heap too, in a second run under
  ``tracemalloc`` (which slows it: its time is not reported); every Kubernetes object the k8s command
  wrote, its size as YAML against the Prometheus Operator's 524,288-byte limit on a PrometheusRule (the
  largest object of each kind is printed);
* the promtool tests ``tritonwatch rules`` writes (``DIR/tests/*.yml``) at ``--test-models`` (default
  10, 50, 200): their number and total size, and ``promtool test rules`` (3.16, ``make stack``) per file.
  A file is timed up to ``--timeout`` seconds (its time then reads ``>``); above ``--sample`` files, an
  evenly spread sample of that many is timed and the total is estimated from their mean (said so).

Writes bench/results/fleet_gen.json. Run: ``python -m bench.fleet_gen`` (``--models 100 --test-models 2``
for a quick look).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from bench.slo_cost import stack_dir
from bench.slo_rules import LATENCY_OBJECTIVE, LATENCY_THRESHOLD, WINDOW

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
_LOADER = getattr(
    yaml, "CSafeLoader", yaml.SafeLoader
)  # libyaml: 30 MiB of manifests in seconds, not minutes
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
OPERATOR_RULE_LIMIT = 524_288  # bytes: the Prometheus Operator refuses a PrometheusRule above it

# Runs the command as its only child and prints that child's peak RSS (KiB) last on stderr.
_RSS = (
    "import resource, subprocess, sys; rc = subprocess.run(sys.argv[1:]).returncode; "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(rc)"
)
# Runs tritonwatch in this process under tracemalloc and prints the peak traced bytes last on stderr.
_HEAP = (
    "import runpy, sys, tracemalloc; tracemalloc.start(); sys.argv = ['tritonwatch', *sys.argv[1:]]\n"
    "try:\n    runpy.run_module('tritonwatch', run_name='__main__')\nexcept SystemExit as e:\n    rc = e.code\n"
    "else:\n    rc = 0\nprint(tracemalloc.get_traced_memory()[1], file=sys.stderr); sys.exit(rc)"
)


def slo_file(n: int) -> dict[str, object]:
    return {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": f"fleet-{n}"},
        "spec": {
            "window": WINDOW,
            "slos": [
                {
                    "model": f"model-{i:04d}",
                    "availability": {"objective": 99.9},
                    "latency": {"threshold": LATENCY_THRESHOLD, "objective": LATENCY_OBJECTIVE},
                }
                for i in range(n)
            ],
        },
    }


def _last_int(stderr: str, what: str, rc: int) -> int:
    lines = stderr.strip().splitlines()
    if rc != 0 or not lines:
        raise RuntimeError(f"{what} failed ({rc}): {stderr.strip()[-600:]}")
    return int(lines[-1])


def measured(
    command: Sequence[str], args: Sequence[str], timeout: float, heap: bool, cwd: Path
) -> dict[str, float] | None:
    """``tritonwatch ARGS``: wall time and peak RSS (and the peak Python heap in a second run); None when
    it did not end within ``timeout`` seconds (the child's whole group is killed then)."""
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-c", _RSS, *command, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=cwd,
    )
    try:
        _, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    wall = time.monotonic() - started
    rss_kib = _last_int(stderr, f"tritonwatch {args[0]}", proc.returncode)
    out = {"wall_s": round(wall, 2), "peak_rss_mib": round(rss_kib / 1024, 1)}
    if heap:
        done = subprocess.run([sys.executable, "-c", _HEAP, *args], capture_output=True, text=True, cwd=cwd)
        out["peak_heap_mib"] = round(
            _last_int(done.stderr, f"tritonwatch {args[0]} (tracemalloc)", done.returncode) / 2**20, 1
        )
    return out


def object_sizes(manifests: Path) -> list[dict[str, Any]]:
    """Every object in the written manifests with its size as YAML."""
    sizes = []
    for f in sorted(manifests.rglob("*.y*ml")):
        for doc in yaml.load_all(f.read_text(), Loader=_LOADER):
            if not isinstance(doc, dict) or "kind" not in doc:
                continue
            sizes.append(
                {
                    "file": str(f.relative_to(manifests)),
                    "kind": doc["kind"],
                    "name": (doc.get("metadata") or {}).get("name", ""),
                    "bytes": len(yaml.dump(doc, Dumper=_DUMPER, sort_keys=False).encode()),
                }
            )
    return sizes


def generation(n: int, work: Path, command: Sequence[str], timeout: float, heap: bool) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    slo = work / "slo.yaml"
    slo.write_text(yaml.safe_dump(slo_file(n), sort_keys=False))
    rules_dir, k8s_dir = work / "rules", work / "k8s"
    rules = measured(command, ["rules", "--slo", str(slo), "--out", str(rules_dir)], timeout, heap, work)
    if rules is None:
        return {"models": n, "timeout_s": timeout, "rules": None}
    # The dashboards the manifests carry, written by the same tritonwatch (not timed).
    dashboards = work / "dashboards"
    subprocess.run(
        [*command, "dashboards", "--out", str(dashboards)], check=True, cwd=work, capture_output=True
    )
    k8s = measured(
        command,
        [
            "k8s",
            "--rules",
            str(rules_dir),
            "--dashboards",
            str(dashboards),
            "--slo",
            str(slo),
            "--out",
            str(k8s_dir),
        ],
        timeout,
        heap,
        work,
    )
    if k8s is None:
        return {"models": n, "timeout_s": timeout, "rules": rules, "k8s": None}
    sizes = object_sizes(k8s_dir)
    largest: dict[str, dict[str, Any]] = {}
    for s in sizes:
        if s["kind"] not in largest or s["bytes"] > largest[s["kind"]]["bytes"]:
            largest[s["kind"]] = s
    rule_objects = [s for s in sizes if s["kind"] == "PrometheusRule"]
    return {
        "models": n,
        "rules": rules,
        "k8s": k8s,
        "objects": len(sizes),
        "prometheus_rules": len(rule_objects),
        "over_operator_limit": [s["name"] for s in rule_objects if s["bytes"] > OPERATOR_RULE_LIMIT],
        "largest_by_kind": largest,
        "rule_files_bytes": sum(f.stat().st_size for f in rules_dir.glob("*.rules.yml")),
        "test_files_bytes": sum(f.stat().st_size for f in (rules_dir / "tests").glob("*.yml")),
    }


def promtool_run(promtool: str, test: Path, timeout: float) -> float | None:
    """Seconds ``promtool test rules`` took on one file, None past ``timeout``."""
    started = time.monotonic()
    try:
        proc = subprocess.run(
            [promtool, "test", "rules", test.name],
            cwd=test.parent,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return None
    if proc.returncode != 0:
        raise RuntimeError(f"promtool test rules {test}: {(proc.stdout + proc.stderr).strip()[-600:]}")
    return round(time.monotonic() - started, 2)


def tests_at(
    n: int, work: Path, command: Sequence[str], promtool: str, timeout: float, sample: int
) -> dict[str, Any]:
    slo = work / "slo.yaml"
    slo.write_text(yaml.safe_dump(slo_file(n), sort_keys=False))
    out = work / "rules"
    subprocess.run(
        [*command, "rules", "--slo", str(slo), "--out", str(out)], check=True, cwd=work, capture_output=True
    )
    families: dict[str, list[Path]] = {}
    for f in sorted((out / "tests").glob("*.yml")):
        families.setdefault(family(f.name), []).append(f)
    return {
        "models": n,
        "families": {
            name: timed_family(files, promtool, timeout, sample) for name, files in families.items()
        },
    }


def family(filename: str) -> str:
    """``slo-<objective>.test.yml`` -> ``slo-*``; ``operational.test.yml`` -> ``operational``: files of one
    family are made alike, one per objective or model."""
    stem = filename.removesuffix(".yml").removesuffix(".test")
    head, sep, _ = stem.partition("-")
    return f"{head}-*" if sep else head


def timed_family(files: Sequence[Path], promtool: str, timeout: float, sample: int) -> dict[str, Any]:
    """Size of a family's files, promtool on all of them or on an evenly spread sample of ``sample``."""
    picked = (
        list(files)
        if len(files) <= sample
        else [files[round(k * (len(files) - 1) / (sample - 1))] for k in range(sample)]
    )
    timed = {f.name: promtool_run(promtool, f, timeout) for f in picked}
    done = [t for t in timed.values() if t is not None]
    result: dict[str, Any] = {
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "largest_bytes": max(f.stat().st_size for f in files),
        "timed": timed,
        "timed_out": sorted(k for k, v in timed.items() if v is None),
        "timeout_s": timeout,
    }
    if done and not result["timed_out"]:
        result["mean_s"] = round(sum(done) / len(done), 2)
        result["max_s"] = max(done)
        result["total_s"] = round(
            sum(done) if len(picked) == len(files) else result["mean_s"] * len(files), 1
        )
        result["total_estimated"] = len(picked) != len(files)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.fleet_gen", description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="1000", help="fleet sizes for rules and k8s (default 1000)")
    ap.add_argument(
        "--gen-timeout", type=float, default=1800.0, help="seconds one generation command may take"
    )
    ap.add_argument(
        "--heap", action="store_true", help="also run each command under tracemalloc (this checkout's)"
    )
    ap.add_argument(
        "--tritonwatch",
        default="",
        help="the tritonwatch command measured (default: this checkout's); another checkout's venv/bin/tritonwatch",
    )
    ap.add_argument("--test-models", default="10,50,200", help="fleet sizes for the promtool tests")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds one promtool file may take")
    ap.add_argument("--sample", type=int, default=12, help="promtool files timed per size at most")
    ap.add_argument("--results", type=Path, default=RESULTS / "fleet_gen.json")
    args = ap.parse_args(argv)
    promtool = stack_dir() / "prometheus-v0.316.0" / "bin" / "promtool"
    sizes = [int(x) for x in args.test_models.split(",") if x]
    if sizes and not promtool.is_file():
        print(f"fleet_gen: {promtool} missing: run make stack", file=sys.stderr)
        return 2
    command = args.tritonwatch.split() or [sys.executable, "-m", "tritonwatch"]
    if args.heap and args.tritonwatch:
        print("fleet_gen: --heap runs this checkout's tritonwatch only", file=sys.stderr)
        return 2
    doc: dict[str, Any] = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, shared",
        "tritonwatch": args.tritonwatch or "this checkout",
    }
    with tempfile.TemporaryDirectory(prefix="fleet-gen-") as tmp:
        doc["generation"] = []
        for n in (int(x) for x in args.models.split(",") if x):
            doc["generation"].append(
                generation(n, Path(tmp) / f"gen-{n}", command, args.gen_timeout, args.heap)
            )
            print(f"fleet_gen: {json.dumps(doc['generation'][-1])}", file=sys.stderr)
        doc["tests"] = []
        for n in sizes:
            work = Path(tmp) / f"tests-{n}"
            work.mkdir()
            doc["tests"].append(tests_at(n, work, command, str(promtool), args.timeout, args.sample))
            print(f"fleet_gen: {json.dumps(doc['tests'][-1])}", file=sys.stderr)
    args.results.parent.mkdir(parents=True, exist_ok=True)
    args.results.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(report(doc))
    return 0


def report(doc: dict[str, Any]) -> str:
    lines = []
    for g in doc.get("generation") or []:
        lines += [
            f"generation at {g['models']:,} models",
            "",
            "| command | wall | peak RSS | peak Python heap |",
        ]
        lines.append("|---|---:|---:|---:|")
        for cmd in ("rules", "k8s"):
            m = g.get(cmd)
            if m is None:
                lines.append(f"| tritonwatch {cmd} | did not end within {g['timeout_s']:g} s | | |")
                continue
            heap = f"{m['peak_heap_mib']} MiB" if "peak_heap_mib" in m else "-"
            lines.append(f"| tritonwatch {cmd} | {m['wall_s']} s | {m['peak_rss_mib']} MiB | {heap} |")
        if "objects" not in g:
            continue
        lines.append(
            f"\nrule files {g['rule_files_bytes'] / 2**20:,.1f} MiB, promtool test files {g['test_files_bytes'] / 2**20:,.1f} MiB"
        )
        lines += [
            "",
            f"{g['objects']} Kubernetes objects, {g['prometheus_rules']} PrometheusRules; largest of each kind:",
            "",
        ]
        lines += ["| kind | name | bytes | of 524,288 |", "|---|---|---:|---:|"]
        for kind, s in sorted(g["largest_by_kind"].items()):
            lines.append(
                f"| {kind} | {s['name']} | {s['bytes']:,} | {100 * s['bytes'] / OPERATOR_RULE_LIMIT:.1f} % |"
            )
        over = g["over_operator_limit"]
        lines.append(f"\nPrometheusRules over the limit: {', '.join(over) if over else 'none'}\n")
    if doc.get("tests"):
        lines += [
            "",
            "generated promtool tests (promtool 3.16; a family: one file per objective or model)",
            "",
        ]
        lines += [
            "| models | family | files | total size | largest file | timed | mean per file | max per file | total |",
            "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for t in doc["tests"]:
            for name, f in t["families"].items():
                if f["timed_out"]:
                    mean = maxs = "-"
                    total = f"> {f['timeout_s']:g} s ({len(f['timed_out'])} past the timeout)"
                else:
                    mean, maxs = f"{f['mean_s']} s", f"{f['max_s']} s"
                    total = f"{'~' if f['total_estimated'] else ''}{f['total_s']} s"
                lines.append(
                    f"| {t['models']} | {name} | {f['files']} | {f['bytes'] / 1024:,.0f} KiB | "
                    f"{f['largest_bytes'] / 1024:,.0f} KiB | {len(f['timed'])} | {mean} | {maxs} | {total} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
