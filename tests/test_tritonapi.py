"""The one Triton HTTP client (``tritonwatch.tritonapi``) and the one typed model config (``modelconfig``).

Configs are the JSON the real local Triton 2.51 served (``tests/data/triton_config_*.json``, and the
session's Triton itself). ``model_metrics`` cannot be recorded here: Triton 2.51's model config has no
such field (its config.pbtxt parse fails on one; the field came with the histogram buckets after it), so
it is spelled as the JSON mapping of model_config.proto's ``ModelMetrics`` spells it
(``metric_control[].metric_identifier.family``, ``histogram_options.buckets``). Hostile answers come
from a loopback server that says what each case asks; each failure is one line naming the URL or field.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tritonwatch import modelconfig, uncounted
from tritonwatch.exporters.batching import batching_config
from tritonwatch.exporters.placement import Placement, placement
from tritonwatch.fetch import ScrapeError
from tritonwatch.modelconfig import DynamicBatching, InstanceGroup, ModelConfig, TensorSpec
from tritonwatch.tritonapi import IndexEntry, TritonClient

DATA = Path(__file__).resolve().parent / "data"
FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"


def recorded(name: str) -> dict[str, Any]:
    return json.loads((DATA / f"triton_config_{name}.json").read_text())  # type: ignore[no-any-return]


def test_a_recorded_config_reads_into_the_typed_model() -> None:
    cfg = modelconfig.parse(recorded("fraud_detector"))
    assert cfg == ModelConfig(
        name="fraud_detector",
        platform="",
        backend="python",
        max_batch_size=64,
        dynamic_batching=DynamicBatching(max_queue_delay_us=100, preferred=(64,)),
        instance_groups=(InstanceGroup("KIND_CPU", 1),),
        response_cache=True,
        inputs=(TensorSpec("input_features", "TYPE_FP32", (10,)),),
    )
    assert (cfg.ensemble, cfg.kind, cfg.steps, cfg.buckets(FIRST_RESPONSE)) == (False, "python", None, None)
    assert uncounted.shape(cfg) == uncounted.ModelShape("python", False)
    assert placement(cfg) == Placement(reason="cpu_instances")
    # the label advise --prometheus reads: the same keys, spelt as Triton spells them
    assert json.loads(batching_config(cfg) or "") == {
        k: recorded("fraud_detector")[k]
        for k in ("backend", "dynamic_batching", "instance_group", "max_batch_size", "platform")
    }


def test_a_recorded_ensemble_gives_its_steps_in_order() -> None:
    cfg = modelconfig.parse(recorded("pipeline"))
    assert (cfg.ensemble, cfg.ensemble_scheduling, cfg.steps, cfg.max_batch_size) == (
        True,
        True,
        ("pre", "core", "post"),
        8,
    )
    assert json.loads(batching_config(cfg) or "")["ensemble_scheduling"] == {}


def test_model_metrics_give_the_histogram_buckets_per_family() -> None:
    config = recorded("fraud_detector") | {
        "model_metrics": {
            "metric_control": [
                {
                    "metric_identifier": {"family": FIRST_RESPONSE},
                    "histogram_options": {"buckets": [500, 1, 100, 10, 1000, 100]},
                },
                {"metric_identifier": {"family": "nv_other"}},  # no histogram options: Triton's defaults
            ]
        }
    }
    cfg = modelconfig.parse(config)
    assert cfg.buckets(FIRST_RESPONSE) == (1.0, 10.0, 100.0, 500.0, 1000.0)  # ascending, distinct
    assert cfg.buckets("nv_other") is None
    assert cfg.histogram_buckets == {FIRST_RESPONSE: (1.0, 10.0, 100.0, 500.0, 1000.0)}


def test_gpu_groups_and_a_decoupled_python_model() -> None:
    cfg = modelconfig.parse(
        {
            "backend": "vllm",
            "max_batch_size": 0,
            "model_transaction_policy": {"decoupled": True},
            "instance_group": [{"kind": "KIND_GPU", "count": 2, "gpus": [0, "1"]}, {"kind": "KIND_GPU"}],
        }
    )
    assert cfg.instance_groups == (InstanceGroup("KIND_GPU", 2, (0, 1)), InstanceGroup("KIND_GPU", 1))
    assert [g.devices for g in cfg.instance_groups] == [2, 1]
    assert placement(cfg) == Placement(((0, 2), (1, 2)), 1)
    assert uncounted.reasons({"llm": uncounted.shape(cfg)}) == {"llm": ("python_backend", "decoupled")}


def _deep(n: int) -> Any:
    return {"max_batch_size": 1, "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [1] * n}]}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], "a model config must be an object"),
        ({"max_batch_size": -1}, "no valid max_batch_size (got -1)"),
        ({"max_batch_size": True}, "no valid max_batch_size (got True)"),
        ({"max_batch_size": 2**31}, "no valid max_batch_size (got 2147483648)"),
        ({"backend": 3}, "backend must be a string"),
        ({"platform": "x" * 2000}, "platform must be a string of at most 1024 characters"),
        (
            {"model_transaction_policy": {"decoupled": "yes"}},
            "model_transaction_policy.decoupled must be a boolean",
        ),
        ({"platform": "ensemble"}, "ensemble_scheduling.step is not a list of model_name"),
        (
            {"platform": "ensemble", "ensemble_scheduling": {"step": [{"model_name": "m"}] * 65}},
            "ensemble_scheduling.step is not a list of model_name",
        ),
        ({"instance_group": {}}, "instance_group must be a list (got dict)"),
        ({"instance_group": [{}] * 1025}, "instance_group: 1025 entries, over 1024"),
        ({"instance_group": [7]}, "instance_group[0] must be an object (got int)"),
        (
            {"instance_group": [{"kind": "KIND_GPU", "count": 10**6}]},
            "instance_group[0].count: not an integer in [0, 100000] (got 1000000)",
        ),
        (
            {"dynamic_batching": {"preferred_batch_size": [0]}},
            "dynamic_batching.preferred_batch_size[0]: not an integer in [1, 2147483647] (got 0)",
        ),
        (
            {"dynamic_batching": {"default_queue_policy": []}},
            "dynamic_batching.default_queue_policy must be an object (got list)",
        ),
        (
            {"input": [{"name": "x", "data_type": 1}]},
            "input[0].data_type must be a string of at most 1024 characters",
        ),
        (_deep(65), "input[0].dims: 65 entries, over 64"),
        (
            {"model_metrics": {"metric_control": [{"histogram_options": {"buckets": ["1"]}}]}},
            "model_metrics.metric_control[0].histogram_options.buckets[0]: not a finite number",
        ),
        (
            {"model_metrics": {"metric_control": [{"metric_identifier": {"family": 7}}]}},
            "model_metrics.metric_control[0].metric_identifier.family must be a string of at most 1024 characters",
        ),
        (
            {"model_metrics": {"metric_control": [{"histogram_options": {"buckets": [1.0] * 1025}}]}},
            "model_metrics.metric_control[0].histogram_options.buckets: 1025 entries, over 1024",
        ),
    ],
)
def test_a_hostile_config_is_refused_in_one_line_naming_the_field(config: object, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        modelconfig.parse(config)
    assert str(exc.value) == message


# -- the client against a server that answers what each case asks


@pytest.fixture()
def answers() -> Iterator[tuple[str, dict[str, Callable[[], tuple[int, bytes]]]]]:
    routes: dict[str, Callable[[], tuple[int, bytes]]] = {}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def _answer(self) -> None:
            if self.command == "POST":
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
            code, body = routes.get(f"{self.command} {self.path}", lambda: (404, b'{"error":"no"}'))()
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", routes
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _json(value: object) -> Callable[[], tuple[int, bytes]]:
    return lambda: (200, json.dumps(value).encode())


def test_the_client_reads_each_endpoint_and_checks_its_shape(answers: Any) -> None:
    base, routes = answers
    client = TritonClient(base, timeout=5)
    assert client.base == base.rstrip("/")
    routes["POST /v2/repository/index"] = _json(
        [
            {"name": "a", "version": "1", "state": "READY"},
            {"name": "b", "version": 2, "state": "UNAVAILABLE"},
            {"name": "unloaded"},
            {"version": "1"},  # no name: skipped
            "junk",
            {"name": 5},
        ]
    )
    assert client.index() == [
        IndexEntry("a", "1", "READY"),
        IndexEntry("b", "2", "UNAVAILABLE"),
        IndexEntry("unloaded", "", ""),
    ]
    routes["GET /v2/models/a%2Fb/versions/1/config"] = _json(recorded("pipeline"))
    assert client.config("a/b", "1").steps == ("pre", "core", "post")
    routes["GET /v2/models/stats"] = _json({"model_stats": [{"name": "a"}]})
    assert client.stats() == [{"name": "a"}]
    routes["GET /v2/models/a/stats"] = lambda: (200, b"")
    assert client.stats("a") == []
    routes["GET /v2/trace/setting"] = _json({"trace_rate": "1000", "trace_mode": "opentelemetry"})
    routes["POST /v2/trace/setting"] = _json({"trace_rate": "10"})
    assert client.trace_settings()["trace_rate"] == "1000"
    assert client.trace_settings({"trace_rate": "10"}) == {"trace_rate": "10"}
    routes["GET /v2/health/ready"] = lambda: (200, b"")
    assert client.ready() is True
    routes["GET /v2/health/ready"] = lambda: (400, b"")
    assert client.ready() is False
    routes["GET /v2/models/a"] = _json({"name": "a", "versions": ["1"]})
    assert client.metadata("a") == {"name": "a", "versions": ["1"]}


@pytest.mark.parametrize(
    ("route", "body", "call", "reason", "message"),
    [
        (
            "POST /v2/repository/index",
            b"{}",
            lambda c: c.index(),
            "bad_json",
            "/v2/repository/index: expected a list",
        ),
        (
            "GET /v2/models/m/config",
            b"[]",
            lambda c: c.config("m"),
            "bad_json",
            "/v2/models/m/config: not a JSON object",
        ),
        (
            "GET /v2/models/m/config",
            b'{"max_batch_size": "many"}',
            lambda c: c.config("m"),
            "bad_json",
            "/v2/models/m/config: no valid max_batch_size (got many)",
        ),
        (
            "GET /v2/models/m/config",
            b"<html>",
            lambda c: c.config("m"),
            "bad_json",
            "/v2/models/m/config: response is not JSON",
        ),
        (
            "GET /v2/models/m/config",
            b'{"max_batch_size": 1e999}',
            lambda c: c.config("m"),
            "bad_number",
            "/v2/models/m/config: number 1e999 out of range",
        ),
        (
            "GET /v2/models/stats",
            b'{"model_stats": "x"}',
            lambda c: c.stats(),
            "bad_json",
            "/v2/models/stats: no model_stats list",
        ),
        (
            "GET /v2/trace/setting",
            b"[1]",
            lambda c: c.trace_settings(),
            "bad_json",
            "/v2/trace/setting: not a JSON object",
        ),
        (
            "GET /v2/models/m/config",
            b"x" * 2000,
            lambda c: c.config("m"),
            "too_large",
            "/v2/models/m/config: payload of 2000 bytes over 1000",
        ),
    ],
)
def test_a_hostile_answer_is_one_line_naming_the_url(
    answers: Any, route: str, body: bytes, call: Callable[[TritonClient], object], reason: str, message: str
) -> None:
    base, routes = answers
    routes[route] = lambda: (200, body)
    with pytest.raises(ScrapeError) as exc:
        call(TritonClient(base, timeout=5, max_bytes=1000))
    assert (exc.value.reason, str(exc.value)) == (reason, base.rstrip("/") + message)


def test_a_refusal_carries_tritons_own_words(answers: Any) -> None:
    base, routes = answers
    routes["GET /v2/models/gone/config"] = lambda: (
        400,
        b'{"error":"Request for unknown model:\\n \'gone\'"}',
    )
    with pytest.raises(ScrapeError) as exc:
        TritonClient(base, timeout=5).config("gone")
    assert (exc.value.reason, str(exc.value)) == (
        "http_status",
        f"{base}v2/models/gone/config: HTTP 400: Request for unknown model: 'gone'",
    )


def test_nothing_listening_is_a_connection_error(answers: Any) -> None:
    base, _routes = answers
    client = TritonClient("http://127.0.0.1:9", timeout=2)
    with pytest.raises(ScrapeError) as exc:
        client.index()
    assert exc.value.reason == "connection"
    assert str(exc.value).startswith("http://127.0.0.1:9/v2/repository/index: cannot connect")


# -- the real Triton


def test_the_real_triton_through_the_client(triton: Any) -> None:
    client = TritonClient(triton.http_url, timeout=10)
    assert client.ready() is True
    index = {(e.name, e.version): e.state for e in client.index()}
    assert index[("fraud_detector", "1")] == "READY" and index[("streamer", "1")] == "READY"
    detector = client.config("fraud_detector")
    recorded_detector = modelconfig.parse(recorded("fraud_detector"))
    # the config the real Triton serves now reads as the one recorded from it
    assert detector == recorded_detector
    streamer = client.config("streamer")
    assert (streamer.backend, streamer.decoupled, streamer.max_batch_size) == ("python", True, 0)
    assert streamer.instance_groups == (InstanceGroup("KIND_CPU", 4),)
    assert [(i.name, i.data_type, i.dims) for i in streamer.inputs] == [
        ("tokens", "TYPE_INT32", (1,)),
        ("ttft_ms", "TYPE_FP32", (1,)),
        ("gap_ms", "TYPE_FP32", (1,)),
    ]
    pipeline = client.config("fraud_pipeline")
    assert pipeline.ensemble and pipeline.steps is not None and len(pipeline.steps) >= 2
    names = {e["name"] for e in client.stats()}
    assert {"fraud_detector", "streamer"} <= names
    assert [e["name"] for e in client.stats("streamer")] == ["streamer"]
    assert client.metadata("streamer")["name"] == "streamer"
    assert "trace_rate" in client.trace_settings()
    with pytest.raises(ScrapeError) as exc:
        client.config("no_such_model")
    assert (exc.value.reason, str(exc.value)) == (
        "http_status",
        f"{client.base}/v2/models/no_such_model/config: HTTP 404: "
        "Request for unknown model: 'no_such_model' is not found",
    )


def test_lenient_reads_a_field_of_another_shape_as_absent() -> None:
    """``init`` proposes from whatever it can read: each bad field takes Triton's default, the rest stand."""
    config = {
        "name": "core",
        "backend": "python",
        "max_batch_size": "8",
        "ensemble_scheduling": [1],
        "response_cache": "yes",
        "model_transaction_policy": 1,
        "instance_group": [{"kind": "KIND_CPU", "count": -1}],
        "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
    }
    with pytest.raises(ValueError, match=r"^no valid max_batch_size \(got 8\)$"):
        modelconfig.parse(config)
    cfg = modelconfig.parse(config, lenient=True)
    assert cfg == ModelConfig(
        name="core",
        backend="python",
        ensemble_scheduling=True,
        inputs=(TensorSpec("x", "TYPE_FP32", (4,)),),
    )
    with pytest.raises(ValueError, match="^a model config must be an object$"):
        modelconfig.parse([], lenient=True)
