"""The canary probe against the real Triton: 1 for a healthy model, 0 for a failing or missing one."""

from __future__ import annotations

import urllib.request
from typing import Any

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.config import SidecarConfig, validate
from tritonwatch.exporters.probe import Probe
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.procs import free_port, wait_until

MODELS = ("fraud_detector", "fail_always", "no_such_model")


def scrape(port: int) -> dict[str, dict[Any, float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return parse(resp.read())


def test_probe_success_and_duration(triton: Any) -> None:
    sidecar = Sidecar.local(
        triton.http_url,
        triton.metrics_url,
        interval=1.0,
        window=10.0,
        probe=",".join(MODELS),
        probe_interval=0.3,
    )
    [probe] = [s for s in sidecar.sources if isinstance(s, Probe)]
    sidecar.start()
    try:
        wait_until(lambda: min(probe.attempts.get(m, 0) for m in MODELS) >= 3, 30, "three probe rounds")
        values = scrape(sidecar.port)
    finally:
        sidecar.stop()
    success = {dict(k)["model"]: v for k, v in values[catalog.PROBE_SUCCESS].items()}
    assert success == {"fraud_detector": 1.0, "fail_always": 0.0, "no_such_model": 0.0}
    counts = {dict(k)["model"]: v for k, v in values[catalog.PROBE_DURATION + "_count"].items()}
    buckets = {frozenset(k): v for k, v in values[catalog.PROBE_DURATION + "_bucket"].items()}
    for model in MODELS:
        # Every probe is counted once, failed ones too (the scrape saw at least the 3 rounds waited for).
        assert 3 <= counts[model] <= probe.attempts[model]
        assert buckets[frozenset({("model", model), ("le", "+Inf")})] == counts[model]
    # The canary's answer from the real model is fast on this CPU: under a second.
    assert buckets[frozenset({("model", "fraud_detector"), ("le", "1.0")})] == counts["fraud_detector"]
    assert "no_such_model" in probe.last_error["no_such_model"]
    # The probe is not a scrape target: tritonwatch_up keeps its fixed targets.
    assert {dict(k)["target"] for k in values[catalog.UP]} <= set(catalog.TARGETS)


def test_an_unreachable_triton_reads_zero() -> None:
    probe = Probe(f"http://127.0.0.1:{free_port()}", ("fraud_detector",), 1.0, 2.0)
    try:
        assert probe.probe("fraud_detector") is False
    finally:
        probe.stop()
    fams = {m.name: m for m in probe.collect()}
    [sample] = fams[catalog.PROBE_SUCCESS].samples
    assert sample.value == 0.0 and sample.labels == {"model": "fraud_detector"}


def test_no_probe_flag_no_probe() -> None:
    from tritonwatch.exporters import probe
    from tritonwatch.exporters.context import standalone

    cfg = validate(SidecarConfig(listen="127.0.0.1:0", triton=f"http://127.0.0.1:{free_port()}"))
    assert probe.make_part(standalone(cfg)) == []
