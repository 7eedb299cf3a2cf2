"""Availability from what clients see: the real Triton behind the real HAProxy, a real Prometheus.

``flaky`` and ``steady`` are python models (``tests/front_models/``); flaky answers every
``FAIL_EVERY``-th request with an error response, which the client gets as HTTP 500 and Triton 2.51
counts as a success. HAProxy (Debian 2.6, one backend per model, its built-in exporter) is in front;
Prometheus scrapes HAProxy, Triton and the sidecar with the rules ``tritonwatch rules`` writes for
``alerts/examples/haproxy-slo.yaml``. The SLO's recorded error ratio must be the share of 5xx the
clients saw, while Triton's own error ratio reads 0, and the sidecar marks both models. The dashboards'
gap panel and the capacity report read the same; ``tritonwatch rules --triton`` warns for steady,
whose availability reads Triton's counters, and at run time ``TritonSLOErrorsUncounted`` fires for
steady's SLO and not for flaky's. On the session's Triton, the decoupled ``streamer`` is marked
``decoupled`` too.
"""

from __future__ import annotations

import contextlib
import csv
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import ROOT, need_binary
from support import stacks
from support.haproxy import HAProxy
from support.harness import poll, value

from tritonwatch import catalog
from tritonwatch.cli import main
from tritonwatch.dashboards import queries as q

SLO_FILE = ROOT / "alerts" / "examples" / "haproxy-slo.yaml"
FAIL_EVERY = 8  # flaky: every 8th request asks to fail, 12.5 %
REQUESTS = 320  # per model
FLAKY_ERRORS = 'haproxy_backend_http_responses_total{proxy="flaky",code="5xx"}'
FLAKY_TOTAL = 'haproxy_backend_http_responses_total{proxy="flaky"}'


@dataclass
class Stack:
    front: HAProxy
    prometheus_url: str
    sidecar_port: int
    rules_dir: Path
    triton_url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        resp = requests.get(f"{self.prometheus_url}/api/v1/query", params={"query": expr}, timeout=10)
        resp.raise_for_status()
        result: list[dict[str, Any]] = resp.json()["data"]["result"]
        return result

    def scalar(self, expr: str) -> float | None:
        result = self.query(expr)
        assert len(result) <= 1, (expr, result)
        return float(result[0]["value"][1]) if result else None


def _poll(check: Any, what: str, timeout: float = 30.0) -> Any:
    from tritonwatch.local.procs import wait_until

    wait_until(lambda: bool(check()), timeout, what)
    return check()


@pytest.fixture(scope="module")
def stack(
    platform: stacks.Stack, tmp_path_factory: pytest.TempPathFactory, triton_server: Any
) -> Iterator[Stack]:
    """One stack for the module: the second test only reads configs, it sends no request."""
    tmp_path = tmp_path_factory.mktemp("front")
    haproxy = need_binary("haproxy")
    need_binary("prometheus")
    from tritonwatch.alerts.generate import render, write
    from tritonwatch.exporters.sidecar import Sidecar
    from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

    rules_dir = tmp_path / "rules"
    write(render(str(SLO_FILE)), rules_dir)
    with contextlib.ExitStack() as stack:
        triton = triton_server  # the session's, which serves FRONT_MODELS: only this test drives them
        front = HAProxy(haproxy, tmp_path / "haproxy", ["flaky", "steady"], f"127.0.0.1:{triton.http_port}")
        stack.callback(front.stop)
        front.wait_ready()
        side = Sidecar.local(triton.http_url, triton.metrics_url, interval=1, window=60).start()
        stack.callback(side.stop)
        targets = [
            ScrapeTarget("front", front.metrics_address),
            ScrapeTarget("triton", f"127.0.0.1:{triton.metrics_port}"),
            ScrapeTarget("tritonwatch", f"127.0.0.1:{side.port}"),
        ]
        rule_files = sorted(rules_dir.glob("*.rules.yml"))
        prom = Prometheus(tmp_path / "prometheus", prometheus_config(targets, rule_files))
        stack.callback(prom.stop)
        prom.wait_ready()
        yield Stack(front, prom.url, side.port, rules_dir, triton.http_url)


def _drive(url: str, model: str, fail_every: int, seen: Counter[int]) -> None:
    """REQUESTS inferences through the front, one client (session) per thread; counts the statuses."""
    with requests.Session() as session:
        for i in range(REQUESTS):
            x = -1.0 if fail_every and i % fail_every == 0 else 1.0
            body = {"inputs": [{"name": "x", "shape": [1], "datatype": "FP32", "data": [x]}]}
            resp = session.post(f"{url}/v2/models/{model}/infer", json=body, timeout=30)
            seen[resp.status_code] += 1


def _triton_successes(triton_url: str, model: str) -> int:
    """Triton's own count of the model's successful requests (statistics API)."""
    resp = requests.get(f"{triton_url}/v2/models/{model}/stats", timeout=10)
    resp.raise_for_status()
    return int(resp.json()["model_stats"][0]["inference_stats"]["success"]["count"])


