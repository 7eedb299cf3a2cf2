"""Scale across replicas: the generated recording rules turn several Triton servers into one fleet.

* ``promtool test rules`` on series labelled the way a Prometheus Operator PodMonitor labels them
  (``pod``, ``container``, ``endpoint``, ``namespace``, ``instance``, and Triton's own ``namespace``
  arriving as ``exported_namespace``) from two pods: every model-level rule yields ONE series per
  model and version, a sum of rates or a ratio of sums, never an average of per-pod ratios.
* Live: two real Triton servers, each with its own in-process sidecar reading its trace files, a real
  Prometheus of each stack (side by side, the same load) scraping all four targets with the generated
  rules, load at two different rates: on each, the recorded fleet request rate is the sum of both
  servers' rates, and the fleet percentiles come from the two sidecars' histograms merged.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from conftest import need_binary, need_pytriton
from support import stacks

from tritonwatch import catalog
from tritonwatch import slo as slo_file
from tritonwatch.expfmt import parse

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "alerts" / "generated"
SLO_FILE = ROOT / "alerts" / "slo.yaml"
MODEL = "fraud_detector"


def _rule_files() -> list[Path]:
    files = sorted(RULES_DIR.glob("*.rules.yml"))
    if not files:
        pytest.fail("alerts/generated/*.rules.yml is not generated (run `make generate`)", pytrace=False)
    return files


def _series(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


# --- promtool: PodMonitor labels, two pods ----------------------------------------------------------
def _pod(pod: str, ip: str, endpoint: str, container: str, job: str, port: int) -> dict[str, str]:
    return {
        "namespace": "serving",  # the Kubernetes namespace (the PodMonitor's)
        "pod": pod,
        "container": container,
        "endpoint": endpoint,
        "job": job,
        "instance": f"{ip}:{port}",
    }


def _triton(pod: str, ip: str, **extra: str) -> dict[str, str]:
    # Triton's own namespace label (--model-namespacing) collides with the scraper's: it arrives renamed.
    labels = _pod(pod, ip, "metrics", "triton", "triton", 8002)
    return {**labels, "exported_namespace": "fraud", "model": MODEL, "version": "1", **extra}


def _sidecar(pod: str, ip: str, **extra: str) -> dict[str, str]:
    labels = _pod(pod, ip, "tritonwatch", "tritonwatch", "tritonwatch", 9450)
    return {**labels, "model": MODEL, "version": "1", **extra}


def _per_minute(step: float, minutes: int = 20) -> str:
    return f"0+{step:g}x{minutes}"


@dataclass(frozen=True)
class PodLoad:
    """Per-minute increments of one pod's counters (rates per second are these / 60)."""

    success: float
    failure: float
    canceled: float
    inferences: tuple[float, ...]  # one entry per gpu_uuid: execution-side counters carry it
    executions: tuple[float, ...]
    traced: float  # requests in the sidecar's trace histogram
    traced_slow: bool  # all above 1 s (else all under the smallest bucket)


PODS = {
    # pod a: 2 req/s, 0.1 server failures/s; one GPU, batches of 1; its traced requests are fast.
    ("triton-7d9f-a", "10.0.0.11"): PodLoad(120, 6, 30, (120,), (120,), 60, False),
    # pod b: 4 req/s, 0.3 server failures/s; two GPUs, batches of 4; its traced requests are slow.
    ("triton-7d9f-b", "10.0.0.12"): PodLoad(240, 18, 0, (120, 120), (30, 30), 180, True),
}


