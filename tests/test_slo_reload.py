"""The sidecar follows its SLO file as Kubernetes updates a mounted ConfigMap: the kubelet writes the new
files into a fresh hidden folder and swaps the ``..data`` link to it in one rename; the file the sidecar
was given (``slo.yaml -> ..data/slo.yaml``) then reads as the new one. A real ``tritonwatch sidecar``
process (against the recorded Triton stand-in) serves the new objective without a restart, counts a
file that does not load and keeps serving the last good one.
"""

from __future__ import annotations

import os
from pathlib import Path

from support.fake_triton import fake_triton
from support.harness import poll, value
from support.sidecar import sidecar_argv

from tritonwatch import catalog
from tritonwatch.local.procs import Managed, free_port, http_ok, wait_until

ROOT = Path(__file__).resolve().parent.parent
SLO = (ROOT / "alerts" / "slo.yaml").read_text()
assert "latency: {threshold: 50ms, objective: 99}" in SLO


def _configmap_update(mount: Path, text: str, version: int) -> None:
    """What the kubelet's atomic writer does: a new timestamped folder, then ``..data`` swapped by rename."""
    fresh = mount / f"..2026_12_07_00_00_0{version}.000000000"
    fresh.mkdir()
    (fresh / "slo.yaml").write_text(text)
    tmp = mount / "..data_tmp"
    tmp.symlink_to(fresh.name)
    os.rename(tmp, mount / "..data")
    if not (mount / "slo.yaml").is_symlink():
        (mount / "slo.yaml").symlink_to("..data/slo.yaml")


def test_a_configmap_update_reaches_the_running_sidecar(tmp_path: Path) -> None:
    mount = tmp_path / "etc-tritonwatch"
    mount.mkdir()
    _configmap_update(mount, SLO, 1)
    port = free_port()
    with fake_triton() as triton:
        argv = sidecar_argv(
            triton.base_url,
            triton.metrics_url,
            port,
            "--slo",
            str(mount / "slo.yaml"),
            "--headroom-interval",
            "1",
        )
        sidecar = Managed("sidecar", argv, log_path=tmp_path / "sidecar.log")
        try:
            wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/metrics"), 30, "the sidecar's /metrics")
            objective = {"model": "fraud_detector", "quantile": "0.99"}
            first = poll(
                port,
                lambda s: value(s, catalog.CAPACITY_OBJECTIVE, **objective) is not None,
                "the objective",
                30,
            )
            assert value(first, catalog.CAPACITY_OBJECTIVE, **objective) == 0.05
            assert value(first, catalog.SLO_RELOAD_SUCCESS) == 1.0
            assert value(first, catalog.SLO_RELOAD_FAILURES_TOTAL) == 0.0

            # the operator tightens the objective: 99.9 % within 25 ms
            _configmap_update(
                mount, SLO.replace("threshold: 50ms, objective: 99}", "threshold: 25ms, objective: 99.9}"), 2
            )
            tighter = {"model": "fraud_detector", "quantile": "0.999"}
            after = poll(
                port, lambda s: value(s, catalog.CAPACITY_OBJECTIVE, **tighter) == 0.025, "the new objective"
            )
            assert value(after, catalog.CAPACITY_OBJECTIVE, **objective) is None
            assert value(after, catalog.SLO_RELOAD_SUCCESS) == 1.0

            # a file that does not load: counted, and the last good objective stays
            _configmap_update(
                mount,
                SLO.replace("objective: 99.9}", "objective: 120}").replace(
                    "objective: 99}", "objective: 120}"
                ),
                3,
            )
            bad = poll(port, lambda s: value(s, catalog.SLO_RELOAD_SUCCESS) == 0.0, "the failed reload")
            assert value(bad, catalog.SLO_RELOAD_FAILURES_TOTAL) == 1.0
            assert value(bad, catalog.CAPACITY_OBJECTIVE, **tighter) == 0.025
            assert sidecar.alive()
            assert "does not load" in (tmp_path / "sidecar.log").read_text()
        finally:
            sidecar.stop()
