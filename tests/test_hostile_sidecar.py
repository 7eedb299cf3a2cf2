"""Hostile and broken answers from Triton (issue 23 cases 1, 2, 7 and 8): each is refused at its
budget, counted in ``tritonwatch_scrape_errors_total{reason}``, and costs only what it touches.

The long label value runs the real ``tritonwatch sidecar`` process: it is about that process's memory,
its GETs and its SIGTERM. The others run the real sidecar in-process against the fake Triton.
"""

from __future__ import annotations

import json
import math
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from support.fake_triton import FakeTriton, fake_triton
from support.harness import models_served, poll, read_metrics, running_sidecar, value
from support.sidecar import sidecar_argv

from tritonwatch import catalog
from tritonwatch.expfmt import MAX_LABELS_TEXT, LabelSet, Parser, Samples
from tritonwatch.exporters.triton import MAX_BATCH_SIZES, TritonApi
from tritonwatch.fetch import MAX_LINE_BYTES
from tritonwatch.local.procs import Managed, free_port, wait_until

FAST = ["--interval", "0.2", "--timeout", "0.15", "--window", "30"]
BOTH = {"fail_always", "fraud_detector"}


@pytest.fixture()
def fake() -> Iterator[FakeTriton]:
    with fake_triton() as server:
        yield server


def errors(samples: object, target: str, reason: str) -> float:
    return value(samples, catalog.SCRAPE_ERRORS, target=target, reason=reason) or 0.0  # type: ignore[arg-type]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


# --- case 1: one long label value ---------------------------------------------------------------
HOSTILE_MODEL = "m047"


def _per_model(samples: Samples, model: str) -> dict[tuple[str, LabelSet], float]:
    """Every sample the sidecar serves for ``model``, keyed by name and its other labels."""
    return {
        (name, tuple((k, v) for k, v in ls if k != "model")): v
        for name, series in samples.items()
        for ls, v in series.items()
        if dict(ls).get("model") == model
    }


