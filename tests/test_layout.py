"""The package's layout holds: imports run from the leaves to the core, never back (issue 15).

Every module under ``tritonwatch/`` (the four subpackages through their links included) is read with
``ast``; its imports, those inside functions too, and the dotted module names it imports by string
(``importlib.import_module(name)``: the CLI's commands, the sidecar's parts) are checked against the
layers below. A new module must be placed in a layer here, consciously.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tritonwatch"
SUBPACKAGES = ("exporters", "alerts", "dashboards", "reports", "advise", "local", "cli", "deploy")

# What the others stand on. It imports nothing of tritonwatch but itself.
CORE = {
    "tritonwatch",
    "tritonwatch.catalog",
    "tritonwatch.catalog.alerts",
    "tritonwatch.catalog.gpu",
    "tritonwatch.catalog.llm",
    "tritonwatch.catalog.names",
    "tritonwatch.catalog.render",
    "tritonwatch.catalog.signals",
    "tritonwatch.durations",
    "tritonwatch.errors",
    "tritonwatch.expfmt",
    "tritonwatch.fetch",
    "tritonwatch.files",
    "tritonwatch.flags",
    "tritonwatch.frontcounters",
    "tritonwatch.fronthistogram",
    "tritonwatch.inputs",
    "tritonwatch.modelconfig",
    "tritonwatch.safeyaml",
    "tritonwatch.secrets_check",
    "tritonwatch.selector",
    "tritonwatch.slo",
    "tritonwatch.tritonapi",
    "tritonwatch.uncounted",
    "tritonwatch.validators",
}
# Leaves at the top: the entry point (``cli/__init__``, and ``__main__`` for ``python -m tritonwatch``).
TOP = {
    "tritonwatch.__main__",
    "tritonwatch.cli",
}
# subpackage -> the other subpackages it may import (besides the core and itself)
MAY_IMPORT: dict[str, set[str]] = {
    # the commands that stand on the core alone (``init``, ``alerts``), modules named after them
    # (init proposes the model_metrics stanza that `rules` writes: one builder, alerts.model_metrics)
    "tritonwatch.cli": {"tritonwatch.alerts"},
    "tritonwatch.exporters": set(),
    "tritonwatch.alerts": set(),
    "tritonwatch.dashboards": set(),
    # the report's configuration section is the advice at the period's end
    "tritonwatch.reports": {"tritonwatch.advise"},
    # advise reads Prometheus through the report's client (reports.promapi) and nothing else of it
    "tritonwatch.advise": {"tritonwatch.reports"},
    # the demo runs the sidecar and writes the rules, as `tritonwatch sidecar` and `rules` would
    "tritonwatch.local": {"tritonwatch.exporters", "tritonwatch.alerts"},
    # `tritonwatch k8s` wraps what `rules` wrote, placing each rule file in its layer (alerts.layers)
    "tritonwatch.deploy": {"tritonwatch.alerts"},
}

# Single modules allowed one import across the layers: the sidecar's headroom (issue 39) runs advise's
# model of the server, through this one door (observed and simulate stand on the core alone: no pandas in the sidecar).
CROSSINGS: dict[str, set[str]] = {
    "tritonwatch.exporters.advise_model": {
        "tritonwatch.advise.observed",
        "tritonwatch.advise.simulate",
    },
}


def modules() -> dict[str, Path]:
    """Module name -> file, walking the subpackages' links; folders without __init__.py are data."""
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(PACKAGE, followlinks=True):
        here = Path(dirpath)
        if not (here / "__init__.py").exists():
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        parts = here.relative_to(ROOT).parts
        for name in filenames:
            if name.endswith(".py"):
                mod = ".".join(parts if name == "__init__.py" else (*parts, name[:-3]))
                found[mod] = here / name
    return found


