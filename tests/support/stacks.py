"""The two Prometheus-side stacks every Prometheus-side test runs on: the oldest supported and today's.

* ``debian``: Debian's packages on PATH (``make debs``): Prometheus and promtool 2.42, Alertmanager 0.25
  (binary ``prometheus-alertmanager``) and amtool, VictoriaMetrics and vmalert 1.79.
* ``current``: today's releases built from their Go modules by ``tools/build-stack.sh`` (``make stack``)
  into ``$TRITONWATCH_STACK_CACHE`` (default ``~/.cache/tritonwatch/stack``): ``<name>-<version>/bin/``.

A test takes the ``platform`` fixture (tests/conftest.py, a ``Stack``), which runs it once per stack
(ids ``debian`` and ``current``). For the time of the
test (or of the module, for module-scoped servers) the stack's ``bin_dir`` comes first on PATH: it holds
each program under the name Debian gives it (``prometheus-alertmanager`` for Alertmanager too), so the
product's own lookups (``local/promstack.py``), a test's ``promtool`` and a CLI run as a subprocess all
get that stack's programs. A program a stack lacks is a script there that fails with how to get it:
the test fails, it never skips and never falls back on the other stack's program.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pytest

if TYPE_CHECKING:
    from tritonwatch.local.promstack import Prometheus

F = TypeVar("F", bound=Callable[..., object])

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "tools" / "build-stack.sh"
NAMES = ("debian", "current")

# Program (as Debian names it) -> (the component that ships it, the program's name in that build).
PROGRAMS: dict[str, tuple[str, str]] = {
    "prometheus": ("prometheus", "prometheus"),
    "promtool": ("prometheus", "promtool"),
    "prometheus-alertmanager": ("alertmanager", "alertmanager"),
    "amtool": ("alertmanager", "amtool"),
    "victoria-metrics": ("victoriametrics", "victoria-metrics"),
    "vmalert": ("victoriametrics", "vmalert"),
}
# Upstream's name for Alertmanager: the bin dir carries it too.
ALIASES = {"alertmanager": "prometheus-alertmanager"}
DEBIAN_VERSIONS = {"prometheus": "2.42", "alertmanager": "0.25", "victoriametrics": "1.79"}
DEBIAN_PACKAGES = {
    "prometheus": "prometheus",
    "alertmanager": "prometheus-alertmanager",
    "victoriametrics": "victoria-metrics",
}


def needs(*programs: str) -> Callable[[F], F]:
    """``@pytest.mark.needs(*programs)`` run on both stacks: the test takes the ``platform`` parameter."""

    def apply(test: F) -> F:
        return pytest.mark.usefixtures("platform")(pytest.mark.needs(*programs)(test))  # type: ignore[no-any-return]

    return apply


def only(name: str, why: str) -> pytest.MarkDecorator:
    """Run a stack test on one stack only, saying why next to it (``why`` is shown nowhere else: keep it
    true). Used for tests whose expectations are one version's arithmetic and not yet the other's."""
    assert name in NAMES and why, "name the stack and say why"
    return pytest.mark.parametrize("platform", [name], indirect=True)


def cache_dir() -> Path:
    """Where ``tools/build-stack.sh`` puts its builds (the same default as the script's)."""
    explicit = os.environ.get("TRITONWATCH_STACK_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tritonwatch" / "stack"


def module_versions(script: Path = BUILD_SCRIPT) -> dict[str, str]:
    """The Go module versions the build script builds by default: {"prometheus": "v0.316.0", ...}."""
    found = re.findall(r"^([A-Z]+)_VERSION=\$\{\1_VERSION:-(v[0-9.]+)\}", script.read_text(), re.MULTILINE)
    return {name.lower(): version for name, version in found}


def release(component: str, module_version: str) -> str:
    """The release a module version is: Prometheus publishes 3.x as v0.3xx.y (v0.316.0 is 3.16.0)."""
    v = module_version.lstrip("v")
    if component == "prometheus" and v.startswith("0."):
        _, minor, patch = v.split(".")
        return f"{int(minor) // 100}.{int(minor) % 100}.{patch}"
    return v


@dataclass(frozen=True)
class Stack:
    """One stack: where each program is (None: missing) and each component's release."""

    name: str
    programs: dict[str, str | None]  # Debian's program name -> absolute path
    versions: dict[str, str]  # component -> release ("3.16.0", "0.35.0", "1.151.0")
    get_it: str  # how to get a missing program

    @property
    def prometheus_major(self) -> int:
        return int(self.versions["prometheus"].split(".")[0])

    def path(self, program: str) -> str:
        """The program's path; raises ``MissingProgram`` (naming how to get it) when the stack lacks it."""
        program = ALIASES.get(program, program)
        path = self.programs[program]
        if path is None:
            raise MissingProgram(self.missing_line(program))
        return path

    def missing_line(self, program: str) -> str:
        return f"the {self.name} stack has no {program}: {self.get_it}"

    @property
    def prometheus(self) -> str:
        return self.path("prometheus")

    @property
    def promtool(self) -> str:
        return self.path("promtool")

    @property
    def alertmanager(self) -> str:
        return self.path("prometheus-alertmanager")

    @property
    def amtool(self) -> str:
        return self.path("amtool")

    @property
    def victoria_metrics(self) -> str:
        return self.path("victoria-metrics")

    @property
    def vmalert(self) -> str:
        return self.path("vmalert")

    def bin_dir(self, under: Path) -> Path:
        """A directory (made once under ``under``) holding each program under Debian's name: a link to
        it, or a script that fails naming how to get it."""
        out = under / self.name / "bin"
        if out.is_dir():
            return out
        tmp = under / self.name / "bin.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        names = {**{p: p for p in self.programs}, **{alias: p for alias, p in ALIASES.items()}}
        for shown, program in names.items():
            target = self.programs[program]
            if target is not None:
                (tmp / shown).symlink_to(target)
            else:
                refuse_script(tmp / shown, self.missing_line(program))
        tmp.rename(out)
        return out


class MissingProgram(Exception):
    """A stack lacks a program a test needs."""


def refuse_script(path: Path, line: str) -> None:
    path.write_text(f"#!/bin/sh\necho {shell_quote(line)} >&2\nexit 127\n")
    path.chmod(0o755)


def shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def debian(search_path: str) -> Stack:
    programs = {p: shutil.which(p, path=search_path) for p in PROGRAMS}
    return Stack(
        "debian",
        programs,
        dict(DEBIAN_VERSIONS),
        "make debs installs it (Debian packages " + ", ".join(sorted(set(DEBIAN_PACKAGES.values()))) + ")",
    )


def current(cache: Path | None = None) -> Stack:
    cache = cache or cache_dir()
    modules = module_versions()
    programs: dict[str, str | None] = {}
    for program, (component, built_name) in PROGRAMS.items():
        binary = cache / f"{component}-{modules[component]}" / "bin" / built_name
        programs[program] = str(binary) if os.access(binary, os.X_OK) else None
    versions = {component: release(component, v) for component, v in modules.items()}
    return Stack("current", programs, versions, f"make stack builds it (tools/build-stack.sh, into {cache})")


def load(name: str, search_path: str) -> Stack:
    return debian(search_path) if name == "debian" else current()


def prometheus_each(
    every_stack: Mapping[str, Stack],
    workdir: Path,
    config: Callable[[str], dict[str, object]] | dict[str, object],
    stop: contextlib.ExitStack,
) -> dict[str, Prometheus]:
    """One Prometheus of each stack, side by side (``every_stack``), ready: ``config`` is the same for
    all or made per stack name; each is stopped with ``stop``."""
    from tritonwatch.local.promstack import Prometheus

    proms = {}
    for name, chosen in every_stack.items():
        made = config(name) if callable(config) else config
        proms[name] = Prometheus(workdir / f"prometheus-{name}", made, binary=chosen.prometheus)
        stop.callback(proms[name].stop)
    for prom in proms.values():
        prom.wait_ready(60)
    return proms
