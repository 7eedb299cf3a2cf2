"""SLO-bound headroom (exporters/headroom.py) on recorded API state and a fake clock: the estimate is
advise's simulation on the fitted line, it refuses (no value, reason counted) where the data cannot
support one, and it follows a config reload."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.core import Metric

from tritonwatch import catalog, modelconfig
from tritonwatch.advise import observed, simulate
from tritonwatch.exporters import headroom
from tritonwatch.exporters.batching import batching_config
from tritonwatch.exporters.config import resolve
from tritonwatch.exporters.triton import ApiState, BatchStat

ROOT = Path(__file__).resolve().parent.parent

KEY = ("linear", "1")
OBJECTIVE = headroom.Objective(0.25, 0.99)
FIXED, PER_ITEM = 0.05, 0.006
CONFIG = {
    "name": "linear",
    "backend": "python",
    "max_batch_size": 8,
    "dynamic_batching": {"max_queue_delay_microseconds": 0},
    "instance_group": [{"count": 1, "kind": "KIND_CPU"}],
}
SLO = """apiVersion: tritonwatch/v1
kind: ServiceLevelObjectives
metadata: {name: headroom}
spec:
  window: 28d
  slos:
    - model: linear
      latency: {threshold: 250ms, objective: 99}
"""


def stats(executions: dict[int, int]) -> dict[int, BatchStat]:
    """batch_stats of a model whose batch of b costs exactly FIXED + PER_ITEM x b."""
    return {b: BatchStat(n, n * (FIXED + PER_ITEM * b)) for b, n in executions.items()}


class Fake:
    """The sidecar's API state as a part sees it (replaced whole, as TritonApi does), and a clock."""

    def __init__(self, config: dict[str, object] | None, batch: dict[int, BatchStat]) -> None:
        self.now = 1000.0
        self.set(config, batch)

    def set(self, config: dict[str, object] | None, batch: dict[int, BatchStat]) -> None:
        self.state = ApiState(
            ready={KEY: True},
            batch_stats={KEY: batch} if batch else {},
            batching={"linear": batching_config(modelconfig.parse(config))} if config is not None else {},  # type: ignore[dict-item]
        )

    def part(self) -> headroom.Headroom:
        return headroom.Headroom(
            {"linear": OBJECTIVE}, lambda: self.state, lambda: None, 30.0, clock=lambda: self.now
        )


def families(part: headroom.Headroom) -> dict[str, Metric]:
    return {m.name: m for m in part.collect()}


def served(part: headroom.Headroom) -> dict[str, dict[tuple[str, ...], float]]:
    out: dict[str, dict[tuple[str, ...], float]] = {}
    for m in part.collect():
        for s in m.samples:
            out.setdefault(s.name, {})[tuple(s.labels[k] for k in sorted(s.labels))] = s.value
    return out


def expected(config: dict[str, object]) -> float:
    cfg = observed.batching(config, "linear")
    fit = observed.Fit(FIXED, PER_ITEM, 0.0, 0.0, 0.0, ())
    return simulate.slo_capacity(cfg, fit, 0.25, 0.99, 0.0, n=headroom.SIMULATED_REQUESTS)


def test_the_capacity_is_advises_simulation_on_the_fitted_line() -> None:
    fake = Fake(CONFIG, stats({1: 300, 2: 120, 3: 40, 4: 5}))
    part = fake.part()
    part.refresh()
    got = served(part)
    want = expected(CONFIG)
    assert 60 < want < 75  # 8 items in 98 ms at most: 81.6 req/s; the p99 bound is below it
    assert got[catalog.CAPACITY] == {("linear", "1"): pytest.approx(want, rel=1e-9)}
    # batch size 4 has under 20 executions: not in the fit, nor in the basis
    assert got[catalog.CAPACITY_INFO] == {("1,2,3", "linear", "estimated", "1"): 1.0}
    assert got[catalog.CAPACITY_SAMPLES] == {("linear", "1"): 460.0}
    assert got[catalog.CAPACITY_FIT_ERROR][("linear", "1")] == pytest.approx(0.0, abs=1e-9)
    assert catalog.CAPACITY_REFUSALS_TOTAL not in got  # none refused: no series yet
    assert part.refreshed_at == 1000.0


