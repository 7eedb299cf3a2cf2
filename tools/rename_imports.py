"""Move modules to the one-package layout (issue 15) and rewrite every reference to them.

    .venv/bin/python tools/rename_imports.py          # prints what it moved and rewrote
    .venv/bin/python tools/rename_imports.py --check  # exit 1 if anything is still in the old layout

It runs ruff (from the same venv) on the Python files it rewrote: isort order and line wrapping.

Re-runnable and idempotent: run it again after merging a branch written against the old layout and
it moves what is left at an old path (``git mv``, so history follows) and rewrites only old-style
references; a second run changes nothing. It edits every git-tracked text file except recorded
payloads (``tests/data/`` but for its ``*.py``) and itself.

What it rewrites:
- the four top-level packages become subpackages of ``tritonwatch`` (``tritonwatch/exporters`` etc. are
  symlinks to the folders, see docs/architecture.md): ``from exporters.sidecar import X``,
  ``from exporters import memory``, ``"exporters.llm"`` (any dotted ``<pkg>.<module>`` of a module that
  exists in that folder, in code, strings and docs) -> ``tritonwatch.exporters...``;
- moved modules (MOVES below), by dotted name and by file path;
- ``from alerts import rules, slo`` where only some names moved is split into two imports.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SELF = Path(__file__).resolve().relative_to(ROOT).as_posix()

# The folders installed as tritonwatch.<name>.
SUBPACKAGES = ("exporters", "alerts", "dashboards", "reports")

# old path -> new path. Dotted names follow from the paths (tests/support/x.py is ``support.x`` in the
# tests, which put tests/ on sys.path, and ``tests.support.x`` elsewhere).
MOVES: dict[str, str] = {
    # the local stack: what runs Triton, load, Prometheus and the demo on this machine
    "tritonwatch/local_triton.py": "tritonwatch/local/triton.py",
    "tritonwatch/load.py": "tritonwatch/local/load.py",
    "tritonwatch/demo.py": "tritonwatch/local/demo.py",
    "tritonwatch/promstack.py": "tritonwatch/local/promstack.py",
    "tritonwatch/onnx_shim.py": "tritonwatch/local/onnx_shim.py",
    "tritonwatch/modelrepo.py": "tritonwatch/local/modelrepo.py",
    "tritonwatch/procs.py": "tritonwatch/local/procs.py",
    "tritonwatch/gpureplay.py": "tritonwatch/local/gpureplay.py",
    # a test fixture
    "tritonwatch/otlp_capture.py": "tests/support/otlp_capture.py",
    # the SLO file model is core: the rule generator and the report both read it
    "alerts/slo.py": "tritonwatch/slo.py",
}

SKIP_PREFIXES = ("tests/data/",)
# files that spell the old names on purpose (the layout test's samples of what lint must reject)
SKIP_FILES = ("tests/test_layout.py",)


def dotted(path: str, *, in_tests: bool) -> str:
    name = path.removesuffix(".py").replace("/", ".")
    if name.startswith("tests.") and in_tests:
        name = name.removeprefix("tests.")
    if name.split(".")[0] in SUBPACKAGES:
        name = "tritonwatch." + name
    return name


def package_modules() -> dict[str, list[str]]:
    """Module names per subpackage, from the folders (plus those that moved out, for old references)."""
    mods: dict[str, set[str]] = {}
    for pkg in SUBPACKAGES:
        mods[pkg] = {p.stem for p in (ROOT / pkg).glob("*.py") if p.stem != "__init__"}
    for old in MOVES:
        head, _, rest = old.partition("/")
        if head in SUBPACKAGES:
            mods[head].add(rest.removesuffix(".py"))
    return {k: sorted(v, key=len, reverse=True) for k, v in mods.items()}


def move_files() -> list[str]:
    done = []
    for old, new in MOVES.items():
        src, dst = ROOT / old, ROOT / new
        if not src.exists():
            continue
        if dst.exists():
            sys.exit(f"rename_imports: both {old} and {new} exist; merge them by hand first")
        dst.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "mv", old, new], cwd=ROOT, check=True)
        done.append(f"moved {old} -> {new}")
    return done


def rewrite(text: str, *, in_tests: bool, mods: dict[str, list[str]]) -> str:
    # 1. moved modules: ``from pkg import a, moved, b`` (one line) is split first.
    # old dotted name (as the old layout spelt it) -> new dotted name
    moved = {
        old.removesuffix(".py").replace("/", "."): dotted(new, in_tests=in_tests)
        for old, new in MOVES.items()
    }
    for old_dotted, new_dotted in moved.items():
        old_pkg, _, old_name = old_dotted.rpartition(".")
        new_pkg, _, new_name = new_dotted.rpartition(".")
        old_pkg_full = "tritonwatch." + old_pkg if old_pkg in SUBPACKAGES else old_pkg
        # the old package as the old layout spelt it, or already half-rewritten (tritonwatch.alerts)
        pkg_re = rf"(?:tritonwatch\.)?{re.escape(old_pkg)}" if old_pkg in SUBPACKAGES else re.escape(old_pkg)
        line = re.compile(rf"^(?P<indent>[ \t]*)from {pkg_re} import (?P<names>[\w, ]+)$", re.M)

        def split(
            m: re.Match[str],
            old_name: str = old_name,
            new_pkg: str = new_pkg,
            new_name: str = new_name,
            old_pkg_full: str = old_pkg_full,
        ) -> str:
            names = [n.strip() for n in m["names"].split(",")]  # "slo" or "slo as slo_file"
            mine = [n for n in names if n.split(" as ")[0].strip() == old_name]
            if not mine:
                return m[0]
            rest = [n for n in names if n not in mine]
            out = []
            if rest:
                out.append(f"{m['indent']}from {old_pkg_full} import {', '.join(rest)}")
            for item in mine:
                bound = item.split(" as ")[-1].strip()  # the name the importing code uses
                alias = "" if bound == new_name else f" as {bound}"
                out.append(f"{m['indent']}from {new_pkg} import {new_name}{alias}")
            return "\n".join(out)

        text = line.sub(split, text)
        text = re.sub(rf"(?<![\w./-]){re.escape(old_dotted)}\b", new_dotted, text)
        if old_pkg in SUBPACKAGES:  # ``tritonwatch.alerts.slo``: half-rewritten by hand
            text = re.sub(rf"(?<![\w./-])tritonwatch\.{re.escape(old_dotted)}\b", new_dotted, text)
    # 2. file paths of moved modules (docs, comments, Makefile)
    for old, new in MOVES.items():
        text = re.sub(rf"(?<![\w./-]){re.escape(old)}\b", new, text)
    # 3. the four folders as subpackages of tritonwatch
    for pkg in SUBPACKAGES:
        names = "|".join(re.escape(m) for m in mods[pkg])
        text = re.sub(
            rf"(?<![\w./-]){pkg}\.({names})\b(?![\w-]|\.(?:py|md|ya?ml|json)\b)",
            rf"tritonwatch.{pkg}.\1",
            text,
        )
        text = re.sub(rf"(?m)^([ \t]*)from {pkg} import ", rf"\1from tritonwatch.{pkg} import ", text)
        text = re.sub(rf"(?m)^([ \t]*)import {pkg}$", rf"\1import tritonwatch.{pkg}", text)
    return text


def tracked_text_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True, capture_output=True).stdout
    paths = out.decode().split("\0")
    # recorded payloads are kept as recorded; the recorder scripts beside them are code like any other
    return [
        p
        for p in paths
        if p and p != SELF and p not in SKIP_FILES and (p.endswith(".py") or not p.startswith(SKIP_PREFIXES))
    ]


def tidy(paths: list[str]) -> None:
    """Sort the rewritten imports and reformat (longer names move imports and wrap lines), with ruff."""
    ruff = Path(sys.executable).parent / "ruff"
    if not paths:
        return
    if not ruff.exists():
        sys.exit(f"rename_imports: {ruff} not found: run it with the project's venv python (make venv)")
    subprocess.run([str(ruff), "check", "--quiet", "--select", "I", "--fix", *paths], cwd=ROOT, check=True)
    subprocess.run([str(ruff), "format", "--quiet", *paths], cwd=ROOT, check=True)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    changes = [] if check else move_files()
    if check and any((ROOT / old).exists() for old in MOVES):
        changes.append("old paths still exist")
    mods = package_modules()
    for rel in tracked_text_files():
        path = ROOT / rel
        if path.is_symlink() or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        new = rewrite(text, in_tests=rel.startswith("tests/"), mods=mods)
        if new != text:
            changes.append(f"rewrote {rel}")
            if not check:
                path.write_text(new, encoding="utf-8")
    if not check:
        tidy([c.removeprefix("rewrote ") for c in changes if c.startswith("rewrote ") and c.endswith(".py")])
    print("\n".join(changes) or "nothing to change")
    return 1 if check and changes else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
