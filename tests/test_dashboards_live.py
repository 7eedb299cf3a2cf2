"""Every panel query on live data: a real Prometheus scraping the real local Triton and the sidecar
(with the generated recording rules loaded) while load runs.

None may fail to parse, and at least 90% of the queries that need neither a GPU nor a firing alert
must return series. Queries whose inputs this build cannot produce yet (no trace receiver in the
sidecar -> no latency histogram; no SLO file -> no SLO rules) are counted apart and named in the
printed summary, never silently passed. GPU panels run against the replayed GPU node when the GPU
issue's replay is available (``GPU_REPLAY`` hook below), else they are reported as skipped.
A second pass selects one model, version and host (not All) and checks the same.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from support import stacks
from support.sidecar import sidecar_argv

from tritonwatch import catalog
from tritonwatch.dashboards import promcheck
from tritonwatch.dashboards.generate import render_all
from tritonwatch.errors import TritonwatchError
from tritonwatch.local.procs import Managed, free_port, wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

pytestmark = [pytest.mark.triton, pytest.mark.prometheus]

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
SLO_FILE = ROOT / "alerts" / "slo.yaml"
MODEL_REPOSITORY = ROOT / "model_repository"
TEST_MODELS = ROOT / "tests" / "models"
MODEL = "fraud_detector"
FAILING_MODEL = "fail_always"
PIPELINE = "fraud_pipeline"
# Short windows: the test has about a minute of data, scraped every second.
LIVE_BUILTINS = {
    "__rate_interval": "15s",
    "__interval": "2s",
    "__interval_ms": "2000",
    "__range": "2m",
    "__range_s": "120",
    "__range_ms": "120000",
}
GPU_NAMES = {
    catalog.GPU_UTILIZATION,
    catalog.GPU_MEMORY_USED_RATIO,
    catalog.GPU_POWER,
    catalog.GPU_TEMPERATURE,
    catalog.GPU_SM_CLOCK,
    catalog.GPU_XID,
    catalog.MODEL_GPU_BUSY,
    catalog.MODEL_ENERGY_PER_INFERENCE,
}
TRACE_NAMES = {catalog.REQUEST_DURATION, catalog.LATENCY_QUANTILE}
LLM_PREFIXES = ("tritonwatch_llm_", "vllm:", "nv_trt_llm_", "nv_llm_")
HAVE_TRACES = importlib.util.find_spec("tritonwatch.exporters.traces") is not None
HAVE_PROBE = importlib.util.find_spec("tritonwatch.exporters.probe") is not None
# The GPU issue's replayed GPU node (the same one `tritonwatch demo --gpu-replay` uses):
# ``start_replay()`` -> an object with ``dcgm_url`` and ``stop()``; passed to the sidecar as --dcgm.
GPU_REPLAY = "tritonwatch.local.gpureplay"
HAVE_GPU_REPLAY = importlib.util.find_spec(GPU_REPLAY) is not None


@dataclass
class Stack:
    prometheus: Prometheus
    rules_loaded: bool
    traces: bool
    gpu: bool
    host: str  # the instance variable's value for the Triton under test (host without port)
    notes: list[str] = field(default_factory=list)


def _metrics_names(expr: str) -> set[str]:
    return {m.removesuffix("_bucket") for m in re.findall(r"\b([a-zA-Z_:][\w:]*)\s*[{\[(]", expr)} | set(
        re.findall(r"\b((?:tritonwatch|nv)_\w+|slo:\w+)", expr)
    )


def _needs(expr: str) -> set[str]:
    """What a query needs beyond Triton and the sidecar core."""
    names = {n.removesuffix("_bucket") for n in _metrics_names(expr)}
    needs = set()
    if names & GPU_NAMES:
        needs.add("gpu")
    if catalog.ALERTS_SERIES in names and "or vector(0)" not in expr:
        needs.add("firing alert")
    if names & TRACE_NAMES:
        needs.add("traces")
    if any(n.startswith("slo:") for n in names):
        needs.add("slo rules")
    if {catalog.PROBE_SUCCESS, catalog.PROBE_DURATION} & names:
        needs.add("probe")
    if any(n.startswith(LLM_PREFIXES) for n in names):
        needs.add("llm")  # proven on LLM data by tests/test_dashboards_llm_live.py
    if " offset 1w" in expr:
        needs.add("a week of history")  # proven on backfilled history by tests/test_alerts_where_time_went.py
    return needs


def _rules(tmp: Path) -> list[Path]:
    if not SLO_FILE.exists() or importlib.util.find_spec("tritonwatch.alerts.generate") is None:
        return []
    out = tmp / "rules"
    argv = [str(BIN / "tritonwatch"), "rules", "--slo", str(SLO_FILE), "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return sorted(out.glob("*.rules.yml"))


def _serving(sidecar: Managed, url: str) -> bool:
    if not sidecar.alive():
        pytest.fail(f"sidecar exited: {sidecar.log_tail(20)}")
    try:
        return requests.get(url, timeout=2).ok
    except requests.RequestException:
        return False


def _triton(request: pytest.FixtureRequest, stack: contextlib.ExitStack, trace_file: Path | None) -> Any:
    """The session Triton, or, when the sidecar can read traces, a Triton of our own tracing for it."""
    if trace_file is None:
        return request.getfixturevalue("triton_server")  # module scope: the session Triton itself
    from tritonwatch.local.triton import LocalTriton

    # Trace files (mode=triton), not OpenTelemetry: OTel-traced Triton 2.51 can die under this load
    # (Triton issue #7795); the one OTel test is test_traces_triton.py. A new file every 20 traces.
    server = LocalTriton(
        [MODEL_REPOSITORY, TEST_MODELS], trace_file=trace_file, trace_rate=10, trace_log_frequency=20
    )
    stack.callback(server.close)
    server.start()
    server.wait_ready(120)
    return server


@pytest.fixture(scope="module")
def live(
    platform: stacks.Stack, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    from tritonwatch.local.load import LoadDriver

    tmp = tmp_path_factory.mktemp("dash-live")
    notes: list[str] = []
    with contextlib.ExitStack() as stack:
        trace_file = tmp / "traces" / "trace.json" if HAVE_TRACES else None
        if trace_file is None:
            notes.append(
                "sidecar has no trace reader yet (tritonwatch.exporters.traces missing): no latency histogram"
            )
        else:
            trace_file.parent.mkdir()
        triton = _triton(request, stack, trace_file)
        sidecar_port = free_port()
        args = sidecar_argv(
            triton.http_url, triton.metrics_url, sidecar_port, "--window", "15", "--quantile-window", "60"
        )
        if trace_file:
            args += ["--trace-file", str(trace_file)]
        if HAVE_PROBE:
            args += ["--probe", MODEL, "--probe-interval", "1"]
        else:
            notes.append("sidecar has no canary probe yet (tritonwatch.exporters.probe missing)")
        gpu = False
        gpu_targets: list[ScrapeTarget] = []
        if HAVE_GPU_REPLAY:
            # The replayed GPU node has its own (replayed) Triton: the sidecar re-exports only the
            # GPUs its Triton uses, so the node gets a sidecar of its own, as in production.
            replay = importlib.import_module(GPU_REPLAY).start_replay()
            stack.callback(replay.stop)
            gpu_port = free_port()
            gpu_sidecar = Managed(
                "gpu-sidecar",
                sidecar_argv(
                    replay.triton_url,
                    replay.triton_metrics_url,
                    gpu_port,
                    "--dcgm",
                    replay.dcgm_url,
                    "--window",
                    "15",
                ),
                log_path=tmp / "gpu-sidecar.log",
            )
            stack.callback(gpu_sidecar.stop)
            replay_addr = urlsplit(replay.triton_metrics_url).netloc
            gpu_targets = [
                ScrapeTarget("triton-replayed-gpu-node", replay_addr),
                ScrapeTarget("tritonwatch-gpu-node", f"127.0.0.1:{gpu_port}"),
            ]
            gpu = True
        else:
            notes.append(f"no GPU replay ({GPU_REPLAY} missing): GPU panels not run on data")
        sidecar = Managed("sidecar", args, log_path=tmp / "sidecar.log")
        stack.callback(sidecar.stop)
        rule_files = _rules(tmp)
        if not rule_files:
            notes.append(
                f"no recording rules loaded ({SLO_FILE.relative_to(ROOT)} or `tritonwatch rules` missing)"
            )
        metrics_addr = urlsplit(triton.metrics_url).netloc
        prom = Prometheus(
            tmp / "prom",
            prometheus_config(
                [
                    ScrapeTarget("triton-under-test", metrics_addr),
                    ScrapeTarget("tritonwatch-sidecar", f"127.0.0.1:{sidecar_port}"),
                    *gpu_targets,
                ],
                rule_files=rule_files,
            ),
        )
        stack.callback(prom.stop)
        prom.wait_ready(60)
        url = f"http://127.0.0.1:{sidecar_port}/metrics"
        wait_until(lambda: _serving(sidecar, url), 30, "sidecar /metrics")
        # Cache hits (repeat), real failures (NaN inputs) and batching (concurrency) on the model;
        # a model whose every request fails.
        load = LoadDriver(triton.http_url, MODEL, concurrency=6, repeat=1, error_ratio=0.05, seed=7)
        stack.callback(load.stop)
        load.start()
        fail = LoadDriver(triton.http_url, FAILING_MODEL, concurrency=1, rps=5, seed=8)
        stack.callback(fail.stop)
        fail.start()
        # The ensemble around the model (its steps, traced): the pipeline dashboard's inputs.
        pipeline = LoadDriver(triton.http_url, PIPELINE, concurrency=2, rps=20, repeat=1, seed=9)
        stack.callback(pipeline.stop)
        pipeline.start()
        yield Stack(
            prom, bool(rule_files), trace_file is not None, gpu, metrics_addr.rsplit(":", 1)[0], notes
        )


Counted = Callable[[promcheck.PanelQuery], bool]


def _run(
    live: Stack, variables: dict[str, str], check: Callable[[dict[str, promcheck.Result]], None]
) -> tuple[list[promcheck.Result], Counted, str]:
    """Run every panel query until 90% of the counted ones have data and ``check`` passes (or 120 s)."""
    dashes = {name: json.loads(data) for name, data in render_all().items()}
    queries = promcheck.collect(dashes)
    unavailable = set()
    if not live.traces:
        unavailable.add("traces")
    if not live.rules_loaded:
        unavailable.add("slo rules")
    if not HAVE_PROBE:
        unavailable.add("probe")
    if not live.gpu:
        unavailable.add("gpu")
    unavailable.add("llm")  # no LLM model in this stack

    def counted(q: promcheck.PanelQuery) -> bool:
        return not _needs(q.expr) & ({"gpu", "firing alert", "a week of history"} | unavailable)

    results: list[promcheck.Result] = []

    def enough() -> bool:
        results[:] = promcheck.run(live.prometheus.url, queries, variables)
        if any(r.status != 200 for r in results):
            return True  # a parse error does not heal: stop polling and report it
        eligible = [r for r in results if counted(r.query)]
        if sum(r.has_data for r in eligible) < 0.9 * len(eligible):
            return False
        try:
            check({r.query.key: r for r in results})
        except AssertionError:
            return False  # rate windows still filling
        return True

    try:
        wait_until(enough, 120, "90% of the panel queries to return data", interval=3)
    except TritonwatchError:
        pass  # the assertions below say which panels had no data
    failures = [f"{r.query.key}: {r.status} {r.error}" for r in results if r.status != 200]
    assert not failures, "\n".join(failures)
    summary = _summary(results, counted, live)
    print(summary)
    eligible = [r for r in results if counted(r.query)]
    assert len(eligible) >= 40, summary
    assert sum(r.has_data for r in eligible) >= 0.9 * len(eligible), summary
    return results, counted, summary


def test_every_panel_query_parses_and_returns_data_under_load(live: Stack) -> None:
    dashes = [json.loads(data) for data in render_all().values()]
    variables = {**promcheck.dashboard_variables(dashes), **LIVE_BUILTINS}
    servers = 2 if live.gpu else 1

    def check(by_key: dict[str, promcheck.Result]) -> None:
        _assert_real_values(by_key, servers)

    results, _, _ = _run(live, variables, check)
    check({r.query.key: r for r in results})
    if live.gpu:  # against the replayed GPU node every GPU panel has its inputs
        gpu_empty = [r.query.key for r in results if "gpu" in _needs(r.query.expr) and not r.has_data]
        assert not gpu_empty, "\n".join(gpu_empty)


def test_panels_with_one_model_version_and_host_selected(live: Stack) -> None:
    """The host variable (instance without port) keeps Triton's and the sidecar's series together."""
    dashes = [json.loads(data) for data in render_all().values()]
    variables = {
        **promcheck.dashboard_variables(dashes),
        **LIVE_BUILTINS,
        "model": MODEL,
        "version": "1",
        "instance": live.host,
    }

    def only_the_selected_model(by_key: dict[str, promcheck.Result]) -> None:
        detail = "tritonwatch-model.json"
        for name in ("Model ready", "Mean batch vs max_batch_size", "Request rate", "Cache hit ratio"):
            for ref in ("A", "B") if name.startswith("Mean") else ("A",):
                r = by_key[f"{detail} / {name} / {ref}"]
                assert r.has_data and {dict(ls).get("model") for ls, _ in r.values} == {MODEL}, r

    results, _, _ = _run(live, variables, only_the_selected_model)
    only_the_selected_model({r.query.key: r for r in results})


def _assert_real_values(by_key: dict[str, promcheck.Result], servers: int = 1) -> None:
    """The numbers the panels show are the load's: not merely 'some series'."""

    def value(key: str, **labels: str) -> float:
        v = by_key[key].value(**labels)
        assert v is not None, f"{key}: no single series for {labels}: {by_key[key].values}"
        return v

    fleet, detail = "tritonwatch-fleet.json", "tritonwatch-model.json"
    assert value(f"{fleet} / Triton servers up / A") == servers  # the replayed GPU node is a second one
    assert value(f"{fleet} / Request rate / A", model=MODEL) > 1
    # Every request to the failing model fails; ~5% of the fresh inputs to the model are NaN.
    assert value(f"{fleet} / Error ratio / A", model=FAILING_MODEL) == 1.0
    assert 0 < value(f"{fleet} / Error ratio / A", model=MODEL) < 0.3
    # Each input is sent twice (repeat=1): about half the lookups hit the response cache.
    assert 0.2 < value(f"{fleet} / Cache hit ratio / A", model=MODEL) < 0.8
    assert value(f"{detail} / Model ready / A", model=MODEL) == 1
    assert value(f"{detail} / Mean batch vs max_batch_size / B", model=MODEL) == 64
    executions = by_key[f"{detail} / Batch-size distribution / A"].values
    assert executions and all(dict(labels)["batch_size"].isdigit() for labels, _ in executions)
    assert sum(v for _, v in executions) > 0
    # The pipeline: its steps in order, and traced time in each of them, queue and compute.
    pipeline = "tritonwatch-pipeline.json"
    steps = {dict(ls)["position"]: dict(ls)["step"] for ls, _ in by_key[f"{pipeline} / Steps / A"].values}
    assert steps == {"1": "fraud_scaler", "2": "fraud_detector", "3": "fraud_decision"}
    per_step = {
        (dict(ls)["step"], dict(ls)["phase"])
        for ls, _ in by_key[f"{pipeline} / Time per step (traced requests) / A"].values
    }
    assert per_step == {(s, ph) for s in steps.values() for ph in catalog.STEP_PHASES}
    assert value(f"{pipeline} / Requests / s (clients) / A", model=PIPELINE) > 1


def _summary(results: list[promcheck.Result], counted: Any, stack: Stack) -> str:
    eligible = [r for r in results if counted(r.query)]
    with_data = sum(r.has_data for r in eligible)
    lines = [
        f"panel queries: {len(results)}, all parsed: {all(r.status == 200 for r in results)}",
        f"counted (need neither GPU nor a firing alert, inputs present): {len(eligible)}, "
        f"with data: {with_data} ({100 * with_data / max(1, len(eligible)):.0f}%)",
        *(f"note: {n}" for n in stack.notes),
    ]
    for r in results:
        if counted(r.query):
            if not r.has_data:
                lines.append(f"  NO DATA  {r.query.key}: {r.promql}")
        else:
            needs = ", ".join(sorted(_needs(r.query.expr)))
            lines.append(f"  not counted ({needs}; series={r.series})  {r.query.key}")
    return "\n".join(lines)
