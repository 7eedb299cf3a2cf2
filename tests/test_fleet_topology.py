"""The fleet beyond one Prometheus: sharded scrapers remote-writing to VictoriaMetrics, rules on vmalert.

Topology, all real processes on loopback:

* 7 Triton replicas, each with its own sidecar: 2 real local Tritons (the session's, and one more
  serving the bundled model repository), and 5 replays of recorded real payloads (``FakeTriton``: every
  counter advances by one recorded step per scrape);
* 2 Prometheus shards, each keeping the replicas whose fixed name hashes to it (``hashmod``),
  with an external ``shard`` label, remote-writing to one VictoriaMetrics store; each evaluates the
  replica layer of the generated rules (``replica.rules.yml``: alerts on one target's own series)
  and alerts the Alertmanager;
* ``vmalert`` evaluating the global layer (every other generated rule file) against the store, writing
  the records back to it and alerting one Alertmanager (the generated config).

Shown: the fleet request rate recorded by vmalert equals the sum of the replicas' rates read from
the store at the same instant; each of the model's SLOs (availability, latency) burns and pages once
(not per shard or replica);
a replica that joins under load with requests pending from its first scrape (a busy server scaled
up) pages nobody, on vmalert over VictoriaMetrics (which reads ``increase()`` over a series' first
samples as 0) nor on one Prometheus (``whole``) evaluating the same rules over every target; a
replica that goes away (dropped from its shard's targets) pages nobody; every dashboard query
parses on VictoriaMetrics and returns data there wherever it does on a shard.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from conftest import MODEL_REPOSITORY, need_binary
from support import stacks
from support.fake_triton import FakeTriton
from support.vmstack import VictoriaMetrics, VMAlert
from test_dashboards_live import LIVE_BUILTINS

from tritonwatch import catalog
from tritonwatch.alerts import layers, stall
from tritonwatch.dashboards import promcheck
from tritonwatch.dashboards.generate import render_all
from tritonwatch.errors import TritonwatchError
from tritonwatch.local.procs import wait_until
from tritonwatch.local.promstack import Alertmanager, Prometheus, ScrapeTarget, prometheus_config

ROOT = Path(__file__).resolve().parent.parent
MODEL = "fraud_detector"
REPLAYS = 5
SHARDS = 2
BURN = "TritonSLOErrorBudgetBurn"


@dataclass
class Fleet:
    triton_targets: list[str]
    sidecar_targets: list[str]
    shards: list[Prometheus]
    shard_configs: list[dict[str, Any]]
    store: VictoriaMetrics
    alertmanager: Alertmanager
    fakes: list[FakeTriton]
    sidecars: list[Any]
    tmp: Path
    vmalert: VMAlert
    whole: Prometheus  # every target, every rule file: the same rules on Prometheus
    whole_config: dict[str, Any]
    joiner: FakeTriton  # serving from the start, scraped only once the test adds its targets
    joiner_targets: list[ScrapeTarget]


def query(url: str, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"query": expr}
    if at is not None:
        params["time"] = at
    resp = requests.get(f"{url}/api/v1/query", params=params, timeout=10)
    assert resp.status_code == 200, f"{url}: {expr}: {resp.status_code} {resp.text[:300]}"
    return list(resp.json()["data"]["result"])


def scalar(url: str, expr: str, at: float | None = None) -> float | None:
    result = query(url, expr, at)
    assert len(result) <= 1, f"{expr}: {len(result)} series, expected one: {result}"
    return float(result[0]["value"][1]) if result else None


# A label of the target that the scrape drops (Prometheus drops labels starting with "__").
SHARD_KEY = "__tmp_replica"


def shard_config(
    targets: list[ScrapeTarget], shard: int, store: VictoriaMetrics, rules: list[Path], alertmanager: str
) -> dict[str, Any]:
    """One shard of the scrape: keep the targets whose replica name hashes to ``shard``, write to the
    store, evaluate ``rules`` (the replica layer) and alert ``alertmanager``."""
    cfg = prometheus_config(targets, rules, alertmanager=alertmanager)
    keep = [
        {
            "source_labels": [SHARD_KEY],
            "modulus": SHARDS,
            "target_label": "__tmp_shard",
            "action": "hashmod",
        },
        {"source_labels": ["__tmp_shard"], "regex": str(shard), "action": "keep"},
    ]
    for job in cfg["scrape_configs"]:  # type: ignore[attr-defined]
        job["relabel_configs"] = keep
    cfg["global"]["external_labels"] = {"shard": str(shard)}  # type: ignore[index]
    cfg["remote_write"] = [{"url": store.write_url, "queue_config": {"batch_send_deadline": "1s"}}]
    return cfg


def trace_path(tmp: Path, replica: int) -> Path:
    folder = tmp / f"traces{replica}"
    folder.mkdir(exist_ok=True)
    return folder / "trace.json"


def trace_file(durations: list[float], model: str = MODEL) -> list[dict[str, Any]]:
    """Triton's mode=triton trace file (its shape as recorded in ``tests/data/trace_file_sleeper.json``:
    one entry per model header and per timestamp) for requests that took ``durations`` seconds."""
    entries: list[dict[str, Any]] = []
    start = 1_000_000_000_000
    for tid, d in enumerate(durations, 1):
        ns = round(d * 1e9)
        entries.append({"id": tid, "model_name": model, "model_version": 1, "request_id": str(tid)})
        marks = [
            ("REQUEST_START", 0),
            ("QUEUE_START", 1_000),
            ("COMPUTE_START", 2_000),
            ("COMPUTE_INPUT_END", 3_000),
            ("COMPUTE_OUTPUT_START", ns - 2_000),
            ("COMPUTE_END", ns - 1_000),
            ("REQUEST_END", ns),
        ]
        entries += [{"id": tid, "timestamps": [{"name": n, "ns": start + at}]} for n, at in marks]
        start += ns + 10_000
    return entries


def traced_durations(replica: int) -> list[float]:
    """Replica ``replica``'s traced request durations: 40 x replica of them, slower on later replicas."""
    rng = random.Random(replica)
    return [round(rng.lognormvariate(math.log(0.004 * 2**replica), 0.8), 6) for _ in range(40 * replica)]


