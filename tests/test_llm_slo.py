"""LLM SLOs: time to first token and inter-token latency objectives, burn-rate alerts, promtool.

The example SLO file (alerts/examples/llm-slo.yaml) generates rules and their own promtool tests;
a hand-written scenario then holds the TTFT SLO to the behaviour an operator needs: healthy traffic
(0.5 % of first tokens over 500 ms, half the budget) never pages, and the same traffic with half of
its first tokens over 500 ms pages.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from support import stacks

from tritonwatch import catalog, slo
from tritonwatch.alerts import rules
from tritonwatch.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "alerts" / "examples" / "llm-slo.yaml"
needs_promtool = stacks.needs("promtool")
SLO_NAME = "vllm_model-time-to-first-token"


def test_ttft_and_itl_objectives_parse_and_read_the_llm_histograms() -> None:
    spec = slo.load(EXAMPLE)
    kinds = {o.name: o.kind for o in spec.objectives()}
    assert kinds == {
        "vllm_model-availability": "availability",
        SLO_NAME: "time_to_first_token",
        "vllm_model-inter-token-latency": "inter_token_latency",
    }
    ttft = next(o for o in spec.objectives() if o.kind == "time_to_first_token")
    ttft_rules = {r.record: r.expr for r in rules.sli_rules(spec, ttft)}
    assert (
        f'{catalog.LLM_TTFT}_bucket{{model="vllm_model",le=~"0\\\\.5"}}' in ttft_rules["slo:sli_bad:rate5m"]
    )
    assert f"{catalog.LLM_TTFT}_count" in ttft_rules["slo:sli_total:rate5m"]
    itl = next(o for o in spec.objectives() if o.kind == "inter_token_latency")
    itl_rules = {r.record: r.expr for r in rules.sli_rules(spec, itl)}
    assert (
        f'{catalog.LLM_ITL}_bucket{{model="vllm_model",le=~"0\\\\.1"}}' in itl_rules["slo:sli_total:rate5m"]
    )
    # Longer windows read the records only.
    assert catalog.LLM_ITL not in itl_rules["slo:sli_total:rate1h"] + itl_rules["slo:sli_error:ratio_rate1h"]


def test_threshold_off_the_buckets_is_one_line_naming_the_field(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["spec"]["slos"][0]["time_to_first_token"]["threshold"] = "300ms"
    with pytest.raises(slo.UsageError, match=r"spec\.slos\[0\]\.time_to_first_token\.threshold: must be"):
        slo.parse(doc)


def scenario(slow_per_minute: list[tuple[int, int]]) -> str:
    """Series text: 600 first tokens a minute, ``slow`` of them over 500 ms, for ``minutes`` each."""
    under, count, u, c = [], [], 0, 0
    for minutes, slow in slow_per_minute:
        for _ in range(minutes):
            under.append(u)
            count.append(c)
            u += 600 - slow
            c += 600
    return " ".join(map(str, under)), " ".join(map(str, count))


@needs_promtool
def test_ttft_slo_pages_when_first_tokens_slow_down_and_not_on_healthy_traffic(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert main(["rules", "--slo", str(EXAMPLE), "--out", str(out)]) == 0
    check = subprocess.run(
        ["promtool", "check", "rules", *map(str, out.glob("*.rules.yml"))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    generated = subprocess.run(
        ["promtool", "test", "rules", *map(str, out.glob("tests/*.test.yml"))],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr

    healthy, degraded = (120, 3), (40, 300)  # 0.5 % slow (0.5x burn), then 50 % slow (50x)
    under, count = scenario([healthy, degraded])
    labels = 'model="vllm_model",version="1",instance="sidecar:9450",job="tritonwatch"'
    page = f'count(ALERTS{{alertname="{catalog.SLO_BURN_ALERT}",alertstate="firing",severity="page",slo="{SLO_NAME}"}})'
    doc = {
        "rule_files": [str(p) for p in sorted(out.glob("model-*.rules.yml"))],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": f'{catalog.LLM_TTFT}_bucket{{{labels},le="0.5"}}', "values": under},
                    {"series": f"{catalog.LLM_TTFT}_count{{{labels}}}", "values": count},
                ],
                "promql_expr_test": [
                    {"expr": page, "eval_time": "119m", "exp_samples": []},
                    {"expr": page, "eval_time": "159m", "exp_samples": [{"labels": "{}", "value": 1}]},
                ],
            }
        ],
    }
    path = tmp_path / "ttft.test.yml"
    path.write_text(yaml.safe_dump(doc))
    run = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stdout + run.stderr
