"""The config-placed models' counters (exporters/gpucounters.py) only grow, whatever the placement does."""

from __future__ import annotations

import pytest

from tritonwatch import catalog
from tritonwatch.exporters.gpucounters import ConfigCounters


def totals(c: ConfigCounters) -> dict[tuple[str, str, str], float]:
    fams = {
        f.name: {
            tuple(s.labels[k] for k in ("model", catalog.GPU_UUID, catalog.ATTRIBUTION)): s.value
            for s in f.samples
        }
        for f in c.families()
    }
    return fams[catalog.MODEL_GPU_BUSY_SECONDS.removesuffix("_total")]


def test_each_scrape_is_split_by_the_placement_of_its_time_and_never_taken_back() -> None:
    c = ConfigCounters()
    m = ("llm", "1", "")
    c.add({(m, "busy"): 4.0, (m, "inferences"): 40.0, (("resnet", "1", "GPU-a"), "busy"): 9.0})
    c.settle(c.take(), {"llm": {"GPU-a": 1.0}})
    assert totals(c) == {("llm", "GPU-a", "config"): 4.0}  # rows with a gpu_uuid are not counted here
    # The config moves the model across two GPUs: the next increase splits, the first stays on GPU-a.
    c.add({(m, "busy"): 2.0, (m, "inferences"): 20.0})
    c.settle(c.take(), {"llm": {"GPU-a": 0.5, "GPU-b": 0.5}})
    assert totals(c) == {("llm", "GPU-a", "config"): 5.0, ("llm", "GPU-b", "config"): 1.0}
    assert c.inferences == {("llm", "1", "GPU-a"): 50.0, ("llm", "1", "GPU-b"): 10.0}
    # No placement (a reason) adds nothing; taking again finds nothing left over.
    c.add({(m, "busy"): 7.0})
    c.settle(c.take(), {"llm": "kind_model"})
    assert c.take() == {}
    assert totals(c) == {("llm", "GPU-a", "config"): 5.0, ("llm", "GPU-b", "config"): 1.0}


def test_without_batch_stats_busy_is_the_mean_batch_formula_of_the_increase() -> None:
    c = ConfigCounters()
    m = ("py", "1", "")
    # 3 s of compute counted once per request, 60 inferences in 20 executions: batch 3, 1 s busy
    c.add({(m, "compute"): 3.0, (m, "inferences"): 60.0, (m, "executions"): 20.0})
    c.add({(m, "compute"): 0.0, (m, "inferences"): 0.0, (m, "executions"): 0.0})  # an idle scrape
    c.settle(c.take(), {"py": {"GPU-a": 1.0}})
    assert c.busy == {("py", "1", "GPU-a"): pytest.approx(1.0)}
    assert c.inferences == {("py", "1", "GPU-a"): 60.0}
