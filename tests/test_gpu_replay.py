"""The GPU replay server: labelled payloads whose counters advance at the recorded rates."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from test_gpu_query import DATA, GPU0, GPU1, INTERVAL, load

from tritonwatch import catalog
from tritonwatch.errors import TritonwatchError
from tritonwatch.expfmt import parse
from tritonwatch.local.gpureplay import REPLAY_MARK, TRITON_REPLAY_MARK, GpuReplay, Recording


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return bytes(resp.read())


def test_served_payloads_are_labelled_and_advance_deterministically() -> None:
    clock = FakeClock()
    with GpuReplay(clock=clock) as node:
        dcgm0 = get(node.dcgm_url).decode()
        triton0 = get(node.triton_metrics_url).decode()
        clock.now += INTERVAL
        dcgm1 = parse(get(node.dcgm_url))
        triton1 = parse(get(node.triton_metrics_url))
    assert dcgm0.splitlines()[0] == REPLAY_MARK
    assert triton0.splitlines()[0] == TRITON_REPLAY_MARK
    first, second = load("dcgm_node2gpu_1.txt"), load("dcgm_node2gpu_2.txt")
    assert parse(dcgm0) == second  # at the start: the second snapshot as recorded
    for labels, v in second[catalog.DCGM_ENERGY].items():  # a counter: one more interval's increase
        assert dcgm1[catalog.DCGM_ENERGY][labels] == 2 * v - first[catalog.DCGM_ENERGY][labels]
    assert dcgm1[catalog.DCGM_POWER] == second[catalog.DCGM_POWER]  # gauges stay as recorded
    t1, t2 = load("triton_gpu_node2gpu_1.txt"), load("triton_gpu_node2gpu_2.txt")
    for labels, v in t2[catalog.TRITON_EXEC_COUNT].items():
        assert triton1[catalog.TRITON_EXEC_COUNT][labels] == 2 * v - t1[catalog.TRITON_EXEC_COUNT][labels]
    gpu1 = (("gpu_uuid", GPU1),)
    assert triton1[catalog.TRITON_ENERGY][gpu1] == pytest.approx(
        2 * t2[catalog.TRITON_ENERGY][gpu1] - t1[catalog.TRITON_ENERGY][gpu1], abs=1e-3
    )


def test_failure_modes_and_triton_without_gpu_metrics() -> None:
    with GpuReplay(triton_gpu_metrics=False) as node:
        triton = parse(get(node.triton_metrics_url))
        node.dcgm.fail = "http_500"
        with pytest.raises(urllib.error.HTTPError) as err:
            get(node.dcgm_url)
        node.dcgm.fail = "garbage"
        garbage = get(node.dcgm_url)
    assert err.value.code == 500
    assert b"not the exposition format" in garbage
    assert catalog.TRITON_GPU_UTILIZATION not in triton and catalog.TRITON_ENERGY not in triton
    # the model counters keep their gpu_uuid labels
    assert any(dict(ls).get("gpu_uuid") == GPU0 for ls in triton[catalog.TRITON_INFERENCE_COUNT])


def test_recording_without_interval_is_refused(tmp_path: Path) -> None:
    first = tmp_path / "a_1.txt"
    second = tmp_path / "a_2.txt"
    first.write_text("# TYPE x counter\nx 1\n")
    second.write_text("# TYPE x counter\nx 2\n")
    with pytest.raises(TritonwatchError, match=r"a_2\.txt: no '# replay-interval-seconds N' line"):
        Recording.load(first, second, REPLAY_MARK)
    with pytest.raises(TritonwatchError, match="cannot read replay payload"):
        Recording.load(first, tmp_path / "missing.txt", REPLAY_MARK)


def test_a_recording_line_that_is_no_sample_is_one_line_naming_file_and_line(tmp_path: Path) -> None:
    first, second = tmp_path / "a_1.txt", tmp_path / "a_2.txt"
    second.write_text("# replay-interval-seconds 15\n# TYPE x counter\nx 2\n")
    first.write_text("# TYPE x counter\nx one\n")
    with pytest.raises(TritonwatchError, match=r"^\S*a_1\.txt: line 2: not a sample line: 'x one'$"):
        Recording.load(first, second, REPLAY_MARK)
    first.write_text("# TYPE x counter\nx 1\n")
    second.write_text('# replay-interval-seconds 15\n# TYPE x counter\nx{a="b"}\n')
    with pytest.raises(TritonwatchError, match=r"^\S*a_2\.txt: line 3: not a sample line: 'x\{a=\"b\"\}'$"):
        Recording.load(first, second, REPLAY_MARK)


def test_recorded_files_say_they_are_reconstructions() -> None:
    for path in sorted(DATA.glob("dcgm_*.txt")) + sorted(DATA.glob("triton_gpu_*.txt")):
        head = path.read_text().splitlines()[:3]
        assert head[0].startswith("# replay: recorded"), path
        assert "NOT captured" in " ".join(head + path.read_text().splitlines()[3:6]), path


def test_replayed_triton_api_is_worked_out_of_the_metrics() -> None:
    with GpuReplay(clock=FakeClock()) as node:  # frozen: the stats are the second snapshot's
        req = urllib.request.Request(f"{node.triton_url}/v2/repository/index", data=b"{}", method="POST")
        with urllib.request.urlopen(req, timeout=5) as resp:
            index = json.loads(resp.read())
        stats = json.loads(get(f"{node.triton_url}/v2/models/stats"))
        config = json.loads(get(f"{node.triton_url}/v2/models/bert_base/config"))
        with pytest.raises(urllib.error.HTTPError) as err:
            get(f"{node.triton_url}/v2/models/nope/config")
    assert [(m["name"], m["version"], m["state"]) for m in index] == [
        ("bert_base", "2", "READY"),
        ("resnet50", "1", "READY"),
        ("tokenizer", "1", "READY"),
    ]
    assert all(m["reason"].startswith("replay:") for m in index)
    assert config["max_batch_size"] == 8
    assert err.value.code == 404
    resnet = next(m for m in stats["model_stats"] if m["name"] == "resnet50")
    t2 = load("triton_gpu_node2gpu_2.txt")
    assert resnet["inference_count"] == sum(
        v for ls, v in t2[catalog.TRITON_INFERENCE_COUNT].items() if dict(ls)["model"] == "resnet50"
    )
    (batch,) = resnet["batch_stats"]
    assert batch["batch_size"] == 8
    assert batch["compute_infer"]["ns"] / batch["compute_infer"]["count"] == pytest.approx(11e6, rel=0.01)
