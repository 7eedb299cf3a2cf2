"""The operational alerts on an ensemble, proven with ``promtool test rules`` on generated rules.

An SLO file with objectives on an ensemble ``pipeline`` is turned into rules by ``tritonwatch rules``;
the cases give Triton's counters as Triton 2.51 serves them for an ensemble, plus the sidecar's
``tritonwatch_model_role_info{role="ensemble"}``. Each case has a twin without that series (the same
counters read as a plain model's), which must come out the other way: the role is what decides.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import need_binary

from tritonwatch import catalog, slo
from tritonwatch.alerts import promtests, rulefiles, rules
from tritonwatch.cli import main

pytestmark = pytest.mark.usefixtures("platform")  # every test runs promtool: on both stacks

MODEL = "pipeline"
SLO_FILE = f"""apiVersion: tritonwatch/v1
kind: ServiceLevelObjectives
metadata:
  name: pipelines
spec:
  window: 28d
  slos:
    - model: {MODEL}
      availability: {{objective: 99.9}}
      queue_time_ratio: {{max: 0.5}}
      batch_efficiency: {{min: 0.5}}
"""
SIDE = {catalog.MODEL: MODEL, catalog.VERSION: promtests.VERSION}


def spec(tmp_path: Path) -> slo.SLOFile:
    path = tmp_path / "slo.yaml"
    path.write_text(SLO_FILE)
    return slo.load(path)


def role(c: promtests.Case, s: slo.SLOFile, ensemble: bool) -> None:
    """The sidecar's role series for the ensemble (absent for the plain-model twin)."""
    if ensemble:
        labels = promtests.sidecar_labels(s, **SIDE, **{catalog.ROLE: catalog.ROLE_ENSEMBLE})
        c.add(catalog.MODEL_ROLE_INFO, labels, promtests.gauge(1, 60))


def batch_case(s: slo.SLOFile, ensemble: bool) -> promtests.Case:
    """Triton's counters of an ensemble: one "execution" per request (batch 1 of max 8, 12.5 %)."""
    c = promtests.Case(f"{MODEL} as {'an ensemble' if ensemble else 'a plain model'}: batch efficiency 12.5%")
    labels = promtests.triton_labels(s, MODEL)
    c.add(catalog.TRITON_EXEC_COUNT, labels, promtests.counter(100, 60))
    c.add(catalog.TRITON_INFERENCE_COUNT, labels, promtests.counter(100, 60))
    c.add(catalog.MAX_BATCH_SIZE, promtests.sidecar_labels(s, **SIDE), promtests.gauge(8, 60))
    role(c, s, ensemble)
    alert = catalog.BATCH_EFFICIENCY_LOW_ALERT
    fired = () if ensemble else (expected(s, alert, "12.5%"),)
    c.checks.append(promtests.Check("50m", alert, fired))
    return c


def queue_case(s: slo.SLOFile, ensemble: bool) -> promtests.Case:
    """An ensemble whose steps queue: 1 s of request time a minute, 2 us of it its own scheduling
    (its queue counter), 0.3 s computing in its steps: 70 % of its time is spent waiting in steps."""
    c = promtests.Case(f"{MODEL} as {'an ensemble' if ensemble else 'a plain model'}: steps queue 70%")
    labels = promtests.triton_labels(s, MODEL)
    c.add(catalog.triton_duration("request"), labels, promtests.counter(1_000_000, 60))
    c.add(catalog.triton_duration("queue"), labels, promtests.counter(2, 60))
    c.add(catalog.triton_duration("compute_input"), labels, promtests.counter(10_000, 60))
    c.add(catalog.triton_duration("compute_infer"), labels, promtests.counter(280_000, 60))
    c.add(catalog.triton_duration("compute_output"), labels, promtests.counter(10_000, 60))
    role(c, s, ensemble)
    alert = catalog.QUEUE_TIME_HIGH_ALERT
    fired = (expected(s, alert, "70%"),) if ensemble else ()
    c.checks.append(promtests.Check("30m", alert, fired))
    return c