@pytest.mark.parametrize(
    ("config", "batch", "state"),
    [
        (CONFIG, {1: 300, 2: 19, 3: 19}, "too_little_data"),
        (CONFIG, {}, "too_little_data"),
        (CONFIG, {1: 5000}, "single_batch_size"),
        ({**CONFIG, "sequence_batching": {}}, {1: 300, 2: 120, 3: 40}, "sequence_batcher"),
        (
            {
                "name": "pipe",
                "platform": "ensemble",
                "max_batch_size": 8,
                "ensemble_scheduling": {"step": [{"model_name": "linear_step", "model_version": -1}]},
            },
            {1: 300, 2: 120, 3: 40},
            "ensemble",
        ),
        ({**CONFIG, "max_batch_size": 0}, {1: 300}, "no_dynamic_batching"),
        (None, {1: 300, 2: 120, 3: 40}, "no_config"),
        (CONFIG, "zero", "bad_fit"),
    ],
)
def test_refuses_with_no_value_and_counts_the_reason(
    config: dict[str, object] | None, batch: dict[int, int] | str, state: str
) -> None:
    # "zero": executions that took no time (a stub model): a line of 0 bounds nothing
    fake = Fake(config, stats(batch) if batch != "zero" else {b: BatchStat(50, 0.0) for b in (1, 2, 3)})
    part = fake.part()
    part.refresh()
    part.refresh()
    got = served(part)
    assert catalog.CAPACITY not in got
    ((labels, one),) = got[catalog.CAPACITY_INFO].items()
    assert labels[2] == state and one == 1.0
    assert got[catalog.CAPACITY_REFUSALS_TOTAL] == {("linear", state, "1"): 2.0}
    assert state in catalog.CAPACITY_REFUSAL_REASONS


def test_follows_a_config_reload() -> None:
    fake = Fake(CONFIG, stats({1: 300, 2: 120, 3: 40}))
    part = fake.part()
    part.refresh()
    before = served(part)[catalog.CAPACITY][("linear", "1")]
    # The model is reloaded with a second instance: its counters start again from 0 ...
    delayed = {**CONFIG, "instance_group": [{"count": 2, "kind": "KIND_CPU"}]}
    fake.set(delayed, {})
    fake.now += 30
    part.refresh()
    got = served(part)
    assert catalog.CAPACITY not in got
    assert got[catalog.CAPACITY_INFO] == {("", "linear", "too_little_data", "1"): 1.0}
    # ... and once the new configuration has run enough batches, the estimate is of it alone
    fake.set(delayed, stats({2: 30, 3: 80, 4: 200, 5: 60}))
    fake.now += 30
    part.refresh()
    after = served(part)[catalog.CAPACITY][("linear", "1")]
    assert after == pytest.approx(expected(delayed), rel=1e-9)
    # two instances take batches side by side: well over half as much again
    assert after > 1.6 * before
    assert part.refreshed_at == 1060.0


