"""Target ``triton_api``: the repository index, model configs and statistics fail independently.

The fake Triton serves the statistics and index JSON recorded from the real local Triton 2.51
(``tests/data/triton_stats_*.json``, ``triton_repository_index.json``); its ``fail_always`` model has no
config (HTTP 400), like a model whose config cannot be read. ``TritonApi`` is stepped by hand under a
fake clock, so every count below is exact (issue 13 cases 3 and 4, issue 17's endpoint intervals).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.fake_triton import FakeTriton, fake_triton

from tritonwatch.cli import build_parser
from tritonwatch.exporters.config import resolve
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.exporters.triton import BatchStat, TritonApi

DATA = Path(__file__).resolve().parent / "data"
INDEX = "/v2/repository/index"
STATS = "/v2/models/stats"
CONFIG_FRAUD = "/v2/models/fraud_detector/config"
CONFIG_FAIL = "/v2/models/fail_always/config"
READY = {("fail_always", "1"): True, ("fraud_detector", "1"): True}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        yield server


def api_of(fake: FakeTriton, clock: Clock, **kw: float) -> TritonApi:
    return TritonApi(fake.base_url, 1.0, 5.0, clock=clock, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("status", [400, 404])
def test_failing_statistics_keep_readiness_and_max_batch_size(fake: FakeTriton, status: int) -> None:
    clock = Clock()
    api = api_of(fake, clock)
    fake.fail_paths[STATS] = status
    assert api.step() is False  # the API is down: its statistics are missing
    assert api.health.up == 0.0
    assert api.state.ready == READY
    assert api.state.max_batch_size == {"fraud_detector": 64}
    assert api.state.batch_stats == {}  # dropped, not served stale
    # each failed endpoint counted under its own reason
    assert api.health.errors == {"stats_http_status": 1.0, "config_http_status": 1.0}

    del fake.fail_paths[STATS]
    clock.now = 1.0
    assert api.step() is True
    assert api.health.up == 1.0
    assert api.state.batch_stats[("fraud_detector", "1")][2].executions == 1212.0
    assert api.state.max_batch_size == {"fraud_detector": 64}
    assert api.health.errors == {"stats_http_status": 1.0, "config_http_status": 2.0}


def test_failing_index_drops_readiness_but_keeps_statistics(fake: FakeTriton) -> None:
    clock = Clock()
    api = api_of(fake, clock)
    fake.fail_paths[INDEX] = 503
    assert api.step() is False
    assert api.state.ready == {} and api.state.max_batch_size == {}  # no readiness, no config asked
    assert api.state.batch_stats[("fraud_detector", "1")][2].executions == 1212.0
    assert api.health.errors == {"index_http_status": 1.0}
    assert fake.requests[CONFIG_FRAUD] == 0


def test_failed_config_backs_off_instead_of_refetching_every_interval(fake: FakeTriton) -> None:
    clock = Clock()
    api = api_of(fake, clock)  # interval 1 s, configs every 300 s
    for t in range(14):  # 14 ticks in 14 s
        clock.now = float(t)
        api.step()
        assert api.health.up == 1.0  # one unreadable config does not mark the API down
    # fail_always: tried at 0, 1, 3, 7 (backoff 1, 2, 4, 8 s), not 14 times; fraud_detector once
    assert fake.requests[CONFIG_FAIL] == 4
    assert fake.requests[CONFIG_FRAUD] == 1
    assert fake.requests[INDEX] == 14 and fake.requests[STATS] == 14
    assert api.health.errors == {"config_http_status": 4.0}
    assert api.state.max_batch_size == {"fraud_detector": 64}
    clock.now = 15.0
    api.step()
    assert fake.requests[CONFIG_FAIL] == 5


def test_each_endpoint_on_its_own_interval(fake: FakeTriton) -> None:
    clock = Clock()
    api = api_of(fake, clock, index_interval=5.0, stats_interval=1.0, config_refresh=4.0)
    assert api.interval == 1.0  # the loop ticks at the shortest endpoint interval
    for t in range(10):
        clock.now = float(t)
        api.step()
    assert fake.requests[STATS] == 10
    assert fake.requests[INDEX] == 2  # t = 0 and 5
    assert fake.requests[CONFIG_FRAUD] == 3  # t = 0, 4 and 8
    assert api.state.ready == READY


def test_endpoint_intervals_from_flag_environment_and_file(
    tmp_path: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "sidecar.yaml"  # type: ignore[operator]
    cfg.write_text("stats_interval: 2\nindex-interval: 20\nmodel_config_interval: 600\n")
    monkeypatch.setenv("TRITONWATCH_STATS_INTERVAL", "3")  # the environment over the file
    args = build_parser().parse_args(["sidecar", "--config", str(cfg), "--index-interval", "30"])
    got = resolve(args)
    assert (got.stats_interval, got.index_interval, got.model_config_interval) == (3.0, 30.0, 600.0)
    monkeypatch.delenv("TRITONWATCH_STATS_INTERVAL")
    defaults = resolve(build_parser().parse_args(["sidecar"]))
    assert (defaults.stats_interval, defaults.index_interval, defaults.model_config_interval) == (
        0.0,
        0.0,
        300.0,
    )


def test_real_statistics_answer_gives_executions_per_batch_size(fake: FakeTriton) -> None:
    """A December 2021 Triton's answer for the *batching* example backend: one execution of batch size 2."""
    real = json.loads((DATA / "real" / "triton_backend_batching_stats.json").read_text())
    fake.stats = real
    fake.index = [{"name": "batching", "state": "READY", "version": "1"}]
    fake.configs["batching"] = {"name": "batching", "max_batch_size": 8}  # the fake's, not recorded
    api = api_of(fake, Clock())
    assert api.step() is True
    compute_ns = 47644 + 116101 + 97925  # batch_stats' input + infer + output for the one execution
    assert api.state.batch_stats == {("batching", "1"): {2: BatchStat(1.0, compute_ns / 1e9)}}
    assert api.state.ready == {("batching", "1"): True}
    assert api.state.max_batch_size == {"batching": 8}


def test_sidecar_hands_the_intervals_to_the_api_source() -> None:
    sidecar = Sidecar.local(
        "http://127.0.0.1:1", "", stats_interval=2.0, index_interval=10.0, model_config_interval=600.0
    )
    try:
        api = sidecar.api
        assert (api.stats_interval, api.index_interval, api.config_refresh) == (2.0, 10.0, 600.0)
        assert api.interval == 2.0  # ticks at the shortest
    finally:
        sidecar.server.httpd.server_close()  # never started: nothing to shut down
