"""The GPU recording rules and the capacity report cover models placed by their config (issue 30).

Prometheus never sees model configs, so the sidecar exports what the rules need for a model whose
counters carry no ``gpu_uuid``: ``tritonwatch_model_gpu_busy_seconds_total`` and
``tritonwatch_model_gpu_inferences_total`` (``attribution="config"``). The data: the real H200 capture
(``tests/data/real/h200/``) replayed as a server whose counters grow linearly from 0 (Triton just
started) to the capture over ``SPAN`` seconds, plus ``resnet50``, a model whose counters *do* carry
the H200's ``gpu_uuid``, on the same GPU. The sidecar scrapes every ``STEP`` seconds; its exposition
and Triton's, timestamped, are backfilled into a real Prometheus, which evaluates the catalog's rules.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import requests
from support import stacks
from support.backfill import openmetrics_to_blocks, serve
from support.static_endpoint import StaticEndpoint
from test_gpu_config_attribution import COMPUTE, H200_DIR, H200_GPU, PAYLOAD, pbtxt_instance_groups, values

from tritonwatch import catalog
from tritonwatch.expfmt import Samples, parse
from tritonwatch.exporters.gpu import GpuPart, TritonGpuWindow
from tritonwatch.exporters.placement import placement
from tritonwatch.exporters.triton import ApiState, TritonMetrics
from tritonwatch.exporters.window import CounterWindow
from tritonwatch.local.promstack import Prometheus
from tritonwatch.reports import week
from tritonwatch.reports.promapi import PromClient

pytestmark = [
    pytest.mark.prometheus,
    pytest.mark.needs("promtool", "prometheus"),
    pytest.mark.usefixtures("platform"),
]

SPAN = 600  # s from Triton's start to the capture
STEP = 15  # s between scrapes
RESTART = 300  # s: the sidecar restarts here (Triton does not)
WINDOW = "2m"  # the rules' window; the sidecar's is 120 s too
BASE = int(datetime.now(UTC).timestamp()) // 3600 * 3600 - 2 * 3600  # inside retention, whole hours
# resnet50 at the capture: batch 8 (80,000 inferences in 10,000 executions), 400 s of compute counted
# once per request, so 50 s of GPU time; its counters carry the H200's gpu_uuid.
RESNET = {
    catalog.TRITON_INFERENCE_COUNT: 80000.0,
    catalog.TRITON_EXEC_COUNT: 10000.0,
    catalog.TRITON_SUCCESS: 80000.0,
    catalog.triton_duration("compute_input"): 40e6,
    catalog.triton_duration("compute_infer"): 340e6,
    catalog.triton_duration("compute_output"): 20e6,
}
SIDECAR_COUNTERS = (catalog.MODEL_GPU_BUSY_SECONDS, catalog.MODEL_GPU_INFERENCES)


def at(real: str, fraction: float) -> str:
    """The capture with every value scaled by ``fraction`` and resnet50's series beside mlp_gpu's."""
    out = []
    for ln in real.splitlines():
        if ln.startswith("#") or not ln.strip():
            out.append(ln)
            continue
        head, _, value = ln.rpartition(" ")
        out.append(f"{head} {float(value) * fraction:.17g}")
        family = head.partition("{")[0]
        if family in RESNET and 'model="mlp_gpu"' in head and "reason=" not in head:
            labels = f'{{gpu_uuid="{H200_GPU}",model="resnet50",version="1"}}'
            out.append(f"{family}{labels} {RESNET[family] * fraction:.17g}")
    return "\n".join(out) + "\n"


def by(samples: Samples, name: str, *labels: str) -> dict[tuple[str, ...], float]:
    return {tuple(dict(ls)[k] for k in labels): v for ls, v in samples.get(name, {}).items()}


def exposition(part: GpuPart) -> Samples:
    out: Samples = {}
    for fam in part.collect():
        for s in fam.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


def om_line(name: str, labels: tuple[tuple[str, str], ...], value: float, ts: int) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{text}}} {value:.17g} {ts}"


class Replayed:
    """The replayed server and the sidecar over it: the sidecar's gauges at the end, and both
    expositions at every scrape as OpenMetrics."""

    def __init__(self) -> None:
        real = PAYLOAD.read_text()
        state = ApiState(
            placement={
                m: placement(pbtxt_instance_groups(H200_DIR / f"{m}.config.pbtxt"))
                for m in ("mlp_gpu", "mlp_heavy")
            }
        )
        now = [0.0]
        endpoint = StaticEndpoint(at(real, 0.0).encode()).start()
        lines: dict[str, list[str]] = {}

        def sidecar() -> tuple[TritonMetrics, GpuPart]:
            metrics = TritonMetrics(
                endpoint.url, CounterWindow(120.0), 1.0, 5.0, 1 << 26, clock=lambda: now[0]
            )
            gpu = TritonGpuWindow(120.0, lambda: state)
            metrics.snapshots.subscribe(gpu.observe)
            return metrics, GpuPart(metrics.snapshots, gpu, None)

        try:
            metrics, part = sidecar()
            for t in range(0, SPAN + 1, STEP):
                now[0] = float(t)
                if t == RESTART:
                    metrics, part = sidecar()  # the sidecar restarts: its counters begin again at 0
                payload = at(real, t / SPAN)
                endpoint.payload = payload.encode()
                assert metrics.step()
                self.sidecar = exposition(part)
                for source, names in (
                    (parse(payload.encode()), (*RESNET, catalog.TRITON_ENERGY)),
                    (self.sidecar, SIDECAR_COUNTERS),
                ):
                    for name in names:
                        for ls, v in source.get(name, {}).items():
                            lines.setdefault(name, []).append(om_line(name, ls, v, BASE + t))
        finally:
            endpoint.stop()
        self.real = real
        self.om = "\n".join(ln for family in lines.values() for ln in family) + "\n# EOF\n"


@pytest.fixture(scope="module")
def replayed() -> Replayed:
    return Replayed()


@pytest.fixture(scope="module")
def prom(
    platform: stacks.Stack, replayed: Replayed, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    work = tmp_path_factory.mktemp("gpu-config-rules")
    om = work / "replay.om"
    om.write_text(replayed.om)
    openmetrics_to_blocks(om, work / "blocks")
    server = serve([work / "blocks"], work)
    try:
        yield server
    finally:
        server.stop()


def instant(prom: Prometheus, expr: str, *labels: str, when: int = SPAN) -> dict[tuple[str, ...], float]:
    resp = requests.get(f"{prom.url}/api/v1/query", params={"query": expr, "time": BASE + when}, timeout=10)
    resp.raise_for_status()
    return {
        tuple(r["metric"].get(k, "") for k in labels): float(r["value"][1])
        for r in resp.json()["data"]["result"]
    }


def busy_by_hand(real: str) -> dict[str, float]:
    """GPU seconds over the span: compute x executions / inferences, from the capture and RESNET."""
    compute = {m: sum(values(real, f)[m] for f in COMPUTE) * 1e-6 for m in ("mlp_gpu", "mlp_heavy")}
    inferences, executions = (
        values(real, catalog.TRITON_INFERENCE_COUNT),
        values(real, catalog.TRITON_EXEC_COUNT),
    )
    busy = {m: compute[m] * executions[m] / inferences[m] for m in compute}
    busy["resnet50"] = sum(RESNET[f] for f in COMPUTE) * 1e-6 * 10000 / 80000
    return busy


def test_sidecar_counts_config_placed_busy_seconds_and_inferences_from_its_start(replayed: Replayed) -> None:
    keys = ("model", "version", catalog.GPU_UUID, catalog.ATTRIBUTION)
    busy = by(replayed.sidecar, catalog.MODEL_GPU_BUSY_SECONDS, *keys)
    inferences = by(replayed.sidecar, catalog.MODEL_GPU_INFERENCES, *keys)
    hand = busy_by_hand(replayed.real)
    counts = values(replayed.real, catalog.TRITON_INFERENCE_COUNT)
    # Only the config-placed models: resnet50's gpu_uuid counters are the rules' own input.
    # Counted from the restarted sidecar's first scrape: the second half of the span.
    seen = (SPAN - RESTART) / SPAN
    want = {(m, "1", H200_GPU, "config"): hand[m] * seen for m in ("mlp_gpu", "mlp_heavy")}
    assert busy == pytest.approx(want, rel=1e-9)
    assert busy[("mlp_gpu", "1", H200_GPU, "config")] == pytest.approx(12.528254 * 4120 / 8029 / 2, rel=1e-6)
    assert inferences == pytest.approx({k: counts[k[0]] * seen for k in want}, rel=1e-9)
    assert inferences[("mlp_gpu", "1", H200_GPU, "config")] == pytest.approx(8029.0 / 2)


def test_a_sidecar_restart_is_a_counter_reset_to_prometheus(platform: stacks.Stack, prom: Prometheus) -> None:
    counter = f'{catalog.MODEL_GPU_BUSY_SECONDS}{{model="mlp_gpu"}}'
    assert instant(prom, f"resets({counter}[{SPAN}s])", "model") == {("mlp_gpu",): 1.0}
    # A window across the restart loses only the interval in which the new sidecar took its starting
    # point, never a negative or absurd rate. Prometheus 2's closed [240, 360] holds samples at
    # 240..285 and 315..360 s: 105 s counted in 120. Prometheus 3's (240, 360] starts at 255: 90 s
    # counted in 105 sampled, extrapolated by the 15 s to the window's start (within 1.1 intervals).
    per_second = 12.528254 * 4120 / 8029 / SPAN
    counted = 90 / 105 if platform.prometheus_major >= 3 else 105 / 120
    across = instant(prom, f"rate({counter}[{WINDOW}])", "model", when=RESTART + 60)
    assert across == pytest.approx({("mlp_gpu",): per_second * counted}, rel=1e-6)


def test_busy_share_rule_covers_config_placed_models_on_a_shared_gpu(
    replayed: Replayed, prom: Prometheus
) -> None:
    keys = ("model", "version", catalog.GPU_UUID)
    rule = instant(prom, catalog.gpu_busy_ratio_promql(WINDOW), *keys)
    ours = by(replayed.sidecar, catalog.MODEL_GPU_BUSY, *keys)
    hand = busy_by_hand(replayed.real)
    truth = {(m, "1", H200_GPU): b / sum(hand.values()) for m, b in hand.items()}
    assert set(rule) == set(ours) == set(truth)
    assert rule == pytest.approx(truth, rel=1e-6)
    assert ours == pytest.approx(truth, rel=1e-6)
    assert rule[("resnet50", "1", H200_GPU)] == pytest.approx(
        50 / (50 + hand["mlp_gpu"] + hand["mlp_heavy"]), rel=1e-4
    )
    seconds = instant(prom, catalog.gpu_busy_seconds_promql(WINDOW), "model")
    assert seconds == pytest.approx({(m,): b / SPAN for m, b in hand.items()}, rel=1e-6)


def test_energy_per_inference_rule_covers_config_placed_models(replayed: Replayed, prom: Prometheus) -> None:
    rule = instant(prom, catalog.energy_per_inference_promql(WINDOW), "model", "version")
    ours = by(replayed.sidecar, catalog.MODEL_ENERGY_PER_INFERENCE, "model", "version")
    hand = busy_by_hand(replayed.real)
    inferences = {**values(replayed.real, catalog.TRITON_INFERENCE_COUNT), "resnet50": 80000.0}
    joules = 3017.192  # nv_energy_consumption at the capture: every joule since Triton started
    truth = {(m, "1"): b / sum(hand.values()) * joules / inferences[m] for m, b in hand.items()}
    assert set(rule) == set(ours) == set(truth)
    assert rule == pytest.approx(truth, rel=1e-6)
    assert ours == pytest.approx(truth, rel=1e-6)
    # every joule is attributed, to one kind of model or the other
    assert sum(rule[(m, "1")] * inferences[m] for m in hand) == pytest.approx(joules, rel=1e-6)


def test_report_gpu_columns_include_config_placed_models(
    platform: stacks.Stack, replayed: Replayed, prom: Prometheus
) -> None:
    end = datetime.fromtimestamp(BASE + SPAN, UTC)
    got = week.collect(PromClient(prom.url, timeout=30), end, days=1)
    # The report's day holds the restart: the sidecar's counters hold 585 of the 600 s, all but the
    # 15 s from the old sidecar's last scrape to the new one's starting point, less what increase()
    # leaves of the counters' first value (15 s worth, at 15 s). Prometheus 2.42 extrapolates to zero
    # (15.4 s, under 1.1 mean intervals): all of it. 3.16 first caps an extrapolation that long at
    # half a mean interval, then at zero: half of it. Triton's counters start at 0: whole.
    seen = (SPAN - STEP - (STEP / 2 if platform.prometheus_major >= 3 else 0)) / SPAN
    busy = {m: b * (seen if m != "resnet50" else 1.0) for m, b in busy_by_hand(replayed.real).items()}
    success = {**values(replayed.real, catalog.TRITON_SUCCESS), "resnet50": 80000.0}
    joules = 3017.192
    for m, b in busy.items():
        row = got.models[(m, "1")]
        assert row.gpus == (H200_GPU,), m
        assert row.gpu_seconds_per_request == pytest.approx(b / success[m], rel=1e-6), m
        want = b / sum(busy.values()) * joules / success[m]
        assert row.joules_per_request == pytest.approx(want, rel=1e-6), m
