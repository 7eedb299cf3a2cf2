"""``tritonwatch advise --prometheus`` gives ``--triton``'s advice on the same traffic (issue 27).

A real Triton serves bench/models/linear (a batch of n sleeps 50 + 6 n ms), the real sidecar scrapes it
every second, and a real Prometheus of each stack (side by side, one load) scrapes both every second. ``--triton``'s reader reads the
statistics before and after 20 s of open-loop Poisson load at 40 requests/s (the load runs inside its
read); then ``advise --prometheus`` reads the same span from Prometheus, ending when the read ended.

Exact where the data allow: the config (the sidecar's ``tritonwatch_model_batching_info``), the compute
costs per batch size and so the fit, and, given the load and overhead it read, every prediction (the
same function of the same figures). Not exact, and bounded here: the load (Prometheus's ``increase()``
extrapolates scrapes to the window's edges, by up to about one scrape interval in the window) and the
server overhead (Triton's /metrics counts whole microseconds, the statistics API nanoseconds).
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from support import stacks
from support.harness import read_metrics, running_sidecar
from support.poisson import Run, drive
from support.static_endpoint import StaticEndpoint

from tritonwatch import catalog, cli, slo
from tritonwatch.advise import advice, textfile
from tritonwatch.advise.prometheus import PrometheusReader
from tritonwatch.advise.triton import TritonReader
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config
from tritonwatch.reports.promapi import PromClient

ROOT = Path(__file__).resolve().parent.parent

RATE, SECONDS = 40.0, 20.0
SLO = """apiVersion: tritonwatch/v1
kind: ServiceLevelObjectives
metadata: {name: advise}
spec:
  window: 28d
  slos:
    - model: linear
      latency: {threshold: 250ms, objective: 99}
