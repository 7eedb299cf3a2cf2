"""Latency from the front (``latency.from``): a proxy's own histogram as the latency SLI.

Without processes: the ``_bucket`` selector takes the strict grammar of ``availability.from``, and
anything else is refused with one line naming the field, nothing written; the unit comes from the
family name or ``unit:``; ``le`` is matched however the front spells the bound; the generated promtool
tests pass, and fail against a rule that reads the sidecar's histogram. With processes: the real
Triton's ``sleeper`` behind a real Caddy 2.6, a real Prometheus with the generated rules; the recorded
5m latency error ratio equals the share of requests the clients themselves timed over 50 ms.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from conftest import need_binary
from support import sli_swap, stacks

from tritonwatch import slo
from tritonwatch.alerts import rules
from tritonwatch.alerts.generate import render, write
from tritonwatch.cli import main
from tritonwatch.errors import UsageError
from tritonwatch.fronthistogram import le_regex

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "alerts" / "examples" / "caddy-slo.yaml"
CADDY = 'caddy_http_request_duration_seconds_bucket{server="sleeper"}'
FIELD = "spec.slos[0].latency.from"


def doc(histogram: object = CADDY, threshold: object = "50ms", **front: Any) -> dict[str, Any]:
    return {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "front"},
        "spec": {
            "window": "28d",
            "slos": [
                {
                    "model": "sleeper",
                    "latency": {
                        "threshold": threshold,
                        "objective": 99,
                        "from": {"histogram": histogram, **front},
                    },
                }
            ],
        },
    }


HOSTILE = [
    ("up) or vector(1", "histogram: not a histogram bucket selector", "column 3"),
    (f"rate({CADDY}[5m])", "histogram: not a histogram bucket selector", "column 5"),
    (f"{CADDY} or vector(1)", "histogram: not a histogram bucket selector", "got 'or vector(1)'"),
    (f"{CADDY}[5m]", "histogram: not a histogram bucket selector", "got '[5m]'"),
    (f"{CADDY} offset 1h", "histogram: not a histogram bucket selector", "got 'offset 1h'"),
    (f'{CADDY}\n{{le="+Inf"}}', "histogram: control character '\\n' in selector", ""),
    ('x_bucket{server=~"(?!a)"}', "histogram: label server: lookaround", ""),
    ("caddy_http_request_duration_seconds_count", "histogram: must select a histogram's _bucket series", ""),
    ("caddy_http_request_duration_seconds", "histogram: must select a histogram's _bucket series", ""),
    (
        'caddy_http_request_duration_seconds_bucket{le="0.05"}',
        "histogram: must not match le (the rules pick the bucket at the threshold)",
        "",
    ),
    ({"a": 1}, "histogram: must be a histogram bucket selector string (got dict)", ""),
    (None, "histogram: required", ""),
]


@pytest.mark.parametrize(("histogram", "message", "detail"), HOSTILE)
def test_hostile_histograms_are_refused_with_one_line_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], histogram: object, message: str, detail: str
) -> None:
    f = tmp_path / "slo.yaml"
    f.write_text(yaml.safe_dump(doc(histogram)))
    out = tmp_path / "out"
    code = main(["rules", "--slo", str(f), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{f}: {FIELD}.{message}" in err and detail in err, err
    assert not out.exists()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        ({"unit": "minutes"}, f"{FIELD}.unit: must be one of: seconds, milliseconds (got 'minutes')"),
        (
            {"unit": "milliseconds"},
            f"{FIELD}.unit: milliseconds contradicts the family name "
            "'caddy_http_request_duration_seconds' (seconds)",
        ),
        ({"sum": "x"}, f"{FIELD}.sum: unknown field (expected one of: histogram, unit)"),
    ],
)
def test_bad_units_and_fields_are_refused(edit: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError) as exc:
        slo.parse(doc(**edit))
    assert str(exc.value) == message


def test_the_unit_comes_from_the_family_name_or_the_unit_field() -> None:
    def unit(histogram: str, **front: Any) -> str:
        lat = slo.parse(doc(histogram, **front)).slos[0].latency
        assert lat is not None and lat.source is not None
        return lat.source.unit

    assert unit(CADDY) == "seconds"
    assert unit('istio_request_duration_milliseconds_bucket{destination_workload="triton"}') == "milliseconds"
    assert unit("nv_inference_first_response_histogram_ms_bucket") == "milliseconds"
    # Known fronts whose names do not say the unit: Envoy's and Knative's are milliseconds.
    assert unit('envoy_cluster_upstream_rq_time_bucket{envoy_cluster_name="triton"}') == "milliseconds"
    assert unit("revision_app_request_latencies_bucket", unit="milliseconds") == "milliseconds"
    assert unit("my_proxy_latency_bucket", unit="seconds") == "seconds"
    with pytest.raises(UsageError, match=r"\.from\.unit: required: the family name 'my_proxy_latency'"):
        unit("my_proxy_latency_bucket")  # neither: never guessed
    with pytest.raises(
        UsageError, match="seconds contradicts the family name 'envoy_cluster_upstream_rq_time'"
    ):
        unit("envoy_cluster_upstream_rq_time_bucket", unit="seconds")


def test_le_is_matched_however_the_front_spells_the_bound() -> None:
    seconds = slo.parse(doc()).slos[0].latency
    ms = slo.parse(doc("istio_request_duration_milliseconds_bucket")).slos[0].latency
    assert seconds is not None and seconds.source is not None and ms is not None and ms.source is not None
    assert seconds.source.under(0.05) == f'{CADDY[:-1]},le=~"0\\\\.050*"}}'
    assert ms.source.under(0.05) == 'istio_request_duration_milliseconds_bucket{le=~"50(\\\\.0*)?"}'

    def spellings(pattern: str, candidates: list[str]) -> list[str]:
        return [c for c in candidates if re.fullmatch(pattern, c)]

    near = ["0.05", "0.050", "0.5", "0.005", "0.051", "50", "50.0", "500", "5", "5e+01", "0.05e0"]
    assert spellings(le_regex(seconds.source.bound(0.05)), near) == ["0.05", "0.050"]
    assert spellings(le_regex(ms.source.bound(0.05)), near) == ["50", "50.0"]
    # floats that do not print as they were written: 0.1 + 0.2 s is 300 ms, not 300.00000000000006
    assert ms.source.bound(0.3) == 300 and spellings(le_regex(ms.source.bound(0.0001)), ["0.1"]) == ["0.1"]
    assert spellings(le_regex(seconds.source.bound(0.00001)), ["1e-05", "0.00001", "0.0001"]) == [
        "1e-05",
        "0.00001",
    ]


def test_a_front_threshold_need_not_be_a_sidecar_bucket() -> None:
    lat = slo.parse(doc(threshold="30ms")).slos[0].latency
    assert lat is not None and lat.threshold == 0.03
    plain = doc(threshold="30ms")
    del plain["spec"]["slos"][0]["latency"]["from"]
    # nor the sidecar's: on Triton 2.65+ rules' model_metrics stanza makes 30 ms one of Triton's bounds
    served = slo.parse(plain).slos[0].latency
    assert served is not None and served.threshold == 0.03 and served.source is None
    for kind in ("time_to_first_token", "inter_token_latency"):  # the front times whole requests only
        raw = doc()
        raw["spec"]["slos"][0][kind] = raw["spec"]["slos"][0].pop("latency")
        with pytest.raises(UsageError, match=f"spec.slos\\[0\\].{kind}.from: unknown field"):
            slo.parse(raw)


def test_front_sli_reads_only_the_fronts_buckets() -> None:
    spec = slo.load(EXAMPLE)
    [sleeper] = [o for o in spec.objectives() if o.model == "sleeper"]
    got = {r.record: r.to_yaml() for r in rules.sli_rules(spec, sleeper)}
    under = f'{CADDY[:-1]},le=~"0\\\\.050*"}}'
    total = f'{CADDY[:-1]},le="+Inf"}}'
    labels = {"model": "sleeper", "slo": "sleeper-latency"}
    mine = '{slo="sleeper-latency"}'
    assert got["slo:sli_total:rate5m"] == {
        "record": "slo:sli_total:rate5m",
        "expr": f"sum(rate({total}[5m1ms]))",
        "labels": labels,
    }
    assert got["slo:sli_bad:rate5m"] == {
        "record": "slo:sli_bad:rate5m",
        "expr": f"slo:sli_total:rate5m{mine}\n- ignoring (model, slo)\nsum(rate({under}[5m1ms]))",
        "labels": labels,
    }
    assert got["slo:sli_error:ratio_rate5m"]["expr"] == (
        f"slo:sli_bad:rate5m{mine}\n/\nslo:sli_total:rate5m{mine}\nand\nslo:sli_total:rate5m{mine} * 300 >= 20"
    )
    assert [r for r in got if "caddy" in got[r]["expr"]] == ["slo:sli_total:rate5m", "slo:sli_bad:rate5m"]


@stacks.needs("promtool")
def test_promtool_tests_for_the_front_latency_pass_and_catch_a_rule_that_reads_the_sidecar(
    tmp_path: Path,
) -> None:
    out = tmp_path / "rules"
    write(render(str(EXAMPLE)), out)
    tests = yaml.safe_load((out / "tests" / "slo-sleeper-latency.test.yml").read_text())
    names = [t["name"] for t in tests["tests"]]
    for name in (
        "sleeper-latency: the sidecar's histogram is not read",
        "sleeper-latency: a front without a bucket at the threshold raises TritonSLONoData",
        "sleeper-latency: fewer than 20 samples per window never fire",
    ):
        assert name in names
    promtool = shutil.which("promtool")
    assert promtool
    ok = subprocess.run(
        [promtool, "test", "rules", "tests/slo-sleeper-latency.test.yml"],
        cwd=out,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr

    # The same tests against rules whose sleeper SLI reads the sidecar's histogram: they must fail.
    sli_swap.read_by_triton(out / "model-sleeper.rules.yml", EXAMPLE, "sleeper", "latency")
    wanted = ("sleeper-latency: total outage", "sleeper-latency: the sidecar's histogram")
    tests["tests"] = [t for t in tests["tests"] if t["name"].startswith(wanted)]
    assert len(tests["tests"]) == 2
    (out / "tests" / "front.test.yml").write_text(yaml.safe_dump(tests))
    bad = subprocess.run(
        [promtool, "test", "rules", "tests/front.test.yml"], cwd=out, capture_output=True, text=True
    )
    assert bad.returncode == 1
    for name in wanted:
        assert name in bad.stdout + bad.stderr


# --- end to end: Caddy before the real Triton -------------------------------------------------------
THRESHOLD = 0.05
FAST_MS, SLOW_MS = 2.0, 120.0
SLOW_EVERY = 4  # a quarter of the requests ask to sleep 120 ms
CLIENTS = 4  # sleeper has 4 instances: no client waits in Triton's queue behind another
PER_CLIENT = 80


def _infer(session: requests.Session, url: str, delay_ms: float) -> float:
    body = {"inputs": [{"name": "delay_ms", "shape": [1], "datatype": "FP32", "data": [delay_ms]}]}
    start = time.perf_counter()
    resp = session.post(f"{url}/v2/models/sleeper/infer", json=body, timeout=30)
    took = time.perf_counter() - start
    assert resp.status_code == 200, resp.text
    return took


@pytest.fixture
def caddy_stack(triton: Any, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """Caddy in front of the session's Triton, Prometheus scraping Caddy with the example's rules."""
    from support.caddy import Caddy

    from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

    binary = need_binary("caddy")
    need_binary("prometheus")
    rules_dir = tmp_path / "rules"
    write(render(str(EXAMPLE)), rules_dir)
    caddy = Caddy(binary, tmp_path / "caddy", ["sleeper"], f"127.0.0.1:{triton.http_port}")
    try:
        caddy.wait_ready()
        config = prometheus_config(
            [ScrapeTarget("front", caddy.metrics_address)], sorted(rules_dir.glob("*.rules.yml"))
        )
        prom = Prometheus(tmp_path / "prometheus", config)
        try:
            prom.wait_ready()
            yield caddy.urls["sleeper"], prom.url
        finally:
            prom.stop()
    finally:
        caddy.stop()


def _scalar(prom: str, expr: str) -> float | None:
    resp = requests.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10)
    resp.raise_for_status()
    result = resp.json()["data"]["result"]
    assert len(result) <= 1, (expr, result)
    return float(result[0]["value"][1]) if result else None


def _until(check: Any, what: str, timeout: float = 60.0) -> Any:
    from tritonwatch.local.procs import wait_until

    wait_until(lambda: check() is not None and bool(check()), timeout, what)
    return check()


@pytest.mark.triton
@stacks.needs("caddy", "prometheus")
def test_recorded_latency_error_ratio_is_the_share_clients_timed_over_the_threshold(
    caddy_stack: tuple[str, str],
) -> None:
    url, prom = caddy_stack
    total = f'sum({CADDY[:-1]},le="+Inf"}})'
    # Caddy creates its series with the first request: one fast request, then wait until Prometheus
    # holds it, so that the load below is all increase (rate() does not count a series' first sample).
    with requests.Session() as s:
        _infer(s, url, 0.0)
    _until(lambda: _scalar(prom, total) == 1, "Caddy's first request in Prometheus")

    timings: list[list[float]] = [[] for _ in range(CLIENTS)]

    def client(i: int) -> None:
        with requests.Session() as s:
            for n in range(PER_CLIENT):
                timings[i].append(_infer(s, url, SLOW_MS if n % SLOW_EVERY == i % SLOW_EVERY else FAST_MS))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seen = [x for ts in timings for x in ts]
    assert len(seen) == CLIENTS * PER_CLIENT
    clients_share = sum(1 for x in seen if x > THRESHOLD) / len(seen)

    _until(lambda: _scalar(prom, total) == len(seen) + 1, "Caddy's final counts in Prometheus")
    scraped = _scalar(prom, f"max(timestamp({CADDY}))")
    assert scraped is not None
    sli = 'slo:sli_error:ratio_rate5m{slo="sleeper-latency"}'
    _until(lambda: (_scalar(prom, f"timestamp({sli})") or 0) > scraped, "the SLI evaluated after it")
    recorded = _scalar(prom, sli)
    assert recorded is not None
    asked = 1 / SLOW_EVERY  # requests that sleep 120 ms: over 50 ms wherever they are timed
    print(f"clients over 50 ms: {clients_share:.4f}; recorded 5m latency error ratio: {recorded:.4f}")
    # Caddy times every request that slept, and no more than the clients did: on a loaded machine a
    # client's own scheduling can push a 2 ms request over 50 ms on its side (82 against Caddy's 80 of
    # 320 once), never on Caddy's. 0.005: rate()'s extrapolation of two series young in the window.
    assert asked - 0.005 <= recorded <= clients_share + 0.005, (recorded, asked, clients_share)
    assert abs(clients_share - asked) <= 0.05  # the load made the share it meant to
    # The no-data alert stays quiet: Caddy's buckets include the threshold.
    assert _scalar(prom, 'ALERTS{alertname="TritonSLONoData",slo="sleeper-latency"}') is None


def test_the_report_reads_the_fronts_buckets_where_the_slo_does() -> None:
    from tritonwatch.reports import queries

    lat = slo.load(EXAMPLE).slo_for("sleeper").latency
    assert lat is not None and lat.source is not None
    under = f'{CADDY[:-1]},le=~"0\\\\.050*"}}'
    assert queries.front_latency(lat.source, lat.threshold) == f"sum(rate({under}[5m]))"
    assert queries.front_latency(lat.source, None) == f'sum(rate({CADDY[:-1]},le="+Inf"}}[5m]))'
