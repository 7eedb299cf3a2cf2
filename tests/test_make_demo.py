"""``make demo`` installs only what the demo runs, and only when it is missing: Prometheus and
Alertmanager, never the suite's programs (Chromium, kubectl, HAProxy, Caddy, VictoriaMetrics); a machine
that has them runs the demo without root and without apt; a missing one is named with its install
command, and a user who is not root is told what to run instead of failing on apt's lock.

The prerequisites run for real (``tools/need-debs.sh`` through ``make``) with a PATH of the test's own:
stand-ins for ``prometheus`` and ``prometheus-alertmanager``, an ``apt-get`` that writes down how it was
called, an ``id`` that says which user runs. The demo itself is read with ``make -n`` (running it is the
demo tests' job).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from support.lanes import run_once

ROOT = Path(__file__).resolve().parent.parent
MAKE = shutil.which("make") or "/usr/bin/make"
SUITE_ONLY = ("chromium", "kubectl", "haproxy", "caddy", "victoria-metrics", "vmalert", "promtool", "amtool")


def _script(path: Path, body: str) -> None:
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


def _bin(tmp_path: Path, *, uid: int, programs: tuple[str, ...]) -> tuple[Path, Path]:
    """A PATH folder: the given programs, an ``id -u`` printing ``uid``, an apt-get that logs its argv."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    apt_log = tmp_path / "apt-get.log"
    for program in programs:
        _script(bin_dir / program, "exit 0")
    _script(bin_dir / "id", f"echo {uid}")
    _script(bin_dir / "apt-get", f'echo "$*" >> {apt_log}')
    return bin_dir, apt_log


def _make(target: str, bin_dir: Path) -> tuple[int, str, str]:
    # Only the test's folder on PATH: the machine's own prometheus (make debs) must not be found.
    done = run_once(
        [MAKE, "--no-print-directory", "-C", str(ROOT), target],
        env={"PATH": str(bin_dir), "HOME": str(bin_dir.parent)},
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout, done.stderr


def test_demo_with_prometheus_and_alertmanager_needs_neither_root_nor_apt(tmp_path: Path) -> None:
    bin_dir, apt_log = _bin(tmp_path, uid=1000, programs=("prometheus", "prometheus-alertmanager"))
    assert _make("demo-debs", bin_dir) == (0, "", "")
    assert not apt_log.exists()


def test_demo_without_root_names_each_missing_program_and_what_to_run(tmp_path: Path) -> None:
    bin_dir, apt_log = _bin(tmp_path, uid=1000, programs=("prometheus",))
    code, out, err = _make("demo-debs", bin_dir)
    assert out == "prometheus-alertmanager is not installed: apt-get install prometheus-alertmanager\n"
    assert err.splitlines()[0] == (
        "not root, so nothing installed: run sudo apt-get install -y --no-install-recommends "
        "prometheus-alertmanager"
    )
    assert code != 0
    assert not apt_log.exists()


def test_demo_as_root_installs_only_the_missing_demo_programs(tmp_path: Path) -> None:
    bin_dir, apt_log = _bin(tmp_path, uid=0, programs=())
    code, out, _ = _make("demo-debs", bin_dir)
    assert code == 0
    assert out.splitlines() == [
        "prometheus is not installed: apt-get install prometheus",
        "prometheus-alertmanager is not installed: apt-get install prometheus-alertmanager",
        "installing Debian packages: prometheus prometheus-alertmanager",
    ]
    assert apt_log.read_text().splitlines() == [
        "update -qq",
        "install -y -qq --no-install-recommends prometheus prometheus-alertmanager",
    ]


def test_the_suite_installs_its_programs_once_each(tmp_path: Path) -> None:
    """``make debs`` (check, pytest, test) names each missing program; a package is installed once."""
    bin_dir, apt_log = _bin(tmp_path, uid=0, programs=("prometheus", "prometheus-alertmanager", "kubectl"))
    code, out, _ = _make("debs", bin_dir)
    assert code == 0
    missing = ("promtool", "amtool", "chromium", "haproxy", "victoria-metrics", "vmalert", "caddy")
    assert [line.split()[0] for line in out.splitlines()[:-1]] == list(missing)
    assert apt_log.read_text().splitlines()[1] == (
        "install -y -qq --no-install-recommends prometheus prometheus-alertmanager chromium haproxy "
        "victoria-metrics caddy"
    )


def test_make_demo_runs_the_demo_programs_prerequisites_only() -> None:
    """What ``make demo`` would run: the venv of the demo's extras, the demo's programs, the demo."""
    done = run_once(
        [MAKE, "-n", "-C", str(ROOT), "--no-print-directory", "demo"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    needs = [line for line in done.stdout.splitlines() if "need-debs.sh" in line]
    assert needs == [
        "tools/need-debs.sh prometheus:prometheus prometheus-alertmanager:prometheus-alertmanager"
    ]
    assert "apt-get" not in re.sub(r"^\s*echo .*$", "", done.stdout, flags=re.M)
    assert not [p for p in SUITE_ONLY if re.search(rf"\b{re.escape(p)}\b", done.stdout)]
    assert "--group dev" not in done.stdout
    # the demo's own SLO file (an objective on the pipeline its clients call), which it names on stderr
    assert done.stdout.splitlines()[-1].split() == [".venv/bin/tritonwatch", "demo"]