"""


def query(prom: Prometheus, expr: str) -> float | None:
    resp = requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=5)
    resp.raise_for_status()
    result = resp.json()["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.fixture(scope="module")
def stack(
    every_stack: dict[str, stacks.Stack], tmp_path_factory: pytest.TempPathFactory, bench_triton: Any
) -> Iterator[tuple[Any, Any, dict[str, tuple[Prometheus, StaticEndpoint]]]]:
    """The shared Triton, a sidecar, and per stack a Prometheus scraping both and its own stand-in
    textfile collector (each stack's advice is its own, so is the file it writes)."""
    tmp = tmp_path_factory.mktemp("advise-prom")
    with contextlib.ExitStack() as stop:
        triton = bench_triton  # shared with test_advise_triton.py
        sidecar = stop.enter_context(
            running_sidecar(
                ["--triton", triton.http_url, "--triton-metrics", triton.metrics_url, "--interval", "1"]
            )
        )
        addr, _, path = triton.metrics_url.split("//", 1)[1].partition("/")
        # node_exporter's textfile collector serves the advisor's file as it is: a stand-in for it
        collectors = {name: StaticEndpoint(b"").start() for name in every_stack}
        for collector in collectors.values():
            stop.callback(collector.stop)

        def config(name: str) -> dict[str, object]:
            targets = [
                ScrapeTarget("triton", addr, metrics_path="/" + path),
                ScrapeTarget("tritonwatch", f"127.0.0.1:{sidecar.port}"),
                ScrapeTarget("node", f"127.0.0.1:{collectors[name].port}"),
            ]
            return prometheus_config(targets, scrape_interval="1s")

        each = stacks.prometheus_each(every_stack, tmp, config, stop)
        proms = {name: (prom, collectors[name]) for name, prom in each.items()}
        yield triton, sidecar, proms


def _final(triton: Any) -> dict[str, Any]:
    st: dict[str, Any] = requests.get(f"{triton.http_url}/v2/models/linear/stats", timeout=5).json()[
        "model_stats"
    ][0]
    return st


# On a real Prometheus (both stacks); the two tests after it read no server.
@pytest.mark.triton
@pytest.mark.prometheus
@pytest.mark.needs("prometheus")
def test_prometheus_gives_the_advice_triton_gives(
    stack: tuple[Any, Any, dict[str, tuple[Prometheus, StaticEndpoint]]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    triton, sidecar, proms = stack
    sel = '{model="linear"}'
    # Each Prometheus holds the idle model (its counters and the sidecar's config series) before the read
    wait_until(
        lambda: all(
            query(prom, f"count_over_time({catalog.TRITON_SUCCESS}{sel}[10s])") is not None
            and query(prom, f"{catalog.MODEL_BATCHING_INFO}{sel}") is not None
            for prom, _ in proms.values()
        ),
        60,
        "each Prometheus scraping Triton and the sidecar",
    )
    runs: list[Run] = []

    def load_then_settle(_interval: float) -> None:
        """The read's wait: the load, then until Prometheus holds the counters where they ended."""
        runs.append(drive(triton.http_url, "linear", RATE, SECONDS, seed=27, warmup=0.0))
        final = _final(triton)
        executions = sum(b["compute_infer"]["count"] for b in final["batch_stats"])
        success = final["inference_stats"]["success"]["count"]
        wait_until(
            lambda: all(
                query(prom, f"sum({catalog.BATCH_EXECUTIONS}{sel})") == executions
                and query(prom, f"sum({catalog.TRITON_SUCCESS}{sel})") == success
                for prom, _ in proms.values()
            ),
            30,
            "each Prometheus holding the final counters",
        )

    (reading,) = TritonReader(triton.http_url, 10).read("linear", 0, sleep=load_then_settle)
    at = datetime.now(timezone.utc)
    assert runs[0].failed == 0 and len(runs[0].latencies) > 0.8 * RATE * SECONDS
    slo_path = tmp_path / "slo.yaml"
    slo_path.write_text(SLO)
    slos = slo.load(str(slo_path))
    by_triton = advice.advise(reading, slos, str(slo_path), 2)
    assert by_triton["refusal"] is None, by_triton["refusal"]

    read = TritonRead(triton, sidecar, reading, at, by_triton, slos, slo_path)
    for name, (prom, textfile_collector) in proms.items():
        try:
            _advice_from(prom, textfile_collector, read, tmp_path / name, capsys)
        except AssertionError as e:
            raise AssertionError(f"on {name}'s Prometheus: {e}") from e


@dataclass(frozen=True)
class TritonRead:
    """What ``--triton``'s read gave, once for both stacks: the servers, the reading and its advice."""

    triton: Any
    sidecar: Any
    reading: Any
    at: datetime
    by_triton: dict[str, Any]
    slos: Any
    slo_path: Path


def _advice_from(
    prom: Prometheus,
    textfile_collector: StaticEndpoint,
    read: TritonRead,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``advise --prometheus`` on one stack's Prometheus against ``--triton``'s advice on the same read."""
    triton, sidecar, reading, at = read.triton, read.sidecar, read.reading, read.at
    by_triton, slos, slo_path = read.by_triton, read.slos, read.slo_path
    tmp_path.mkdir()
    argv = ["advise", "--prometheus", prom.url, "--slo", str(slo_path), "--model", "linear"]
    argv += ["--time", at.isoformat(), "--interval", f"{reading.seconds:.3f}", "--max-instances", "2"]
    assert cli.main([*argv, "--format", "json"]) == 0
    (by_prom,) = json.loads(capsys.readouterr().out)["models"]
    assert by_prom["refusal"] is None, by_prom["refusal"]

    # exact: the config the sidecar exported, and the costs per batch size (hence the fit)
    assert by_prom["current"]["config"] == by_triton["current"]["config"]
    dp, dt = by_prom["details"], by_triton["details"]
    assert dp["fit"] == dt["fit"]
    assert dp["replicas"] == 1
    with capsys.disabled():
        print(
            f"load {dt['arrival_rps']:.3f} (triton) vs {dp['arrival_rps']:.3f} req/s (prometheus); overhead "
            f"{dt['overhead_seconds'] * 1e6:.2f} vs {dp['overhead_seconds'] * 1e6:.2f} us; capacity "
            f"{by_triton['recommended']['slo_capacity_rps']:.2f} vs {by_prom['recommended']['slo_capacity_rps']:.2f}"
        )
    # bounded: the load, by Prometheus's extrapolation to the window's edges (at most
    # 1.1 scrape intervals at each edge, 1 s apart, in a window of ~22 s, both edges idle) ...
    assert dp["arrival_rps"] == pytest.approx(dt["arrival_rps"], rel=2.2 / reading.seconds)
    # ... and the overhead, by Triton's whole microseconds (request, queue and 3 compute counters)
    assert abs(dp["overhead_seconds"] - dt["overhead_seconds"]) < 5e-6
    # the same advice: the same recommendation; predictions differ only by the load and overhead read
    assert by_prom["recommended"]["config"] == by_triton["recommended"]["config"]
    obs = advice.from_reading(reading)
    (seen,) = PrometheusReader(PromClient(prom.url)).read("linear", float(f"{reading.seconds:.3f}"), at)
    same_inputs = replace(
        obs,
        seconds=seen.seconds,
        requests=seen.requests,
        rate_rps=seen.rate_rps,
        items=seen.items,
        overhead_s=seen.overhead_s,
    )
    assert seen.costs == obs.costs and seen.config == _subset(obs.config)
    assert advice.advise_observed(same_inputs, slos, str(slo_path), 2) == by_prom
    for side in ("current", "recommended"):
        assert by_prom[side]["slo_capacity_rps"] == pytest.approx(
            by_triton[side]["slo_capacity_rps"], rel=0.01
        )

    # the sidecar's info series is that subset of the served config, exactly
    served = requests.get(f"{triton.http_url}/v2/models/linear/config", timeout=5).json()
    labels = next(iter(read_metrics(sidecar.port)[catalog.MODEL_BATCHING_INFO]))
    assert json.loads(dict(labels)[catalog.CONFIG]) == _subset(served)

    # the weekly report's configuration section: the same advice (its load: the last hour)
    report = tmp_path / "report"
    end = at.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert (
        cli.main(
            [
                "report",
                "--prometheus",
                prom.url,
                "--end",
                end,
                "--days",
                "1",
                "--slo",
                str(slo_path),
                "--out",
                str(report),
            ]
        )
        == 0
    )
    capsys.readouterr()
    (hourly,) = PrometheusReader(PromClient(prom.url)).read(None, 3600, datetime.fromisoformat(end))
    want = advice.advise_observed(hourly, slos, "the SLO file", 0)
    with (report / "configuration.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert row["model"] == "linear" and row["refusal"] == ""
    assert json.loads(row["recommended_config"]) == want["recommended"]["config"]
    for side in ("current", "recommended"):
        assert float(row[f"{side}_slo_capacity_rps"]) == pytest.approx(
            want[side]["slo_capacity_rps"], rel=1e-9
        )
        assert float(row[f"{side}_p99_seconds"]) == pytest.approx(want[side]["p99_seconds"], rel=1e-9)
    assert "## Configuration" in (report / "report.md").read_text()

    # --textfile: the predicted distributions as series, and never over a file it did not write
    out = tmp_path / "advise.prom"
    assert cli.main([*argv, "--textfile", str(out)]) == 0
    capsys.readouterr()
    shares = _parse_textfile(out.read_text())
    for side in ("current", "recommended"):
        want = by_prom["details"]["predicted"][side]["batch_executions"]
        total = sum(want.values())
        assert shares[side] == {int(b): n / total for b, n in want.items()}
    # the model dashboard's panel, as generated, reads them back beside the executed distribution
    textfile_collector.payload = out.read_bytes()
    panel = next(
        x
        for x in json.loads((ROOT / "dashboards" / "generated" / "tritonwatch-model.json").read_text())[
            "panels"
        ]
        if x.get("title") == "Batch sizes: executed vs advised"
    )
    exprs = [
        t["expr"]
        .replace("$model", "linear")
        .replace("$version", "1")
        .replace("$instance", ".*")
        .replace("$__range", "10m")
        for t in panel["targets"]
    ]
    wait_until(lambda: query(prom, exprs[2]) is not None, 30, "the advised shares in Prometheus")
    for expr, side in zip(exprs[1:], ("current", "recommended"), strict=True):
        assert _by_size(prom, expr) == shares[side]
    assert sum(_by_size(prom, exprs[0]).values()) == pytest.approx(1.0, rel=1e-12)
    foreign = tmp_path / "foreign.prom"
    foreign.write_text("node_foo 1\n")
    assert cli.main([*argv, "--textfile", str(foreign)]) == 1
    assert foreign.read_text() == "node_foo 1\n"
    assert "was not written by tritonwatch advise" in capsys.readouterr().err


def _by_size(prom: Prometheus, expr: str) -> dict[int, float]:
    resp = requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=5)
    resp.raise_for_status()
    return {int(r["metric"][catalog.BATCH_SIZE]): float(r["value"][1]) for r in resp.json()["data"]["result"]}


def _subset(config: dict[str, Any] | Any) -> dict[str, Any]:
    keep = ("backend", "dynamic_batching", "instance_group", "max_batch_size", "platform")
    out = {k: config[k] for k in keep if k in config}
    out.update({k: {} for k in ("ensemble_scheduling", "sequence_batching") if k in config})
    return out


def _parse_textfile(text: str) -> dict[str, dict[int, float]]:
    from tritonwatch.expfmt import parse

    assert text.startswith(textfile.HEADER)
    out: dict[str, dict[int, float]] = {}
    for labels, v in parse(text)[catalog.ADVISED_BATCH_SHARE].items():
        d = dict(labels)
        assert (d["model"], d["version"]) == ("linear", "1")
        out.setdefault(d[catalog.ADVISED], {})[int(d[catalog.BATCH_SIZE])] = v
    return out


def test_a_model_without_the_config_series_is_refused_with_the_reason() -> None:
    obs = advice.Observation(
        "m", "1", {}, 30.0, 300, 10.0, 300.0, (), 0.0, refusal="no tritonwatch_model_batching_info"
    )
    slos = slo.parse(
        {
            "apiVersion": "tritonwatch/v1",
            "kind": "ServiceLevelObjectives",
            "metadata": {"name": "x"},
            "spec": {
                "window": "28d",
                "slos": [{"model": "m", "latency": {"threshold": "1s", "objective": 99}}],
            },
        }
    )
    entry = advice.advise_observed(obs, slos, "slo.yaml", 0)
    assert entry["refusal"] == "no tritonwatch_model_batching_info" and entry["recommended"] is None


def test_flags_name_the_mode(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["advise", "--slo", "x.yaml"]) == 2
    assert cli.main(["advise", "--triton", "http://a:1", "--prometheus", "http://b:2", "--slo", "x"]) == 2
    assert cli.main(["advise", "--triton", "http://a:1", "--time", "2026-01-01T00:00:00Z", "--slo", "x"]) == 2
    assert cli.main(["advise", "--prometheus", "http://b:2", "--time", "noon", "--slo", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "tritonwatch advise: error: --triton or --prometheus: exactly one is required (or TRITONWATCH_TRITON, "
        "TRITONWATCH_PROMETHEUS)",
    ] * 2 + [
        "tritonwatch advise: error: --time: only with --prometheus (a live Triton is read now)",
        "tritonwatch advise: error: --time: not an ISO-8601 time (got 'noon'; e.g. 2026-11-09T00:00:00Z)",
    ]
