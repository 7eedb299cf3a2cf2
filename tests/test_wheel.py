"""The wheel is the product: built from this checkout, installed into a clean virtualenv outside it, and
run there from a directory that is not the checkout (issue 15).

- the wheel holds ``tritonwatch/`` only (no top-level ``exporters``/``alerts``/``dashboards``/``reports``)
  plus the package data commands need: the default SLO file, the demo model repository, the GPU replay;
- ``tritonwatch sidecar --help`` works; ``tritonwatch rules --out DIR`` (the bundled SLO) and
  ``tritonwatch dashboards --out DIR`` write exactly the committed ``alerts/generated`` and
  ``dashboards/generated``;
- ``tritonwatch demo --duration 30`` runs the whole stack from the installed package data.

Building takes a few seconds; installing ``[local,demo,dashboards]`` from the local wheel cache took
about 35 s here, the demo about 40 s.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import venv
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HAVE_PYTRITON = importlib.util.find_spec("pytriton") is not None
SUBPACKAGES = ("exporters", "alerts", "dashboards", "reports")
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "dist")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    cwd: Path  # outside the checkout
    env: dict[str, str]

    def run(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.venv / "bin" / argv[0]), *argv[1:]],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def _clean_env(venv_dir: Path) -> dict[str, str]:
    """The user's environment as after ``source venv/bin/activate``: nothing of the checkout's venv."""
    ours = str(Path(sys.executable).parent)
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != ours]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PATH"] = os.pathsep.join([str(venv_dir / "bin"), *path])
    env["VIRTUAL_ENV"] = str(venv_dir)
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.resolve().is_relative_to(ROOT)
    dist = base / "dist"
    # Built from a copy: setuptools leaves build/lib in the source tree, and a stale one from an earlier
    # build would put modules that have since moved away into this wheel.
    source = base / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(*NOT_SOURCE))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("tritonwatch-*.whl")
    venv_dir = base / "venv"
    venv.create(venv_dir, with_pip=True, clear=True)  # clean: no system or checkout site-packages
    extras = "dashboards,local,demo" if HAVE_PYTRITON else "dashboards"
    install = subprocess.run(
        [str(venv_dir / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{wheel}[{extras}]"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    cwd = base / "elsewhere"
    cwd.mkdir()
    yield Installed(wheel, venv_dir, cwd, _clean_env(venv_dir))


def test_the_wheel_holds_one_package_and_its_data(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"tritonwatch", "tritonwatch-0.1.0.dist-info"}
    # every file is one of the checkout's (through the links): nothing stale, nothing from elsewhere
    assert [n for n in names if n.startswith("tritonwatch/") and not (ROOT / n).is_file()] == []
    for data in (
        "tritonwatch/alerts/slo.yaml",
        "tritonwatch/local/model_repository/fraud_detector/config.pbtxt",
        "tritonwatch/local/model_repository/fraud_detector/1/model.onnx",
        "tritonwatch/local/replay/dcgm_node2gpu_1.txt",
        "tritonwatch/local/replay/triton_gpu_node2gpu_2.txt",
        "tritonwatch/exporters/sidecar.py",
        "tritonwatch/py.typed",
    ):
        assert data in names


def test_no_top_level_subpackage_is_importable(installed: Installed) -> None:
    probe = (
        "import importlib.util, sys\n"
        f"print([n for n in {SUBPACKAGES!r} if importlib.util.find_spec(n)])\n"
        "import tritonwatch.exporters.sidecar as s; print(s.__file__)\n"
    )
    result = installed.run("python", "-c", probe)
    assert result.returncode == 0, result.stderr
    found, where = result.stdout.splitlines()
    assert found == "[]"
    assert Path(where).is_relative_to(installed.venv)


def test_sidecar_help(installed: Installed) -> None:
    result = installed.run("tritonwatch", "sidecar", "--help")
    assert result.returncode == 0, result.stderr
    assert "--triton URL" in result.stdout and "--otlp-listen HOST:PORT" in result.stdout


def same_tree(left: Path, right: Path) -> list[str]:
    """Paths that differ (missing on one side or other bytes) between two directory trees."""
    a = {p.relative_to(left) for p in left.rglob("*") if p.is_file()}
    b = {p.relative_to(right) for p in right.rglob("*") if p.is_file()}
    differ = sorted(str(p) for p in a ^ b)
    differ += sorted(str(p) for p in a & b if not filecmp.cmp(left / p, right / p, shallow=False))
    return differ


def test_rules_from_the_bundled_slo_file_are_the_committed_ones(installed: Installed) -> None:
    out = installed.cwd / "rules"
    result = installed.run("tritonwatch", "rules", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert same_tree(out, ROOT / "alerts" / "generated") == []


def test_dashboards_are_the_committed_ones(installed: Installed) -> None:
    out = installed.cwd / "dashboards"
    result = installed.run("tritonwatch", "dashboards", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert same_tree(out, ROOT / "dashboards" / "generated") == []


@pytest.mark.triton
@pytest.mark.prometheus
def test_demo_runs_from_the_installed_package(installed: Installed) -> None:
    if not HAVE_PYTRITON:
        pytest.skip("nvidia-pytriton is not installed: the wheel was installed without [local]")
    if not (shutil.which("prometheus") and shutil.which("prometheus-alertmanager")):
        pytest.skip("Prometheus/Alertmanager binaries not installed (make debs)")
    workdir = installed.cwd / "demo"
    proc = subprocess.Popen(
        [str(installed.venv / "bin" / "tritonwatch"), "demo", "--duration", "30", "--no-live"]
        + ["--workdir", str(workdir)],
        cwd=installed.cwd,
        env=installed.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    site = installed.venv / "lib"
    served = next(line for line in err.splitlines() if "starting Triton on" in line).split(
        "starting Triton on "
    )[1]
    assert Path(served).is_relative_to(site) and served.endswith("tritonwatch/local/model_repository")
    assert "demo summary" in out
    row = next(line for line in out.splitlines() if line.startswith("fraud_detector"))
    assert float(row.split()[1]) > 0, row  # requests/s served from the bundled model