def _rules(tmp: Path) -> tuple[dict[str, list[Path]], Path]:
    """The generated rule files by layer, and the Alertmanager config."""
    from tritonwatch.cli import main

    out = tmp / "rules"
    assert main(["rules", "--slo", str(ROOT / "alerts" / "slo.yaml"), "--out", str(out)]) == 0
    by_layer: dict[str, list[Path]] = {layer: [] for layer in layers.LAYERS}
    for path in sorted(out.glob("*.rules.yml")):
        by_layer[layers.layer_of(path.name)].append(path)
    return by_layer, out / "alertmanager.yml"


def _groups(path: Path) -> set[str]:
    return {g["name"] for g in yaml.safe_load(path.read_text())["groups"]}


@pytest.fixture
def fleet(platform: stacks.Stack, tmp_path: Path, triton: Any) -> Iterator[Fleet]:
    vm_bin, vmalert_bin = need_binary("victoria-metrics"), need_binary("vmalert")
    need_binary("prometheus")
    need_binary("prometheus-alertmanager")
    from tritonwatch.exporters.sidecar import Sidecar
    from tritonwatch.local.load import LoadDriver
    from tritonwatch.local.triton import LocalTriton

    rule_files, am_config = _rules(tmp_path)
    assert [p.name for p in rule_files[layers.REPLICA]] == [layers.REPLICA_FILE]
    with contextlib.ExitStack() as stack:
        # The second real replica starts first: it is ready while the rest of the fleet comes up.
        second = LocalTriton([MODEL_REPOSITORY], workdir=tmp_path / "triton2")
        stack.callback(second.close)
        second.start()
        store = VictoriaMetrics(vm_bin, tmp_path / "vm")
        stack.callback(store.stop)
        am = Alertmanager(tmp_path / "am", am_config)
        stack.callback(am.stop)
        fakes = [FakeTriton().start() for _ in range(REPLAYS)]
        for f in fakes:
            stack.callback(f.stop)
        joiner = FakeTriton().start()
        joiner.pending = 3  # a busy server: requests pending from its first scrape on
        joiner.frozen = True  # and none completing yet, until the test says
        stack.callback(joiner.stop)
        second.wait_ready(120)
        servers = [(triton.http_url, triton.metrics_url)] + [(f.base_url, f.metrics_url) for f in fakes]
        servers.append((second.http_url, second.metrics_url))
        sidecars = []
        for i, (http_url, metrics_url) in enumerate(servers):
            traces = {"trace_file": str(trace_path(tmp_path, i))} if 1 <= i <= REPLAYS else {}
            side = Sidecar.local(http_url, metrics_url, interval=1, window=10, **traces).start()
            stack.callback(side.stop)
            sidecars.append(side)
        triton_targets = [m.split("/")[2] for _, m in servers]
        sidecar_targets = [f"127.0.0.1:{s.port}" for s in sidecars]
        joiner_side = Sidecar.local(joiner.base_url, joiner.metrics_url, interval=1, window=10).start()
        stack.callback(joiner_side.stop)
        joiner_targets = [
            ScrapeTarget("triton", f"127.0.0.1:{joiner.port}", labels={SHARD_KEY: f"r{len(servers)}"}),
            ScrapeTarget(
                "tritonwatch", f"127.0.0.1:{joiner_side.port}", labels={SHARD_KEY: f"r{len(servers)}"}
            ),
        ]
        # Sharded on a fixed name per replica, not on the address: random ports could hash every
        # target to one shard. Triton and its sidecar go to the same shard, as a per-pod shard would.
        targets = [
            ScrapeTarget("triton", t, labels={SHARD_KEY: f"r{i}"}) for i, t in enumerate(triton_targets)
        ]
        targets += [
            ScrapeTarget("tritonwatch", t, labels={SHARD_KEY: f"r{i}"}) for i, t in enumerate(sidecar_targets)
        ]
        store.wait_ready()
        am.wait_ready()
        replica_rules = rule_files[layers.REPLICA]
        configs = [shard_config(targets, i, store, replica_rules, am.address) for i in range(SHARDS)]
        shards = []
        for i, cfg in enumerate(configs):
            prom = Prometheus(tmp_path / f"shard{i}", cfg)
            stack.callback(prom.stop)
            shards.append(prom)
        vmalert = VMAlert(vmalert_bin, tmp_path / "vmalert", rule_files[layers.GLOBAL], store, am.url)
        stack.callback(vmalert.stop)
        whole_config = prometheus_config(targets, rule_files[layers.GLOBAL] + rule_files[layers.REPLICA])
        whole = Prometheus(tmp_path / "whole", whole_config)
        stack.callback(whole.stop)
        # Live traffic on the real replicas too (light: the machine runs the whole fleet). Started after
        # the last child process: a fork while two load threads ran once warned "release unlocked lock".
        for seed, url in ((25, triton.http_url), (26, second.http_url)):
            load = LoadDriver(url, model=MODEL, concurrency=1, rps=5, seed=seed)
            stack.callback(load.stop)
            load.start()
        for p in [*shards, whole]:
            p.wait_ready()
        vmalert.wait_ready()
        yield Fleet(
            triton_targets,
            sidecar_targets,
            shards,
            configs,
            store,
            am,
            fakes,
            sidecars,
            tmp_path,
            vmalert,
            whole,
            whole_config,
            joiner,
            joiner_targets,
        )


