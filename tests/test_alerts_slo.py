"""The SLO file: parsed into typed objects; every invalid input is one line naming file and field."""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from tritonwatch import catalog, slo
from tritonwatch.cli import main
from tritonwatch.errors import UsageError

ROOT = Path(__file__).resolve().parent.parent

VALID: dict[str, Any] = {
    "apiVersion": "tritonwatch/v1",
    "kind": "ServiceLevelObjectives",
    "metadata": {"name": "test"},
    "spec": {
        "window": "28d",
        "slos": [
            {
                "model": "fraud_detector",
                "availability": {"objective": 99.9},
                "latency": {"threshold": "50ms", "objective": 99},
                "queue_time_ratio": {"max": 0.5},
                "capacity": {"max_request_rate": 500},
            }
        ],
    },
}


def edited(path: str, value: object) -> dict[str, Any]:
    """VALID with one dotted path set (``spec.slos.0.availability.objective``); None deletes it."""
    doc = copy.deepcopy(VALID)
    *parents, last = path.split(".")
    node: Any = doc
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if value is None:
        del node[last]
    else:
        node[last] = value
    return doc


def test_repository_slo_file_parses_into_typed_objects() -> None:
    spec = slo.load(ROOT / "alerts" / "slo.yaml")
    assert spec.name == "fraud-platform"
    assert spec.window == 28 * 86400 and spec.window_text == "28d"
    fd = spec.slo_for("fraud_detector")
    # min_requests from the objective: one failure alone reads 2x (1 / (2 x 0.001))
    assert fd.availability == slo.Availability(Decimal("99.9"), min_requests=500)
    assert fd.latency is not None and fd.latency.threshold == 0.05 and fd.latency.objective == Decimal(99)
    assert fd.queue_time_ratio_max == 0.5
    assert fd.capacity == slo.Capacity(max_request_rate=500.0)
    assert [o.name for o in spec.objectives()] == ["fraud_detector-availability", "fraud_detector-latency"]
    assert spec.objectives()[0].budget == Decimal("0.001")


def test_only_availability_for_an_unknown_model_is_valid() -> None:
    doc = edited("spec.slos", [{"model": "not_in_the_repository", "availability": {"objective": 99.5}}])
    spec = slo.parse(doc)
    assert spec.slos == (
        slo.SLO(
            model="not_in_the_repository",
            availability=slo.Availability(Decimal("99.5"), min_requests=100),
        ),
    )
    assert spec.grouping == () and spec.up_job == "triton"
    assert spec.runbook_base_url == slo.DEFAULT_RUNBOOK_BASE_URL


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (
            "spec.slos.0.availability.objective",
            150,
            "spec.slos[0].availability.objective: must be between 0 and 100 (got 150)",
        ),
        (
            "spec.slos.0.availability.objective",
            100,
            "spec.slos[0].availability.objective: must be between 0 and 100",
        ),
        ("spec.slos.0.latency.objective", "abc", "spec.slos[0].latency.objective: must be a number"),
        ("spec.slos.0.availabilty", {"objective": 99}, "spec.slos[0].availabilty: unknown field"),
        ("spec.windo", "28d", "spec.windo: unknown field"),
        ("spec.window", "28x", "spec.window: unknown duration '28x'"),
        ("spec.window", "1d", "spec.window: must be at least 3d"),
        ("spec.slos.0.model", None, "spec.slos[0].model: required"),
        ("spec.slos.0.model", "bad name", "spec.slos[0].model: not a Triton model name"),
        ("spec.slos.0.latency.threshold", "0ms", "spec.slos[0].latency.threshold: must be greater than 0"),
        (
            "spec.slos.0.time_to_first_token",
            {"threshold": "40ms", "objective": 99},
            "spec.slos[0].time_to_first_token.threshold: must be a latency histogram bucket",
        ),
        (
            "spec.slos.0.availability.min_requests",
            2.5,
            "spec.slos[0].availability.min_requests: must be a whole number from 1 to 1000000000 (got 2.5)",
        ),
        (
            "spec.slos.0.availability.min_requests",
            0,
            "spec.slos[0].availability.min_requests: must be a whole number from 1 to 1000000000 (got 0)",
        ),
        ("spec.slos.0.latency.threshold", "fast", "spec.slos[0].latency.threshold: unknown duration 'fast'"),
        (
            "spec.slos.0.queue_time_ratio.max",
            1.5,
            "spec.slos[0].queue_time_ratio.max: must be a ratio between 0 and 1",
        ),
        (
            "spec.slos.0.capacity.max_request_rate",
            0,
            "spec.slos[0].capacity.max_request_rate: must be greater than 0",
        ),
        ("spec.grouping", ["model"], "spec.grouping[0]: not a usable label name"),
        ("spec.runbook_base_url", "docs/runbooks", "spec.runbook_base_url: must be an http(s) URL"),
        ("apiVersion", "tritonwatch/v2", "apiVersion: must be tritonwatch/v1"),
        ("metadata.name", None, "metadata.name: required"),
        ("spec.slos", [], "spec.slos: must be a non-empty list"),
        ("spec.slos", [{"model": "m"}], "spec.slos[0]: needs at least one objective"),
        (
            "spec.alertmanager",
            {"receivers": {"page": {"pagerduty_configs": [{"routing_key": "s3cret"}]}}},
            "spec.alertmanager.receivers.page.pagerduty_configs[0].routing_key: secrets must not be written",
        ),
    ],
)
def test_invalid_fields_are_named(path: str, value: object, message: str) -> None:
    with pytest.raises(UsageError) as err:
        slo.parse(edited(path, value), "slo.yaml")
    text = str(err.value)
    assert text.startswith("slo.yaml: " + message), text
    assert "\n" not in text


