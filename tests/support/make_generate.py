"""``make generate``'s own commands, run the way it runs them, for the tests that hold the committed
generated files to their bytes.

A generated file's "Regenerate:" line is the command that was run, with its paths as given: the
committed copies say ``make generate``'s fixed commands. ``run`` reads a command from the Makefile and
runs it through the CLI from a scratch folder that holds the checkout's inputs at the same relative
paths (links), so that what it writes there is, byte for byte, what ``make generate`` commits.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# What each generate command reads, by the path the Makefile names it with (never what it writes: a
# link there would write into the checkout).
INPUTS = {
    "rules": ("alerts/slo.yaml",),
    "k8s": ("alerts/slo.yaml", "alerts/generated", "dashboards/generated"),
}


def commands() -> dict[str, list[str]]:
    """Subcommand -> its argv (after ``tritonwatch``) in the Makefile's ``generate`` recipe."""
    text = (ROOT / "Makefile").read_text().replace("\\\n", " ")
    recipe = re.search(r"^generate:.*\n((?:\t.*\n)+)", text, re.M)
    assert recipe, "Makefile: no generate target"
    found = {}
    for line in recipe.group(1).splitlines():
        argv = shlex.split(line)
        if argv and argv[0] == "$(BIN)/tritonwatch":
            found[argv[1]] = argv[1:]
    return found


def run(command: str, scratch: Path) -> list[str]:
    """Runs ``make generate``'s ``tritonwatch <command> ...`` in ``scratch``; returns its argv."""
    from tritonwatch.cli import main

    argv = commands()[command]
    for rel in INPUTS[command]:
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        (scratch / rel).symlink_to(ROOT / rel)
    here = Path.cwd()
    os.chdir(scratch)
    try:
        assert main(argv) == 0, argv
    finally:
        os.chdir(here)
    return argv