def _retarget(fleet: Fleet, add: list[ScrapeTarget], drop: set[str]) -> None:
    """Every shard and the whole-fleet Prometheus: ``add`` these targets, ``drop`` those addresses."""
    for prom, cfg in [
        *zip(fleet.shards, fleet.shard_configs, strict=True),
        (fleet.whole, fleet.whole_config),
    ]:
        for job in cfg["scrape_configs"]:
            configs = job["static_configs"]
            configs[:] = [sc for sc in configs if not set(sc["targets"]) & drop]
            configs += [
                {"targets": [t.address], "labels": dict(t.labels or {})}
                for t in add
                if t.job == job["job_name"]
            ]
        prom.config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        requests.post(f"{prom.url}/-/reload", timeout=10).raise_for_status()


STALLS = f'ALERTS{{alertname=~"{catalog.MODEL_STALLED_ALERT}|{catalog.SERVER_STALLED_ALERT}"}}'


def _stalls(fleet: Fleet, over: str) -> dict[str, list[Any]]:
    """Any stall alert, pending or firing, on either engine over ``over``: vmalert writes ALERTS to
    the store, the whole-fleet Prometheus keeps its own."""
    expr = f"max_over_time({STALLS}[{over}])"
    return {
        "victoriametrics": query(fleet.store.url, expr),
        "prometheus": query(fleet.whole.url, expr),
        "vmalert now": [a for a in _evaluated(fleet.vmalert) if "Stalled" in a],
    }