def _podmonitor_input() -> list[dict[str, str]]:
    series = []
    for (pod, ip), load in PODS.items():
        series += [
            {
                "series": _series(catalog.TRITON_SUCCESS, _triton(pod, ip)),
                "values": _per_minute(load.success),
            },
            {
                "series": _series(catalog.TRITON_FAILURE, _triton(pod, ip, reason="BACKEND")),
                "values": _per_minute(load.failure),
            },
            {
                "series": _series(catalog.TRITON_FAILURE, _triton(pod, ip, reason="CANCELED")),
                "values": _per_minute(load.canceled),
            },
        ]
        for i, (inf, execs) in enumerate(zip(load.inferences, load.executions, strict=True)):
            gpu = {"gpu_uuid": f"GPU-{pod[-1]}{i}"}
            series += [
                {
                    "series": _series(catalog.TRITON_INFERENCE_COUNT, _triton(pod, ip, **gpu)),
                    "values": _per_minute(inf),
                },
                {
                    "series": _series(catalog.TRITON_EXEC_COUNT, _triton(pod, ip, **gpu)),
                    "values": _per_minute(execs),
                },
            ]
        hist = catalog.REQUEST_DURATION
        phase = {catalog.PHASE: "request"}
        for le in [*catalog.DEFAULT_BUCKETS, math.inf]:
            under = load.traced if (not load.traced_slow or le > 1.0) else 0.0
            le_text = "+Inf" if math.isinf(le) else f"{le:g}"
            series.append(
                {
                    "series": _series(f"{hist}_bucket", _sidecar(pod, ip, le=le_text, **phase)),
                    "values": _per_minute(under),
                }
            )
        series += [
            {
                "series": _series(f"{hist}_count", _sidecar(pod, ip, **phase)),
                "values": _per_minute(load.traced),
            },
            {
                "series": _series(f"{hist}_sum", _sidecar(pod, ip, **phase)),
                "values": _per_minute(load.traced),
            },
        ]
    return series


def _expected_model_series() -> list[dict[str, Any]]:
    loads = list(PODS.values())
    success = sum(p.success for p in loads) / 60
    failure = sum(p.failure for p in loads) / 60
    key = f'{{model="{MODEL}",version="1"}}'
    return [
        {
            "expr": catalog.REQUEST_RATE_RECORD + key,
            "exp_samples": [{"labels": catalog.REQUEST_RATE_RECORD + key, "value": success}],
        },
        {
            # Ratio of sums: 0.4 / 6.4 = 0.0625 (the mean of the pods' ratios would be 0.0582).
            "expr": catalog.ERROR_RATIO_RECORD + key,
            "exp_samples": [
                {"labels": catalog.ERROR_RATIO_RECORD + key, "value": failure / (success + failure)}
            ],
        },
        {
            # Batch size over both pods and all three GPUs: 6 / 3 = 2 inferences per execution (the mean
            # of the pods' 1 and 4 would be 2.5).
            "expr": catalog.signal(catalog.BATCH_SIZE_MEAN).record + key,
            "exp_samples": [
                {
                    "labels": catalog.signal(catalog.BATCH_SIZE_MEAN).record + key,
                    "value": sum(sum(p.inferences) for p in loads) / sum(sum(p.executions) for p in loads),
                }
            ],
        },
    ]


def _expected_slo_series(spec: slo_file.SLOFile) -> list[dict[str, Any]]:
    loads = list(PODS.values())
    record = catalog.slo_sli_error_record("5m")
    out = []
    for objective in spec.objectives():
        if objective.model != MODEL:
            continue
        if objective.kind == "availability":
            failure = sum(p.failure for p in loads)
            value = failure / (failure + sum(p.success for p in loads))
        else:
            latency = spec.slo_for(MODEL).latency
            assert latency is not None
            if latency.threshold >= 1.0:
                continue  # the slow pod's requests would count as good: no clean expectation
            value = 1 - sum(p.traced for p in loads if not p.traced_slow) / sum(p.traced for p in loads)
        labels = f'{{model="{MODEL}",slo="{objective.name}"}}'
        out.append(
            {
                "expr": f'{record}{{slo="{objective.name}"}}',
                "exp_samples": [{"labels": record + labels, "value": value}],
            }
        )
    return out