def imported(path: Path, known: set[str]) -> set[str]:
    """tritonwatch modules a file imports: import statements anywhere, and known module names as strings."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in known)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in known:
            out.add(node.value)
    return {m for m in out if m == "tritonwatch" or m.startswith("tritonwatch.")}


def layer(module: str) -> str:
    if module in CORE or module in TOP:
        return module
    for sub in MAY_IMPORT:
        if module == sub or module.startswith(sub + "."):
            return sub
    raise AssertionError(f"{module}: not placed in a layer (tests/test_layout.py: CORE, TOP or MAY_IMPORT)")


def test_every_module_is_placed_in_a_layer() -> None:
    mods = modules()
    assert "tritonwatch.exporters.sidecar" in mods and "tritonwatch.local.demo" in mods
    for mod in mods:
        layer(mod)


def test_imports_run_from_the_leaves_to_the_core() -> None:
    mods = modules()
    known = set(mods)
    wrong = []
    for mod, path in sorted(mods.items()):
        if mod in TOP:
            continue
        mine = layer(mod)
        allowed = CORE | {mine} | MAY_IMPORT.get(mine, set())
        for target in sorted(imported(path, known)):
            if layer(target) not in allowed and target not in CROSSINGS.get(mod, set()):
                wrong.append(f"{mod} imports {target}")
    assert wrong == []


def test_the_core_folder_holds_the_core_only() -> None:
    """``tritonwatch/`` itself holds the core and ``__main__``; every leaf (the CLI and the local stack
    included, issue 21) is a folder of its own beside it, linked in."""
    own = {
        path.stem if path.name != "__init__.py" else ""
        for path in PACKAGE.iterdir()
        if path.suffix == ".py" and not path.is_symlink()
    }
    assert {f"tritonwatch.{name}" if name else "tritonwatch" for name in own} <= CORE | {
        "tritonwatch.__main__"
    }
    folders = [
        p.name for p in PACKAGE.iterdir() if p.is_dir() and not p.is_symlink() and p.name != "__pycache__"
    ]
    # Only core packages (the catalog) are folders of their own inside it.
    assert [f for f in folders if f"tritonwatch.{f}" not in CORE] == []
    for mod in TOP - {"tritonwatch.__main__"}:
        assert (PACKAGE / mod.split(".")[1]).is_symlink(), mod


def test_the_directions_the_issue_names() -> None:
    """The four imports that ran the wrong way are gone (a guard even if the layers above are loosened)."""
    mods = modules()
    known = set(mods)

    def imports_of(prefix: str) -> set[str]:
        return {t for m, p in mods.items() if m.startswith(prefix) for t in imported(p, known)}

    assert not {t for t in imports_of("tritonwatch.exporters.probe") if t.startswith("tritonwatch.local")}
    assert not {t for t in imports_of("tritonwatch.reports") if t.startswith("tritonwatch.alerts")}
    assert "tritonwatch.cli" not in imports_of("tritonwatch.cli.alerts")
    assert not {t for t in imports_of("tritonwatch.exporters") if t.startswith("tritonwatch.local")}
    # advise (issue 36) leans on the report for its Prometheus client only
    assert {t for t in imports_of("tritonwatch.advise") if t.startswith("tritonwatch.reports")} == {
        "tritonwatch.reports.promapi"
    }


def test_no_sidecar_part_imports_the_sidecar_or_the_collector() -> None:
    """Parts are given a PartContext (issue 21): none imports the sidecar or the collector, even for
    type checking, so nothing there runs both ways."""
    mods = modules()
    known = set(mods)
    wiring = {"tritonwatch.exporters.sidecar", "tritonwatch.exporters.collector"}
    wrong = [
        f"{mod} imports {target}"
        for mod, path in sorted(mods.items())
        if mod.startswith("tritonwatch.exporters.") and mod not in wiring
        for target in sorted(imported(path, known) & wiring)
    ]
    assert wrong == []


def test_no_bare_subpackage_name_anywhere_in_code() -> None:
    """``"exporters.llm"`` as a string would import a second copy from a checkout and fail from the wheel."""
    bare = []
    files = [*modules().values(), *(ROOT / "tests").rglob("*.py"), *(ROOT / "bench").rglob("*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                head = node.value.split(".")[0]
                if head in SUBPACKAGES and "." in node.value and node.value.split(".")[1].isidentifier():
                    if (ROOT / head / (node.value.split(".")[1] + ".py")).exists():
                        bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert bare == []


def test_ruff_bans_bare_subpackage_imports(tmp_path: Path) -> None:
    """The lint rule (pyproject: flake8-tidy-imports banned-api) fires on every bare form, not on ours."""
    ruff = Path(sys.executable).parent / "ruff"
    if not ruff.exists():
        pytest.skip("ruff not installed (make venv: pip install --group dev)")
    sample = tmp_path / "sample.py"
    bad = [
        "import exporters",
        "import exporters.sidecar",
        "from exporters.sidecar import Sidecar",
        "from alerts import rules",
        "import reports.report as report",
        "from dashboards.panels import Panel",
        "import advise.command",
    ]
    good = ["from tritonwatch.exporters.sidecar import Sidecar", "from tritonwatch import alerts"]
    sample.write_text("\n".join(bad + good) + "\n")
    result = subprocess.run(
        [str(ruff), "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "--select", "TID251",
         "--output-format", "concise", str(sample)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    flagged = sorted(int(line.split(":")[1]) for line in result.stdout.splitlines() if "TID251" in line)
    assert flagged == list(range(1, len(bad) + 1)), result.stdout + result.stderr


def _import_graph() -> dict[str, set[str]]:
    """Product module -> the product modules it imports (function-level and by-string imports included).

    ``from tritonwatch.x import y`` counts as importing ``tritonwatch.x.y`` when that is a module, else
    ``tritonwatch.x``; a package's own ``__init__`` is not counted as an import of its submodules.
    """
    mods = modules()
    known = set(mods)
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        targets = set()
        for target in imported(path, known):
            # ``from pkg import sub`` adds both pkg and pkg.sub: keep the most specific known module
            if target in known and target != mod:
                targets.add(target)
        graph[mod] = targets - {t for t in targets if any(o.startswith(t + ".") for o in targets)}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected component of more than one module (Tarjan), as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1 or node in graph.get(node, ()):
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_cycle_anywhere() -> None:
    """No product module reaches itself through imports, those inside functions included (issue 36):
    a cycle makes the import order matter and hides which module stands on which."""
    assert _cycles(_import_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


PRODUCT_LINES = 500


def test_no_product_module_over_500_lines() -> None:
    """A module past 500 lines holds more than one idea (issue 36): split it by what it does."""
    long = {
        mod: n for mod, path in modules().items() if (n := len(path.read_text().splitlines())) > PRODUCT_LINES
    }
    assert long == {}