def test_any_latency_threshold_is_exact_from_the_model_metrics_buckets() -> None:
    # 30 ms is no trace bucket, but rules' model_metrics stanza makes it one of Triton's own bounds.
    spec = slo.parse(edited("spec.slos.0.latency.threshold", "30ms"))
    lat = spec.slo_for("fraud_detector").latency
    assert lat is not None and lat.threshold == 0.03


def test_min_requests_is_derived_from_the_objective_or_set() -> None:
    assert [slo.default_min_requests(Decimal(o)) for o in ("99", "99.9", "99.99", "90")] == [50, 500, 5000, 5]
    spec = slo.parse(edited("spec.slos.0.availability.min_requests", 40))
    a = spec.slo_for("fraud_detector").availability
    assert a is not None and a.min_requests == 40


def test_duplicate_model_is_named() -> None:
    doc = edited("spec.slos", [{"model": "a", "availability": {"objective": 99}}] * 2)
    with pytest.raises(
        UsageError, match=r"^spec.slos\[1\].model: duplicate model 'a' \(first in spec.slos\[0\]\)$"
    ):
        slo.parse(doc)


def test_every_bucket_boundary_is_a_valid_threshold() -> None:
    for bucket in catalog.DEFAULT_BUCKETS:
        doc = edited("spec.slos.0.latency.threshold", slo.format_duration(bucket))
        latency = slo.parse(doc).slos[0].latency
        assert latency is not None and latency.threshold == bucket


def test_secrets_from_files_are_accepted() -> None:
    receivers = {"page": {"pagerduty_configs": [{"routing_key_file": "/run/secrets/pd"}]}}
    spec = slo.parse(edited("spec.alertmanager", {"receivers": receivers}))
    assert spec.receivers["page"]["pagerduty_configs"][0]["routing_key_file"] == "/run/secrets/pd"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (
            "spec.slos.0.availability.objective",
            150,
            "spec.slos[0].availability.objective: must be between 0 and 100 (got 150)",
        ),
        ("spec.slos.0.latencyy", {"objective": 99}, "spec.slos[0].latencyy: unknown field"),
        ("spec.window", "4 weeks", "spec.window: unknown duration '4 weeks'"),
    ],
)
def test_cli_exits_non_zero_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, value: object, field: str
) -> None:
    f = tmp_path / "slo.yaml"
    f.write_text(yaml.safe_dump(edited(path, value)))
    out = tmp_path / "out"
    code = main(["rules", "--slo", str(f), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and f"{f}: {field}" in err, err
    assert not out.exists()


def test_cli_names_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["rules", "--slo", str(tmp_path / "nope.yaml"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "nope.yaml: cannot read SLO file" in err and err.count("\n") == 1


def test_durations_round_trip() -> None:
    assert slo.parse_duration("50ms", "f") == 0.05
    assert slo.parse_duration("2w", "f") == 14 * 86400
    assert [slo.format_duration(s) for s in (0.05, 0.00025, 300, 3600, 86400 * 28)] == [
        "50ms",
        "0.25ms",
        "5m",
        "1h",
        "28d",
    ]