def test_a_5mb_label_line_is_skipped_and_the_other_models_kept_with_bounded_memory(
    tmp_path: Path,
) -> None:
    """Before: one line over 1 MiB stopped the read, and the whole scrape was refused (every model's
    rates and readiness gone while the line was there); before that, the label regex kept a
    backtracking point per character (a 5 MB value peaked at 900 MB and held the GIL for seconds).

    50 models: fraud_detector, fail_always and 48 copies of fraud_detector (``m000``...), so that a
    copy reads, in the same /metrics, exactly what fraud_detector does: the sidecar's rates divide by
    its own scrape times, which no second process could share."""
    fake = FakeTriton(clones=48)
    fake.index = fake.index + [{"name": f"m{i:03d}", "state": "READY", "version": "1"} for i in range(48)]
    fake.start()
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    argv = sidecar_argv(fake.base_url, fake.metrics_url, port, "--timeout", "0.8")
    try:
        with Managed("sidecar", argv, log_path=tmp_path / "sidecar.log") as sidecar:
            wait_until(lambda: _answers(url), 30, "sidecar /metrics")
            clean = poll(port, lambda s: len(models_served(s)) == 50, "50 models served", timeout=30)
            normal = peak_rss_mib(sidecar.pid)
            value_5mb = "x" * (5 * 2**20)
            line = (
                f'nv_inference_request_success{{model="{HOSTILE_MODEL}",version="1",tag="{value_5mb}"}} 1\n'
            )
            fake.extra_lines = line.encode()
            took: list[float] = []

            def skipped_twice(s: object) -> bool:
                took.append(_timed_get(url))
                return errors(s, "triton", "line_too_long") >= 2

            s = poll(port, skipped_twice, "the long line skipped twice", timeout=30)
            assert value(s, catalog.UP, target="triton") == 1.0  # the rest of the payload kept
            assert errors(s, "triton", "parse") == errors(s, "triton", "labels_too_long") == 0.0
            assert len(models_served(s)) == 50
            reference = _per_model(s, "fraud_detector")
            assert reference.keys() == _per_model(clean, "fraud_detector").keys()
            assert reference[(catalog.MODEL_READY, (("version", "1"),))] == 1.0
            assert reference[(catalog.REQUEST_RATE, (("version", "1"),))] > 0
            for i in range(48):
                model = f"m{i:03d}"
                got = _per_model(s, model)
                assert got.keys() == _per_model(clean, model).keys(), model  # no series lost
                # What comes from /metrics is fraud_detector's (the API's statistics are not copied).
                shared = got.keys() & reference.keys()
                assert (catalog.REQUEST_RATE, (("version", "1"),)) in shared
                assert (catalog.MODEL_READY, (("version", "1"),)) in shared
                for key in shared:
                    assert got[key] == pytest.approx(reference[key], rel=1e-9, abs=1e-9), (model, key)
            assert _per_model(s, "fail_always").keys() == _per_model(clean, "fail_always").keys()
            assert value(s, catalog.MODEL_READY, model="fail_always", version="1") == 1.0
            peak = peak_rss_mib(sidecar.pid)
            # The line is dropped as it arrives: at most a MiB of it and a chunk are ever held.
            assert peak < normal + 30, f"peak RSS {peak:.0f} MiB, {normal:.0f} MiB before the long line"
            assert sorted(took)[len(took) // 2] < 0.1, f"GET median {sorted(took)[len(took) // 2]:.3f}s"
            log = (tmp_path / "sidecar.log").read_text()
            # one line naming the source, once while the line stays
            assert log.count(f"{fake.metrics_url}: a line over {MAX_LINE_BYTES} bytes, skipped") == 1
            start = time.monotonic()
            sidecar.signal_group(signal.SIGTERM)
            sidecar.proc.wait(timeout=10)
            assert time.monotonic() - start < 10
            assert sidecar.proc.returncode == 0
    finally:
        fake.stop()


def test_a_label_value_under_the_line_limit_is_skipped_by_the_parser_in_linear_time() -> None:
    """Lines up to MAX_LINE_BYTES reach the parser, which skips one whose label text is over
    MAX_LABELS_TEXT (listed in ``skipped``) and keeps the rest of the payload."""
    long = 'nv_inference_request_success{model="' + "x" * (MAX_LINE_BYTES - 100) + '",version="1"} 1\n'
    ok = 'nv_inference_request_success{model="a",version="1"} 2\n'
    start = time.monotonic()
    parser = Parser()
    out = parser.parse(ok + long + ok.replace('"a"', '"b"'))
    assert time.monotonic() - start < 0.5
    assert dict(out[catalog.TRITON_SUCCESS]) == {
        (("model", "a"), ("version", "1")): 2.0,
        (("model", "b"), ("version", "1")): 2.0,
    }
    assert len(out.skipped) == 1 and f"over {MAX_LABELS_TEXT}" in out.skipped[0]
    assert out.skipped[0].startswith("line 2: labels of ")
    # The same parser, the line gone: read as a fresh parser reads it, nothing skipped.
    again = parser.parse(ok)
    assert dict(again[catalog.TRITON_SUCCESS]) == {(("model", "a"), ("version", "1")): 2.0}
    assert not again.skipped
    ok_long = 'nv_inference_request_success{model="' + "x" * 60_000 + '",version="1"} 1\n'
    assert len(next(iter(Parser().parse(ok_long).values()))) == 1  # under the limit: read as before


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _timed_get(url: str) -> float:
    start = time.monotonic()
    assert requests.get(url, timeout=2).status_code == 200
    return time.monotonic() - start


# --- case 2: one bad model config or statistics entry -------------------------------------------
def test_a_401_digit_max_batch_size_costs_only_that_models_config(fake: FakeTriton) -> None:
    """Before: the config was read as that int, and every render of /metrics failed with an
    OverflowError (empty replies for good) while /-/healthy said 200."""
    fake.configs["fraud_detector"] = {"max_batch_size": 10**400}
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, *FAST]
    with running_sidecar(argv, clock=fake.clock) as sc:
        s = poll(
            sc.port,
            lambda s: models_served(s) == BOTH and errors(s, "triton_api", "config_bad_number") >= 1,
            "models served, the config refused",
        )
        assert value(s, catalog.MODEL_READY, model="fraud_detector", version="1") == 1.0
        assert value(s, catalog.UP, target="triton_api") == 1.0
        assert not s.get(catalog.MAX_BATCH_SIZE)
        fake.configs["fraud_detector"] = {"max_batch_size": 64}


