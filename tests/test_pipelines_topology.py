"""Pipeline topology and step cuts without a Triton: configs in, role and step series out.

The fake Triton serves the index and configs recorded from the real Triton 2.51, plus the config the
real Triton served for the test ensemble ``pipeline`` (``tests/data/triton_config_pipeline.json``,
``GET /v2/models/pipeline/config`` on ``tests/pipeline_models``). Configs are hostile input: a
malformed ensemble is counted as a config error and gets no role rather than a wrong one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_triton import FakeTriton, fake_triton

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.exporters.collector import pipeline_families
from tritonwatch.exporters.steps import StepPart
from tritonwatch.exporters.traces.timing import StepSegment, segments
from tritonwatch.exporters.triton import TritonApi
from tritonwatch.local.modelrepo import entry_models, prepare_copy, read_repository

DATA = Path(__file__).resolve().parent / "data"
PIPELINE = json.loads((DATA / "triton_config_pipeline.json").read_text())
STEP_CONFIG = json.loads((DATA / "triton_config_fraud_detector.json").read_text())


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        server.index = [
            {"name": m, "state": "READY", "version": "1"} for m in ("pipeline", "pre", "core", "post")
        ]
        server.configs = {
            "pipeline": PIPELINE,
            **{m: dict(STEP_CONFIG, name=m) for m in ("pre", "core", "post")},
        }
        yield server


Families = dict[str, dict[tuple[tuple[str, str], ...], float]]


def scraped(fake: FakeTriton) -> tuple[TritonApi, Families, tuple[tuple[str, str], ...]]:
    """One scrape of the fake's API: the source, its pipeline families and the errors it counted."""
    api = TritonApi(fake.base_url, 1.0, 5.0, clock=lambda: 0.0)
    partial = api.scrape()
    families = {}
    for fam in pipeline_families(api.state):
        families[fam.name] = {tuple(sorted(s.labels.items())): s.value for s in fam.samples}
    return api, families, partial.errors


def test_roles_and_steps_come_from_the_configs(fake: FakeTriton) -> None:
    api, families, errors = scraped(fake)
    assert errors == ()
    assert api.state.ensembles == {"pipeline": ("pre", "core", "post")}
    roles = {dict(k)["model"]: dict(k)[catalog.ROLE] for k in families[catalog.MODEL_ROLE_INFO]}
    assert roles == {"pipeline": "ensemble", "pre": "step", "core": "step", "post": "step"}
    steps = {(dict(k)[catalog.STEP], dict(k)[catalog.POSITION]) for k in families[catalog.ENSEMBLE_STEP_INFO]}
    assert steps == {("pre", "1"), ("core", "2"), ("post", "3")}
    assert set(families[catalog.MODEL_ROLE_INFO].values()) == {1.0}


def test_a_bls_caller_seen_in_traces_is_role_bls(fake: FakeTriton) -> None:
    api = TritonApi(fake.base_url, 1.0, 5.0, clock=lambda: 0.0)
    api.scrape()
    (roles, _steps) = pipeline_families(api.state, frozenset({"post", "no_such_model"}))
    got = {s.labels["model"]: s.labels[catalog.ROLE] for s in roles.samples}
    assert got["post"] == "step"  # named in an ensemble's steps: that is what fleet totals need
    assert "no_such_model" not in got  # not READY: no role


@pytest.mark.parametrize(
    "scheduling",
    [None, {"step": "pre"}, {"step": []}, {"step": [{"model_name": 3}]}, {"step": [{"model_name": ""}]},
     {"step": [{"model_name": "m"}] * 65}],
    ids=["missing", "not-a-list", "empty", "name-not-text", "name-empty", "too-many"],
)  # fmt: skip
def test_a_malformed_ensemble_is_a_config_error_and_gets_no_role(
    fake: FakeTriton, scheduling: object
) -> None:
    fake.configs["pipeline"] = dict(PIPELINE, ensemble_scheduling=scheduling)
    api, families, errors = scraped(fake)
    roles = {dict(k)["model"]: dict(k)[catalog.ROLE] for k in families[catalog.MODEL_ROLE_INFO]}
    # Its steps are no longer named anywhere: plain models now, which is what the configs say.
    assert roles == {"pre": "model", "core": "model", "post": "model"}
    assert api.state.ensembles == {} and families[catalog.ENSEMBLE_STEP_INFO] == {}
    assert [reason for reason, _msg in errors] == ["config_bad_json"]
    assert "/v2/models/pipeline/config" in errors[0][1]


# --- cutting an ensemble request at each next step's REQUEST_START -----------------------------------
ROOT = {"REQUEST_START": 1_000, "QUEUE_START": 1_005, "REQUEST_END": 9_000}