def test_an_idle_model_is_not_simulated_again(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Fake(CONFIG, stats({1: 300, 2: 120, 3: 40}))
    part = fake.part()
    calls: list[str] = []
    real = headroom.estimate

    def counted(model: str, *args: Any) -> headroom.Estimate:
        calls.append(model)
        return real(model, *args)

    monkeypatch.setattr(headroom, "estimate", counted)
    part.refresh()
    first = served(part)
    part.refresh()  # nothing new: the same inputs, the estimate kept
    assert calls == ["linear"] and served(part)[catalog.CAPACITY] == first[catalog.CAPACITY]
    fake.set(CONFIG, stats({1: 310, 2: 120, 3: 40}))  # ten more executions of batch size 1
    part.refresh()
    assert calls == ["linear", "linear"]


def test_a_model_without_a_latency_objective_is_left_out() -> None:
    fake = Fake(CONFIG, stats({1: 300, 2: 120, 3: 40}))
    part = headroom.Headroom({}, lambda: fake.state, lambda: None, 30.0)
    part.refresh()
    assert {m.name: m.samples for m in part.collect()} == {
        catalog.CAPACITY: [],
        catalog.CAPACITY_INFO: [],
        catalog.CAPACITY_SAMPLES: [],
        catalog.CAPACITY_FIT_ERROR: [],
        catalog.CAPACITY_REFUSALS_TOTAL.removesuffix("_total"): [],
        catalog.CAPACITY_OBJECTIVE: [],
    }


def test_objectives_come_from_the_slo_file_by_flag_config_field_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slo = tmp_path / "slo.yaml"
    slo.write_text(SLO)
    assert headroom.load_objectives(str(slo)) == {"linear": OBJECTIVE}
    from tritonwatch.cli import build_parser

    parser = build_parser()
    assert resolve(parser.parse_args(["sidecar", "--slo", str(slo)])).slo == str(slo)
    file = tmp_path / "sidecar.yaml"
    file.write_text(f"slo: {slo}\nheadroom-interval: 20\n")
    cfg = resolve(parser.parse_args(["sidecar", "--config", str(file)]))
    assert (cfg.slo, cfg.headroom_interval) == (str(slo), 20.0)
    monkeypatch.setenv("TRITONWATCH_SLO", str(slo))
    assert resolve(build_parser().parse_args(["sidecar"])).slo == str(slo)


def test_a_bad_slo_file_fails_the_sidecar_at_start_naming_the_flag(tmp_path: Path) -> None:
    from tritonwatch.errors import UsageError
    from tritonwatch.exporters.sidecar import Sidecar

    slo = tmp_path / "slo.yaml"
    slo.write_text("apiVersion: tritonwatch/v1\nspec: {}\n")
    with pytest.raises(UsageError, match="^--slo: "):
        Sidecar.local("http://127.0.0.1:9", "http://127.0.0.1:9/metrics", slo=str(slo))


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--slo", "/nonexistent/slo.yaml"], "--slo"),
        (["--headroom-interval", "90"], "--headroom-interval"),
        (["--headroom-interval", "0"], "--headroom-interval"),
    ],
)
def test_bad_headroom_settings_are_one_line_naming_the_flag(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonwatch.cli import main

    assert main(["sidecar", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err


def test_the_batching_label_carries_what_the_refusals_need() -> None:
    # exporters/batching.py keeps platform and the schedulers' presence: the estimate reads that label
    label = batching_config(
        modelconfig.parse({**CONFIG, "sequence_batching": {"max_sequence_idle_microseconds": 5}})
    )
    assert label is not None and json.loads(label)["sequence_batching"] == {}


def test_the_report_takes_the_sidecars_capacity_where_the_latency_bins_have_no_answer() -> None:
    from datetime import datetime, timedelta, timezone

    import pandas as pd

    from tritonwatch import slo as slo_model
    from tritonwatch.reports import figures
    from tritonwatch.reports.week import ModelWeek, Week

    end = datetime(2026, 11, 30, tzinfo=timezone.utc)
    index = pd.date_range(end - timedelta(days=21), end, freq="5min", inclusive="right")
    # a rate growing 1 req/s a day, peaking at 30 req/s: far from the bins' knee (none in the data)
    rate = pd.Series([30.0 - (end - t).total_seconds() / 86400 for t in index], index=index)
    within = pd.Series(10.0, index=index[-2016:])  # every sampled request within the threshold
    week = Week(
        end - timedelta(days=7),
        end,
        7,
        {
            KEY: ModelWeek(
                "linear", "1", rate=rate, latency_within=within, latency_sampled=within, sidecar_capacity=66.9
            )
        },
        {},
        True,
        history=21,
    )
    slos = slo_model.parse(__import__("yaml").safe_load(SLO))
    (f,), _ = figures.build(week, slos)
    assert f.knee is not None and f.knee.rate is None  # the objective was met at every load seen
    assert f.capacity_source == "headroom"
    assert f.forecast is not None and f.forecast.capacity == 66.9
    row = figures.model_row(f, end)
    assert row["slo_capacity_request_rate"] == row["capacity_request_rate"] == 66.9
    assert figures.SOURCES["headroom"] == "SLO-bound (sidecar)"


def test_the_slo_file_is_followed_and_a_bad_one_counted_not_used(tmp_path: Path) -> None:
    """SloWatch (the sidecar's --slo): a changed file is used from the next refresh; one that does not
    load, or that is gone, is counted once per change and the last good objectives stay."""
    slo = tmp_path / "slo.yaml"
    text = (ROOT / "alerts" / "slo.yaml").read_text()
    slo.write_text(text)
    fake = Fake(CONFIG, stats({1: 300, 2: 120, 3: 40}))
    watch = headroom.SloWatch(str(slo))
    part = headroom.Headroom(
        headroom.objectives(watch.slos), lambda: fake.state, lambda: None, 30.0, watch=watch
    )

    def objective() -> dict[tuple[str, ...], float]:
        return served(part)[catalog.CAPACITY_OBJECTIVE]

    part.refresh()
    assert objective() == {("fraud_detector", "0.99"): 0.05}
    slo.write_text(text.replace("threshold: 50ms, objective: 99}", "threshold: 100ms, objective: 95}"))
    part.refresh()
    assert objective() == {("fraud_detector", "0.95"): 0.1}
    assert part.objectives["fraud_detector"] == headroom.Objective(0.1, 0.95)
    for broken in ("spec: [", text.replace("objective: 99}", "objective: 101}")):
        slo.write_text(broken)
        part.refresh()
        part.refresh()  # the same bad file again: counted once
    slo.unlink()
    part.refresh()
    assert watch.failures == 3 and not watch.ok
    assert served(part)[catalog.SLO_RELOAD_FAILURES_TOTAL] == {(): 3.0}
    assert served(part)[catalog.SLO_RELOAD_SUCCESS] == {(): 0.0}
    assert objective() == {("fraud_detector", "0.95"): 0.1}
    slo.write_text(text)
    part.refresh()
    assert watch.ok and objective() == {("fraud_detector", "0.99"): 0.05}