@pytest.mark.parametrize("number", ["Infinity", "1e400", "-Infinity", "NaN", "1" * 401, "-5"])
def test_an_out_of_range_statistic_costs_only_that_models_distribution(fake: FakeTriton, number: str) -> None:
    """Before: ``Infinity`` or ``1e400`` in one model's statistics raised OverflowError, counted as
    ``internal``, and took the whole ``triton_api`` target down: readiness of every model went; a
    negative count cost every model's distribution."""
    body = json.dumps(fake.stats).replace('"count": 1212', f'"count": {number}', 1)
    assert body != json.dumps(fake.stats)
    raw = body.encode()
    api = TritonApi(fake.base_url, 1.0, 5.0)
    api.client.fetcher.request = lambda method, url, b=None: (  # type: ignore[method-assign]
        raw
        if url.endswith("/v2/models/stats")
        else type(api.client.fetcher).request(api.client.fetcher, method, url, b)
    )
    assert api.step() is True
    assert api.state.ready == {("fail_always", "1"): True, ("fraud_detector", "1"): True}
    assert set(api.state.batch_stats) == {("fail_always", "1")}  # fraud_detector's held 1212
    assert api.state.max_batch_size == {"fraud_detector": 64}
    assert api.health.errors == {"stats_bad_json": 1.0, "config_http_status": 1.0}


def test_json_nested_past_the_recursion_limit_is_counted_not_internal(fake: FakeTriton) -> None:
    raw = ('{"model_stats": ' + "[" * 100_000 + "]" * 100_000 + "}").encode()
    api = TritonApi(fake.base_url, 1.0, 5.0)
    api.client.fetcher.request = lambda method, url, b=None: (  # type: ignore[method-assign]
        raw
        if url.endswith("/v2/models/stats")
        else type(api.client.fetcher).request(api.client.fetcher, method, url, b)
    )
    assert api.step() is False  # the statistics failed: triton_api is down, as for any failed read
    assert api.state.ready == {("fail_always", "1"): True, ("fraud_detector", "1"): True}
    assert api.health.errors == {"stats_too_deep": 1.0, "config_http_status": 1.0}


# --- case 7: the cap bounds the cost ---------------------------------------------------------------
def test_200000_batch_sizes_of_one_model_are_refused_before_they_are_read(
    fake: FakeTriton, caplog: pytest.LogCaptureFixture
) -> None:
    """Before: each became a series of tritonwatch_model_batch_executions_total (400,000 for one model)."""
    one = {"batch_size": 1, "compute_infer": {"count": 1, "ns": 1}}
    flood = [{**one, "batch_size": n} for n in range(1, 200_001)]
    for m in fake.stats["model_stats"]:
        if m["name"] == "fraud_detector":
            m["batch_stats"] = flood
    api = TritonApi(fake.base_url, 1.0, 5.0)
    assert api.step() is True
    assert set(api.state.batch_stats) == {("fail_always", "1")}
    assert api.health.errors == {"stats_too_many_batch_sizes": 1.0, "config_http_status": 1.0}
    said = [r.getMessage() for r in caplog.records if "batch sizes" in r.getMessage()]
    assert said == [
        f"triton_api scrape failed: {fake.base_url}/v2/models/stats: model 'fraud_detector': "
        f"200000 batch sizes, over {MAX_BATCH_SIZES}"
    ]


# --- case 8: config reads must not block readiness -------------------------------------------------
def test_hanging_config_endpoint_does_not_hold_back_readiness(fake: FakeTriton) -> None:
    """Before: the configs of all READY models were read one after the other before readiness was
    published: 50 hanging configs left no tritonwatch_model_ready at all for 50 timeouts."""
    fake.index = fake.index + [{"name": f"m{i:03d}", "state": "READY", "version": "1"} for i in range(50)]
    fake.hang_configs = True
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, *FAST]
    with running_sidecar(argv, clock=fake.clock) as sc:
        start = time.monotonic()
        s = poll(
            sc.port,
            lambda s: (
                len(s.get(catalog.MODEL_READY, {})) == 52 and errors(s, "triton_api", "config_timeout") >= 1
            ),
            "readiness of all 52 models while their configs hang",
            timeout=5,  # 50 timeouts of 0.15 s one after the other would take 7.5 s
        )
        assert time.monotonic() - start < 5
        assert all(v == 1.0 for v in s[catalog.MODEL_READY].values())
        assert value(s, catalog.UP, target="triton_api") == 1.0
        read_metrics(sc.port)