def _firing(am: Alertmanager) -> list[dict[str, str]]:
    resp = requests.get(f"{am.url}/api/v2/alerts", params={"active": "true"}, timeout=10)
    resp.raise_for_status()
    return [a["labels"] for a in resp.json()]


def _evaluated(vmalert: VMAlert) -> set[str]:
    """vmalert's active alerts, pending ones (a ``for`` still running) included."""
    resp = requests.get(f"{vmalert.url}/api/v1/alerts", timeout=10)
    resp.raise_for_status()
    return {json.dumps(a["labels"], sort_keys=True) for a in resp.json()["data"]["alerts"]}


def _vmalert_metrics(vmalert: VMAlert) -> list[str]:
    return requests.get(f"{vmalert.url}/metrics", timeout=10).text.splitlines()


def _slowest_rounds(metrics: list[str]) -> dict[str, float]:
    """Per group, vmalert's slowest recent evaluation round (seconds, its 0.99 quantile): a firing
    alert is sent with an expiry 3 evaluation intervals ahead, so a round slower than that (a loaded
    machine) would reach Alertmanager already expired."""
    out: dict[str, float] = {}
    for line in metrics:
        if line.startswith("vmalert_iteration_duration_seconds{") and 'quantile="0.99"' in line:
            group = line.split('group="', 1)[1].split('"', 1)[0]
            out[group] = float(line.rsplit(" ", 1)[1])
    return out


