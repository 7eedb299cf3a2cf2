"""``tritonwatch init`` against a Triton API stand-in whose counters, version and request p99 are chosen,
so every proposed objective is known in advance; the file it writes passes ``tritonwatch rules`` and
``rules --triton`` warns about nothing in it. The real Triton 2.51 runs at the end of this file (an
ensemble under load) and in ``test_wheel.py`` (from the installed wheel, with ``promtool``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import stacks
from support.static_endpoint import serve, shutdown

from tritonwatch import catalog, slo
from tritonwatch.cli import main
from tritonwatch.durations import parse_duration

MS = 1_000_000  # ns


def stats(name: str, ok: int, ok_ns: int, fail: int = 0, queue_ns: int = 0, **more: int) -> dict[str, Any]:
    return {
        "name": name,
        "version": "1",
        "inference_count": more.get("inferences", ok),
        "execution_count": more.get("executions", ok),
        "inference_stats": {
            "success": {"count": ok, "ns": ok_ns},
            "fail": {"count": fail, "ns": 0},
            "queue": {"count": ok, "ns": queue_ns},
            "compute_infer": {"count": ok, "ns": more.get("compute_ns", 0)},
            "cache_hit": {"count": more.get("hits", 0), "ns": 0},
            "cache_miss": {"count": more.get("misses", 0), "ns": 0},
        },
    }


INDEX = [
    {"name": "core", "version": "1", "state": "READY"},
    {"name": "pipeline", "version": "1", "state": "READY"},
    {"name": "pre", "version": "1", "state": "READY"},
    {"name": "stream", "version": "2", "state": "READY"},
    {"name": "lonely", "version": "1", "state": "READY"},
    {"name": "gone", "version": "1", "state": "UNAVAILABLE"},
    {"name": "bad\nname", "version": "1", "state": "READY"},  # hostile: never reaches the file
]
CONFIGS = {
    "core": {"platform": "onnxruntime_onnx", "max_batch_size": 8, "response_cache": {"enable": True}},
    "pipeline": {
        "platform": "ensemble",
        "ensemble_scheduling": {"step": [{"model_name": "pre"}, {"model_name": "core"}]},
    },
    "pre": {"backend": "python", "max_batch_size": 0},
    "stream": {"backend": "python", "model_transaction_policy": {"decoupled": True}},
    "lonely": {"backend": "python", "max_batch_size": 4},
}
CUMULATIVE = [
    # 1 failure in 1,001; mean 2 ms; queued a quarter; batches of 4 of 8; 20 % cache hits
    stats("core", 1000, 2000 * MS, fail=1, queue_ns=500 * MS, executions=250, hits=200, misses=800),
    # no failure in 900; mean 20 ms; queued 5 % in its own queue, its steps computing 80 % of the time
    stats("pipeline", 900, 18000 * MS, queue_ns=900 * MS, compute_ns=14400 * MS),
    stats("pre", 900, 900 * MS),
    stats("stream", 10, 10000 * MS),
]


# Triton's request summaries (summary_latencies=true): pipeline's p99 30 ms; core has the cache on, so
# Triton keeps none for it (NaN) and its threshold follows the mean of the requests the cache missed.
METRICS = """# TYPE nv_inference_request_summary_us summary
nv_inference_request_summary_us_count{model="pipeline",version="1"} 900
nv_inference_request_summary_us{model="pipeline",version="1",quantile="0.5"} 15000
nv_inference_request_summary_us{model="pipeline",version="1",quantile="0.99"} 30000
nv_inference_request_summary_us_count{model="core",version="1"} 0
nv_inference_request_summary_us{model="core",version="1",quantile="0.99"} NaN
"""


class Api:
    """Serves the server metadata (``version``), INDEX, CONFIGS, METRICS and, per statistics read, the
    next of ``reads`` (the last one repeats)."""

    def __init__(
        self,
        reads: list[list[dict[str, Any]]],
        index: list[dict[str, str]] = INDEX,
        configs: dict[str, dict[str, Any]] = CONFIGS,
        version: str = "2.51.0",
    ) -> None:
        self.reads = reads
        self.stats_reads = 0
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def _json(self, doc: object, code: int = 200) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                self._json(index if self.path == "/v2/repository/index" else {"error": "no"}, 200)

            def do_GET(self) -> None:
                if self.path == "/v2":
                    self._json({"name": "triton", "version": version, "extensions": []})
                    return
                if self.path == "/metrics":
                    body = METRICS.encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; version=0.0.4")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if self.path == "/v2/models/stats":
                    read = api.reads[min(api.stats_reads, len(api.reads) - 1)]
                    api.stats_reads += 1
                    self._json({"model_stats": read})
                    return
                name = self.path.removeprefix("/v2/models/").removesuffix("/config")
                if name in configs:
                    self._json({"name": name, **configs[name]})
                else:
                    self._json({"error": "unknown model"}, 400)

        self.httpd = serve(Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        # never Triton's default port 8002 on this host: another Triton may serve it
        self.init = ["init", "--triton", self.url, "--triton-metrics", f"{self.url}/metrics"]

    def close(self) -> None:
        shutdown(self.httpd)


@pytest.fixture
def api() -> Iterator[Api]:
    server = Api([CUMULATIVE])
    yield server
    server.close()


def entries(path: Path) -> dict[str, dict[str, Any]]:
    return {e["model"]: e for e in yaml.safe_load(path.read_text())["spec"]["slos"]}


def test_proposes_from_the_counters_since_load(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "slo.yaml"
    assert main([*api.init, "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(
        f"# Written by tritonwatch init from {api.url}, counters since each model loaded, Triton 2.51.0.\n"
    )
    got = entries(out)
    # ensembles first, then the models clients call directly, then steps; unready and hostile names left
    # out; lonely (python: no availability on Triton's counters; no traffic: no latency) has no
    # objective and is a comment
    assert list(got) == ["pipeline", "stream", "core", "pre"]
    assert got["core"] == {
        "model": "core",
        "availability": {"objective": 99.5},  # 99.9's budget 0.1 % is not twice the 0.0999 % seen
        # no p99 (cache on): the 800 requests the cache missed took 2.5 ms on average, 4x -> 10 ms
        "latency": {"threshold": "10ms", "objective": 99},
        "queue_time_ratio": {"max": 0.5},  # twice 25 %
        "batch_efficiency": {"min": 0.25},  # half of 4/8
        "cache_hit_ratio": {"min": 0.1},  # half of 20 %
    }
    assert got["pipeline"] == {
        "model": "pipeline",
        "availability": {"objective": 99.5},  # 0 of 900: 99.9 needs one request in 1,000
        "latency": {"threshold": "50ms", "objective": 99},  # 1.5 x its p99 of 30 ms -> the 50 ms bucket
        "queue_time_ratio": {"max": 0.4},  # twice the 20 % not computing in its steps; no batching
    }
    assert "not computing in its steps 20.0% of request time; twice that, 0.25-0.9" in text
    assert "p99 30 ms (Triton's request summary, last 60 s); the first bucket >= 1.5x it" in text
    assert (
        "no p99 from Triton; mean request not answered from the cache 2.5 ms; the first bucket >= 4x it"
        in text
    )
    # python, decoupled: Triton does not count its errors, so no availability on its counters
    assert got["stream"] == {"model": "stream", "queue_time_ratio": {"max": 0.25}}
    assert (
        "# availability: not proposed on Triton's counters, which do not count this model's errors "
        "(python_backend, decoupled): give it availability.from (docs/uncounted-errors.md)"
    ) in text
    # pre saw only its ensemble's 900 requests: its own operational objectives, not the clients'
    assert got["pre"] == {"model": "pre", "queue_time_ratio": {"max": 0.25}}
    assert '    # - model: "lonely"  (no objective proposed)' in text
    assert "# a step of ensemble pipeline, also called directly (101 requests)" in text  # core: 1001 - 900
    assert (
        "# a step of ensemble pipeline: its clients' objectives (availability, latency) are on the ensemble"
        in text
    )
    assert "1 of 1001 requests failed (0.100%)" in text
    assert "decoupled (streaming): set time_to_first_token by hand" in text
    # Triton 2.51 keeps no histogram for an ordinary model: the sidecar's traces, and the threshold is
    # one of its bounds
    assert (
        text.count(
            "# latency source: the sidecar's trace histogram: Triton 2.51.0 keeps no "
            "nv_inference_first_response_histogram_ms for this model (every model from 2.65, decoupled ones from 2.52)."
        )
        == 2
    )
    assert "bad" not in text and "gone" not in text
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"wrote {out}: 5 models; next: tritonwatch rules --slo {out} --out rules/"
    )
    # ready for the generator as written, and nothing in it for rules --triton to warn about
    assert main(["rules", "--slo", str(out), "--out", str(tmp_path / "rules"), "--triton", api.url]) == 0
    assert capsys.readouterr().err == ""
    assert {o.name for o in slo.load(out).objectives()} >= {
        "core-availability",
        "core-latency",
        "pipeline-latency",
    }


def test_observe_proposes_from_the_traffic_in_between(tmp_path: Path) -> None:
    later = [
        # core: 500 more requests, none failed, mean of those 1 ms; batches of 2 of 8
        stats(
            "core",
            1500,
            2500 * MS,
            fail=1,
            queue_ns=500 * MS,
            inferences=1500,
            executions=500,
            hits=200,
            misses=1300,
        ),
        # pipeline reloaded inside the span: counters from 0, the later reading is the whole increase
        stats("pipeline", 100, 100 * 30 * MS),
    ]
    api = Api([CUMULATIVE, later])
    try:
        out = tmp_path / "slo.yaml"
        assert main([*api.init, "--out", str(out), "--observe", "0.2"]) == 0
    finally:
        api.close()
    assert api.stats_reads == 2
    got = entries(out)
    assert got["core"] == {
        "model": "core",
        "availability": {"objective": 99.5},  # 0 of 500: one request in 500 is 0.2 %
        "latency": {"threshold": "5ms", "objective": 99},  # 4 x 1 ms -> 5 ms
        "queue_time_ratio": {"max": 0.25},  # nothing queued
        # 500 inferences in 250 executions: batch 2 of 8, half of it 0.125 is the least batch: not proposed
    }
    # its p99 (30 ms) wins over its mean (30 ms in the span, 4x would be 250 ms): 1.5 x 30 -> 50 ms
    assert got["pipeline"]["latency"] == {"threshold": "50ms", "objective": 99}
    assert "pre" not in got  # a step without traffic in the span: nothing of its own to propose
    assert "0.2 s of traffic observed" in out.read_text().splitlines()[0]
    assert "batch_efficiency: mean batch 2 seen, nothing lower to alert on" in out.read_text()


def test_never_overwrites_a_file_it_did_not_write(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = tmp_path / "slo.yaml"
    theirs.write_text("# my own SLOs\n")
    assert main([*api.init, "--out", str(theirs)]) == 2
    assert theirs.read_text() == "# my own SLOs\n"
    err = capsys.readouterr().err
    assert err == (
        f"tritonwatch init: error: --out {theirs}: exists and was not written by tritonwatch init; not overwriting it\n"
    )
    link = tmp_path / "link.yaml"
    ours = tmp_path / "ours.yaml"
    assert main([*api.init, "--out", str(ours)]) == 0
    link.symlink_to(ours)  # a link, even to our own file, is the user's
    assert main([*api.init, "--out", str(link)]) == 2
    ours.write_text(ours.read_text().replace("window: 28d", "window: 30d"))
    assert main([*api.init, "--out", str(ours)]) == 0  # its own file: rewritten
    assert "window: 28d" in ours.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "ours.yaml", "slo.yaml"]


def test_fields_of_another_shape_read_as_absent_and_a_bad_count_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    index = [{"name": "core", "version": "1", "state": "READY"}]
    configs = {"core": {"ensemble_scheduling": [1], "response_cache": "yes", "max_batch_size": "8"}}
    odd = {"name": "core", "inference_stats": [], "model_transaction_policy": 1}
    out = tmp_path / "slo.yaml"
    api = Api([[{**odd, "inference_count": -3}]], index, configs)
    try:
        assert main([*api.init, "--out", str(out)]) == 1
    finally:
        api.close()
    assert capsys.readouterr().err == (
        f"tritonwatch init: error: --triton {api.url}: /v2/models/stats of core.inference_count: not a count ('-3')\n"
    )
    api = Api([[odd]], index, configs)
    try:
        assert main([*api.init, "--out", str(out)]) == 0
    finally:
        api.close()
    assert entries(out) == {"core": {"model": "core", "availability": {"objective": 99.9}}}
    assert '# "core": no platform in its config, versions 1' in out.read_text()


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (
            ["--triton", "ftp://x"],
            "--triton: 'ftp://x' is not an http(s) base URL (e.g. http://127.0.0.1:8000)",
        ),
        (["--triton", "http://127.0.0.1:1"], "--triton http://127.0.0.1:1: cannot reach"),
        (
            ["--triton", "http://x", "--observe", "-1"],
            "--observe: must be between 0 and 86400 seconds (got -1.0)",
        ),
        (
            ["--triton", "http://x", "--name", "a b"],
            "--name: letters, digits, '_', '.', '-' only (got 'a b')",
        ),
    ],
)
def test_bad_input_is_one_line(
    argv: list[str], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "--out", str(tmp_path / "x.yaml"), *argv]) != 0
    err = capsys.readouterr().err
    assert err.startswith(f"tritonwatch init: error: {error}") and err.count("\n") == 1, err
    assert not (tmp_path / "x.yaml").exists()


ENSEMBLE = """name: "fraud_pipeline"
platform: "ensemble"
max_batch_size: 64
input [ { name: "features", data_type: TYPE_FP32, dims: [ 10 ] } ]
output [ { name: "probability", data_type: TYPE_FP32, dims: [ 1 ] } ]
ensemble_scheduling {
  step [
    {
      model_name: "fraud_detector"
      model_version: -1
      input_map { key: "input_features", value: "features" }
      output_map { key: "fraud_probability", value: "probability" }
    }
  ]
}
"""


@pytest.fixture(scope="module")
def real_ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """``init`` on the real Triton 2.51 serving a one-step ensemble over fraud_detector after 60
    requests: the file it wrote, the ensemble's statistics, its request p99 as Triton's summary gave it
    right after ``init`` read it (seconds), and the Triton, still up for ``rules --triton``. Once a
    module: the file is the same on both stacks, only promtool differs."""
    import shutil

    import requests

    from tritonwatch.local.triton import LocalTriton

    tmp = tmp_path_factory.mktemp("real_ensemble")
    repo = tmp / "repo"
    (repo / "fraud_pipeline" / "1").mkdir(parents=True)
    (repo / "fraud_pipeline" / "config.pbtxt").write_text(ENSEMBLE)
    # fraud_detector alone: the bundled repository's own fraud_pipeline (and its other steps) would
    # clash with this one-step ensemble of the same name
    root = Path(__file__).resolve().parent.parent
    shutil.copytree(root / "model_repository" / "fraud_detector", repo / "fraud_detector")
    from tritonwatch.expfmt import parse

    with LocalTriton([repo]) as triton:
        body = {"inputs": [{"name": "features", "shape": [1, 10], "datatype": "FP32", "data": [0.5] * 10}]}
        for _ in range(60):
            resp = requests.post(f"{triton.http_url}/v2/models/fraud_pipeline/infer", json=body, timeout=30)
            assert resp.status_code == 200, resp.text
        out = tmp / "slo.yaml"
        argv = ["init", "--triton", triton.http_url, "--triton-metrics", triton.metrics_url]
        assert main([*argv, "--out", str(out)]) == 0
        stats = requests.get(f"{triton.http_url}/v2/models/fraud_pipeline/stats", timeout=10).json()
        summary = parse(requests.get(triton.metrics_url, timeout=10).content)[
            "nv_inference_request_summary_us"
        ]
        (p99_us,) = [
            v
            for labels, v in summary.items()
            if ("model", "fraud_pipeline") in labels and ("quantile", "0.99") in labels
        ]
        yield out, {"stats": stats, "p99": p99_us / 1e6, "url": triton.http_url}


@pytest.mark.triton
def test_the_real_triton_ensemble_and_its_step(real_ensemble: tuple[Path, dict[str, Any]]) -> None:
    """On the real Triton 2.51: an ensemble over fraud_detector is found by ``platform: ensemble``, comes
    first, gets no batch objective, and its step says whose it is."""
    out, seen = real_ensemble
    inference = seen["stats"]["model_stats"][0]["inference_stats"]
    request_ns = int(inference["success"]["ns"])
    compute_ns = sum(int(inference[k]["ns"]) for k in ("compute_input", "compute_infer", "compute_output"))
    not_computing = max(0, request_ns - compute_ns) / request_ns
    got = entries(out)
    assert list(got) == ["fraud_pipeline", "fraud_detector"]
    pipeline, step = got["fraud_pipeline"], got["fraud_detector"]
    assert pipeline["availability"] == {"objective": 95}  # 0 of 60: one request in 60 is 1.7 %
    assert set(pipeline) == {
        "model",
        "availability",
        "latency",
        "queue_time_ratio",
    }  # no batching: an ensemble
    # its step saw only the ensemble's 60 requests: the clients' objectives are the ensemble's; the same
    # input 60 times, 59 answered from its cache
    assert set(step) == {"model", "queue_time_ratio", "cache_hit_ratio"}  # its own operational objectives
    assert step["cache_hit_ratio"] == {"min": 0.49}  # half of 59 in 60
    # Triton 2.51 keeps no latency histogram for it: the sidecar's traces, at one of their bounds, the
    # first at or above 1.5 times the p99 Triton measured (its summary), so that p99 meets it
    p99 = seen["p99"]
    threshold = min(b for b in catalog.DEFAULT_BUCKETS if b >= 1.5 * p99)
    assert parse_duration(pipeline["latency"]["threshold"], "threshold") == pytest.approx(
        threshold, abs=1e-12
    )
    assert p99 > 0 and parse_duration(pipeline["latency"]["threshold"], "threshold") >= 1.5 * p99
    # the share of its request time its step did not compute, twice, within 0.25-0.9, two digits
    assert pipeline["queue_time_ratio"]["max"] == float(f"{min(0.9, max(0.25, 2 * not_computing)):.2g}")
    text = out.read_text()
    assert '# "fraud_pipeline": ensemble of "fraud_detector", versions 1' in text
    assert (
        "# a step of ensemble fraud_pipeline: its clients' objectives (availability, latency) are on the ensemble"
        in text
    )
    assert text.splitlines()[0].endswith(", counters since each model loaded, Triton 2.51.0.")
    assert (
        "# latency source: the sidecar's trace histogram: Triton 2.51.0 keeps no "
        "nv_inference_first_response_histogram_ms for this model (every model from 2.65, decoupled ones from 2.52)."
    ) in text
    assert "nv_inference_first_response_histogram_ms (Triton >= 2.65)" not in text


@pytest.mark.triton
def test_rules_triton_warns_about_nothing_in_the_real_file(
    real_ensemble: tuple[Path, dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``rules --triton`` on what init wrote for the real Triton 2.51: no uncounted-errors warning (no
    availability on a python model), no bucket warning (the threshold is a bound of the traces' histogram)."""
    out, seen = real_ensemble
    capsys.readouterr()
    assert main(["rules", "--slo", str(out), "--out", str(tmp_path / "rules"), "--triton", seen["url"]]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.triton
@stacks.needs("promtool")
def test_the_real_ensembles_file_passes_rules_and_promtool(
    real_ensemble: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """Two latency objectives: each SLI's no-data test once saw the other's alert fire, and failed."""
    import subprocess

    out, _ = real_ensemble
    rules = tmp_path / "rules"
    assert main(["rules", "--slo", str(out), "--out", str(rules)]) == 0
    check = subprocess.run(
        ["promtool", "check", "rules", *map(str, sorted(rules.glob("*.rules.yml")))],
        capture_output=True,
        text=True,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    tests = subprocess.run(
        ["promtool", "test", "rules", *map(str, sorted(rules.glob("tests/*.yml")))],
        capture_output=True,
        text=True,
    )
    assert tests.returncode == 0 and "FAILED" not in tests.stdout, tests.stdout + tests.stderr


@pytest.fixture
def api_265() -> Iterator[Api]:
    server = Api([CUMULATIVE], version="2.65.0")
    yield server
    server.close()


def test_on_265_proposes_the_model_metrics_stanza_and_no_tracing(
    api_265: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Where Triton's own histogram covers latency (every model from 2.65), init reads it: the threshold
    is a bound of the buckets the model has now (Triton's defaults here), rules --triton accepts it,
    and the stanza for finer buckets is the one rules --out writes; it proposes no tracing."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    from tritonwatch.alerts import model_metrics

    api = api_265
    out = tmp_path / "slo.yaml"
    assert main([*api.init, "--out", str(out)]) == 0
    got = entries(out)
    # pipeline: 1.5 x p99 30 ms; core: 4 x 2.5 ms; both at Triton's first default bucket, 100 ms
    assert got["pipeline"]["latency"] == got["core"]["latency"] == {"threshold": "100ms", "objective": 99}
    text = out.read_text()
    lines = text.splitlines()
    start = lines.index("    #   model_metrics {")  # the first latency in file order: pipeline's
    block = []
    for line in lines[start:]:
        block.append(line.removeprefix("    #   "))
        if line == "    #   }":
            break
    stanza = "\n".join(block) + "\n"
    capsys.readouterr()
    rules_out = tmp_path / "rules"
    assert main(["rules", "--slo", str(out), "--out", str(rules_out), "--triton", api.url]) == 0
    assert capsys.readouterr().err == ""  # 100 ms is a bucket of Triton's defaults: nothing to warn
    written = {p.name: p.read_text() for p in (rules_out / "triton").iterdir()}
    with_latency = [m for m, e in entries(out).items() if "latency" in e]
    assert set(written) == {f"{m}.model_metrics.pbtxt" for m in with_latency}
    assert any(t.endswith(stanza) for t in written.values())  # the same stanza as rules writes
    parsed = text_format.Parse(stanza, model_config_pb2.ModelConfig())
    assert list(parsed.model_metrics.metric_control[0].histogram_options.buckets) == list(
        model_metrics.ladder([100.0])
    )  # pipeline's 100 ms comes first (ensembles first)
    n = len(with_latency)
    assert n == 2 and text.count("--metrics-config histogram_latencies=true and reload the model") == n
    assert (
        text.count(
            "# latency source: Triton's own nv_inference_first_response_histogram_ms: Triton 2.65.0 keeps "
            "nv_inference_first_response_histogram_ms for this model (>= 2.65: every model), no tracing needed."
        )
        == n
    )
    assert (
        text.count("The threshold is one of its bucket bounds (Triton's defaults), so the SLI is exact.") == n
    )
    assert "trace" not in text.replace("no tracing needed", "")  # no trace rate, no trace config proposed


def test_rules_triton_checks_the_histogram_this_version_keeps(api: Api, api_265: Api, tmp_path: Path) -> None:
    """A 10 ms threshold is a bound of the sidecar's trace buckets (what 2.51 gives) and not one of
    Triton's default buckets (what 2.65 gives): rules --triton warns on 2.65 only, naming which and why."""
    from tritonwatch.alerts import model_metrics

    spec = slo.parse(
        {
            "apiVersion": "tritonwatch/v1",
            "kind": "ServiceLevelObjectives",
            "metadata": {"name": "x"},
            "spec": {
                "window": "28d",
                "slos": [{"model": "core", "latency": {"threshold": "10ms", "objective": 99}}],
            },
        },
        "x.yaml",
    )
    assert model_metrics.check(spec, api.url) == []
    assert model_metrics.check(spec, api_265.url) == [
        "spec.slos[0] (core): threshold 10 ms is not a bucket of Triton's own "
        "nv_inference_first_response_histogram_ms (Triton's defaults: 100, 500, 2000, 5000 ms; Triton 2.65.0 "
        "keeps nv_inference_first_response_histogram_ms for this model (>= 2.65: every model)): the SLI would "
        "be inexact (no bucket to read there: its requests are left out of the SLI); any latency between 0 ms "
        "and 100 ms is indistinguishable (off by up to 100 ms); apply triton/core.model_metrics.pbtxt from rules --out"
    ]
    spec = slo.parse(
        {
            "apiVersion": "tritonwatch/v1",
            "kind": "ServiceLevelObjectives",
            "metadata": {"name": "x"},
            "spec": {
                "window": "28d",
                "slos": [{"model": "core", "latency": {"threshold": "7ms", "objective": 99}}],
            },
        },
        "x.yaml",
    )
    (line,) = model_metrics.check(spec, api.url)
    assert line.startswith(
        "spec.slos[0] (core): threshold 7 ms is not a bucket of the sidecar's trace histogram "
        "(the sidecar's default buckets: 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25,"
    )
    assert line.endswith(
        "Triton 2.51.0 keeps no nv_inference_first_response_histogram_ms for this model (every model from "
        "2.65, decoupled ones from 2.52)): the SLI would be inexact (no bucket to read there: its requests are "
        "left out of the SLI); any latency between 5 ms and 10 ms is indistinguishable (off by up to 5 ms); "
        "run the sidecar with --latency-buckets holding it, or choose a threshold among them"
    )
