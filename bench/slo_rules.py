"""Both sides' rules for the same objectives: tritonwatch's (its CLI) and Sloth's (its CLI, its own format).

Per model two objectives over 28 days: availability 99.9 % (Triton's failures other than cancellations
over successes plus those failures) and latency 99 % within 50 ms (the sidecar's request histogram, the
bucket at 0.05). SLO names are the same on both sides, ``<model>-availability`` and ``<model>-latency``:
tritonwatch's ``slo`` label, Sloth's ``sloth_slo``.

tritonwatch's rules are whatever ``tritonwatch rules --slo FILE --out DIR`` writes (``DIR/*.rules.yml``),
so the bench measures any branch's generator. Sloth's are ``sloth generate --default-slo-period=28d``
(default plugins and optimisation).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import yaml

from bench.slo_plan import Rule

AVAILABILITY_OBJECTIVE = 99.9
LATENCY_OBJECTIVE = 99.0
LATENCY_THRESHOLD = "50ms"
WINDOW = "28d"


def tritonwatch_slo_file(models: Sequence[str]) -> dict[str, object]:
    return {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "slo-cost-bench"},
        "spec": {
            "window": WINDOW,
            "up_job": "triton",
            "slos": [
                {
                    "model": m,
                    "availability": {"objective": AVAILABILITY_OBJECTIVE},
                    "latency": {"threshold": LATENCY_THRESHOLD, "objective": LATENCY_OBJECTIVE},
                }
                for m in models
            ],
        },
    }


def sloth_spec(models: Sequence[str]) -> dict[str, object]:
    """Sloth's ``prometheus/v1`` spec for the same objectives over the same counters."""
    slos = []
    for m in models:
        failed = f'nv_inference_request_failure{{model="{m}",reason!="CANCELED"}}'
        ok = f'nv_inference_request_success{{model="{m}"}}'
        count = f'tritonwatch_request_duration_seconds_count{{model="{m}",phase="request"}}'
        within = f'tritonwatch_request_duration_seconds_bucket{{model="{m}",phase="request",le="0.05"}}'
        for kind, objective, error_query, total_query in (
            (
                "availability",
                AVAILABILITY_OBJECTIVE,
                f"sum(rate({failed}[{{{{.window}}}}]))",
                f"sum(rate({ok}[{{{{.window}}}}])) + sum(rate({failed}[{{{{.window}}}}]))",
            ),
            (
                "latency",
                LATENCY_OBJECTIVE,
                f"sum(rate({count}[{{{{.window}}}}])) - sum(rate({within}[{{{{.window}}}}]))",
                f"sum(rate({count}[{{{{.window}}}}]))",
            ),
        ):
            slos.append(
                {
                    "name": f"{m}-{kind}",
                    "objective": objective,
                    "labels": {"model": m},
                    "sli": {"events": {"error_query": error_query, "total_query": total_query}},
                    "alerting": {
                        "name": "SlothErrorBudgetBurn",
                        "page_alert": {"labels": {"severity": "page"}},
                        "ticket_alert": {"labels": {"severity": "ticket"}},
                    },
                }
            )
    return {"version": "prometheus/v1", "service": "triton", "slos": slos}


def _run(argv: Sequence[str], what: str, cwd: Path | None = None) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-800:]}"
        )


def generate_tritonwatch(models: Sequence[str], workdir: Path, command: Sequence[str] = ()) -> list[Path]:
    """``tritonwatch rules`` (``command``, default this interpreter's) for the models' objectives."""
    workdir.mkdir(parents=True, exist_ok=True)
    slo = workdir / "slo.yaml"
    slo.write_text(yaml.safe_dump(tritonwatch_slo_file(models), sort_keys=False))
    out = workdir / "generated"
    argv = [
        *(command or (sys.executable, "-m", "tritonwatch")),
        "rules",
        "--slo",
        str(slo),
        "--out",
        str(out),
    ]
    # Run where no tritonwatch package lies: ``python -m`` puts its working directory first on the path.
    _run(argv, "tritonwatch rules", cwd=workdir)
    return sorted(out.glob("*.rules.yml"))


def generate_sloth(sloth: str, models: Sequence[str], workdir: Path) -> list[Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    spec = workdir / "sloth.yaml"
    spec.write_text(yaml.safe_dump(sloth_spec(models), sort_keys=False))
    out = workdir / "sloth.rules.yml"
    _run([sloth, "generate", "--default-slo-period=28d", "-i", str(spec), "-o", str(out)], "sloth generate")
    return [out]


def load(side: str, files: Sequence[Path]) -> list[Rule]:
    """Every rule of the files, in file and group order (selectors not read yet)."""
    rules = []
    for f in files:
        doc = yaml.safe_load(f.read_text()) or {}
        for group in doc.get("groups") or []:
            for r in group.get("rules") or []:
                rules.append(
                    Rule(
                        side=side,
                        group=str(group["name"]),
                        name=str(r.get("record") or r.get("alert")),
                        is_record="record" in r,
                        expr=str(r["expr"]),
                        labels={str(k): str(v) for k, v in (r.get("labels") or {}).items()},
                    )
                )
    return rules