def _diagnosis(fleet: Fleet) -> str:
    """What each hop holds, for a wait that timed out: vmalert's alerts, Alertmanager's (all states)."""
    rows = []
    for a in requests.get(f"{fleet.vmalert.url}/api/v1/alerts", timeout=10).json()["data"]["alerts"]:
        rows.append(f"vmalert {a['state']} {a['labels']} active since {a.get('activeAt')}")
    for a in requests.get(f"{fleet.alertmanager.url}/api/v2/alerts", timeout=10).json():
        rows.append(f"alertmanager {a['status']} {a['labels']} {a['startsAt']} .. {a['endsAt']}")
    # Whether vmalert sent, failed to send, or took longer per round than an alert's 3-interval expiry.
    metrics = _vmalert_metrics(fleet.vmalert)
    keep = ("vmalert_alerts_sent_total", "vmalert_alerts_send_errors_total")
    rows += [line for line in metrics if line.startswith(keep)]
    rows.append(f"slowest rounds: {_slowest_rounds(metrics)}")
    rows.append(f"now {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    return "\n".join(rows)


@pytest.mark.prometheus
def test_sharded_fleet_on_victoriametrics(fleet: Fleet) -> None:
    vm = fleet.store.url
    everyone = set(fleet.triton_targets + fleet.sidecar_targets)
    sel = f'{catalog.MODEL}="{MODEL}"'

    # Each target is scraped by exactly one shard, and both shards scrape some.
    def scraped_by_shard() -> list[set[str]]:
        return [{r["metric"]["instance"] for r in query(p.url, "up")} for p in fleet.shards]

    wait_until(lambda: set().union(*scraped_by_shard()) == everyone, 60, "the shards to find all targets")
    per_shard = scraped_by_shard()
    assert all(per_shard) and not per_shard[0] & per_shard[1], per_shard

    # A replica joins under load, with 3 requests of the model pending from its first scrape and none
    # completing over its first scrapes (a busy server scaled up while its model warms up; a restart
    # or a model load starts series the same way), then completing steadily. VictoriaMetrics reads
    # increase() over a series' first sample as 0, and over a few frozen samples both engines read 0:
    # the stall alerts paged such a replica before they judged only series a whole window old.
    # It joins first: the rest of the test runs while it is watched past its first stall window.
    joined = {t.address for t in fleet.joiner_targets}
    instance = f'instance="127.0.0.1:{fleet.joiner.port}"'
    pending = f"{catalog.TRITON_PENDING}{{{sel},{instance}}}"
    success = f"{catalog.TRITON_SUCCESS}{{{sel},{instance}}}"
    _retarget(fleet, fleet.joiner_targets, set())
    for url in (vm, fleet.whole.url):
        wait_until(
            lambda u=url: scalar(u, pending) == 3, 60, f"the joining replica's pending requests in {url}"
        )
    # Its first 5 samples on each engine complete nothing (vmalert's rounds and the whole Prometheus's
    # evaluations see them); then its requests complete.
    for url in (vm, fleet.whole.url):
        wait_until(
            lambda u=url: (scalar(u, f"count_over_time({success}[1m])") or 0) >= 5,
            60,
            f"5 samples of the joining replica in {url}",
        )
    # (not changes(): VictoriaMetrics counts a series' first sample as a change)
    frozen = f"max_over_time({success}[1m]) - min_over_time({success}[1m])"
    assert scalar(vm, frozen) == scalar(fleet.whole.url, frozen) == 0
    fleet.joiner.frozen = False
    # Everything reaches the store, the joined replica too, with the shard that wrote it.
    wait_until(
        lambda: len(query(vm, "up == 1")) == len(everyone | joined),
        60,
        "every target's up in the store, the joined replica's too",
    )
    joined_at = time.monotonic()
    assert {r["metric"]["shard"] for r in query(vm, "up")} == {"0", "1"}

    # Where the rules run: each shard the replica layer, evaluated without error; vmalert the global one.
    replica_groups = _groups(fleet.tmp / "rules" / layers.REPLICA_FILE)
    global_groups = set().union(*(_groups(p) for p in fleet.vmalert.rule_files))
    assert replica_groups == {layers.REPLICA_GROUP} and not replica_groups & global_groups

    def shard_rules_ok() -> bool:
        for p in fleet.shards:
            groups = requests.get(f"{p.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
            if {g["name"] for g in groups} != replica_groups:
                return False
            if not all(r["health"] == "ok" for g in groups for r in g["rules"]):
                return False
        return True

    wait_until(shard_rules_ok, 60, "both shards to evaluate the replica layer")
    vm_groups = requests.get(f"{fleet.vmalert.url}/api/v1/rules", timeout=10).json()["data"]["groups"]
    assert {g["name"] for g in vm_groups} == global_groups

    # Fleet request rate: vmalert's record equals the sum over replicas at the record's own instant.
    record = catalog.REQUEST_RATE_RECORD
    rate = catalog.promql(catalog.signal(catalog.REQUEST_RATE), "5m", grouping=["instance"], selector=sel)
    seen: list[Any] = []

    def recorded_with_every_replica() -> bool:
        # The latest record, once it was evaluated at an instant where every replica has a rate.
        rows = query(vm, f"timestamp({record}{{{sel}}})")
        if not rows:
            return False
        at = float(rows[0]["value"][1])
        by_replica = query(vm, rate, at)
        seen[:] = [scalar(vm, f"{record}{{{sel}}}", at), by_replica]
        replicas = {*fleet.triton_targets, fleet.joiner_targets[0].address}
        return {r["metric"]["instance"] for r in by_replica} == replicas and all(
            float(r["value"][1]) > 0 for r in by_replica
        )

    wait_until(recorded_with_every_replica, 90, "vmalert's fleet request rate over every replica")
    recorded, by_replica = seen
    assert recorded is not None and recorded > 0
    total = sum(float(r["value"][1]) for r in by_replica)
    assert recorded == pytest.approx(total, rel=1e-12), (recorded, by_replica)
    print(f"fleet request rate {recorded} = sum over {len(by_replica)} replicas {total}")

    # Fleet p99 from the merged histograms of the sidecars lies in the bucket of the exact nearest-rank
    # p99 of the pooled traced requests.
    # The traced replicas' histograms are in the store at zero before their first traced request:
    # increase() then counts every request on both engines (a series whose first sample already
    # counted them read 0 on VictoriaMetrics here, and the latency burn never paged).
    count = f'{catalog.REQUEST_DURATION}_count{{{sel},{catalog.PHASE}="request"}}'
    wait_until(
        lambda: [float(r["value"][1]) for r in query(vm, count)] == [0.0] * REPLAYS,
        60,
        "the traced replicas' histograms at zero in the store",
    )
    pooled: list[float] = []
    for i in range(1, REPLAYS + 1):
        durations = traced_durations(i)
        pooled += durations
        target = trace_path(fleet.tmp, i)
        part = target.with_name("writing.json")
        part.write_text(json.dumps(trace_file(durations)))
        os.replace(part, target)  # Triton writes each file at once
    wait_until(
        lambda: scalar(vm, f"sum({count})") == len(pooled), 60, f"{len(pooled)} traced requests in the store"
    )
    assert scalar(vm, f"sum(increase({count}[5m]))") == len(pooled)
    exact = sorted(pooled)[math.ceil(0.99 * len(pooled)) - 1]
    bounds = [*catalog.DEFAULT_BUCKETS, math.inf]
    upper = next(b for b in bounds if exact <= b)
    lower = max([0.0, *(b for b in bounds if b < upper)])
    buckets = f'{catalog.REQUEST_DURATION}_bucket{{{sel},{catalog.PHASE}="request"}}'
    fleet_p99 = scalar(vm, f"histogram_quantile(0.99, sum by (le) ({buckets}))")
    assert fleet_p99 is not None and lower <= fleet_p99 <= upper, (fleet_p99, exact, lower, upper)
    print(
        f"pooled traced requests: {len(pooled)}, exact p99 {exact}, fleet p99 {fleet_p99} in ({lower}, {upper}]"
    )

    # Each SLO of the model burns (the recorded payloads fail 0.8 % of requests, the traced requests
    # are slow) and pages once, whatever the number of shards and replicas. Each burns faster than its
    # ticket's 3x too: the wait takes the tickets as well, since one that reached Alertmanager only after
    # the replica went away read as a new alert there (the latency ticket once, on a CI run).
    slos = {f"{MODEL}-availability", f"{MODEL}-latency"}
    every_burn = {(slo, severity) for slo in slos for severity in ("page", "ticket")}

    def burns() -> list[dict[str, str]]:
        return [a for a in _firing(fleet.alertmanager) if a.get("alertname") == BURN]

    try:
        wait_until(
            lambda: {(a.get("slo", ""), a.get("severity", "")) for a in burns()} == every_burn,
            90,
            "a burn page and ticket for each SLO",
        )
    except TritonwatchError as e:
        raise AssertionError(f"{e}\n{_diagnosis(fleet)}") from None
    burn = [a for a in burns() if a.get("severity") == "page"]
    print(f"vmalert's slowest rounds (s) by group: {_slowest_rounds(_vmalert_metrics(fleet.vmalert))}")
    assert sorted(a["slo"] for a in burn) == sorted(slos), burn
    assert all(a["model"] == MODEL and "shard" not in a and "instance" not in a for a in burn), burn
    # No stall so far on either engine (every replica's series but the joined one's started with the test).
    assert not any(_stalls(fleet, "10m").values()), _stalls(fleet, "10m")

    before = {json.dumps(a, sort_keys=True) for a in _firing(fleet.alertmanager)}
    # What the fleet's own data makes active (e.g. the recorded batches fill 2 % of max_batch_size:
    # TritonModelBatchEfficiencyLow starts pending) settles first: the same set over 4 evaluations.
    reads: list[set[str]] = []

    def settled() -> bool:
        reads.append(_evaluated(fleet.vmalert))
        return len(reads) >= 4 and all(r == reads[-1] for r in reads[-4:])

    wait_until(settled, 60, "vmalert's active alerts to settle", interval=2)
    pending_before = reads[-1]
    print("firing before the replica goes away:", sorted(json.loads(a)["alertname"] for a in before))

    # A replay replica goes away: its shard drops its two targets (scaled down), the server stops.
    gone = fleet.fakes[0]
    gone_targets = {f"127.0.0.1:{gone.port}", fleet.sidecar_targets[1]}
    _retarget(fleet, [], gone_targets)

    # Service discovery drops the targets before the pod stops, as in a scale-down. Prometheus applies
    # a reload's targets a few seconds later (its discovery updates are throttled): a server stopped at
    # once was scraped down in between, and TritonServerDown went pending (seen once under a full run).
    def scraped_anywhere() -> set[str]:
        active: set[str] = set()
        for prom in [*fleet.shards, fleet.whole]:
            body = requests.get(f"{prom.url}/api/v1/targets", timeout=10).json()
            active |= {t["labels"]["instance"] for t in body["data"]["activeTargets"]}
        return active & gone_targets

    wait_until(lambda: not scraped_anywhere(), 60, "the shards to drop the replica's targets")
    fleet.sidecars[1].stop()
    gone.stop()
    wait_until(
        lambda: len(query(vm, "up")) == len(everyone | joined) - 2,
        60,
        "the store to see the replica gone (stale)",
    )
    # Ten evaluations after: nothing new fires.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        now = {json.dumps(a, sort_keys=True) for a in _firing(fleet.alertmanager)}
        assert now <= before, sorted(now - before)
        # Nor does any alert start pending (one with a `for` longer than this wait would show here).
        active = _evaluated(fleet.vmalert)
        assert active <= pending_before, sorted(active - pending_before)
        time.sleep(1)
    # Every dashboard query parses on VictoriaMetrics and has data there wherever a shard has it.
    dashes = {name: json.loads(data) for name, data in render_all().items()}
    queries = promcheck.collect(dashes)
    variables = {**promcheck.dashboard_variables(dashes.values()), **LIVE_BUILTINS}
    on_vm = {r.query.key: r for r in promcheck.run(vm, queries, variables)}
    bad = [f"{k}: {r.status} {r.error}" for k, r in on_vm.items() if r.status != 200]
    assert not bad, "\n".join(bad)
    on_shards = [{r.query.key: r for r in promcheck.run(p.url, queries, variables)} for p in fleet.shards]
    missing = sorted(k for k, r in on_vm.items() if not r.has_data and any(s[k].has_data for s in on_shards))
    assert not missing, "\n".join(missing)
    print(
        f"dashboard queries: {len(on_vm)}; with data on VictoriaMetrics: "
        f"{sum(r.has_data for r in on_vm.values())}; on shard 0/1: "
        f"{[sum(r.has_data for r in s.values()) for s in on_shards]}"
    )

    # The joined replica, watched past the first stall window (2m for this model) and its first judgement.
    window = stall.seconds(catalog.STALL_WINDOWS[0]) + 20
    while time.monotonic() - joined_at < window:
        stalls = _stalls(fleet, "10m")
        assert not any(stalls.values()), stalls
        time.sleep(2)
    # It was there all along, with requests pending at every sample, and completing.
    for url in (vm, fleet.whole.url):
        assert scalar(url, f"min_over_time({pending}[{catalog.STALL_WINDOWS[0]}])") == 3, url
        assert (scalar(url, f"increase({success}[{catalog.STALL_WINDOWS[0]}])") or 0) > 0, url
    print(
        f"a replica joined with 3 requests pending, 5 scrapes without completions: no stall over {window} s"
    )

    # No stall alert at any evaluation since the test began, on either engine.
    assert not any(_stalls(fleet, "15m").values()), _stalls(fleet, "15m")