def expected(s: slo.SLOFile, alert: str, value_pct: str) -> dict[str, dict[str, str]]:
    values = {**rules.operational_texts(s, alert, s.slo_for(MODEL)), "value_pct": value_pct}
    labels = {rules.SEVERITY: "ticket", **SIDE}
    return promtests.expected(s, alert, labels, values)


def promtool(tmp_path: Path, s: slo.SLOFile, cases: list[promtests.Case]) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "rules"
    assert main(["rules", "--slo", str(tmp_path / "slo.yaml"), "--out", str(out)]) == 0
    test = {
        "rule_files": [str(out / f) for f in (*promtests.OPERATIONAL_RULES, rulefiles.model_file(MODEL))],
        "evaluation_interval": promtests.INTERVAL,
        "tests": [c.to_yaml() for c in cases],
    }
    path = tmp_path / "pipeline.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 16))
    return subprocess.run(
        [need_binary("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("ensemble", [True, False], ids=["ensemble", "plain-model-twin"])
def test_batch_efficiency_alert_never_fires_for_an_ensemble(tmp_path: Path, ensemble: bool) -> None:
    s = spec(tmp_path)
    proc = promtool(tmp_path, s, [batch_case(s, ensemble)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("ensemble", [True, False], ids=["ensemble", "plain-model-twin"])
def test_queue_alert_fires_for_an_ensemble_whose_steps_queue(tmp_path: Path, ensemble: bool) -> None:
    s = spec(tmp_path)
    proc = promtool(tmp_path, s, [queue_case(s, ensemble)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_the_cases_fail_when_the_role_is_not_heeded(tmp_path: Path) -> None:
    """Each case checked against the other's expectation fails: the role series is what decides."""
    s = spec(tmp_path)
    swapped = []
    for make in (batch_case, queue_case):
        ens, plain = make(s, True), make(s, False)
        ens.checks = plain.checks
        swapped.append(ens)
    proc = promtool(tmp_path, s, swapped)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert catalog.BATCH_EFFICIENCY_LOW_ALERT in out and catalog.QUEUE_TIME_HIGH_ALERT in out, out


@pytest.mark.parametrize("ensemble", [True, False], ids=["ensemble", "plain-model-twin"])
def test_the_availability_sli_counts_each_failed_ensemble_request_once(
    tmp_path: Path, ensemble: bool
) -> None:
    """900 successes and 100 failed requests a minute, which Triton 2.51 counts as 200 failures of
    the ensemble: the SLI is 10 % for the ensemble, 200/1100 read as a plain model."""
    s = spec(tmp_path)
    c = promtests.Case("availability")
    c.add(catalog.TRITON_SUCCESS, promtests.triton_labels(s, MODEL), promtests.counter(900, 60))
    labels = promtests.triton_labels(s, MODEL, reason="OTHER")
    c.add(catalog.TRITON_FAILURE, labels, promtests.counter(2 * 100, 60))
    role(c, s, ensemble)
    out = tmp_path / "rules"
    assert main(["rules", "--slo", str(tmp_path / "slo.yaml"), "--out", str(out)]) == 0
    want = 100 / 1000 if ensemble else 200 / 1100
    record = f'{catalog.slo_sli_error_record("30m")}{{slo="{MODEL}-availability"}}'
    test = {
        "rule_files": [str(out / rulefiles.model_file(MODEL))],
        "evaluation_interval": promtests.INTERVAL,
        "tests": [
            {
                "interval": promtests.INTERVAL,
                "input_series": [{"series": k, "values": v} for k, v in c.series],
                "promql_expr_test": [
                    {
                        "expr": f"abs({record} - {want!r}) < bool 1e-12",
                        "eval_time": "40m",
                        "exp_samples": [
                            {"labels": f'{{model="{MODEL}", slo="{MODEL}-availability"}}', "value": 1}
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "sli.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False, width=1 << 16))
    proc = subprocess.run(
        [need_binary("promtool"), "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