@pytest.mark.triton
def test_slo_error_ratio_is_what_clients_saw_while_triton_reads_zero(stack: Stack) -> None:
    # Every target scraped, and HAProxy's counters held at 0 before any request: rate() then
    # starts from the first sample, for the 5xx series and the others alike.
    _poll(lambda: len(stack.query("up == 1")) == 3, "Prometheus scraping HAProxy, Triton and the sidecar")
    _poll(lambda: stack.scalar(f"sum({FLAKY_TOTAL})") == 0, "HAProxy's flaky counters at 0 in Prometheus")

    # The session's Triton outlives this module (it runs once per stack): its counters start where the
    # last run left them, so Triton's count is checked as an increase over this run.
    before = _triton_successes(stack.triton_url, "flaky")
    seen: dict[str, Counter[int]] = {"flaky": Counter(), "steady": Counter()}
    threads = [
        threading.Thread(target=_drive, args=(stack.front.url, "flaky", FAIL_EVERY, seen["flaky"])),
        threading.Thread(target=_drive, args=(stack.front.url, "steady", 0, seen["steady"])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    flaky = seen["flaky"]
    client_5xx = sum(n for code, n in flaky.items() if 500 <= code < 600)
    assert sum(flaky.values()) == REQUESTS
    assert client_5xx == REQUESTS // FAIL_EVERY, flaky  # every request asked to fail got a 5xx
    assert seen["steady"] == Counter({200: REQUESTS})

    # Wait for Prometheus to hold the final counts, then for a rule evaluation after that scrape.
    _poll(lambda: stack.scalar(f"sum({FLAKY_TOTAL})") == REQUESTS, "HAProxy's final counts in Prometheus")
    scraped = stack.scalar(f"max(timestamp({FLAKY_ERRORS}))")
    assert scraped is not None
    slo_sli = 'slo:sli_error:ratio_rate5m{slo="flaky-availability"}'
    _poll(lambda: (stack.scalar(f"timestamp({slo_sli})") or 0) > scraped, "the SLI evaluated after it")

    recorded = stack.scalar(slo_sli)
    clients = client_5xx / REQUESTS
    assert recorded is not None
    assert abs(recorded - clients) * 100 < 0.3, (recorded, clients)
    labels = stack.query(slo_sli)[0]["metric"]
    assert labels == {"__name__": "slo:sli_error:ratio_rate5m", "slo": "flaky-availability", "model": "flaky"}

    # Triton counted every one of those requests as a success: its own error ratio is 0.
    triton_successes = f'sum({catalog.TRITON_SUCCESS}{{model="flaky"}})'
    assert _triton_successes(stack.triton_url, "flaky") == before + REQUESTS
    _poll(lambda: stack.scalar(triton_successes) == before + REQUESTS, "Triton's final counts in Prometheus")
    assert stack.scalar(f'sum({catalog.TRITON_FAILURE}{{model="flaky"}})') == 0
    triton_ratio = f'{catalog.ERROR_RATIO_RECORD}{{model="flaky"}}'
    _poll(lambda: stack.scalar(triton_ratio) is not None, "Triton's error ratio recorded")
    assert stack.scalar(triton_ratio) == 0
    # steady's SLO reads Triton's counters, and there nothing failed either. Its rule group is evaluated
    # on its own, and its SLI needs two scrapes of steady's counters: polled, not read once (read once, it
    # was absent in a full run).
    steady_sli = 'slo:sli_error:ratio_rate5m{slo="steady-availability"}'
    _poll(lambda: stack.scalar(steady_sli) is not None, "steady's SLI recorded")
    assert stack.scalar(steady_sli) == 0

    # The dashboards' gap panel, on the same data: the clients' share, Triton's 0, the difference.
    flaky_only = 'model=~"flaky"'
    assert stack.scalar(q.slo_error_ratio(flaky_only)) == recorded
    assert stack.scalar(q.triton_error_ratio(flaky_only)) == 0
    assert stack.scalar(q.error_ratio_gap(flaky_only, flaky_only)) == recorded

    # The capacity report takes flaky's availability from HAProxy too (steady's from Triton).
    out = stack.rules_dir.parent / "report"
    end = datetime.fromtimestamp(scraped + 2, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    argv = [
        "report",
        "--prometheus",
        stack.prometheus_url,
        "--end",
        end,
        "--days",
        "1",
        "--slo",
        str(SLO_FILE),
    ]
    assert main([*argv, "--out", str(out)]) == 0
    with (out / "models.csv").open() as f:
        rows = {row["model"]: row for row in csv.DictReader(f)}
    assert float(rows["flaky"]["availability"]) == pytest.approx(1 - clients, abs=1e-9)
    assert float(rows["flaky"]["error_ratio"]) == 0  # Triton's own, kept as Triton reports it
    assert float(rows["steady"]["availability"]) == 1
    findings = (out / "report.md").read_text()
    assert "availability 87.500 % is below its objective 99.900 %" in findings
    assert f"Look at the errors the front answered ({FLAKY_ERRORS})" in findings

    # The sidecar says where Triton is blind: both python models, nothing else (of the front's; the
    # session's Triton serves other models too).
    def front(ls: Any) -> bool:
        return dict(ls)["model"] in ("flaky", "steady")

    samples = poll(
        stack.sidecar_port,
        lambda s: (
            len([ls for ls in s.get(catalog.MODEL_UNCOUNTED_ERRORS, {}) if front(ls)]) == 2
            and catalog.ERROR_RATIO in s
        ),
        "the uncounted-errors marker and an error ratio",
    )
    marked = {tuple(sorted(dict(ls).items())) for ls in samples[catalog.MODEL_UNCOUNTED_ERRORS] if front(ls)}
    assert marked == {
        (("model", m), ("reason", "python_backend"), ("version", "1")) for m in ("flaky", "steady")
    }
    assert all(v == 1 for v in samples[catalog.MODEL_UNCOUNTED_ERRORS].values())
    assert value(samples, catalog.ERROR_RATIO, model="flaky", version="1") == 0
    # ... and the dashboards' marker table reads it back through Prometheus.
    marker = 'model=~"flaky|steady",version=~"1"'
    _poll(lambda: len(stack.query(q.uncounted_errors(marker))) == 2, "the marker in Prometheus")
    assert {r["metric"]["model"]: r["metric"]["reason"] for r in stack.query(q.uncounted_errors(marker))} == {
        "flaky": "python_backend",
        "steady": "python_backend",
    }
    # The rules say it at run time: steady's availability SLO is blind (a ticket naming it); flaky's
    # SLI comes from HAProxy, so it has no such rule, though flaky is marked too.
    blind = f'ALERTS{{alertname="{catalog.SLO_ERRORS_UNCOUNTED_ALERT}",alertstate="firing"}}'
    _poll(lambda: stack.query(blind), f"{catalog.SLO_ERRORS_UNCOUNTED_ALERT} firing")
    assert [r["metric"] for r in stack.query(blind)] == [
        {
            "__name__": "ALERTS",
            "alertname": catalog.SLO_ERRORS_UNCOUNTED_ALERT,
            "alertstate": "firing",
            "model": "steady",
            "reason": "python_backend",
            "severity": "ticket",
            "slo": "steady-availability",
        }
    ]
    rules_doc = "".join(p.read_text() for p in sorted(stack.rules_dir.glob("*.rules.yml")))
    assert rules_doc.count(f"alert: {catalog.SLO_ERRORS_UNCOUNTED_ALERT}") == 1
    assert (
        f"alert: {catalog.SLO_ERRORS_UNCOUNTED_ALERT}"
        in (stack.rules_dir / "model-steady.rules.yml").read_text()
    )


@pytest.mark.triton
def test_rules_warn_where_an_availability_slo_reads_tritons_counters_for_a_python_model(
    stack: Stack, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """steady's availability reads Triton's counters and steady is a python model: one warning line;
    flaky's comes from HAProxy: none. The rules written are those of a run without --triton."""
    out = tmp_path / "with-triton"
    with caplog.at_level(logging.WARNING, logger="tritonwatch.alerts.triton_check"):
        assert main(["rules", "--slo", str(SLO_FILE), "--out", str(out), "--triton", stack.triton_url]) == 0
    assert [r.getMessage() for r in caplog.records] == [
        "spec.slos[1].availability (steady): reads Triton's counters, which do not count this model's "
        "errors (python_backend): set availability.from (docs/uncounted-errors.md)"
    ]
    # the same files, but for the header's "Regenerate:" line: each names the command that made it
    for path in stack.rules_dir.rglob("*.yml"):
        mine = (out / path.relative_to(stack.rules_dir)).read_text().splitlines()
        theirs = path.read_text().splitlines()
        assert mine[1].startswith("# Regenerate: tritonwatch rules ") and "--triton" in mine[1]
        assert mine[:1] + mine[2:] == theirs[:1] + theirs[2:]


SHARED = {"fail_always", "fraud_detector", "sleeper", "streamer"}


def test_the_shared_triton_marks_its_python_models_and_the_decoupled_one(triton: Any) -> None:
    """The session's Triton: fraud_detector (ONNX served through the python shim), fail_always and
    sleeper are python models; streamer is python and decoupled. Read from their real configs."""
    from tritonwatch.exporters.sidecar import Sidecar

    side = Sidecar.local(triton.http_url, triton.metrics_url, interval=1, window=60).start()
    try:
        samples = poll(
            side.port,
            lambda s: SHARED <= {dict(ls)["model"] for ls in s.get(catalog.MAX_BATCH_SIZE, {})},
            "the configs of " + ", ".join(sorted(SHARED)),
        )
    finally:
        side.stop()
    # Only these four: other tests may add models to the session's Triton.
    marked = sorted(
        (dict(ls)["model"], dict(ls)["reason"])
        for ls in samples[catalog.MODEL_UNCOUNTED_ERRORS]
        if dict(ls)["model"] in SHARED
    )
    assert marked == [
        ("fail_always", "python_backend"),
        ("fraud_detector", "python_backend"),
        ("sleeper", "python_backend"),
        ("streamer", "decoupled"),
        ("streamer", "python_backend"),
    ]
