"""``tritonwatch init`` against a Triton API stand-in whose counters are chosen, so every proposed
objective is known in advance; the file it writes passes ``tritonwatch rules``. The real Triton run is in
``test_wheel.py`` (from the installed wheel, with ``promtool``)."""

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

from tritonwatch import slo
from tritonwatch.cli import main

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


class Api:
    """Serves INDEX, CONFIGS and, per statistics read, the next of ``reads`` (the last one repeats)."""

    def __init__(
        self,
        reads: list[list[dict[str, Any]]],
        index: list[dict[str, str]] = INDEX,
        configs: dict[str, dict[str, Any]] = CONFIGS,
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
    assert main(["init", "--triton", api.url, "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith(
        f"# Written by tritonwatch init from {api.url}, counters since each model loaded.\n"
    )
    got = entries(out)
    # ensembles first, then the models clients call directly, then steps; unready and hostile names left out
    assert list(got) == ["pipeline", "lonely", "stream", "core", "pre"]
    assert got["core"] == {
        "model": "core",
        "availability": {"objective": 99.5},  # 99.9's budget 0.1 % is not twice the 0.0999 % seen
        "latency": {"threshold": "10ms", "objective": 99},  # 4 x 2 ms -> the 10 ms bucket
        "queue_time_ratio": {"max": 0.5},  # twice 25 %
        "batch_efficiency": {"min": 0.25},  # half of 4/8
        "cache_hit_ratio": {"min": 0.1},  # half of 20 %
    }
    assert got["pipeline"] == {
        "model": "pipeline",
        "availability": {"objective": 99.5},  # 0 of 900: 99.9 needs one request in 1,000
        "latency": {"threshold": "100ms", "objective": 99},  # 4 x 20 ms -> the 100 ms bucket
        "queue_time_ratio": {"max": 0.4},  # twice the 20 % not computing in its steps; no batching
    }
    assert "not computing in its steps 20.0% of request time; twice that, 0.25-0.9" in text
    assert got["lonely"] == {"model": "lonely", "availability": {"objective": 99.9}}
    assert got["stream"] == {
        "model": "stream",
        "availability": {"objective": 95},
        "queue_time_ratio": {"max": 0.25},
    }
    assert "# a step of ensemble pipeline: its clients' objectives are on the ensemble" in text
    assert "1 of 1001 requests failed (0.100%)" in text
    assert "decoupled (streaming): set time_to_first_token by hand" in text
    assert "bad" not in text and "gone" not in text
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"wrote {out}: 5 models; next: tritonwatch rules --slo {out} --out rules/"
    )
    # ready for the generator as written
    assert main(["rules", "--slo", str(out), "--out", str(tmp_path / "rules")]) == 0
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
        assert main(["init", "--triton", api.url, "--out", str(out), "--observe", "0.2"]) == 0
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
    assert got["pipeline"]["latency"] == {"threshold": "250ms", "objective": 99}  # 4 x 30 ms
    assert got["pre"] == {"model": "pre", "availability": {"objective": 99.9}}  # no traffic in the span
    assert "0.2 s of traffic observed" in out.read_text().splitlines()[0]
    assert "batch_efficiency: mean batch 2 seen, nothing lower to alert on" in out.read_text()


def test_never_overwrites_a_file_it_did_not_write(
    api: Api, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    theirs = tmp_path / "slo.yaml"
    theirs.write_text("# my own SLOs\n")
    assert main(["init", "--triton", api.url, "--out", str(theirs)]) == 2
    assert theirs.read_text() == "# my own SLOs\n"
    err = capsys.readouterr().err
    assert err == (
        f"tritonwatch init: error: --out {theirs}: exists and was not written by tritonwatch init; not overwriting it\n"
    )
    link = tmp_path / "link.yaml"
    ours = tmp_path / "ours.yaml"
    assert main(["init", "--triton", api.url, "--out", str(ours)]) == 0
    link.symlink_to(ours)  # a link, even to our own file, is the user's
    assert main(["init", "--triton", api.url, "--out", str(link)]) == 2
    ours.write_text(ours.read_text().replace("window: 28d", "window: 30d"))
    assert main(["init", "--triton", api.url, "--out", str(ours)]) == 0  # its own file: rewritten
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
        assert main(["init", "--triton", api.url, "--out", str(out)]) == 1
    finally:
        api.close()
    assert capsys.readouterr().err == (
        f"tritonwatch init: error: --triton {api.url}: /v2/models/stats of core.inference_count: not a count ('-3')\n"
    )
    api = Api([[odd]], index, configs)
    try:
        assert main(["init", "--triton", api.url, "--out", str(out)]) == 0
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
def real_ensemble(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """``init`` on the real Triton 2.51 serving a one-step ensemble over fraud_detector after 60
    requests: the file it wrote and the ensemble's statistics. Once a module: the file is the same on
    both stacks, only promtool differs."""
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
    with LocalTriton([repo]) as triton:
        body = {"inputs": [{"name": "features", "shape": [1, 10], "datatype": "FP32", "data": [0.5] * 10}]}
        for _ in range(60):
            resp = requests.post(f"{triton.http_url}/v2/models/fraud_pipeline/infer", json=body, timeout=30)
            assert resp.status_code == 200, resp.text
        out = tmp / "slo.yaml"
        assert main(["init", "--triton", triton.http_url, "--out", str(out)]) == 0
        stats = requests.get(f"{triton.http_url}/v2/models/fraud_pipeline/stats", timeout=10).json()
    return out, stats


@pytest.mark.triton
def test_the_real_triton_ensemble_and_its_step(real_ensemble: tuple[Path, dict[str, Any]]) -> None:
    """On the real Triton 2.51: an ensemble over fraud_detector is found by ``platform: ensemble``, comes
    first, gets no batch objective, and its step says whose it is."""
    out, stats = real_ensemble
    inference = stats["model_stats"][0]["inference_stats"]
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
    assert step["availability"] == {"objective": 95}  # the same 60 requests, each one step
    # the share of its request time its step did not compute, twice, within 0.25-0.9, two digits
    assert pipeline["queue_time_ratio"]["max"] == float(f"{min(0.9, max(0.25, 2 * not_computing)):.2g}")
    text = out.read_text()
    assert '# "fraud_pipeline": ensemble of "fraud_detector", versions 1' in text
    assert "# a step of ensemble fraud_pipeline: its clients' objectives are on the ensemble" in text


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


def test_proposes_the_model_metrics_stanza_and_no_tracing(api: Api, tmp_path: Path) -> None:
    """Issue 37: where Triton's own histogram covers latency, init proposes the stanza that makes the
    SLI exact (the same rules --out writes) and says how to apply it; it proposes no tracing."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    from tritonwatch.alerts import model_metrics

    out = tmp_path / "slo.yaml"
    assert main(["init", "--triton", api.url, "--out", str(out)]) == 0
    text = out.read_text()
    lines = text.splitlines()
    start = lines.index("    #   model_metrics {")  # the first latency in file order: pipeline's
    block = []
    for line in lines[start:]:
        block.append(line.removeprefix("    #   "))
        if line == "    #   }":
            break
    stanza = "\n".join(block) + "\n"
    rules_out = tmp_path / "rules"
    assert main(["rules", "--slo", str(out), "--out", str(rules_out)]) == 0
    written = {p.name: p.read_text() for p in (rules_out / "triton").iterdir()}
    with_latency = [m for m, e in entries(out).items() if "latency" in e]
    assert set(written) == {f"{m}.model_metrics.pbtxt" for m in with_latency}
    assert any(t.endswith(stanza) for t in written.values())  # the same stanza as rules writes
    parsed = text_format.Parse(stanza, model_config_pb2.ModelConfig())
    assert list(parsed.model_metrics.metric_control[0].histogram_options.buckets) == list(
        model_metrics.ladder([100.0])
    )  # pipeline's 100 ms comes first (ensembles first)
    n = len(with_latency)
    assert n >= 2 and text.count("--metrics-config histogram_latencies=true and reload the model") == n
    assert text.count("no tracing needed") == n
    assert "trace" not in text.replace("no tracing needed", "")  # no trace rate, no trace config proposed