def step(start: int, compute: int | None) -> dict[str, int]:
    ev = {"REQUEST_START": start, "QUEUE_START": start + 1}
    if compute is not None:
        ev["COMPUTE_START"] = compute
    return ev


def test_segments_cover_the_request_to_the_nanosecond() -> None:
    # Steps overlap at each hand-off (a step starts before the previous one's COMPUTE_END).
    children = [("post", step(7_000, 7_500)), ("pre", step(1_010, 1_100)), ("core", step(3_000, 4_000))]
    cut = segments(ROOT, children)
    assert cut == (
        StepSegment("pre", 100, 1_900),
        StepSegment("core", 1_000, 3_000),
        StepSegment("post", 500, 1_500),
    )
    assert sum(s.queue_ns + s.compute_ns for s in cut) == ROOT["REQUEST_END"] - ROOT["REQUEST_START"]


def test_a_step_that_never_computed_waited_all_its_segment() -> None:
    cut = segments(ROOT, [("pre", step(1_010, 1_100)), ("core", step(3_000, None))])
    assert cut[-1] == StepSegment("core", 6_000, 0)


@pytest.mark.parametrize(
    "children",
    [[], [("pre", {"QUEUE_START": 5})], [("pre", step(500, 600))], [("pre", step(1_010, 1_100)), ("core", step(9_500, 9_600))]],
    ids=["no-steps", "no-request-start", "before-the-request", "after-the-request"],
)  # fmt: skip
def test_times_that_do_not_line_up_give_no_segments(children: list[tuple[str, dict[str, int]]]) -> None:
    assert segments(ROOT, children) == ()


def test_step_means_are_per_traced_request_and_quantiles_nearest_rank() -> None:
    from tritonwatch.exporters.traces.timing import RequestTiming

    part = StepPart(60.0, clock=lambda: 100.0)
    full = (StepSegment("pre", 1_000_000, 2_000_000), StepSegment("core", 3_000_000, 10_000_000))
    stopped = (StepSegment("pre", 2_000_000, 1_000_000),)  # failed in pre: its chain stops there
    part.record([RequestTiming("pipeline", "1", "t1", "", {"request": 0.016}, steps=full)])
    part.record([RequestTiming("pipeline", "1", "t2", "", {"request": 0.003}, steps=stopped)])
    part.record([RequestTiming("bls", "1", "t3", "", {"request": 0.01}, calls=("pre",))])
    mean, quant, seconds, traced, ends = part.collect()
    got = {(s.labels["step"], s.labels["phase"]): s.value for s in mean.samples}
    # Per traced request of the ensemble (2): core counts 0 for the request that never reached it.
    assert got == {
        ("pre", "queue"): 3_000_000 / 2 / 1e9,
        ("pre", "compute"): 3_000_000 / 2 / 1e9,
        ("core", "queue"): 3_000_000 / 2 / 1e9,
        ("core", "compute"): 10_000_000 / 2 / 1e9,
    }
    assert sum(got.values()) == pytest.approx((0.016 + 0.003) / 2, abs=1e-15)
    q = {
        (s.labels["step"], s.labels["phase"], s.labels["quantile"]): s.value
        for s in quant.samples
        if s.labels["step"] == "pre"
    }
    assert q[("pre", "queue", "0.5")] == 0.001 and q[("pre", "queue", "0.99")] == 0.002
    assert part.bls_models() == frozenset({"bls"})
    # The aggregatable pair: cumulative step time and traced requests, whose ratio is the mean.
    totals = {(s.labels["step"], s.labels["phase"]): s.value for s in seconds.samples}
    assert {k: v / 2 for k, v in totals.items()} == got
    assert [(s.name, s.labels, s.value) for s in traced.samples] == [
        (catalog.ENSEMBLE_TRACED_REQUESTS, {"model": "pipeline", "version": "1"}, 2.0)
    ]
    # Where each chain ended: one went through core, one stopped at pre (it failed there).
    assert {s.labels["step"]: s.value for s in ends.samples} == {"core": 1.0, "pre": 1.0}


# --- the local Triton's repositories ----------------------------------------------------------------
def test_local_triton_serves_ensembles_and_still_refuses_other_platforms(tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parent / "pipeline_models"
    served = prepare_copy(repo, tmp_path / "copy")
    assert [m.name for m in served if m.is_ensemble] == ["pipeline"]
    assert entry_models(read_repository(repo)) == ["bls_pipeline", "pipeline"]
    odd = tmp_path / "odd" / "tf"
    odd.mkdir(parents=True)
    (odd / "config.pbtxt").write_text('name: "tf"\nplatform: "tensorflow_savedmodel"\n')
    with pytest.raises(TritonwatchError, match='platform "tensorflow_savedmodel" has no backend'):
        prepare_copy(tmp_path / "odd", tmp_path / "odd-copy")
