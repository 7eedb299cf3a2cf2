"""The two engines of one catalog agree: the sidecar's value and the recording rule's value, same data.

A real Prometheus scrapes the real local Triton and the sidecar, with the generated catalog rules
loaded, while steady load (with some invalid inputs, so errors are real) runs. Each catalog signal is
then read from both: the sidecar's gauge and Prometheus's recording rule, over the same traffic.
"""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tritonwatch import catalog
from tritonwatch.expfmt import parse
from tritonwatch.exporters.sidecar import Sidecar
from tritonwatch.local.load import LoadDriver
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import Prometheus, ScrapeTarget, prometheus_config

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "alerts" / "generated" / "catalog.rules.yml"
MODEL = "fraud_detector"


def prom_value(url: str, query: str) -> float | None:
    with urllib.request.urlopen(
        f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": query}), timeout=5
    ) as r:
        result = json.loads(r.read())["data"]["result"]
    return float(result[0]["value"][1]) if result else None


@pytest.fixture
def stack(triton: Any, tmp_path: Path) -> Iterator[tuple[Sidecar, Prometheus]]:
    if not RULES.is_file():
        pytest.skip(f"{RULES} not generated")
    # The sidecar's window matches what Prometheus has seen: both look at the same traffic.
    sidecar = Sidecar.local(triton.http_url, triton.metrics_url, interval=1.0, window=20.0).start()
    prom = Prometheus(
        tmp_path / "prom",
        prometheus_config(
            [
                ScrapeTarget("triton", f"127.0.0.1:{triton.metrics_port}"),
                ScrapeTarget("tritonwatch", f"127.0.0.1:{sidecar.port}"),
            ],
            [RULES],
        ),
    )
    try:
        prom.wait_ready()
        yield sidecar, prom
    finally:
        prom.stop()
        sidecar.stop()


def test_sidecar_and_recording_rules_agree(triton: Any, stack: tuple[Sidecar, Prometheus]) -> None:
    sidecar, prom = stack
    load = LoadDriver(triton.http_url, model=MODEL, concurrency=6, repeat=3, error_ratio=0.05).start()
    try:
        record = catalog.signal(catalog.REQUEST_RATE).record
        wait_until(
            lambda: prom_value(prom.url, f'{record}{{model="{MODEL}"}}') is not None, 60, "recorded rate"
        )
        deadline = time.monotonic() + 22  # let both windows hold the same steady traffic
        while time.monotonic() < deadline:
            time.sleep(0.5)
        with urllib.request.urlopen(f"http://127.0.0.1:{sidecar.port}/metrics", timeout=5) as r:
            side = parse(r.read())
        compared = []
        for sig in catalog.SIGNALS:
            labels = dict(sig.labels)
            want = {"model": MODEL, "version": "1", **labels}
            mine = next(
                (
                    v
                    for ls, v in side.get(sig.name, {}).items()
                    if all(dict(ls).get(k) == x for k, x in want.items())
                ),
                None,
            )
            selector = ",".join(f'{k}="{v}"' for k, v in want.items())
            if sig.kind == "rate":
                # rate(x[5m]) over a Prometheus with 25 s of data divides by 300 s: compare the same
                # catalog formula over the window both engines have seen instead.
                theirs = prom_value(prom.url, catalog.promql(sig, window="20s", selector=selector))
            else:
                theirs = prom_value(prom.url, f"{sig.record}{{{selector}}}")
            if sig.kind == "gauge":
                continue  # an instant value: the two engines sample it at different moments
            assert mine is not None and theirs is not None, (sig.name, labels, mine, theirs)
            compared.append(sig.name)
            # Same counters, windows of 20 s (sidecar) and 5m-with-20s-of-data (Prometheus): close, not equal.
            tolerance = 0.01 if sig.name == catalog.ERROR_RATIO else 0.0
            assert mine == pytest.approx(theirs, rel=0.25, abs=tolerance), (sig.name, labels, mine, theirs)
        eff_side = next(v for ls, v in side[catalog.BATCH_EFFICIENCY].items() if dict(ls)["model"] == MODEL)
        eff_prom = prom_value(prom.url, f'{catalog.BATCH_EFFICIENCY_RECORD}{{model="{MODEL}"}}')
        assert eff_prom is not None and eff_side == pytest.approx(eff_prom, rel=0.25)
        assert len(compared) >= 9
    finally:
        load.stop()


def test_recording_rules_are_the_catalog_formulas() -> None:
    import yaml

    if not RULES.is_file():
        pytest.skip(f"{RULES} not generated")
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "record" in r]
    for sig in catalog.SIGNALS:
        match = [
            r for r in rules if r["record"] == sig.record and (r.get("labels") or {}) == dict(sig.labels)
        ]
        assert len(match) == 1, (sig.record, sig.labels)
        assert " ".join(match[0]["expr"].split()) == " ".join(catalog.promql(sig, "5m").split())