# --- case 9: duplicate series; a histogram without +Inf ---------------------------------------------
def test_a_series_twice_in_one_payload_is_refused_and_counted(fake: FakeTriton) -> None:
    """Before: the second value silently replaced the first (which one Triton meant, nobody knows)."""
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, *FAST]
    with running_sidecar(argv, clock=fake.clock) as sc:
        poll(sc.port, lambda s: models_served(s) == BOTH, "both models served")
        fake.extra_lines = b'nv_inference_request_success{model="fraud_detector",version="1"} 1\n'
        s = poll(
            sc.port, lambda s: errors(s, "triton", "duplicate_series") >= 2, "the duplicate refused twice"
        )
        assert value(s, catalog.UP, target="triton") == 0.0 and not s.get(catalog.REQUEST_RATE)
        fake.extra_lines = b""
        poll(sc.port, lambda s: models_served(s) == BOTH, "served again")


def test_buckets_without_inf_give_no_quantile() -> None:
    """Before: cumulative buckets without +Inf still gave a p50 (PromQL's histogram_quantile gives none)."""
    from tritonwatch.exporters.llm import bucket_quantile

    assert bucket_quantile(0.5, [(0.1, 5.0), (0.2, 10.0)]) is None
    assert bucket_quantile(0.5, [(0.1, 5.0), (0.2, 10.0), (math.inf, 10.0)]) == 0.1


def test_label_text_cache_follows_what_is_served_not_every_name_ever_seen() -> None:
    """Before: 6,000 new model names per scrape grew a family's label-text cache towards 500,000."""
    from tritonwatch.exporters import exposition

    key = ("tritonwatch_test_churn", ("model",))
    sizes = []
    texts = exposition.Texts()
    for build in range(40):
        fam = exposition.TextFamily("tritonwatch_test_churn", "churn", ["model"], texts=texts)
        fam.add_many([(f"m{build}-{i}",) for i in range(6000)], [1.0] * 6000)
        exposition.family_text(fam)
        sizes.append(len(texts.prefixes[key]))
    # at most twice the 6,000 served (12,000) before a build starts it afresh, plus that build's own
    assert max(sizes) <= 18_000, max(sizes)
    assert sizes[-1] >= 6000  # and the current build's texts are cached


def test_a_payload_far_over_the_model_cap_is_refused_before_it_is_parsed(fake: FakeTriton) -> None:
    """Before: --max-models cut what was served after every line had been parsed: 800,000 models
    cost 15-44 s and 1.2 GB a scrape. Now the line budget (--max-models x 200 + 10,000) holds first."""
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, "--interval", "0.5"]
    argv += ["--timeout", "0.4", "--window", "30", "--max-models", "5"]
    with running_sidecar(argv, clock=fake.clock) as sc:
        poll(sc.port, lambda s: models_served(s) == BOTH, "both models served")
        fake.extra_lines = b"x 1\n" * 1_000_000  # 4 MB: a million one-sample lines
        s = poll(sc.port, lambda s: errors(s, "triton", "too_many_lines") >= 2, "refused twice")
        assert value(s, catalog.UP, target="triton") == 0.0
        took = value(s, catalog.SCRAPE_DURATION, target="triton")
        assert took is not None and took < 0.3, took  # a fetch and a count, no parse
        fake.extra_lines = b""
        poll(sc.port, lambda s: models_served(s) == BOTH, "served again")


def test_a_flood_of_one_line_models_is_refused_before_it_is_parsed(fake: FakeTriton) -> None:
    """Before: models within the line budget (one line each) were all parsed, then cut to the cap:
    a million of them cost ~17 s and 1.4 GB per scrape."""
    argv = ["--triton", fake.base_url, "--triton-metrics", fake.metrics_url, "--interval", "0.5"]
    argv += ["--timeout", "0.4", "--window", "30", "--max-models", "20"]
    with running_sidecar(argv, clock=fake.clock) as sc:
        poll(sc.port, lambda s: models_served(s) == BOTH, "both models served")
        flood = "".join(
            f'nv_inference_request_success{{model="f{i}",version="1"}} 1\n' for i in range(12_000)
        )
        fake.extra_lines = flood.encode()  # 12,000 lines: under the line budget of 20 x 200 + 10,000
        s = poll(sc.port, lambda s: errors(s, "triton", "too_many_models") >= 2, "refused twice")
        assert value(s, catalog.UP, target="triton") == 0.0
        assert errors(s, "triton", "too_many_lines") == 0.0
        fake.extra_lines = b""
        poll(sc.port, lambda s: models_served(s) == BOTH, "served again")
