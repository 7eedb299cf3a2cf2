"""The wheel is the product: built from this checkout, installed into a clean virtualenv outside it, and
run there from a directory that is not the checkout (issues 15 and 26).

- the wheel holds ``tritonwatch/`` only (no top-level ``exporters``/``alerts``/``dashboards``/``reports``/``advise``)
  plus the package data commands need: the default SLO file, the demo model repository, the GPU replay;
  its LICENSE and metadata; no development script;
- building and installing it print no setuptools warning;
- ``tritonwatch sidecar --help`` works; ``make generate``'s ``tritonwatch rules`` and ``tritonwatch k8s``
  lines and ``tritonwatch dashboards --out DIR`` write exactly the committed files; ``rules`` and ``k8s``
  without ``--slo`` refuse in one line;
- every command shown in README.md and docs/*.md (``DocsRun`` below says how each is run) runs from one
  empty folder, ``tritonwatch init`` against the real local Triton among them, its SLO
  file then through ``tritonwatch rules`` and ``promtool``, and ``tritonwatch demo``.

One wheel build and one virtualenv per run (``[all]``). Building takes a few seconds, installing
``[all]`` from the local wheel cache about 45 s here. The docs' commands that run a program of the
Prometheus stack run once on each stack; the others once.
"""

from __future__ import annotations

import copy
import filecmp
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml
from conftest import need_binary
from support import demo_summary, make_generate, stacks
from support.harness import processes_mentioning, read_metrics, value

from tritonwatch import catalog
from tritonwatch.local.procs import Managed, free_port, http_ok
from tritonwatch.slo import parse_duration