@pytest.mark.prometheus
def test_podmonitor_labelled_pods_aggregate_into_one_model_series(
    platform: stacks.Stack, tmp_path: Path
) -> None:
    need_binary("promtool")
    rule_files = _rule_files()
    spec = slo_file.load(SLO_FILE)
    slo_cases = _expected_slo_series(spec)
    assert slo_cases, "alerts/slo.yaml has no SLO for the model this test drives"
    test = {
        "rule_files": [str(p) for p in rule_files],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": "two pods scraped by a PodMonitor aggregate per model and version",
                "interval": "1m",
                "input_series": _podmonitor_input(),
                "promql_expr_test": [
                    {**case, "eval_time": "10m"} for case in _expected_model_series() + slo_cases
                ],
            }
        ],
    }
    path = tmp_path / "podmonitor.test.yml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    out = subprocess.run(
        ["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


# --- live: two Triton servers, two sidecars, one Prometheus -------------------------------------------
RATES = (24.0, 8.0)  # requests/s driven at server 0 and server 1
LOAD_SECONDS = 20.0
TRACE_RATE = 10  # one request in 10 traced
WINDOW = "5m"  # the catalog's recording-rule window


@dataclass
class Replica:
    triton: Any  # LocalTriton
    sidecar: Any  # tritonwatch.exporters.sidecar.Sidecar

    @property
    def triton_target(self) -> str:
        return self.triton.metrics_url.split("/")[2]

    @property
    def sidecar_target(self) -> str:
        return f"127.0.0.1:{self.sidecar.port}"


@dataclass
class Fleet:
    replicas: list[Replica]
    prometheus_url: str
    stack: str  # whose Prometheus

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = at
        resp = requests.get(f"{self.prometheus_url}/api/v1/query", params=params, timeout=10)
        resp.raise_for_status()
        return list(resp.json()["data"]["result"])

    def scalar(self, expr: str, at: float | None = None) -> float | None:
        result = self.query(expr, at)
        assert len(result) <= 1, f"{expr}: {len(result)} series, expected one: {result}"
        return float(result[0]["value"][1]) if result else None


def _poll(check: Any, what: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


@pytest.fixture
def fleets(every_stack: dict[str, stacks.Stack], tmp_path: Path) -> Iterator[list[Fleet]]:
    """The two replicas, and one Prometheus of each stack scraping them: one load, read by both."""
    need_pytriton()
    rule_files = _rule_files()
    from tritonwatch.exporters.sidecar import Sidecar
    from tritonwatch.local.promstack import ScrapeTarget, prometheus_config
    from tritonwatch.local.triton import LocalTriton

    with contextlib.ExitStack() as stack:
        replicas = []
        for i in range(2):
            # Trace files (mode=triton), not OpenTelemetry: OTel-traced Triton 2.51 can die under
            # load (issue #7795); the one OTel test is test_traces_triton.py. A new file every 2
            # traces, so the histograms grow scrape by scrape and Prometheus sees their rate.
            trace_file = tmp_path / f"traces{i}" / "trace.json"
            trace_file.parent.mkdir()
            triton = LocalTriton(
                [ROOT / "model_repository"],
                trace_file=trace_file,
                trace_rate=TRACE_RATE,
                trace_log_frequency=2,
            )
            stack.callback(triton.close)
            side = Sidecar.local(
                triton.http_url, triton.metrics_url, trace_file=str(trace_file), interval=1, window=10
            ).start()
            stack.callback(side.stop)
            triton.start()  # both servers start loading at once; readiness is awaited below
            replicas.append(Replica(triton, side))
        for r in replicas:
            r.triton.wait_ready(120)
        targets = [ScrapeTarget("triton", r.triton_target) for r in replicas]
        targets += [ScrapeTarget("tritonwatch", r.sidecar_target) for r in replicas]
        config = prometheus_config(targets, rule_files, scrape_interval="1s", evaluation_interval="1s")
        proms = stacks.prometheus_each(every_stack, tmp_path, config, stack)
        yield [Fleet(replicas, prom.url, name) for name, prom in proms.items()]


def _model_selector(**labels: str) -> str:
    return ",".join(f'{k}="{v}"' for k, v in {catalog.MODEL: MODEL, **labels}.items())


def _triton_successes(replica: Replica) -> float:
    """The server's own success counter for the model, read straight from its /metrics."""
    text = requests.get(replica.triton.metrics_url, timeout=5).text
    series = parse(text, keep=[catalog.TRITON_SUCCESS]).get(catalog.TRITON_SUCCESS, {})
    return sum(v for labels, v in series.items() if dict(labels).get(catalog.MODEL) == MODEL)


def _sidecar_traced(replica: Replica) -> float:
    text = requests.get(f"http://{replica.sidecar_target}/metrics", timeout=5).text
    name = f"{catalog.REQUEST_DURATION}_count"
    series = parse(text).get(name, {})
    return sum(
        v
        for labels, v in series.items()
        if dict(labels).get(catalog.MODEL) == MODEL and dict(labels).get(catalog.PHASE) == "request"
    )


def _bucket_quantile(q: float, buckets: dict[float, float]) -> float:
    """Prometheus's histogram_quantile over cumulative bucket values {le: count}."""
    bounds = sorted(buckets)
    counts = []
    for b in bounds:  # rates of separately extrapolated buckets can dip: made monotonic, as Prometheus does
        counts.append(max(buckets[b], counts[-1] if counts else 0.0))
    total = counts[-1]
    rank = q * total
    b = bisect.bisect_left(counts, rank)
    if b == len(bounds) - 1:
        return bounds[-2]
    start, before = (0.0, 0.0) if b == 0 else (bounds[b - 1], counts[b - 1])
    return start + (bounds[b] - start) * (rank - before) / (counts[b] - before)


@pytest.mark.triton
@pytest.mark.prometheus
def test_two_replicas_aggregate_into_one_fleet(fleets: list[Fleet]) -> None:
    from tritonwatch.local.load import LoadDriver

    fleet = fleets[0]  # the replicas are every fleet's
    for f in fleets:
        _poll(lambda f=f: len(f.query("up == 1")) == 4, f"{f.stack}'s Prometheus scraping 4 targets", 30)
    # Start the load only once Prometheus holds each server's counter (at 0): the rate window then
    # covers every request.
    per_server = {
        r.triton_target: catalog.promql(
            catalog.signal(catalog.REQUEST_RATE), WINDOW, selector=_model_selector(instance=r.triton_target)
        )
        for r in fleet.replicas
    }
    success = catalog.TRITON_SUCCESS
    for f in fleets:
        _poll(
            lambda f=f: len(f.query(f"{success}{{{_model_selector()}}}")) == 2,
            f"both servers' counters in {f.stack}'s Prometheus",
            30,
        )

    drivers = [
        LoadDriver(r.triton.http_url, model=MODEL, concurrency=2, rps=rate, seed=i)
        for i, (r, rate) in enumerate(zip(fleet.replicas, RATES, strict=True))
    ]
    for d in drivers:
        d.start()
    try:
        drivers[0].wait(LOAD_SECONDS)
    finally:
        stats = [d.stop() for d in drivers]
    assert all(s.errors == 0 for s in stats), [s.last_error for s in stats]

    # Counters are final now; wait until Prometheus has scraped them and evaluated the rule after that.
    final = [_triton_successes(r) for r in fleet.replicas]
    assert final == [s.ok for s in stats]
    for f in fleets:
        try:
            _fleet_adds_up(f, per_server, final)
        except AssertionError as e:
            raise AssertionError(f"on {f.stack}'s Prometheus: {e}") from e


def _fleet_adds_up(fleet: Fleet, per_server: dict[str, str], final: list[float]) -> None:
    """On one stack's Prometheus: the fleet's recorded rate and percentiles against each server's."""
    success = catalog.TRITON_SUCCESS

    def scraped() -> float | None:
        for r, n in zip(fleet.replicas, final, strict=True):
            got = fleet.scalar(f"sum({success}{{{_model_selector(instance=r.triton_target)}}})")
            if got != n:
                return None
        return time.time()

    scraped_at = _poll(scraped, "Prometheus to scrape the final counters", 30)
    record = catalog.REQUEST_RATE_RECORD
    _poll(
        lambda: (fleet.scalar(f"timestamp({record}{{{_model_selector()}}})") or 0) > scraped_at + 1,
        "the recording rule to run on the final counters",
        30,
    )
    now = time.time()
    (fleet_series,) = fleet.query(f"{record}{{{_model_selector()}}}", now)
    # One series per model and version, whatever labels the scrape added.
    assert set(fleet_series["metric"]) == {"__name__", catalog.MODEL, catalog.VERSION}
    # The rule's expression across the fleet is the sum of each server's, at the same instant, exactly.
    # (Compared as expressions at one time: the recorded sample was evaluated at its own instant.)
    # That instant is 2 s back: every scrape stamped before it has been stored, so all the queries
    # see the same samples.
    at = now - 2.0
    # The model under load only: the repository also serves fraud_pipeline and its other steps, idle here.
    fleet_expr = catalog.promql(catalog.signal(catalog.REQUEST_RATE), WINDOW, selector=_model_selector())
    fleet_rate = fleet.scalar(f"{fleet_expr}", at)
    server_rates = [fleet.scalar(per_server[r.triton_target], at) or 0.0 for r in fleet.replicas]
    assert server_rates[0] > 2 * server_rates[1] > 0, server_rates  # the two servers really differ
    assert fleet_rate == server_rates[0] + server_rates[1]
    # Each server's rate, at the instant of its last scrape, is every request it served / 300 s,
    # exactly: rate() extrapolates to neither end (the range ends on a sample, and the series starts
    # at 0, so Prometheus extends it back to where it was 0: no further). Prometheus multiplies by
    # 1/300 rather than dividing: equal to the last bit or so, hence 1e-12.
    for r, n in zip(fleet.replicas, final, strict=True):
        last = fleet.scalar(f"timestamp({success}{{{_model_selector(instance=r.triton_target)}}})", now)
        assert last is not None
        rate = fleet.scalar(per_server[r.triton_target], last)
        assert rate == pytest.approx(n / 300.0, rel=1e-12, abs=0), (r.triton_target, n)

    # Percentiles: wait for the sampled traces (Triton exports them in batches every ~5 s).
    for r, n in zip(fleet.replicas, final, strict=True):
        _poll(lambda r=r, n=n: _sidecar_traced(r) >= 0.5 * n / TRACE_RATE, "traces at the sidecar", 30)
    hist = f"{catalog.REQUEST_DURATION}_bucket"
    sel = _model_selector(phase="request")
    _poll(
        lambda: len(fleet.query(f"sum by (instance) ({hist}{{{sel}}})")) == 2,
        "both sidecars' histograms in Prometheus",
        15,
    )
    # 2 s back, as above: a scrape stamped before a later instant may be stored between the two queries
    # below, and the fleet quantile then read one more sample than the per-instance rates (seen once).
    at = time.time() - 2.0
    per_instance: dict[str, dict[float, float]] = {}
    for row in fleet.query(f"sum by (instance, le) (rate({hist}{{{sel}}}[{WINDOW}]))", at):
        le = float(row["metric"]["le"])
        per_instance.setdefault(row["metric"]["instance"], {})[le] = float(row["value"][1])
    assert sorted(per_instance) == sorted(r.sidecar_target for r in fleet.replicas)
    merged = {le: sum(h[le] for h in per_instance.values()) for le in next(iter(per_instance.values()))}
    for q in ("0.5", "0.99"):
        fleet_q = fleet.scalar(
            catalog.histogram_quantile_promql(q, "request", WINDOW, selector=f'{catalog.MODEL}="{MODEL}"'), at
        )
        assert fleet_q is not None and fleet_q > 0
        assert fleet_q == pytest.approx(_bucket_quantile(float(q), merged), rel=1e-6)
        alone = [_bucket_quantile(float(q), h) for h in per_instance.values()]
        # A quantile of the merged distribution lies between the replicas' own quantiles.
        assert min(alone) * 0.99 <= fleet_q <= max(alone) * 1.01, (q, alone, fleet_q)
