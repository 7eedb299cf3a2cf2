"""A wedged model pages in a real Prometheus within 3 minutes; an idle and a busy model beside it never do.

A real local Triton serves three copies of ``tests/models_stall/wedge``: ``wedge`` answers a few
requests (so Prometheus learns its latency, hence its 2m stall window) and then gets requests that
block for ever in ``execute``, the first holding the one instance and the rest pending behind it;
``polled`` keeps answering requests all along; ``idle`` gets nothing after the warm-up. Two real
Prometheus servers side by side, one of each stack (Debian's 2.42 and today's 3.x, scrape and
evaluation every second), scrape that one Triton and run the rules ``tritonwatch rules`` generates:
each must page on its own. The sidecar canary-probes ``wedge`` and ``polled``. Triton is stopped with no
exit timeout (waiting for requests that never finish proves nothing) and its process group killed, so the
blocked python stub does not outlive the test.

The page cannot come sooner than the rule's own 2m window (pending at every scrape, no completion in it;
no ``for:``): the test waits about 121 s of it, and about 10 s more for everything else.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from support import stacks
from support.harness import read_metrics, running_sidecar, value

from tritonwatch import catalog
from tritonwatch.alerts.generate import default_slo
from tritonwatch.cli import main
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import PROMETHEUS_BIN, Prometheus, ScrapeTarget, prometheus_config

ROOT = Path(__file__).resolve().parent
WEDGE_MODEL = ROOT / "models_stall" / "wedge"
MODELS = ("wedge", "polled", "idle")
STALLS = (catalog.MODEL_STALLED_ALERT, catalog.SERVER_STALLED_ALERT)
FIRE_WITHIN = 180.0  # the bound: a page within 3 minutes of the wedge
BLOCKED = 4  # requests sent to the wedged model: one executing, three pending
WARM_UP = 3  # requests each model completes before the wedge

pytestmark = [
    pytest.mark.triton,
    pytest.mark.prometheus,
    pytest.mark.needs(PROMETHEUS_BIN),
]


def repository(tmp: Path) -> Path:
    repo = tmp / "repo"
    for name in MODELS:
        shutil.copytree(WEDGE_MODEL, repo / name)
        config = repo / name / "config.pbtxt"
        config.write_text(config.read_text().replace('name: "wedge"', f'name: "{name}"'))
    return repo


def infer(base: str, model: str, block: float, timeout: float) -> requests.Response:
    body = {"inputs": [{"name": "block", "shape": [1], "datatype": "FP32", "data": [block]}]}
    return requests.post(f"{base}/v2/models/{model}/infer", json=body, timeout=timeout)


def query(prom: Prometheus, expr: str) -> list[dict[str, Any]]:
    resp = requests.get(f"{prom.url}/api/v1/query", params={"query": expr}, timeout=5)
    resp.raise_for_status()
    return list(resp.json()["data"]["result"])


def stall_alerts(prom: Prometheus) -> list[dict[str, Any]]:
    resp = requests.get(f"{prom.url}/api/v1/alerts", timeout=5)
    resp.raise_for_status()
    return [a for a in resp.json()["data"]["alerts"] if a["labels"]["alertname"] in STALLS]


@pytest.fixture
def stack(
    tmp_path: Path, every_stack: dict[str, stacks.Stack]
) -> Iterator[tuple[Any, dict[str, Prometheus]]]:
    """One Triton; one Prometheus of each stack scraping it (the wedge takes 2 minutes to page: both
    stacks watch the same one rather than each waiting out its own)."""
    from tritonwatch.local.triton import LocalTriton

    out = tmp_path / "rules"
    assert main(["rules", "--slo", str(default_slo()), "--out", str(out)]) == 0
    with contextlib.ExitStack() as stop:
        triton = LocalTriton([repository(tmp_path)], exit_timeout=0)
        stop.callback(triton.close)  # SIGTERM, then SIGKILL of the group: the blocked stub included
        triton.start()
        # Prometheus starts while Triton loads its models (the ports are chosen before the start).
        addr, _, path = triton.metrics_url.split("//", 1)[1].partition("/")
        config = prometheus_config(
            [ScrapeTarget("triton", addr, metrics_path="/" + path)],
            rule_files=sorted(out.glob("*.rules.yml")),
            scrape_interval="1s",
            evaluation_interval="1s",
        )
        proms = stacks.prometheus_each(every_stack, tmp_path, config, stop)
        triton.wait_ready(120)
        yield triton, proms


def test_a_wedged_model_pages_within_3_minutes_and_idle_or_busy_ones_never(
    stack: tuple[Any, dict[str, Prometheus]],
) -> None:
    triton, proms = stack
    base = triton.http_url
    window = catalog.STALL_WINDOW_RECORD

    def counters_scraped() -> bool:  # at 0: no request yet, so the warm-up shows as an increase
        return all(
            {r["metric"]["model"] for r in query(prom, catalog.TRITON_SUCCESS)} == set(MODELS)
            for prom in proms.values()
        )

    wait_until(
        counters_scraped, 30, f"{catalog.TRITON_SUCCESS} of every model in each Prometheus", interval=0.2
    )
    for name in MODELS:  # warm-up: every model completes requests, so each has a latency
        for _ in range(WARM_UP):
            assert infer(base, name, 0, 10).ok

    def windows_known() -> bool:
        return all(
            {r["metric"]["model"]: r["value"][1] for r in query(prom, window)} == dict.fromkeys(MODELS, "120")
            for prom in proms.values()
        )

    wait_until(windows_known, 60, f"{window} = 120 s for every model in each Prometheus", interval=0.2)

    done = threading.Event()
    hung: list[BaseException] = []

    def blocked_client() -> None:
        try:
            infer(base, "wedge", 1, 600)
        except requests.RequestException as exc:  # ends when Triton is stopped
            hung.append(exc)

    polled: list[bool] = []

    def poller() -> None:
        while not done.is_set():
            try:
                polled.append(infer(base, "polled", 0, 10).ok)
            except requests.RequestException:
                polled.append(False)
            done.wait(0.1)

    wedged_at = time.monotonic()
    clients = [threading.Thread(target=blocked_client, daemon=True) for _ in range(BLOCKED)]
    polling = threading.Thread(target=poller, daemon=True)
    for t in [*clients, polling]:
        t.start()

    seen: dict[str, dict[str, str]] = {}
    fired_after: dict[str, float] = {}
    probe = ["--probe", "wedge,polled", "--probe-interval", "2"]
    with running_sidecar(["--triton", base, "--triton-metrics", triton.metrics_url, *probe]) as sidecar:

        def model_alert_firing() -> bool:
            for name, prom in proms.items():
                alerts = stall_alerts(prom)
                for a in alerts:
                    seen.setdefault(
                        f"{name}: {a['labels']['alertname']}/{a['labels'].get('model', '')}", a["labels"]
                    )
                if name not in fired_after and any(a["state"] == "firing" for a in alerts):
                    fired_after[name] = time.monotonic() - wedged_at
            assert set(seen) <= {f"{name}: {catalog.MODEL_STALLED_ALERT}/wedge" for name in proms}, seen
            return set(fired_after) == set(proms)

        wait_until(
            model_alert_firing, FIRE_WITHIN + 30, "TritonModelStalled for wedge on each stack", interval=0.25
        )
        print(
            "TritonModelStalled fired after the wedge: "
            + ", ".join(f"{n} {s:.0f} s" for n, s in fired_after.items())
        )
        assert all(s < FIRE_WITHIN for s in fired_after.values()), fired_after
        # The canary probe counts each unanswered request as a timeout.
        metrics = read_metrics(sidecar.port)
        timeouts = value(metrics, catalog.PROBE_REQUESTS, model="wedge", result="timeout")
        assert timeouts is not None and timeouts >= 1, metrics.get(catalog.PROBE_REQUESTS)
        assert value(metrics, catalog.PROBE_REQUESTS, model="wedge", result="success") == 0
        assert value(metrics, catalog.PROBE_SUCCESS, model="wedge") == 0
        assert value(metrics, catalog.PROBE_SUCCESS, model="polled") == 1
    for prom in proms.values():
        (alert,) = [a for a in stall_alerts(prom) if a["state"] == "firing"]
        assert alert["labels"]["model"] == "wedge" and alert["labels"]["severity"] == "page"
        # BLOCKED - 1 pending behind the one executing; the probes add theirs until they time out.
        assert float(alert["value"]) >= BLOCKED - 1
        # Over the whole run, the stall rules never held for the idle or the busy model, nor the server.
        over = f"{int(time.monotonic() - wedged_at) + 60}s"
        never = f'max_over_time(ALERTS{{alertname=~"{"|".join(STALLS)}",model!="wedge"}}[{over}])'
        assert query(prom, never) == []
    # The poller ends before Triton stops: a request in flight at the stop failed once (1 of 1,164).
    done.set()
    polling.join(30)
    assert not polling.is_alive()
    triton.stop()
    for t in clients:
        t.join(30)
        assert not t.is_alive()
    assert len(hung) == BLOCKED  # every blocked client waited until Triton was stopped
    # The model beside the wedged one answered every request (a few hundred) all along.
    assert len(polled) > 100 and all(polled), (len(polled), polled.count(False))