ROOT = Path(__file__).resolve().parent.parent
HAVE_PYTRITON = importlib.util.find_spec("pytriton") is not None
SUBPACKAGES = ("exporters", "alerts", "dashboards", "reports", "advise")
NOT_SOURCE = (".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", "dist")


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    cwd: Path  # outside the checkout
    env: dict[str, str]
    installer_output: str  # what building and installing the wheel printed

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
    extras = "all" if HAVE_PYTRITON else "dashboards,report,demo,probe"
    # --no-compile: byte-compiling every installed module (pandas, scipy, statsmodels...) took 33 of the
    # install's 77 s here; the commands compile what they import, once.
    install = subprocess.run(
        [
            str(venv_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            f"{wheel}[{extras}]",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    cwd = base / "elsewhere"
    cwd.mkdir()
    output = build.stdout + build.stderr + install.stdout + install.stderr
    yield Installed(wheel, venv_dir, cwd, _clean_env(venv_dir), output)


def test_building_and_installing_print_no_package_folder_warning(installed: Installed) -> None:
    """The data folders named like modules (model_repository/fraud_scaler, replay) ship as package data
    without setuptools' "Package ... is absent from the `packages` configuration" (a screenful each)."""
    assert "absent from the `packages` configuration" not in installed.installer_output
    assert [line for line in installed.installer_output.splitlines() if "Warning" in line] == []


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
        "tritonwatch/advise/command.py",
        "tritonwatch/cli/init.py",
        "tritonwatch/py.typed",
        "tritonwatch-0.1.0.dist-info/licenses/LICENSE",
    ):
        assert data in names
    # the scripts that generate package data are the checkout's, not the product's; a python-backend
    # model's own code (<model>/<version>/model.py) is the model, and ships
    data_code = [n for n in names if n.endswith(".py") and ("/model_repository/" in n or "/replay/" in n)]
    assert [n for n in data_code if not re.fullmatch(r".*/model_repository/\w+/\d+/model\.py", n)] == []
    assert "tritonwatch/local/model_repository/fraud_scaler/1/model.py" in data_code
    meta = zipfile.ZipFile(installed.wheel).read("tritonwatch-0.1.0.dist-info/METADATA").decode()
    headers = [line.split(": ", 1) for line in meta.split("\n\n", 1)[0].splitlines()]
    assert ["License-Expression", "Apache-2.0"] in headers
    assert {v.split(",")[0] for k, v in headers if k == "Project-URL"} >= {"Homepage", "Source", "Issues"}
    assert any(k == "Classifier" and v.startswith("Programming Language :: Python :: 3") for k, v in headers)
    extras = {v for k, v in headers if k == "Provides-Extra"}
    assert extras == {"local", "probe", "dashboards", "report", "demo", "all"}  # no "dev"
    assert (ROOT / "LICENSE").read_text().split()[:3] == ["Apache", "License", "Version"]


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


def same_tree(left: Path, right: Path, ignore: tuple[str, ...] = ()) -> list[str]:
    """Paths that differ (missing on one side or other bytes) between two directory trees (file names
    in ``ignore`` left out)."""
    a = {p.relative_to(left) for p in left.rglob("*") if p.is_file() and p.name not in ignore}
    b = {p.relative_to(right) for p in right.rglob("*") if p.is_file() and p.name not in ignore}
    differ = sorted(str(p) for p in a ^ b)
    differ += sorted(str(p) for p in a & b if not filecmp.cmp(left / p, right / p, shallow=False))
    return differ


def _as_make_generate(installed: Installed, command: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """``make generate``'s own ``tritonwatch <command>`` line, run by the wheel's command from a folder
    of its own holding the checkout's inputs at the paths the Makefile names (the headers name them)."""
    base = installed.cwd / f"make-generate-{command}"
    for rel in make_generate.INPUTS[command]:
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).symlink_to(ROOT / rel)
    result = subprocess.run(
        [str(installed.venv / "bin" / "tritonwatch"), *make_generate.commands()[command]],
        cwd=base,
        env=installed.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return base, result


def test_rules_are_the_committed_ones(installed: Installed) -> None:
    base, result = _as_make_generate(installed, "rules")
    assert result.returncode == 0, result.stderr
    assert same_tree(base / "alerts" / "generated", ROOT / "alerts" / "generated") == []
    refused = installed.run("tritonwatch", "rules", "--out", str(installed.cwd / "none"))
    assert refused.returncode == 2 and refused.stderr == (
        "tritonwatch rules: error: the following arguments are required: --slo\n"
    )


def test_dashboards_are_the_committed_ones(installed: Installed) -> None:
    out = installed.cwd / "dashboards"
    result = installed.run("tritonwatch", "dashboards", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert same_tree(out, ROOT / "dashboards" / "generated") == []


def test_k8s_writes_the_committed_manifests(installed: Installed) -> None:
    """``tritonwatch k8s`` from the wheel: what ``make generate`` committed under deploy/, byte for byte;
    and with no checkout to point into, the base from package data (``--base``), a tree ``kubectl
    kustomize`` renders whole."""
    out, result = _as_make_generate(installed, "k8s")
    assert result.returncode == 0, result.stderr
    assert (
        same_tree(out / "deploy" / "kubernetes" / "generated", ROOT / "deploy" / "kubernetes" / "generated")
        == []
    )
    for overlay in ("autoscaling", "triton265"):
        written = {
            p.relative_to(out / "deploy" / overlay)
            for p in (out / "deploy" / overlay).rglob("*")
            if p.is_file()
        }
        assert written and all(
            (out / "deploy" / overlay / p).read_bytes() == (ROOT / "deploy" / overlay / p).read_bytes()
            for p in written
        ), overlay
    tree = installed.cwd / "k8s"
    argv = [
        "--dashboards",
        str(ROOT / "dashboards" / "generated"),
        "--slo",
        str(ROOT / "alerts" / "slo.yaml"),
    ]
    argv += ["--base", str(tree / "kubernetes")]
    argv += ["--autoscaling", str(tree / "autoscaling"), "--triton265", str(tree / "triton265")]
    result = installed.run("tritonwatch", "k8s", *argv)
    assert result.returncode == 0, result.stderr
    # The hand-written base and the overlays' kustomizations, from package data, as committed (the
    # generated files' headers name this command, not make generate's: compared above).
    hand_written = [
        p.relative_to(ROOT / "deploy")
        for p in (ROOT / "deploy").rglob("*.yaml")
        if p.name == "kustomization.yaml" or p.parent == ROOT / "deploy" / "kubernetes"
    ]
    assert len(hand_written) >= 8
    for rel in hand_written:
        assert (tree / rel).read_bytes() == (ROOT / "deploy" / rel).read_bytes(), rel
    for kustomization in ("kubernetes", "autoscaling/keda", "autoscaling/prometheus-adapter", "triton265"):
        rendered = subprocess.run(
            [need_binary("kubectl"), "kustomize", str(tree / kustomization)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert rendered.returncode == 0, rendered.stderr
        kinds = set(re.findall(r"^kind: (\w+)$", rendered.stdout, re.MULTILINE))
        assert {"Namespace", "Deployment", "PodMonitor", "PrometheusRule", "CronJob"} <= kinds, kustomization
    refused = installed.run("tritonwatch", "k8s", *argv[:2], "--out", str(out / "none"))
    assert refused.returncode == 2 and refused.stderr == (
        "tritonwatch k8s: error: the following arguments are required: --slo\n"
    )
    assert not (out / "none").exists()


# --- every command the README and the docs show ------------------------------------------------------
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Fenced ```sh and ```console blocks are commands to run; ```text blocks are synopses (brackets,
# placeholders). Lines of these programs are what this test runs; `make` lines are a checkout's.
PROGRAMS = ("tritonwatch", "python", "pip", "promtool", "prometheus")
_FENCE = re.compile(r"^(\s*)```(\w*)\s*$")
# Well-known ports the docs name: each is mapped to a free loopback port, the same one everywhere.
DOC_PORTS = (8000, 8002, 9091, 9093, 9450)


def documented_commands() -> tuple[list[tuple[str, str]], list[str]]:
    """(doc, command) for every runnable line, in order; and lines that look like commands elsewhere."""
    found: list[tuple[str, str]] = []
    unmarked: list[str] = []
    for doc in DOCS:
        fence: str | None = None
        for n, line in enumerate(doc.read_text().splitlines(), 1):
            m = _FENCE.match(line)
            if m:
                fence = None if fence is not None else m.group(2)
                continue
            text = line.strip()
            if fence in ("sh", "console"):
                if fence == "console":
                    if not text.startswith("$ "):
                        continue
                    text = text[2:]
                if text.split(" ", 1)[0] in PROGRAMS:
                    found.append((doc.name, text.split("  #", 1)[0].strip()))
            elif (fence is not None or line.startswith("    ")) and fence not in ("text", "yaml", "json"):
                if text.startswith(("tritonwatch ", "python ", ".venv/bin/")):
                    unmarked.append(f"{doc.name}:{n}: {text}")
    return found, unmarked


def test_every_documented_command_is_in_a_block_this_test_runs() -> None:
    commands, unmarked = documented_commands()
    assert unmarked == [], "fence these as ```sh (run by this test) or ```text (a synopsis)"
    assert len(commands) >= 20


class _Ports(dict[int, int]):
    """A documented port -> a free loopback port, taken when first named, just before a process binds
    it. Taken all at once, a port stayed unbound for the minutes the first steps take: on 7 Dec 2026,
    with other tests' servers starting beside it, the sidecar's port answered with a Triton's metrics
    (its summaries' NaN failed the wait), so another server had bound it first."""

    def __missing__(self, doc_port: int) -> int:
        assert doc_port in DOC_PORTS, doc_port
        self[doc_port] = port = free_port()
        return port


class DocsRun:
    """Runs documented command lines as written, in one empty folder, with the installed wheel.

    What it changes, and only that: the ports in ``DOC_PORTS`` become free loopback ports (the same
    one for every mention), long-running commands are started in the background and polled for
    readiness (the docs run them in a terminal of their own), ``local-triton`` and the sidecar get
    their ports as flags where the docs rely on the defaults, and ``<placeholder>`` URLs are filled in
    from what the command that names them printed. ``pip install`` lines are checked against the
    built wheel, which the fixture installed with ``[all]``.
    """

    def __init__(self, installed: Installed) -> None:
        self.installed = installed
        # A folder of its own, in the module's one folder outside the checkout.
        self.cwd = Path(tempfile.mkdtemp(prefix="first-hour-", dir=installed.cwd))
        self.ports = _Ports()
        self.background: list[Managed] = []
        self.filled: dict[str, str] = {}

    def text(self, line: str) -> str:
        for doc_port in DOC_PORTS:
            if f"127.0.0.1:{doc_port}" in line:
                line = line.replace(f"127.0.0.1:{doc_port}", f"127.0.0.1:{self.ports[doc_port]}")
        for name, filled in self.filled.items():
            line = line.replace(f"<{name}>", filled)
        assert "<" not in line, f"a placeholder nobody filled: {line}"
        return line

    def run(self, line: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess[str]:
        """bash runs it, as a user's shell would: quotes, globs (``rules/*.rules.yml``), ``&&``, ``.``."""
        result = subprocess.run(
            ["bash", "-c", self.text(line)],
            cwd=self.cwd,
            env=dict(self.installed.env, **env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert result.returncode == 0, f"{line}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
        return result

    def start(self, name: str, line: str, *more: str) -> Managed:
        """A long-running command, in the background (a terminal of its own, in the docs)."""
        argv = [*shlex.split(self.text(line)), *more]
        exe = self.installed.venv / "bin" / argv[0]
        argv[0] = str(exe) if exe.exists() else argv[0]
        log = self.cwd / f"{name}.log"  # the run's own: a second run must not read the first one's "ready"
        proc = Managed(name, argv, env=self.installed.env, log_path=log, cwd=self.cwd)
        self.background.append(proc)
        return proc

    def on(self, stack: stacks.Stack, bin_dir: Path, *shared: str) -> DocsRun:
        """This run on one stack: its programs (``bin_dir``, under Debian's names) first on PATH after the
        venv's, in a folder of its own holding copies of ``shared``, what the steps before wrote. The
        ports and the filled-in placeholders stay the run's."""
        child = copy.copy(self)
        child.cwd = self.cwd / f"on-{stack.name}"
        child.cwd.mkdir()
        for name in shared:
            source = self.cwd / name
            if source.is_dir():
                shutil.copytree(source, child.cwd / name)
            else:
                shutil.copy2(source, child.cwd / name)
        venv_bin = str(self.installed.venv / "bin")
        rest = [d for d in self.installed.env["PATH"].split(os.pathsep) if d != venv_bin]
        path = os.pathsep.join([venv_bin, str(bin_dir), *rest])
        child.installed = replace(self.installed, env=dict(self.installed.env, PATH=path))
        child.background = []
        return child

    def log(self, proc: Managed) -> str:
        assert proc.log_path is not None
        return proc.log_path.read_text(errors="replace")

    def stop_all(self) -> None:
        for proc in reversed(self.background):
            proc.stop(grace=15)


def _wait(check: Callable[[], bool], what: str, proc: Managed, run: DocsRun, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # Alive first: a process that could not bind its port leaves whatever holds it to answer.
        assert proc.alive(), f"{what}: the process ended\n{run.log(proc)[-3000:]}"
        if check():
            return
        time.sleep(0.5)
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n{run.log(proc)[-3000:]}")


def _up(port: int, *targets: str) -> bool:
    """Every target's ``tritonwatch_up`` is 1 on the sidecar at ``port`` (False while it is not serving)."""
    try:
        samples = read_metrics(port)
    except requests.RequestException:
        return False
    return all(value(samples, catalog.UP, target=t) == 1.0 for t in targets)


def _stats(triton_url: str, model: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{triton_url}/v2/models/{model}/stats", timeout=10) as resp:
        (entry,) = json.load(resp)["model_stats"]
    return dict(entry["inference_stats"])


def _post_alert(am_url: str, labels: dict[str, str]) -> None:
    body = json.dumps([{"labels": labels, "annotations": {"summary": "posted by the test"}}]).encode()
    req = urllib.request.Request(
        f"{am_url}/api/v2/alerts", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200


@pytest.mark.triton
@pytest.mark.prometheus
@pytest.mark.needs("promtool", "prometheus", "prometheus-alertmanager")
def test_every_documented_command_runs_from_an_empty_folder(
    installed: Installed, every_stack: dict[str, stacks.Stack], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The commands that run a program of the Prometheus stack (promtool, Prometheus, Alertmanager, the
    demo) run once on each stack; the others (Triton, the sidecar, init, dashboards) once, before."""
    if not HAVE_PYTRITON:
        pytest.fail("nvidia-pytriton is not installed: the wheel was installed without [local]")
    commands, _ = documented_commands()
    # Outside a stack: PATH's promtool, prometheus and Alertmanager are scripts that fail (conftest).
    run = DocsRun(replace(installed, env=_clean_env(installed.venv)))
    p = run.ports
    done: list[str] = []

    def each(pattern: str) -> list[str]:
        """The documented lines matching ``pattern`` (at least one: a handler for nothing is stale)."""
        lines = list(dict.fromkeys(c for _, c in commands if re.fullmatch(pattern, c)))
        assert lines, f"no documented command matches {pattern!r} any more"
        done.extend(lines)
        return lines

    try:
        each(r"pip install 'tritonwatch\[all\]'")  # what the fixture did, with the built wheel
        for line in each(r"python -m venv \w+ && \. \w+/bin/activate"):
            run.run(line)
        for line in each(r"tritonwatch --version"):
            assert run.run(line).stdout == "tritonwatch 0.1.0\n"

        # 1. the bundled Triton (no --model-repository), some traffic
        (line,) = each(r"tritonwatch local-triton")
        ports = ["--http-port", str(p[8000]), "--grpc-port", str(free_port()), "--metrics-port", str(p[8002])]
        triton = run.start("local-triton", line, *ports)
        _wait(lambda: "Triton ready" in run.log(triton), "local-triton ready", triton, run)
        for line in each(r"tritonwatch load --triton http://127\.0\.0\.1:8000 .*"):
            run.run(line)

        # 2. an SLO file for the models it serves, from their traffic; rules; promtool
        for line in each(r"tritonwatch init --triton http://127\.0\.0\.1:8000 --out slo\.yaml"):
            run.run(line)
        stats = _stats(f"http://127.0.0.1:{p[8000]}", "fraud_detector")
        ok, failed = int(stats["success"]["count"]), int(stats["fail"]["count"])
        hits, hit_ns = int(stats["cache_hit"]["count"]), int(stats["cache_hit"]["ns"])
        # the bundled repository also serves fraud_pipeline and its other steps: the loaded model's entry
        slos = yaml.safe_load((run.cwd / "slo.yaml").read_text())["spec"]["slos"]
        (entry,) = [e for e in slos if e["model"] == "fraud_detector"]
        assert entry["model"] == "fraud_detector" and ok >= 100 and failed == 0, (entry, stats)
        # served through the python shim here: Triton may not count its errors, so no availability on
        # its counters (rules --triton would warn); called directly by `load`, so a latency objective
        assert "availability" not in entry, entry
        # no p99 from Triton (the cache suppresses its summary): 4x the mean of the requests the cache
        # missed, at a bound of the sidecar's trace buckets (Triton 2.51 keeps no latency histogram)
        mean = (int(stats["success"]["ns"]) - hit_ns) / (ok - hits) / 1e9
        threshold = min(b for b in catalog.DEFAULT_BUCKETS if b >= 4 * mean)
        assert entry["latency"]["objective"] == 99
        assert abs(parse_duration(entry["latency"]["threshold"], "threshold") - threshold) < 1e-9, (
            entry,
            mean,
        )
        assert (
            "latency source: the sidecar's trace histogram: Triton 2.51.0"
            in (run.cwd / "slo.yaml").read_text()
        )
        for line in each(r"tritonwatch rules --slo slo\.yaml --out rules"):
            run.run(line)

        # 3. the sidecar on that Triton, dashboards
        for line in each(r"tritonwatch sidecar --triton http://127\.0\.0\.1:8000 --triton-metrics \S+"):
            sidecar = run.start("sidecar", line, "--listen", f"127.0.0.1:{p[9450]}")
            _wait(lambda: _up(p[9450], "triton", "triton_api"), "sidecar up", sidecar, run)
        for line in each(r"tritonwatch dashboards --out dashboards(/generated)?"):
            run.run(line)
            assert same_tree(run.cwd / line.split()[-1], ROOT / "dashboards" / "generated") == []
        for line in each(r"tritonwatch dashboards --out \S+ --format resource"):
            run.run(line)
            out, committed = run.cwd / line.split()[3], ROOT / "dashboards" / "generated"
            assert sorted(f.name for f in out.iterdir()) == sorted(f.name for f in committed.glob("*.json"))
            for f in out.iterdir():
                assert json.loads(f.read_text())["spec"] == json.loads((committed / f.name).read_text())

        # the capacity report on the synthetic week
        for line in each(r"python tests/support/synthetic\.py week\.om"):  # a checkout's fixture
            run.run(line.replace("tests/", f"{ROOT}/tests/", 1))
        # the replayed GPU node, and a sidecar on the URLs it prints
        (line,) = each(r"python -m tritonwatch\.local\.gpureplay")
        replay = run.start("gpureplay", line)
        _wait(lambda: "HTTP API" in run.log(replay), "replay URLs", replay, run)
        pattern = r"replayed (dcgm-exporter|Triton metrics|Triton HTTP API) \(not a live GPU\): (\S+)"
        printed = dict(re.findall(pattern, run.log(replay)))
        run.filled = {
            "dcgm_url": printed["dcgm-exporter"],
            "triton_metrics_url": printed["Triton metrics"],
            "triton_url": printed["Triton HTTP API"],
        }
        for line in each(r"tritonwatch sidecar --triton <triton_url> .*"):
            gpu_port = free_port()
            gpu_sidecar = run.start("gpu-sidecar", line, "--listen", f"127.0.0.1:{gpu_port}")
            _wait(
                lambda port=gpu_port: _up(port, "dcgm", "triton", "triton_api"),
                "GPU sidecar up",
                gpu_sidecar,
                run,
            )
    finally:
        run.stop_all()

    # 4. on each stack: promtool on the rules init's file gave, the alerts commands on an Alertmanager
    # routing with the generated configuration, the capacity report on the synthetic week, and the demo
    # (everything at once, last: it starts its own Triton, Prometheus and Alertmanager)
    from tritonwatch.local.promstack import Alertmanager

    for chosen in every_stack.values():
        on = run.on(
            chosen, chosen.bin_dir(tmp_path_factory.getbasetemp() / "stacks"), "slo.yaml", "rules", "week.om"
        )
        try:
            for line in each(r"promtool (check|test) rules rules/.*"):
                out = on.run(line)
                assert "SUCCESS" in out.stdout + out.stderr and "FAILED" not in out.stdout + out.stderr, (
                    chosen.name
                )
            am = Alertmanager(
                on.cwd / "am", on.cwd / "rules" / "alertmanager.yml", port=p[9093], binary=chosen.alertmanager
            )
            on.background.append(am.proc)
            am.wait_ready()
            burn = {"alertname": "TritonSLOErrorBudgetBurn", "model": "fraud_detector", "severity": "page"}
            _post_alert(am.url, burn)
            for line in each(r"tritonwatch alerts status --alertmanager \S+"):
                header, row = on.run(line).stdout.splitlines()
                assert header.split()[:3] == ["MODEL", "ALERT", "SEVERITY"]
                assert row.split()[:4] == ["fraud_detector", "TritonSLOErrorBudgetBurn", "page", "active"]
            for line in each(r"tritonwatch alerts silence .*"):
                assert on.run(line).stdout.startswith("silenced model=fraud_detector until ")

            for line in each(r"promtool tsdb create-blocks-from openmetrics .*"):
                on.run(line)
            (line,) = each(r"prometheus --storage\.tsdb\.path=tsdb .*")
            prom = on.start("prometheus", line)
            _wait(lambda: http_ok(f"http://127.0.0.1:{p[9091]}/-/ready"), "prometheus ready", prom, on)
            for line in each(r"tritonwatch report --prometheus http://127\.0\.0\.1:9091 .*"):
                written = on.run(line, timeout=600).stdout.split()
            for name in ("report.html", "report.md", "models.csv", "gpus.csv"):
                assert (on.cwd / "report" / name).is_file() and any(w.endswith(name) for w in written), (
                    written
                )
            assert "resnet" in (on.cwd / "report" / "models.csv").read_text()  # the synthetic week's model

        finally:
            on.stop_all()
        (line,) = each(r"tritonwatch demo --duration \d+")
        tmp = on.cwd / "demo-tmp"
        tmp.mkdir()
        demo = on.run(line, timeout=400, TMPDIR=str(tmp))
        assert "demo summary" in demo.stdout
        summary = demo.stdout[demo.stdout.index("demo summary") :]
        row = next(x for x in summary.splitlines() if x.startswith("fraud_detector"))
        cells = row.split()
        assert float(cells[1]) > 0, row  # requests/s served from the bundled model
        # p99 from the sampled traces (Triton's summaries are off for a model with the cache on)
        assert cells[3] in ("ms", "us") and float(cells[2]) > 0, row
        # cache hit: 3 of 4 requests repeat
        assert cells[-1].endswith("%") and 60 <= float(cells[-1].rstrip("%")) <= 90, row
        # the pipeline the clients call, and its steps in order (from the sidecar's step info)
        steps = "  fraud_pipeline: fraud_scaler -> fraud_detector -> fraud_decision"
        assert steps in summary.splitlines(), summary
        # the failure episode pages fraud_pipeline, the model its clients call, in that phase and as
        # expected, on this stack's Prometheus and Alertmanager; errors only in that phase, at the load's
        # injected ratio; the shim's marker explained (support/demo_summary.py)
        demo_summary.check(summary)
        served = re.search(r"starting Triton on (\S+)", demo.stderr)
        assert served and Path(served.group(1)).is_relative_to(installed.venv / "lib"), demo.stderr[-2000:]
        # latencies logged as the table shows them, never as seconds to four places
        logged = re.findall(r"p99=(\d\S* [mu]s|-)", demo.stderr)
        assert logged and len(logged) == demo.stderr.count("p99="), demo.stderr[-2000:]
        # its temp folder is gone; the `.ses` file a Go binary it ran (Prometheus or Alertmanager) leaves in
        # TMPDIR is not the demo's to delete
        (workdir,) = re.findall(r"logs in (\S+), removed at the end", demo.stdout)
        assert Path(workdir).parent == tmp and not Path(workdir).exists()
        assert [x.name for x in tmp.iterdir() if x.name != ".ses"] == []
        # Triton, the sidecar, Prometheus, Alertmanager: all stopped
        assert processes_mentioning(workdir) == []

    assert sorted(set(done)) == sorted({c for _, c in commands}), "documented commands this test did not run"
