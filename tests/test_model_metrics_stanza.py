"""Buckets that fit the SLO (issue 37 item 2): ``rules`` writes ``triton/<model>.model_metrics.pbtxt``,
parsed here by Triton's own ``ModelConfig`` (tritonclient's ``model_config_pb2``, protobuf text format);
``rules --triton`` warns where a model's served buckets do not hold its threshold."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from google.protobuf import json_format, text_format
from support.fake_triton import FakeTriton, fake_triton
from tritonclient.grpc import model_config_pb2

from tritonwatch import catalog, slo
from tritonwatch.alerts import model_metrics
from tritonwatch.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "alerts" / "generated" / "triton"


def spec_doc() -> dict[str, object]:
    return {
        "apiVersion": "tritonwatch/v1",
        "kind": "ServiceLevelObjectives",
        "metadata": {"name": "buckets"},
        "spec": {
            "window": "28d",
            "slos": [
                {"model": "fast", "latency": {"threshold": "25ms", "objective": 99}},
                {
                    "model": "chat",
                    "time_to_first_token": {"threshold": "250ms", "objective": 99},
                    "inter_token_latency": {"threshold": "50ms", "objective": 99},
                },
                {"model": "tiny", "latency": {"threshold": "0.5ms", "objective": 99}},
                {"model": "vllm_chat", "time_to_first_token": {"threshold": "250ms", "objective": 99}},
                {"model": "counted", "availability": {"objective": 99.9}},
            ],
        },
    }


def parsed(text: str) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def buckets_of(config: model_config_pb2.ModelConfig) -> list[float]:
    (control,) = config.model_metrics.metric_control
    assert control.metric_identifier.family == catalog.TRITON_FIRST_RESPONSE
    return list(control.histogram_options.buckets)


def test_the_committed_stanzas_parse_as_triton_model_configs() -> None:
    files = sorted(GOLDEN.glob("*.model_metrics.pbtxt"))
    assert [p.name for p in files] == ["fraud_detector.model_metrics.pbtxt"]
    assert 50.0 in buckets_of(parsed(files[0].read_text()))  # alerts/slo.yaml: fraud_detector 50 ms


def test_rules_writes_one_stanza_per_model_with_a_native_threshold(tmp_path: Path) -> None:
    path = tmp_path / "slo.yaml"
    path.write_text(yaml.safe_dump(spec_doc()))
    out = tmp_path / "out"
    (out / "triton").mkdir(parents=True)
    (out / "triton" / "mine.pbtxt").write_text("# my notes\n")  # not ours: kept
    assert main(["rules", "--slo", str(path), "--out", str(out)]) == 0
    stanzas = sorted(p.name for p in (out / "triton").iterdir())
    assert stanzas == [
        "chat.model_metrics.pbtxt",
        "fast.model_metrics.pbtxt",
        "mine.pbtxt",
        "tiny.model_metrics.pbtxt",
        "vllm_chat.model_metrics.pbtxt",
    ]
    # (model, its thresholds in ms): each among the buckets, with rungs below and above it
    for model, thresholds in (("fast", (25.0,)), ("chat", (250.0,)), ("tiny", (0.5,))):
        buckets = buckets_of(parsed((out / "triton" / f"{model}.model_metrics.pbtxt").read_text()))
        assert buckets == sorted(set(buckets)) and all(b > 0 for b in buckets)
        for t in thresholds:
            assert t in buckets
            assert any(b < t for b in buckets) or t < 1  # Triton counts whole ms: nothing under 1 ms
            assert any(b > t for b in buckets)
    assert buckets_of(parsed((out / "triton" / "fast.model_metrics.pbtxt").read_text())) == [
        2,
        6,
        12,
        18,
        22,
        25,
        27,
        31,
        37,
        50,
        75,
        125,
        250,
    ]
    # The inter-token threshold does not read this histogram: it is not among chat's buckets.
    assert 50.0 not in buckets_of(parsed((out / "triton" / "chat.model_metrics.pbtxt").read_text()))
    # A model left out of the SLO file on a later run loses its stanza; the user's file stays.
    doc = spec_doc()
    doc["spec"]["slos"] = doc["spec"]["slos"][:1]  # type: ignore[index]
    path.write_text(yaml.safe_dump(doc))
    assert main(["rules", "--slo", str(path), "--out", str(out)]) == 0
    assert sorted(p.name for p in (out / "triton").iterdir()) == ["fast.model_metrics.pbtxt", "mine.pbtxt"]


def triton_json(pbtxt: str, name: str) -> dict[str, object]:
    """The config as Triton's API returns it (JSON of the ModelConfig message, proto field names)."""
    config = parsed(pbtxt)
    config.name = name
    return json_format.MessageToDict(config, preserving_proto_field_name=True)


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        yield server


def test_rules_triton_warns_where_served_buckets_miss_the_threshold(
    fake: FakeTriton, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spec = slo.parse(spec_doc())
    stanzas = model_metrics.stanza_files(spec)
    fake.version = "2.65.0"  # keeps Triton's histogram for every model: its buckets are the ones checked
    fake.configs = {
        "fast": triton_json(stanzas["triton/fast.model_metrics.pbtxt"], "fast"),  # applied: no warning
        "chat": {"name": "chat", "backend": "python", "model_transaction_policy": {"decoupled": True}},
        # vLLM's own time-to-first-token histogram feeds its SLI: Triton's buckets do not matter
        "vllm_chat": {
            "name": "vllm_chat",
            "backend": "vllm",
            "model_transaction_policy": {"decoupled": True},
        },
        # tiny: not served
    }
    with caplog.at_level(logging.WARNING):
        lines = model_metrics.check(spec, fake.base_url)
    assert len(lines) == 2
    chat, tiny = lines
    # Triton's defaults 100, 500, 2000, 5000 ms: 250 ms falls between 100 and 500.
    assert chat.startswith("spec.slos[1] (chat): threshold 250 ms is not a bucket of ")
    assert "Triton's defaults: 100, 500, 2000, 5000 ms" in chat
    assert "between 100 ms and 500 ms" in chat and "off by up to 400 ms" in chat
    assert "triton/chat.model_metrics.pbtxt" in chat
    assert tiny.startswith("spec.slos[2] (tiny): latency buckets not checked: ")
    assert [r.getMessage() for r in caplog.records if r.name.endswith("model_metrics")] == lines
    # Through the CLI: the warnings on stderr, the files unchanged.
    path = tmp_path / "slo.yaml"
    path.write_text(yaml.safe_dump(spec_doc()))
    assert main(["rules", "--slo", str(path), "--out", str(tmp_path / "out"), "--triton", fake.base_url]) == 0
    assert (
        (tmp_path / "out" / "triton" / "fast.model_metrics.pbtxt")
        .read_text()
        .endswith(stanzas["triton/fast.model_metrics.pbtxt"])
    )


def test_bounds_around_a_threshold() -> None:
    assert model_metrics.bounds_around((100.0, 500.0), 250.0) == (100.0, 500.0)
    assert model_metrics.bounds_around((100.0, 500.0), 50.0) == (0.0, 100.0)
    assert model_metrics.bounds_around((100.0, 500.0), 900.0)[1] == float("inf")
